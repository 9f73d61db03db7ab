package tests

// Standard Webhooks 1.0.0 (RFC 0201) on the embedded stack. The receiver verifies
// each delivery twice, with verifiers written here from the two specifications (not
// the host's signer): OpenWOP's v1 recipe keyed by the secret string, and Standard
// Webhooks' keyed by the secret's decoded bytes over "<id>.<timestamp>.<body>".

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/protobuf/proto"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/webhooks"
)

// swHit is one request the Standard Webhooks receiver got.
type swHit struct {
	Path         string
	Header       http.Header
	Body         []byte
	Verification bool
	Type         string // the event's type (deliveries)
	Sequence     float64
	Status       int
}

// swReceiver answers a verification on /echo… with its challenge and on /no-echo with
// {}; it answers the first attempt of each run.completed delivery 500 and every other
// request 204.
type swReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	hits []swHit
}

func newSWReceiver(t *testing.T) *swReceiver {
	r := &swReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		var m struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
			Event     struct {
				Type     string  `json:"type"`
				Sequence float64 `json:"sequence"`
			} `json:"event"`
		}
		_ = json.Unmarshal(raw, &m)
		h := swHit{Path: req.URL.Path, Header: req.Header.Clone(), Body: raw, Verification: m.Type == "openwop.webhook.verification",
			Type: m.Event.Type, Sequence: m.Event.Sequence, Status: http.StatusNoContent}
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case h.Verification && strings.HasPrefix(h.Path, "/echo"):
			h.Status = http.StatusOK
		case h.Verification:
			h.Status = http.StatusOK
			m.Challenge = ""
		case h.Type == "run.completed" && !slices.ContainsFunc(r.hits, func(o swHit) bool { return o.Path == h.Path && o.Type == h.Type }):
			h.Status = http.StatusInternalServerError
		}
		r.hits = append(r.hits, h)
		if h.Verification {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(h.Status)
			out := map[string]string{}
			if m.Challenge != "" {
				out["challenge"] = m.Challenge
			}
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		w.WriteHeader(h.Status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *swReceiver) at(path string, verification bool) []swHit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []swHit
	for _, h := range r.hits {
		if h.Path == path && h.Verification == verification {
			out = append(out, h)
		}
	}
	return out
}

// verifyOpenWOPv1 is webhooks.md's recipe: OpenWOP-Signature is "sha256=" and the hex
// HMAC-SHA256 of "<OpenWOP-Timestamp>.<body>" keyed by the secret string as issued,
// the algorithm v1, the X-openwop-* family the same.
func verifyOpenWOPv1(secret string, h http.Header, body []byte) error {
	if h.Get("OpenWOP-Signature-Algorithm") != "v1" {
		return fmt.Errorf("OpenWOP-Signature-Algorithm %q", h.Get("OpenWOP-Signature-Algorithm"))
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(h.Get("OpenWOP-Timestamp") + "."))
	m.Write(body)
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); h.Get("OpenWOP-Signature") != want {
		return errors.New("OpenWOP-Signature does not verify")
	}
	for _, k := range []string{"Webhook-Id", "Event-Type", "Timestamp", "Signature", "Signature-Algorithm"} {
		if h.Get("OpenWOP-"+k) != h.Get("X-openwop-"+k) {
			return fmt.Errorf("OpenWOP-%s and X-openwop-%s differ", k, k)
		}
	}
	return nil
}

// verifyStandardWebhooks is Standard Webhooks 1.0.0's verification: the key is the
// base64 after "whsec_"; the signed content "<webhook-id>.<webhook-timestamp>.<body>";
// webhook-signature a space-separated list of "v1,<base64 HMAC-SHA256>", one of which
// must match; the timestamp within five minutes.
func verifyStandardWebhooks(secret string, h http.Header, body []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("a webhook-* header is missing")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return fmt.Errorf("webhook-timestamp %q", ts)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if ok && version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no webhook-signature entry verifies")
}

