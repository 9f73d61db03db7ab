package api

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestWebhooksNeedAKey: without a webhook key the host offers no webhooks: discovery
// does not advertise them, their routes do not exist, and a callbackUrl is refused
// rather than accepted and ignored.
func TestWebhooksNeedAKey(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do(http.MethodGet, "/.well-known/openwop", "", "")
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["webhooks"]; ok {
		t.Errorf("webhooks advertised without a key: %v", doc["webhooks"])
	}
	if rec := env.do(http.MethodPost, "/v1/webhooks", fullKey, `{"url":"https://example.com/x","events":["run.completed"]}`); rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/webhooks = %d", rec.Code)
	}
	e := env.expectError(env.do(http.MethodPost, "/v1/runs", fullKey, `{"workflowId":"conformance-noop","callbackUrl":"https://example.com/cb"}`), http.StatusBadRequest, CodeValidation)
	if e.Details["field"] != "callbackUrl" {
		t.Errorf("the refusal names callbackUrl: %+v", e)
	}
}

// TestWebhookRegistrationIsChecked: with a key, registrations are checked before any
// Temporal call: the URL (refused destinations are webhook_url_rejected), the events,
// the tenant, and the scope.
func TestWebhookRegistrationIsChecked(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.WebhookSecret = []byte("webhook-key") })
	rec := env.do(http.MethodGet, "/.well-known/openwop", "", "")
	var doc struct {
		Webhooks map[string]any `json:"webhooks"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Webhooks["supported"] != true {
		t.Fatalf("webhooks not advertised: %s", rec.Body)
	}
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"url":"https://169.254.169.254/x","events":["run.completed"]}`, 400, CodeWebhookURLRejected},
		{`{"url":"https://[fd00:ec2::254]/x","events":["run.completed"]}`, 400, CodeWebhookURLRejected},
		{`{"url":"https://metadata.google.internal/x","events":["run.completed"]}`, 400, CodeWebhookURLRejected},
		{`{"url":"http://127.0.0.1:9/x","events":["run.completed"]}`, 400, CodeWebhookURLRejected},
		{`{"url":"http://example.com/x","events":["run.completed"]}`, 400, CodeWebhookURLRejected},
		{`{"url":"not a url","events":["run.completed"]}`, 400, CodeValidation},
		{`{"events":["run.completed"]}`, 400, CodeValidation},
		{`{"url":"https://example.com/x"}`, 400, CodeValidation},
		{`{"url":"https://example.com/x","events":["node.started"]}`, 400, CodeValidation},
		{`{"url":"https://example.com/x","events":["run.completed","run.completed"]}`, 400, CodeValidation},
		{`{"url":"https://example.com/x","events":["run.completed"],"tenantId":"tenant-b"}`, 403, CodeForbidden},
		{`{"url":"https://example.com/x","events":["run.completed"],"secret":"mine"}`, 400, CodeValidation},
	} {
		env.expectError(env.do(http.MethodPost, "/v1/webhooks", fullKey, c.body), c.status, c.code)
	}
	env.expectError(env.do(http.MethodPost, "/v1/webhooks", lowKey, `{"url":"https://example.com/x","events":["run.completed"]}`), http.StatusForbidden, CodeForbidden)
	env.expectError(env.do(http.MethodPost, "/v1/runs", fullKey, `{"workflowId":"conformance-noop","callbackUrl":"https://169.254.169.254/cb"}`), http.StatusBadRequest, CodeWebhookURLRejected)
}
