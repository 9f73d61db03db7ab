package tests

// Webhooks on the embedded stack: a receiver the test serves on loopback (the stack
// allows private destinations) verifies every delivery the way webhooks.md tells
// subscribers to, and answers as each test needs (failures first, or always).

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// delivery is one POST a webhook receiver got, verified.
type delivery struct {
	WebhookID, EventType string
	Body                 map[string]any
	Raw                  []byte
	// Verified: the signature matched the secret the receiver was given.
	Verified bool
	Status   int // what the receiver answered
}

// receiver is a webhook subscriber: it verifies each delivery against its secret and
// answers with fail() (200 when nil or when it returns 0).
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	secrets map[string]string // webhook id (or "callback:<runId>") -> secret
	got     []delivery
	fail    func(d delivery, nth int) int
}

func newReceiver(t *testing.T, fail func(d delivery, nth int) int) *receiver {
	r := &receiver{secrets: map[string]string{}, fail: fail}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		d := delivery{WebhookID: req.Header.Get("X-openwop-Webhook-Id"), EventType: req.Header.Get("X-openwop-Event-Type"), Raw: raw}
		_ = json.Unmarshal(raw, &d.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		d.Verified = verifyDelivery(req.Header, raw, r.secrets[d.WebhookID]) &&
			req.Header.Get("OpenWOP-Signature") == req.Header.Get("X-openwop-Signature")
		nth := 0
		for _, g := range r.got {
			if g.WebhookID == d.WebhookID && string(g.Raw) == string(raw) {
				nth++
			}
		}
		d.Status = http.StatusOK
		if r.fail != nil {
			if s := r.fail(d, nth); s != 0 {
				d.Status = s
			}
		}
		r.got = append(r.got, d)
		w.WriteHeader(d.Status)
	}))
	t.Cleanup(r.Close)
	return r
}

// verifyDelivery is webhooks.md's verification recipe (activities.VerifyWebhook).
func verifyDelivery(h http.Header, raw []byte, secret string) bool {
	return activities.VerifyWebhook(h, raw, secret, time.Now()) == nil
}

func (r *receiver) trust(id, secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets[id] = secret
}

// of returns the deliveries of one run, in arrival order.
func (r *receiver) of(runID string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	for _, d := range r.got {
		if d.Body["runId"] == runID {
			out = append(out, d)
		}
	}
	return out
}

// register subscribes url to events and makes the receiver trust the returned secret.
func register(t *testing.T, c *apiClient, r *receiver, events ...string) string {
	t.Helper()
	status, _, body := c.do(http.MethodPost, "/v1/webhooks", map[string]any{"url": r.URL + "/hook", "events": events})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	id := body["webhookId"].(string)
	r.trust(id, body["secret"].(string))
	return id
}

// webhookRegistered is the 201 of a v2 registration.
type webhookRegistered struct {
	WebhookID           string   `json:"webhookId"`
	Secret              string   `json:"secret"`
	SignatureAlgorithms []string `json:"signatureAlgorithms"`
}

// startWebhookStack starts a private stack whose webhooks may reach loopback, with
// quick retries.
func startWebhookStack(t *testing.T, o stackOptions) *apiClient {
	o.WebhookAllowPrivate = true
	if o.WebhookDelivery == (webhooks.WebhookDeliveryConfig{}) {
		o.WebhookDelivery = webhooks.WebhookDeliveryConfig{InitialInterval: 200 * time.Millisecond, MaxInterval: time.Second, MaxAttempts: 5}
	}
	return startPrivateStack(t, o)
}

