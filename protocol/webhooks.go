package protocol

// WebhookRegisteredQuery asks a tenant's webhook dispatcher (package webhooks, which
// answers it) whether a webhook id is registered (a bool). It is named here because
// the activities ask it, and they cannot import the dispatcher's package.
const WebhookRegisteredQuery = "openwop.webhooks.registered"

// WebhookDispatcherID is the workflow id of a tenant's webhook dispatcher (package
// webhooks): the runs signal it, the API starts, updates and queries it, and the
// delivery activity asks it whether a webhook is still registered.
func WebhookDispatcherID(tenant string) string { return "wop-webhooks:" + tenant }
