package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
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
		{`{"url":"https://example.com/x","events":["node.started"]}`, 400, CodeValidation}, // node events: v2 subscriptions only
		{`{"url":"https://example.com/x","events":["run.completed","run.completed"]}`, 400, CodeValidation},
		{`{"url":"https://example.com/x","events":["run.completed"],"tenantId":"tenant-b"}`, 403, CodeForbidden},
		{`{"url":"https://example.com/x","events":["run.completed"],"secret":"mine"}`, 400, CodeValidation},
	} {
		env.expectError(env.do(http.MethodPost, "/v1/webhooks", fullKey, c.body), c.status, c.code)
	}
	env.expectError(env.do(http.MethodPost, "/v1/webhooks", lowKey, `{"url":"https://example.com/x","events":["run.completed"]}`), http.StatusForbidden, CodeForbidden)
	env.expectError(env.do(http.MethodPost, "/v1/runs", fullKey, `{"workflowId":"conformance-noop","callbackUrl":"https://169.254.169.254/cb"}`), http.StatusBadRequest, CodeWebhookURLRejected)
}

// TestWebhookStandardOptInIsChecked: at v2 the Standard Webhooks opt-in is checked
// before any Temporal call (RFC 0201 §B): v1 must be listed, no scheme twice, only the
// schemes this host signs with, a whsec_ secret of 24 to 64 bytes, a v1-signed
// subscription's own secret of 24 to 94 printable characters; each refusal a validation_error naming its field. An endpoint that does
// not echo its verification challenge is webhook_endpoint_unverified, and one the
// egress rules refuse is refused before any POST.
func TestWebhookStandardOptInIsChecked(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/no-echo":
			_, _ = w.Write([]byte(`{}`))
		case "/wrong-echo":
			_, _ = w.Write([]byte(`{"challenge":"not-it"}`))
		case "/redirect":
			http.Redirect(w, r, "/echo", http.StatusTemporaryRedirect)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	env := newTestEnv(t, func(c *Config) { c.WebhookSecret = []byte("webhook-key"); c.WebhookAllowPrivate = true })
	whsec := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	body := func(url string, algs any, secret any) string {
		m := map[string]any{"url": url, "events": []string{"run.completed"}}
		if algs != nil {
			m["signatureAlgorithms"] = algs
		}
		if secret != nil {
			m["secret"] = secret
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	sw := []string{"v1", "standard-webhooks-1"}
	for _, c := range []struct {
		name, body, field string
	}{
		{"no v1", body("https://example.com/x", []string{"standard-webhooks-1"}, whsec), "signatureAlgorithms"},
		{"empty", body("https://example.com/x", []string{}, nil), "signatureAlgorithms"},
		{"twice", body("https://example.com/x", []string{"v1", "v1", "standard-webhooks-1"}, whsec), "signatureAlgorithms[1]"},
		{"unknown", body("https://example.com/x", []string{"v1", "openwop-conformance-unlisted-9"}, whsec), "signatureAlgorithms[1]"},
		{"no secret", body("https://example.com/x", sw, nil), "secret"},
		{"not whsec_", body("https://example.com/x", sw, "plain-shared-secret-of-sufficient-length"), "secret"},
		{"8 bytes", body("https://example.com/x", sw, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 8))), "secret"},
		{"65 bytes", body("https://example.com/x", sw, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 65))), "secret"},
		{"not base64", body("https://example.com/x", sw, "whsec_%%%%"), "secret"},
		{"a v1 secret of 23 characters", body("https://example.com/x", []string{"v1"}, strings.Repeat("s", 23)), "secret"},
		{"a v1 secret of 95 characters", body("https://example.com/x", nil, strings.Repeat("s", 95)), "secret"},
		{"a v1 secret with a space", body("https://example.com/x", nil, "conformance secret of sufficient length"), "secret"},
	} {
		e := env.expectError(env.do(http.MethodPost, "/webhooks", fullKey, c.body, "OpenWOP-Version", "2.0"), http.StatusBadRequest, CodeValidation)
		if e.Details["field"] != c.field {
			t.Errorf("%s: the refusal names %v, want %s: %s", c.name, e.Details["field"], c.field, e.Message)
		}
		if strings.Contains(e.Message, whsec) {
			t.Errorf("%s: the refusal echoes the secret: %s", c.name, e.Message)
		}
	}
	if posts.Load() != 0 {
		t.Fatalf("a refused registration POSTed %d verification requests", posts.Load())
	}
	for _, path := range []string{"/no-echo", "/wrong-echo", "/redirect", "/fails"} {
		e := env.expectError(env.do(http.MethodPost, "/webhooks", fullKey, body(srv.URL+path, sw, whsec), "OpenWOP-Version", "2.0"), http.StatusBadRequest, CodeWebhookEndpointUnverified)
		if e.Details["field"] != "url" || strings.Contains(e.Message, whsec) {
			t.Errorf("%s: %+v", path, e)
		}
	}
	if posts.Load() != 4 {
		t.Errorf("one verification POST per opt-in, and no redirect followed: %d", posts.Load())
	}
	strict := newTestEnv(t, func(c *Config) { c.WebhookSecret = []byte("webhook-key") })
	strict.expectError(strict.do(http.MethodPost, "/webhooks", fullKey, body(srv.URL+"/no-echo", sw, whsec), "OpenWOP-Version", "2.0"), http.StatusBadRequest, CodeWebhookURLRejected)
	if posts.Load() != 4 {
		t.Errorf("a loopback endpoint the host does not allow was sent its verification")
	}
}

