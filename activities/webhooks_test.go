package activities

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// TestDeliverWebhookSigns: a delivery carries webhooks.md's headers in both families,
// the wrapper body, and an HMAC over "<timestamp>.<body>" under the subscription's
// derived secret, which a receiver verifies the documented way.
func TestDeliverWebhookSigns(t *testing.T) {
	key := []byte("host-webhook-key")
	var mu sync.Mutex
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = r
		body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, WebhookSecret: key, WebhookAllowPrivate: true, Version: "1.2.3"})
	_ = a
	ev := json.RawMessage(`{"eventId":"evt-r-7","runId":"r","type":"run.completed","payload":{},"timestamp":"2026-01-01T00:00:00.000Z","sequence":7}`)
	val, err := env.ExecuteActivity(a.DeliverWebhook, WebhookDelivery{Tenant: "t1", WebhookID: "wh_1", URL: srv.URL + "/hook", RunID: "r", EventType: "run.completed", Sequence: 7, Event: ev})
	require.NoError(t, err)
	var res WebhookDeliveryResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, http.StatusNoContent, res.Status)

	mu.Lock()
	defer mu.Unlock()
	secret := WebhookSecret(key, "t1", "wh_1")
	ts := got.Header.Get("X-openwop-Timestamp")
	n, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), n, 300)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	require.Equal(t, "sha256="+hex.EncodeToString(m.Sum(nil)), got.Header.Get("X-openwop-Signature"))
	require.Equal(t, "v1", got.Header.Get("X-openwop-Signature-Algorithm"))
	require.Equal(t, "wh_1", got.Header.Get("X-openwop-Webhook-Id"))
	require.Equal(t, "run.completed", got.Header.Get("X-openwop-Event-Type"))
	for _, h := range []string{"Webhook-Id", "Event-Type", "Timestamp", "Signature", "Signature-Algorithm"} {
		require.Equal(t, got.Header.Get("X-openwop-"+h), got.Header.Get("OpenWOP-"+h), h)
	}
	require.Equal(t, "openwop-webhook-dispatcher/wop-1.2.3", got.Header.Get("User-Agent"))
	var b map[string]any
	require.NoError(t, json.Unmarshal(body, &b))
	require.Equal(t, "r", b["runId"])
	require.Equal(t, "t1", b["workspaceId"])
	require.Equal(t, "run.completed", b["type"])
	require.Equal(t, "evt-r-7", b["event"].(map[string]any)["eventId"])
	require.Len(t, SecretFingerprint(secret), 8)
	require.NotEqual(t, secret, CallbackSecret(key, "t1", "wh_1"), "callback and subscription secrets differ")
}

// TestDeliverWebhookRefuses: refused destinations fail without retry, at check time
// and at connect time; a 500 fails the attempt so it is retried.
func TestDeliverWebhookRefuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer srv.Close()
	strict, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, WebhookSecret: []byte("k")})
	for _, u := range []string{"https://169.254.169.254/latest/meta-data", "https://[fd00:ec2::254]/", "https://metadata.google.internal/x", "http://example.com/", "https://127.0.0.1/", "https://10.1.2.3/"} {
		_, err := env.ExecuteActivity(strict.DeliverWebhook, WebhookDelivery{Tenant: "t", WebhookID: "w", URL: u, RunID: "r", EventType: "run.completed", Event: json.RawMessage(`{}`)})
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%s: %v", u, err)
		require.Equal(t, ErrTypeWebhookRefused, appErr.Type(), u)
		require.True(t, appErr.NonRetryable(), u)
	}
	lax, env2 := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, WebhookSecret: []byte("k"), WebhookAllowPrivate: true})
	_, err := env2.ExecuteActivity(lax.DeliverWebhook, WebhookDelivery{Tenant: "t", WebhookID: "w", URL: "http://169.254.169.254/", RunID: "r", EventType: "run.completed", Event: json.RawMessage(`{}`)})
	require.ErrorContains(t, err, "link-local or cloud metadata", "allowing private addresses never allows metadata")
	_, err = env2.ExecuteActivity(lax.DeliverWebhook, WebhookDelivery{Tenant: "t", WebhookID: "w", URL: srv.URL, RunID: "r", EventType: "run.completed", Event: json.RawMessage(`{}`)})
	var appErr *temporal.ApplicationError
	require.ErrorContains(t, err, "answered HTTP 500")
	require.False(t, errors.As(err, &appErr) && appErr.NonRetryable(), "a 500 is retried")

	nokey, env3 := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, WebhookAllowPrivate: true})
	_, err = env3.ExecuteActivity(nokey.DeliverWebhook, WebhookDelivery{Tenant: "t", WebhookID: "w", URL: srv.URL, RunID: "r", EventType: "run.completed", Event: json.RawMessage(`{}`)})
	require.ErrorContains(t, err, "WOP_WEBHOOK_SECRET")
}