// TestWebhookSignedDeliveryE2E follows the suite's webhook-signed-delivery scenario and
// goes on: a subscription to run.completed gets exactly that event of a
// conformance-noop run, signed; the receiver answers 500 twice and the delivery is
// retried until it succeeds, every attempt signed again.
func TestWebhookSignedDeliveryE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{})
	rec := newReceiver(t, func(d delivery, nth int) int {
		if nth < 2 {
			return http.StatusInternalServerError
		}
		return 0
	})
	id := register(t, c, rec, "run.completed")

	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "conformance-noop"})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	runID := body["runId"].(string)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := rec.of(runID)
		assert.Len(ct, got, 3, "two failed attempts and the one that succeeded")
		if len(got) == 3 {
			assert.Equal(ct, 200, got[2].Status)
		}
	}, 30*time.Second, 50*time.Millisecond)
	got := rec.of(runID)
	for i, d := range got {
		assert.True(t, d.Verified, "attempt %d carries a valid signature", i+1)
		assert.Equal(t, id, d.WebhookID)
		assert.Equal(t, "run.completed", d.EventType)
		assert.Equal(t, "run.completed", d.Body["type"], "the body has the event's type at the top")
		assert.Equal(t, "default", d.Body["workspaceId"])
		ev := d.Body["event"].(map[string]any)
		assert.Equal(t, runID, ev["runId"])
		assert.Equal(t, "run.completed", ev["type"])
		cfValidate(t, "run-event.schema.json", mustMarshal(t, ev))
	}
	assert.Equal(t, []int{500, 500, 200}, []int{got[0].Status, got[1].Status, got[2].Status})

	// The same registration under one Idempotency-Key registers once; another body
	// under it is a conflict.
	idem := map[string]string{"Authorization": "Bearer " + c.Key, "Idempotency-Key": "hook-" + randomHex(4)}
	reg := map[string]any{"url": rec.URL + "/again", "events": []string{"run.failed"}}
	s1, _, b1 := c.doRaw(http.MethodPost, "/v1/webhooks", reg, idem)
	s2, h2, b2 := c.doRaw(http.MethodPost, "/v1/webhooks", reg, idem)
	require.Equal(t, http.StatusCreated, s1, "%s", b1)
	require.Equal(t, http.StatusCreated, s2, "%s", b2)
	assert.JSONEq(t, string(b1), string(b2), "the same webhook and secret")
	assert.Equal(t, "true", h2.Get("openwop-Idempotent-Replay"))
	reg["events"] = []string{"run.completed"}
	s3, _, b3 := c.doRaw(http.MethodPost, "/v1/webhooks", reg, idem)
	require.Equal(t, http.StatusConflict, s3, "%s", b3)
	assert.Contains(t, string(b3), "idempotency_key_mismatch")
	var again map[string]any
	require.NoError(t, json.Unmarshal(b1, &again))
	status, _, _ = c.do(http.MethodDelete, "/v1/webhooks/"+again["webhookId"].(string), nil)
	require.Equal(t, http.StatusNoContent, status)

	status, _, list := c.do(http.MethodGet, "/v1/webhooks", nil)
	require.Equal(t, http.StatusOK, status)
	hooks := list["webhooks"].([]any)
	require.Len(t, hooks, 1)
	assert.NotContains(t, hooks[0], "secret", "a listing never shows the secret")
	assert.Empty(t, list["deadLetters"])

	// Once removed, a subscription gets nothing: a second run is delivered to another
	// subscription, and no delivery was ever started for the removed one.
	status, _, _ = c.do(http.MethodDelete, "/v1/webhooks/"+id, nil)
	require.Equal(t, http.StatusNoContent, status)
	other := newReceiver(t, nil)
	otherID := register(t, c, other, "run.completed")
	status, _, body = c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "conformance-noop"})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	second := body["runId"].(string)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, other.of(second), 1) }, 30*time.Second, 50*time.Millisecond)
	eventID := other.of(second)[0].Body["event"].(map[string]any)["eventId"].(string)
	_, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), webhooks.WebhookDeliveryWorkflowID("default", otherID, eventID), "")
	require.NoError(t, err, "the delivery to the subscription that remains")
	_, err = c.Stack.Client().DescribeWorkflowExecution(t.Context(), webhooks.WebhookDeliveryWorkflowID("default", id, eventID), "")
	require.Error(t, err, "no delivery to the removed subscription")
	assert.Empty(t, rec.of(second))

	replayHistory(t, c, runID, "webhook-run")
	replayHistory(t, c, webhooks.WebhookDeliveryWorkflowID("default", id, got[0].Body["event"].(map[string]any)["eventId"].(string)), "webhook-delivery-retried")
	replayHistory(t, c, protocol.WebhookDispatcherID("default"), "webhook-dispatcher")
}