// TestWebhookStandardWebhooksE2E: an opt-in whose endpoint does not echo its challenge
// is refused and leaves nothing behind (not even a dispatcher), a bad secret is
// refused, and a verified opt-in is registered without its secret in any answer. Its
// deliveries carry both signatures, each verified independently, webhook-timestamp =
// OpenWOP-Timestamp, and a webhook-id of the grammar that is the same on the retry of
// a delivery and differs between deliveries; a plain v2 subscription beside it is not
// verified and gets no webhook-* header. No history of the dispatcher, the deliveries
// or the run, and no event, holds the secret.
func TestWebhookStandardWebhooksE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{})
	rec := newSWReceiver(t)
	var k [32]byte
	_, _ = rand.Read(k[:])
	secret := "whsec_" + base64.StdEncoding.EncodeToString(k[:])
	optIn := func(path, secret string) map[string]any {
		return map[string]any{"url": rec.URL + path, "events": []string{"run.started", "run.completed"},
			"signatureAlgorithms": []string{"v1", "standard-webhooks-1"}, "secret": secret}
	}
	leaks := [][]byte{[]byte(secret), []byte(strings.TrimPrefix(secret, "whsec_")), []byte(hex.EncodeToString(k[:])), []byte(base64.RawURLEncoding.EncodeToString(k[:]))}
	noLeak := func(what string, b []byte) {
		t.Helper()
		for _, l := range leaks {
			assert.False(t, bytes.Contains(b, l), "%s holds the secret (%.12s…)", what, l)
		}
	}

	// Unverified: 400, and no subscription (no dispatcher) left behind.
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, "/webhooks", optIn("/no-echo", secret))
	require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	assert.Equal(t, "webhook_endpoint_unverified", v2Code(t, raw))
	noLeak("the refusal", raw)
	require.Len(t, rec.at("/no-echo", true), 1, "one verification request")
	_, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), protocol.WebhookDispatcherID("default"), "")
	var nf *serviceerror.NotFound
	require.True(t, errors.As(err, &nf), "nothing was stored for the unverified endpoint: %v", err)

	// A bad secret: 400 naming it, before any verification request.
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, "/webhooks", optIn("/echo", "whsec_"+base64.StdEncoding.EncodeToString(k[:8])))
	require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	assert.Equal(t, "validation_error", v2Code(t, raw))
	assert.Contains(t, string(raw), `"field":"secret"`)
	assert.Empty(t, rec.at("/echo", true))

	// The opt-in, verified, and a plain v2 subscription beside it.
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, "/webhooks", optIn("/echo", secret))
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	noLeak("the 201", raw)
	var reg map[string]any
	require.NoError(t, json.Unmarshal(raw, &reg))
	assert.Equal(t, []any{"v1", "standard-webhooks-1"}, reg["signatureAlgorithms"], "the 201 echoes the schemes applied")
	assert.NotContains(t, reg, "secret", "a supplied secret is never echoed")
	bound := reg["webhookId"].(string)
	verifications := rec.at("/echo", true)
	require.Len(t, verifications, 1)
	assert.NoError(t, verifyOpenWOPv1(secret, verifications[0].Header, verifications[0].Body), "the verification request is signed")
	assert.NoError(t, verifyStandardWebhooks(secret, verifications[0].Header, verifications[0].Body), "the verification request is signed")
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, "/webhooks", map[string]any{"url": rec.URL + "/plain", "events": []string{"run.completed"}})
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var plain map[string]any
	require.NoError(t, json.Unmarshal(raw, &plain))
	assert.Equal(t, []any{"v1"}, plain["signatureAlgorithms"])

	runID := createRun(t, c, "conformance-noop", nil)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := rec.at("/echo", false)
		assert.Len(ct, got, 3, "run.started once, run.completed answered 500 and retried")
		assert.Len(ct, rec.at("/plain", false), 2, "run.completed answered 500 and retried")
	}, 30*time.Second, 50*time.Millisecond)
	assert.Empty(t, rec.at("/plain", true), "a subscription that did not opt in is not verified")
	for _, d := range rec.at("/plain", false) {
		for name := range d.Header {
			assert.False(t, strings.HasPrefix(strings.ToLower(name), "webhook-"), "no Standard Webhooks header without the opt-in: %s", name)
		}
	}

	grammar := regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)
	ids := map[string]string{} // event type -> webhook-id
	for _, d := range rec.at("/echo", false) {
		assert.NoError(t, verifyOpenWOPv1(secret, d.Header, d.Body), "%s: v1, keyed by the secret as issued", d.Type)
		assert.NoError(t, verifyStandardWebhooks(secret, d.Header, d.Body), "%s: Standard Webhooks, keyed by its decoded bytes", d.Type)
		assert.Equal(t, d.Header.Get("OpenWOP-Timestamp"), d.Header.Get("webhook-timestamp"))
		assert.Equal(t, bound, d.Header.Get("OpenWOP-Webhook-Id"))
		id := d.Header.Get("webhook-id")
		assert.Regexp(t, grammar, id)
		assert.NotEqual(t, bound, id, "webhook-id is not the subscription's id")
		var body map[string]any
		require.NoError(t, json.Unmarshal(d.Body, &body))
		assert.Equal(t, protocol.BindID("default", runID), body["runId"])
		if prev, ok := ids[d.Type]; ok {
			assert.Equal(t, prev, id, "%s: the retry carries the first attempt's webhook-id", d.Type)
		}
		ids[d.Type] = id
	}
	require.Len(t, ids, 2)
	assert.NotEqual(t, ids["run.started"], ids["run.completed"], "distinct deliveries, distinct ids")

	// The same opt-in again under one Idempotency-Key registers once, verified each
	// time, never echoing the secret; another secret under the key is a conflict.
	idem := func(secret string) (int, http.Header, []byte) {
		return v2Call(t, c, c.Key, http.MethodPost, "/webhooks", optIn("/echo/idem", secret), "Idempotency-Key", "standard-webhooks-opt-in-0001")
	}
	status, _, first := idem(secret)
	require.Equal(t, http.StatusCreated, status, "%s", first)
	status, h, again := idem(secret)
	require.Equal(t, http.StatusCreated, status, "%s", again)
	assert.Equal(t, "true", h.Get("OpenWOP-Idempotent-Replay"))
	assert.JSONEq(t, string(first), string(again))
	noLeak("the replayed 201", again)
	assert.Len(t, rec.at("/echo/idem", true), 2)
	status, _, raw = idem("whsec_" + base64.StdEncoding.EncodeToString(k[:24]))
	assert.Equal(t, http.StatusConflict, status, "%s", raw)
	assert.Equal(t, "idempotency_key_mismatch", v2Code(t, raw))

	// The listing shows the schemes, not the sealed secret.
	status, _, list := c.do(http.MethodGet, "/v1/webhooks", nil)
	require.Equal(t, http.StatusOK, status)
	listed, _ := json.Marshal(list)
	noLeak("the listing", listed)
	assert.NotContains(t, string(listed), "sealedSecret")
	assert.Contains(t, string(listed), `"signatureAlgorithms":["v1","standard-webhooks-1"]`)

	// No secret in any history (payloads as stored) or event.
	id := strings.TrimPrefix(bound, "default/")
	dispatcher := workflowHistory(t, c, protocol.WebhookDispatcherID("default"))
	b, err := proto.Marshal(dispatcher)
	require.NoError(t, err)
	noLeak("the dispatcher's history", b)
	assert.Contains(t, string(b), `"sealedSecret":"`, "the dispatcher's history holds the secret sealed, and is read as stored")
	var completedDelivery string
	for _, d := range rec.at("/echo", false) {
		var body struct {
			Event struct {
				EventID string `json:"eventId"`
			} `json:"event"`
		}
		require.NoError(t, json.Unmarshal(d.Body, &body))
		wf := webhooks.WebhookDeliveryWorkflowID("default", id, body.Event.EventID)
		b, err := proto.Marshal(workflowHistory(t, c, wf))
		require.NoError(t, err)
		noLeak("the history of "+wf, b)
		if d.Type == "run.completed" {
			completedDelivery = wf
		}
	}
	b, err = proto.Marshal(workflowHistory(t, c, runID))
	require.NoError(t, err)
	noLeak("the run's history", b)
	noLeak("the run's events", getJSON(t, c, "/v1/runs/"+runID+"/events"))

	replayHistory(t, c, protocol.WebhookDispatcherID("default"), "webhook-dispatcher-standard")
	replayHistory(t, c, completedDelivery, "webhook-delivery-standard")
}