func TestCheckWebhookURL(t *testing.T) {
	for _, c := range []struct {
		url          string
		allowPrivate bool
		ok, urlError bool
	}{
		{"https://hooks.example.com/x", false, true, false},
		{"http://hooks.example.com/x", false, false, true},
		{"http://127.0.0.1:9/x", true, true, false},
		{"http://localhost:9/x", false, false, true},
		// Private destinations allowed: plain http:// to them, never to another.
		{"http://localhost:9/x", true, true, false},
		{"http://10.0.0.1/x", true, true, false},
		{"http://[::ffff:7f00:1]:9/x", true, true, false},
		{"http://8.8.8.8/x", true, false, true},
		{"http://[2606:4700::1111]/x", true, false, true},
		{"http://webhook-egress-probe.invalid/hook", true, false, true}, // not shown to be private
		{"https://webhook-egress-probe.invalid/hook", true, true, false},
		{"https://169.254.169.254/", true, false, true},
		{"https://[fe80::1]/", true, false, true},
		{"https://[fd00:ec2::254]/", true, false, true},
		{"https://metadata.google.internal/", true, false, true},
		{"https://192.168.1.1/", false, false, true},
		{"https://user:pw@hooks.example.com/", false, false, true},
		{"not a url", false, false, false},
		// Addresses that carry or stand for another: refused even where private
		// destinations are allowed.
		{"https://[64:ff9b::a9fe:a9fe]/", true, false, true},  // NAT64 of 169.254.169.254
		{"https://[64:ff9b:1::7f00:1]/", true, false, true},   // local-use NAT64
		{"https://[2002:c0a8:101::1]/", true, false, true},    // 6to4 of 192.168.1.1
		{"https://[2001:0:4136:e378::1]/", true, false, true}, // Teredo
		{"https://[::a9fe:a9fe]/", true, false, true},         // IPv4-compatible ::169.254.169.254
		{"https://[::7f00:1]/", true, false, true},            // IPv4-compatible ::127.0.0.1
		{"https://198.18.0.1/", true, false, true},
		{"https://198.19.255.255/", true, false, true},
		{"https://240.0.0.1/", true, false, true},
		{"https://255.255.255.255/", true, false, true},
		{"https://[::ffff:198.18.0.1]/", true, false, true}, // judged by its IPv4
		{"https://[::ffff:10.0.0.1]/", false, false, true},
		{"https://[2001:db8::1]/", true, false, true},
		{"https://[::1]:9/", true, true, false}, // loopback stays loopback
		{"https://8.8.8.8/", false, true, false},
		{"https://[2606:4700::1111]/", false, true, false},
		{"https://hooks.example.com/" + strings.Repeat("x", MaxWebhookURLBytes), false, false, false}, // too long: not a URL this host takes
		{"ftp://x/", false, false, false},
	} {
		err := CheckWebhookURL(c.url, c.allowPrivate)
		if c.ok {
			require.NoError(t, err, c.url)
			continue
		}
		require.Error(t, err, c.url)
		var ue *WebhookURLError
		require.Equal(t, c.urlError, errors.As(err, &ue), "%s: %v", c.url, err)
	}
}

// TestWebhookDialRefusesTranslatedAddresses: the delivery client checks every address
// it connects to, so a name that resolves to one of the refused ranges after
// registration is refused at dial time too, before a byte is sent.
func TestWebhookDialRefusesTranslatedAddresses(t *testing.T) {
	a, _ := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, WebhookSecret: []byte("k"), WebhookAllowPrivate: true})
	for _, addr := range []string{"[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[::7f00:1]", "198.18.0.1", "240.0.0.1", "255.255.255.255", "[::ffff:198.18.0.1]"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+":80/hook", nil)
		require.NoError(t, err)
		_, err = a.webhookClient().Do(req)
		cancel()
		var refused *refusedAddressError
		require.True(t, errors.As(err, &refused), "%s: %v", addr, err)
	}
}