// TestWebhookDeadLetterE2E: a receiver that always fails gets the configured attempts,
// then the delivery is dead-lettered: listed by GET /v1/webhooks, and its delivery
// workflow closed Failed.
func TestWebhookDeadLetterE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{WebhookDelivery: webhooks.WebhookDeliveryConfig{InitialInterval: 100 * time.Millisecond, MaxInterval: 200 * time.Millisecond, MaxAttempts: 3}})
	rec := newReceiver(t, func(delivery, int) int { return http.StatusServiceUnavailable })
	id := register(t, c, rec, "run.completed", "run.failed")
	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "conformance-failure"})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	runID := body["runId"].(string)
	var dead map[string]any
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, _, list := c.do(http.MethodGet, "/v1/webhooks", nil)
		dls, _ := list["deadLetters"].([]any)
		if assert.Len(ct, dls, 1) {
			dead = dls[0].(map[string]any)
		}
	}, 30*time.Second, 100*time.Millisecond)
	assert.Len(t, rec.of(runID), 3, "three attempts")
	assert.Equal(t, id, dead["webhookId"])
	assert.Equal(t, runID, dead["runId"])
	assert.Equal(t, "run.failed", dead["eventType"])
	assert.Contains(t, dead["error"], "answered HTTP 503")
	// The delivery workflow records its dead letter, then closes: the listing may show
	// the letter a moment before the workflow reads Failed.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		desc, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), dead["deliveryWorkflowId"].(string), "")
		if assert.NoError(ct, err) {
			assert.Equal(ct, "Failed", desc.GetWorkflowExecutionInfo().GetStatus().String())
		}
	}, 10*time.Second, 50*time.Millisecond)
	replayHistory(t, c, dead["deliveryWorkflowId"].(string), "webhook-delivery-dead-lettered")
}

// TestWebhookApprovalEventsE2E: a subscriber to the approval events hears that a tool
// call waits (interrupt.requested, approval.requested), each reminder
// (workflow.stalled), the escalation (approval.requested again, escalated), the expiry
// (approval.received timeout) and the end of the run; a run created with callbackUrl
// gets its events there, signed with the run's callback secret.
func TestWebhookApprovalEventsE2E(t *testing.T) {
	t.Parallel()
	svc := newPayService(t)
	c := startWebhookStack(t, stackOptions{PacksDir: approvalPacksDir, ToolsFile: writeBindings(t, payBindings(svc.URL))})
	rec := newReceiver(t, nil)
	register(t, c, rec, "interrupt.requested", "approval.requested", "workflow.stalled", "approval.received", "run.completed")
	cb := newReceiver(t, nil)
	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "pay-expire", "inputs": map[string]any{"message": "Please pay INV-7."}, "callbackUrl": cb.URL + "/run-events"})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	runID := body["runId"].(string)
	require.Len(t, body["callbackSecret"], 64)
	cb.trust("callback:"+runID, body["callbackSecret"].(string))

	waitSnapshot(t, c, runID, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	want := []string{"interrupt.requested", "interrupt.requested", "approval.requested", "workflow.stalled", "approval.requested", "workflow.stalled", "approval.received", "run.completed"}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var types []string
		for _, d := range rec.of(runID) {
			types = append(types, d.EventType)
		}
		assert.ElementsMatch(ct, want, types, "the conversation's and the payment's interrupt, the request, two reminders, the escalation, the expiry, the end")
	}, 30*time.Second, 100*time.Millisecond)
	for _, d := range rec.of(runID) {
		assert.True(t, d.Verified, "%s is signed", d.EventType)
		if d.EventType == "approval.requested" {
			p := d.Body["event"].(map[string]any)["payload"].(map[string]any)
			assert.Equal(t, "pay_invoice_soon", p["tool"])
		}
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := cb.of(runID)
		assert.GreaterOrEqual(ct, len(got), 9, "every webhook event of the run, run.started included")
	}, 30*time.Second, 100*time.Millisecond)
	for _, d := range cb.of(runID) {
		assert.True(t, d.Verified, "callback delivery %s is signed with the run's callback secret", d.EventType)
		assert.Equal(t, "callback:"+runID, d.WebhookID)
	}
	replayHistory(t, c, runID, "pack-tool-approval-webhooks")
}