// TestWebhookDiscoveryDeclaresPolicyAndRelaxation: the v2 root's webhooks record
// carries retryPolicy only when attempts are counted, and extensions["wop.host"]
// declares the open egress guard as a relaxation only when private destinations are
// allowed on a host that delivers webhooks.
func TestWebhookDiscoveryDeclaresPolicyAndRelaxation(t *testing.T) {
	v2doc := func(cfg func(*Config)) map[string]any {
		env := newTestEnv(t, cfg)
		rec := env.do(http.MethodGet, "/.well-known/openwop", "", "", "OpenWOP-Version", "2.0")
		var doc map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	relaxations := func(doc map[string]any) any {
		return doc["extensions"].(map[string]any)[hostExtension].(map[string]any)["relaxations"]
	}
	closed := v2doc(func(c *Config) { c.WebhookSecret = []byte("webhook-key") })
	if rp, ok := closed["webhooks"].(map[string]any)["retryPolicy"]; ok {
		t.Errorf("a time-bounded policy is advertised as %v", rp)
	}
	if r := relaxations(closed); r != nil {
		t.Errorf("a closed guard declares %v", r)
	}
	if r := relaxations(v2doc(func(c *Config) { c.WebhookAllowPrivate = true })); r != nil {
		t.Errorf("a host without webhooks declares %v", r)
	}
	open := v2doc(func(c *Config) {
		c.WebhookSecret, c.WebhookAllowPrivate = []byte("webhook-key"), true
		c.WebhookDelivery.MaxAttempts = 5
	})
	if rp := open["webhooks"].(map[string]any)["retryPolicy"]; !reflect.DeepEqual(rp, map[string]any{"maxAttempts": 5.0, "backoff": "exponential"}) {
		t.Errorf("retryPolicy = %v", rp)
	}
	r, _ := relaxations(open).([]any)
	if len(r) != 1 {
		t.Fatalf("relaxations = %v, want the open egress guard", relaxations(open))
	}
	decl := r[0].(map[string]any)
	if decl["obligation"] != RelaxationPrivateDestinations || decl["durability"] != "deployment" || decl["reason"] == "" || len(decl) != 3 {
		t.Errorf("the declaration is %v, want {obligation, durability, reason}", decl)
	}
}
