package protocol

// WebhookRegisteredQuery asks a tenant's webhook dispatcher (package webhooks, which
// answers it) whether a webhook id is registered (a bool). It is named here because
// the activities ask it, and they cannot import the dispatcher's package.
const WebhookRegisteredQuery = "openwop.webhooks.registered"