// historyEvents reads the whole Temporal history of workflow id.
func historyEvents(t *testing.T, c *apiClient, id string) []*historypb.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// dispatcherNotices counts the NotifyDispatcher local activities in run id's history:
// the notices it sent its tenant's webhook dispatcher.
func dispatcherNotices(t *testing.T, c *apiClient, id string) int {
	t.Helper()
	n := 0
	for _, ev := range historyEvents(t, c, id) {
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" {
			continue
		}
		for _, p := range m.GetDetails()["data"].GetPayloads() {
			var d struct{ ActivityType string }
			if json.Unmarshal(p.GetData(), &d) == nil && d.ActivityType == "NotifyDispatcher" {
				n++
			}
		}
	}
	return n
}

// requireNoExternalSignals fails when run id's history signals another workflow.
func requireNoExternalSignals(t *testing.T, c *apiClient, id string) {
	t.Helper()
	for _, ev := range historyEvents(t, c, id) {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED:
			t.Fatalf("run %s's history has %s (event %d)", id, ev.GetEventType(), ev.GetEventId())
		}
	}
}

// TestWebhookNoticesE2E: a run of a tenant without a webhook dispatcher signals
// nobody (no failed "Signal External Workflow Execution" in its history); once the
// tenant has a subscription, a run's events reach it through the NotifyDispatcher
// local activity; a replay fork of that run, which re-emits its history, is delivered
// to nobody.
func TestWebhookNoticesE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{})
	lonely := createRun(t, c, "conformance-noop", nil)
	waitSnapshot(t, c, lonely, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	requireNoExternalSignals(t, c, lonely)
	_, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), protocol.WebhookDispatcherID("default"), "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "the tenant has no dispatcher")

	rec := newReceiver(t, nil)
	id := register(t, c, rec, "run.started", "run.completed")
	runID := createRun(t, c, "conformance-noop", nil)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, rec.of(runID), 2) }, 30*time.Second, 50*time.Millisecond)
	for _, d := range rec.of(runID) {
		assert.True(t, d.Verified, "%s is signed", d.EventType)
		assert.Equal(t, id, d.WebhookID)
	}
	requireNoExternalSignals(t, c, runID)

	status, _, body := c.do(http.MethodPost, "/v1/runs/"+runID+":fork", map[string]any{"mode": "replay"})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	fork := body["runId"].(string)
	waitSnapshot(t, c, fork, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	// A later run's delivery shows the dispatcher had time to start any of the fork's.
	after := createRun(t, c, "conformance-noop", nil)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, rec.of(after), 2) }, 30*time.Second, 50*time.Millisecond)
	assert.Empty(t, rec.of(fork), "a replay fork's re-emitted history is never delivered")
	requireNoExternalSignals(t, c, fork)
	assert.Positive(t, dispatcherNotices(t, c, runID))
	assert.Zero(t, dispatcherNotices(t, c, fork), "the fork told its dispatcher nothing")

	replayHistory(t, c, lonely, "webhook-run-no-dispatcher")
	replayHistory(t, c, runID, "webhook-run-local-notice")
	replayHistory(t, c, fork, "webhook-fork-no-fanout")
}

// TestWebhookRefusalsE2E: a webhook URL or subscription past the bounds, and a
// destination in a refused range, are answered 4xx before anything is stored (the
// tenant's dispatcher is not even started); so is a run's callbackUrl. The stack
// allows private destinations, which opens no other (plain http:// to a public
// address, metadata), and discovery declares it as a relaxation.
func TestWebhookRefusalsE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{})
	refuse := func(path string, body map[string]any, code string) {
		t.Helper()
		status, _, got := c.do(http.MethodPost, path, body)
		require.Equal(t, http.StatusBadRequest, status, "%v", got)
		assert.Equal(t, code, got["error"], "%v", got)
	}
	hook := func(url string, tags ...string) map[string]any {
		return map[string]any{"url": url, "events": []string{"run.completed"}, "tags": tags}
	}
	huge := "https://hooks.example.com/" + strings.Repeat("x", 600<<10)
	refuse("/v1/webhooks", hook(huge), "validation_error")
	refuse("/v1/webhooks", hook("https://hooks.example.com/"+strings.Repeat("x", activities.MaxWebhookURLBytes)), "validation_error")
	tags := make([]string, 13)
	for i := range tags {
		tags[i] = strings.Repeat(string(rune('a'+i)), 256)
	}
	refuse("/v1/webhooks", hook("https://hooks.example.com/x", tags...), "validation_error") // 13 × 256 bytes of tags
	for _, host := range []string{"[64:ff9b::a9fe:a9fe]", "[2002:a00:1::1]", "[::a9fe:a9fe]", "198.18.0.1", "240.0.0.1", "255.255.255.255"} {
		refuse("/v1/webhooks", hook("https://"+host+"/hook"), "webhook_url_rejected")
	}
	refuse("/v1/runs", map[string]any{"workflowId": "conformance-noop", "callbackUrl": huge}, "validation_error")
	refuse("/v1/runs", map[string]any{"workflowId": "conformance-noop", "callbackUrl": "https://[64:ff9b::7f00:1]/cb"}, "webhook_url_rejected")
	// The guard is open on this stack (private destinations allowed): plain http://
	// still reaches no other address, metadata stays refused, and discovery declares
	// the relaxation beside the counted retry policy.
	for _, url := range []string{"http://8.8.8.8/hook", "http://webhook-egress-probe.invalid/hook", "https://169.254.169.254/latest/meta-data/", "https://[::ffff:a9fe:a9fe]/latest/meta-data/"} {
		refuse("/v1/webhooks", hook(url), "webhook_url_rejected")
	}
	status, _, raw := v2Call(t, c, "", http.MethodGet, "/.well-known/openwop", nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var doc struct {
		Webhooks struct {
			RetryPolicy map[string]any `json:"retryPolicy"`
		} `json:"webhooks"`
		Extensions map[string]struct {
			Relaxations []map[string]string `json:"relaxations"`
		} `json:"extensions"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, map[string]any{"maxAttempts": 5.0, "backoff": "exponential"}, doc.Webhooks.RetryPolicy)
	relaxed := doc.Extensions["wop.host"].Relaxations
	require.Len(t, relaxed, 1)
	assert.Equal(t, "webhooks.ssrf.private-destinations", relaxed[0]["obligation"])
	assert.Equal(t, "deployment", relaxed[0]["durability"])

	_, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), protocol.WebhookDispatcherID("default"), "")
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf, "nothing was stored: the tenant's dispatcher was never started")
	status, _, list := c.do(http.MethodGet, "/v1/webhooks", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, list["webhooks"])
}

// TestWebhookDeliveryIsolationE2E (RFC 0215 §A): eight receivers that take the
// connection and never answer beside one that answers: with the eight attempts
// outstanding, the live receiver gets its delivery in time, long before the dead
// ones' attempts time out.
func TestWebhookDeliveryIsolationE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{WebhookDelivery: webhooks.WebhookDeliveryConfig{AttemptTimeout: 20 * time.Second, MaxAttempts: 1}})
	release := make(chan struct{})
	var mu sync.Mutex
	hung := 0
	for range 8 {
		dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hung++
			mu.Unlock()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(dead.Close)
		status, _, body := c.do(http.MethodPost, "/v1/webhooks", map[string]any{"url": dead.URL + "/hook", "events": []string{"run.completed"}})
		require.Equal(t, http.StatusCreated, status, "%v", body)
	}
	t.Cleanup(func() { close(release) }) // before the servers close (cleanups run last first)
	live := newReceiver(t, nil)
	register(t, c, live, "run.completed")

	runID := createRun(t, c, "conformance-noop", nil)
	waitSnapshot(t, c, runID, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	ended := time.Now()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(ct, 8, hung, "every dead receiver holds an attempt")
		assert.Len(ct, live.of(runID), 1)
	}, 10*time.Second, 20*time.Millisecond)
	took := time.Since(ended)
	t.Logf("the live receiver got its delivery %s after the run ended, beside 8 unanswered attempts", took)
	assert.Less(t, took, 10*time.Second, "well within the dead attempts' 20 s timeout")
	assert.True(t, live.of(runID)[0].Verified)
}

// TestWebhookUnregisterStopsRetriesE2E (RFC 0215 §B): a delivery that keeps failing is
// retried; once its subscription is unregistered (204), no further attempt reaches the
// receiver, scheduled retries included, and the delivery leaves no dead letter.
func TestWebhookUnregisterStopsRetriesE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{WebhookDelivery: webhooks.WebhookDeliveryConfig{InitialInterval: 300 * time.Millisecond, MaxInterval: 300 * time.Millisecond, MaxAttempts: 40}})
	rec := newReceiver(t, func(delivery, int) int { return http.StatusInternalServerError })
	id := register(t, c, rec, "run.completed")
	runID := createRun(t, c, "conformance-noop", nil)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.GreaterOrEqual(ct, len(rec.of(runID)), 2) }, 30*time.Second, 20*time.Millisecond)
	status, _, _ := c.do(http.MethodDelete, "/v1/webhooks/"+id, nil)
	require.Equal(t, http.StatusNoContent, status)
	atDelete := len(rec.of(runID))
	eventID := rec.of(runID)[0].Body["event"].(map[string]any)["eventId"].(string)
	delivery := webhooks.WebhookDeliveryWorkflowID("default", id, eventID)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		desc, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), delivery, "")
		if assert.NoError(ct, err) {
			assert.NotEqual(ct, "Running", desc.GetWorkflowExecutionInfo().GetStatus().String(), "the delivery ends at its next attempt")
		}
	}, 10*time.Second, 50*time.Millisecond)
	// An attempt already under way when the 204 was sent may still arrive; none after.
	assert.LessOrEqual(t, len(rec.of(runID)), atDelete+1, "no attempt started after the unregistration")
	status, _, list := c.do(http.MethodGet, "/v1/webhooks", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, list["deadLetters"], "an unregistered subscription leaves no dead letter")
	replayHistory(t, c, delivery, "webhook-delivery-unregistered")
	replayHistory(t, c, protocol.WebhookDispatcherID("default"), "webhook-dispatcher-unregistered")
}

// TestWebhookDeadLetterReadE2E (RFC 0188): a subscription registered at major 2 whose
// receiver always fails gets its deliveries dead-lettered, and GET
// /webhooks/{webhookId}/dead-letters reads them newest first, page by page, content
// free, with the attempts made, the last status and the retention; another tenant's
// id and a cursor that is not the subscription's are refused.
func TestWebhookDeadLetterReadE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{WebhookDelivery: webhooks.WebhookDeliveryConfig{InitialInterval: 100 * time.Millisecond, MaxInterval: 200 * time.Millisecond, MaxAttempts: 3}})
	rec := newReceiver(t, func(delivery, int) int { return http.StatusServiceUnavailable })
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, "/webhooks", map[string]any{"url": rec.URL + "/hook", "events": []string{"run.started", "run.failed"}})
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var reg webhookRegistered
	require.NoError(t, json.Unmarshal(raw, &reg))
	bound := reg.WebhookID
	require.True(t, strings.HasPrefix(bound, "default/"), bound)
	path := "/webhooks/" + url.PathEscape(bound) + "/dead-letters"

	runID := createRun(t, c, "conformance-failure", nil)
	var page struct {
		Deliveries []map[string]any `json:"deliveries"`
		NextCursor string           `json:"nextCursor"`
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, _, raw := v2Call(t, c, c.Key, http.MethodGet, path, nil)
		page.Deliveries = nil
		_ = json.Unmarshal(raw, &page)
		assert.Len(ct, page.Deliveries, 2)
	}, 30*time.Second, 100*time.Millisecond)
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, path+"?limit=1", nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	v2Validate(t, "webhook-dead-letter-page.schema.json", raw)
	require.NoError(t, json.Unmarshal(raw, &page))
	require.Len(t, page.Deliveries, 1)
	require.NotEmpty(t, page.NextCursor)
	newest := page.Deliveries[0]
	assert.Equal(t, bound, newest["webhookId"])
	assert.Equal(t, protocol.BindID("default", runID), newest["runId"])
	assert.EqualValues(t, 3, newest["attempts"])
	assert.EqualValues(t, 503, newest["lastStatus"])
	assert.Equal(t, "retries_exhausted", newest["reason"])
	dead, _ := time.Parse(time.RFC3339Nano, newest["deadLetteredAt"].(string))
	expires, _ := time.Parse(time.RFC3339Nano, newest["expiresAt"].(string))
	assert.Equal(t, 30*24*time.Hour, expires.Sub(dead), "expiresAt − deadLetteredAt = retentionDays")
	for _, k := range []string{"body", "headers", "secret", "url", "error"} {
		assert.NotContains(t, newest, k, "a record is content-free")
	}
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, path+"?limit=1&cursor="+url.QueryEscape(page.NextCursor), nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	v2Validate(t, "webhook-dead-letter-page.schema.json", raw)
	page.NextCursor, page.Deliveries = "", nil
	require.NoError(t, json.Unmarshal(raw, &page))
	require.Len(t, page.Deliveries, 1)
	older := page.Deliveries[0]
	assert.ElementsMatch(t, []any{"run.started", "run.failed"}, []any{newest["eventType"], older["eventType"]})
	assert.LessOrEqual(t, older["deadLetteredAt"], newest["deadLetteredAt"], "newest first")
	assert.Empty(t, page.NextCursor, "the last page")

	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, path+"?cursor=bm90LWEtY3Vyc29y", nil)
	assert.Equal(t, http.StatusBadRequest, status, "%s", raw)
	foreign := "/webhooks/" + url.PathEscape("acme/"+strings.TrimPrefix(bound, "default/")) + "/dead-letters"
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, foreign, nil)
	assert.Equal(t, http.StatusForbidden, status, "%s", raw)
	assert.Equal(t, "id_tenant_mismatch", v2Code(t, raw))

	var disc map[string]any
	require.NoError(t, json.Unmarshal(getJSON(t, c, "/.well-known/openwop"), &disc))
	assert.Equal(t, map[string]any{"retentionDays": float64(30), "maxPageSize": float64(100)}, disc["webhooks"].(map[string]any)["deadLetter"])
}

// TestWebhookV2BodyE2E: a subscription registered at major 2 is delivered v2's body,
// {runId, event}, with the run's bound id and the event as a v2 reader gets it, under
// the bound webhook id and the v2 type name, in both header families and signed with
// the generated secret; a subscription registered at /v1 beside it keeps v1's body.
func TestWebhookV2BodyE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{})
	rec := newReceiver(t, nil)
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, "/webhooks", map[string]any{"url": rec.URL + "/v2", "events": []string{"run.started", "run.completed"}})
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var reg webhookRegistered
	require.NoError(t, json.Unmarshal(raw, &reg))
	rec.trust(reg.WebhookID, reg.Secret)
	v1ID := register(t, c, rec, "run.completed")

	runID := createRun(t, c, "conformance-noop", nil)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, rec.of(protocol.BindID("default", runID)), 2) }, 30*time.Second, 50*time.Millisecond)
	for _, d := range rec.of(protocol.BindID("default", runID)) {
		assert.True(t, d.Verified, "%s is signed with the generated secret, in both header families", d.EventType)
		assert.Equal(t, reg.WebhookID, d.WebhookID, "the bound webhook id")
		assert.Equal(t, []string{"event", "runId"}, slices.Sorted(maps.Keys(d.Body)), "v2's body: no workspaceId (the run has none), nothing else")
		ev := v2ValidateEvent(t, mustMarshal(t, d.Body["event"]))
		assert.Equal(t, protocol.BindID("default", runID), ev["runId"])
		assert.Equal(t, d.EventType, ev["type"])
		assert.EqualValues(t, protocol.EventSchemaVersion, ev["schemaVersion"])
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, rec.of(runID), 1) }, 30*time.Second, 50*time.Millisecond,
		"the v1 subscription's delivery, started beside the v2 ones")
	v1 := rec.of(runID)
	assert.Equal(t, v1ID, v1[0].WebhookID)
	assert.Equal(t, "run.completed", v1[0].Body["type"], "v1's body beside it")
	replayHistory(t, c, protocol.WebhookDispatcherID("default"), "webhook-dispatcher-v2")
}

// TestWebhookV2SuppliedSecretNodeEventsE2E follows the suite's v2-webhook-generated-
// secret and webhook-delivery-complete legs: a v2 registration that supplies its own
// secret, without the Standard Webhooks opt-in, answers 201 without echoing it, and
// a subscription to the node lifecycle gets every event of those types the run's log
// holds, each once and signed (v1) with the supplied secret. The run's callbackUrl
// gets the types it always got, no node event.
func TestWebhookV2SuppliedSecretNodeEventsE2E(t *testing.T) {
	t.Parallel()
	c := startWebhookStack(t, stackOptions{})
	rec := newReceiver(t, nil)
	supplied := "conformance-" + strings.Repeat("s", 24)
	lifecycle := []string{"run.started", "node.started", "node.completed", "run.completed"}
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, "/webhooks", map[string]any{"url": rec.URL + "/own", "events": lifecycle, "secret": supplied})
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	assert.NotContains(t, string(raw), supplied, "a supplied secret is never echoed")
	var reg map[string]any
	require.NoError(t, json.Unmarshal(raw, &reg))
	assert.NotContains(t, reg, "secret")
	assert.Equal(t, []any{"v1"}, reg["signatureAlgorithms"])
	webhookID := reg["webhookId"].(string)
	rec.trust(webhookID, supplied)

	cb := newReceiver(t, nil)
	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "conformance-noop", "callbackUrl": cb.URL + "/run-events"})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	runID := body["runId"].(string)
	cb.trust("callback:"+runID, body["callbackSecret"].(string))
	var want []int64
	for _, e := range waitFor(t, 30*time.Second, "the run's end", func() []event { return events(t, c, runID) },
		func(evs []event) bool { return len(ofType(evs, "run.completed")) == 1 }) {
		if slices.Contains(lifecycle, e.Type) {
			want = append(want, e.Sequence)
		}
	}
	require.Len(t, want, 4, "the noop run's lifecycle: one node")
	bound := protocol.BindID("default", runID)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, rec.of(bound), len(want)) }, 30*time.Second, 50*time.Millisecond)
	var got []int64
	for _, d := range rec.of(bound) {
		assert.True(t, d.Verified, "%s verifies under the supplied secret", d.EventType)
		assert.Equal(t, webhookID, d.WebhookID)
		ev := d.Body["event"].(map[string]any)
		assert.Equal(t, d.EventType, ev["type"])
		got = append(got, int64(ev["sequence"].(float64)))
	}
	slices.Sort(got)
	assert.Equal(t, want, got, "every subscribed event of the log, each once")
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, cb.of(runID), 2) }, 30*time.Second, 50*time.Millisecond)
	for _, d := range cb.of(runID) {
		assert.True(t, d.Verified, "callback delivery %s is signed with the run's callback secret", d.EventType)
		assert.Contains(t, []string{"run.started", "run.completed"}, d.EventType, "a callback gets no node event")
	}
	replayHistory(t, c, runID, "webhook-run-node-events")
	replayHistory(t, c, protocol.WebhookDispatcherID("default"), "webhook-dispatcher-node-events")
}
