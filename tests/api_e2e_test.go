package tests

// End-to-end tests of the API's own guarantees against the embedded stack: tenant
// isolation, input hygiene, what Temporal records for a run (summary, search
// attributes), long-poll wake-ups and the SSE stream's life cycle.

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/workflows"
)

// newAPI serves a second API over c's Temporal client and catalog with the given keys.
func newAPI(t *testing.T, c *apiClient, keys []api.Key) (*apiClient, error) {
	t.Helper()
	_, url, err := serveAPI(t, c, api.Config{Keys: keys, TokenSecret: []byte(randomHex(16))}, furtherAPI{PublicURL: true})
	if err != nil {
		return nil, err
	}
	return clientAt(t, c, url, c.Key, 30*time.Second), nil
}

func TestTenantIsolationOverTemporal(t *testing.T) {
	c := startStack(t)
	c2, _, other := lowScopeAPI(t, c)
	id := cfCreate(t, c2, "conformance-approval", nil)
	cfWaitStatus(t, c2, id, "waiting-approval")
	for _, call := range []struct{ method, path string }{
		{http.MethodGet, "/v1/runs/" + id},
		{http.MethodGet, "/v1/runs/" + id + "/events"},
		{http.MethodGet, "/v1/runs/" + id + "/events/poll?timeout=1"},
		{http.MethodPost, "/v1/runs/" + id + "/cancel"},
		{http.MethodPost, "/v1/runs/" + id + ":fork"},
		{http.MethodPost, "/v1/runs/" + id + "/interrupts/gate"},
	} {
		var body any
		if call.method == http.MethodPost {
			body = map[string]any{}
			if strings.Contains(call.path, "interrupts") {
				body = map[string]any{"resumeValue": map[string]any{"action": "accept"}}
			} else if strings.HasSuffix(call.path, ":fork") {
				body = map[string]any{"mode": "replay"}
			}
		}
		status, _, raw := cfCall(t, c2, other, call.method, call.path, body)
		assert.Equal(t, 404, status, "%s %s as tenant-b: %s", call.method, call.path, raw)
	}
	assert.Equal(t, "waiting-approval", cfSnapshot(t, c2, id)["status"], "tenant-b changed nothing")
	cfCancel(t, c2, id)
}

func TestTemporalSeesSummaryAndSearchAttributes(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-noop", nil)
	cfWaitTerminal(t, c, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	assert.Equal(t, workflows.RunWorkflowName, d.GetWorkflowExecutionInfo().GetType().GetName())
	sa := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for _, k := range []string{"WopWorkflowId", "WopTenant", "WopStatus"} {
		assert.Contains(t, sa, k)
	}
	assert.Contains(t, string(d.GetExecutionConfig().GetUserMetadata().GetSummary().GetData()), "conformance-noop")
}

func TestBadInputNeverReachesTemporal(t *testing.T) {
	c := startStack(t)
	cases := []struct {
		name, body, ct string
		status         int
		code           string
	}{
		{"malformed", `{"workflowId":`, "application/json", 400, "validation_error"},
		{"unknown field", `{"workflowId":"conformance-noop","bogus":true}`, "application/json", 400, "validation_error"},
		{"content type", `{"workflowId":"conformance-noop"}`, "text/plain", 415, "unsupported_media_type"},
		{"too large", `{"workflowId":"conformance-noop","metadata":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`, "application/json", 413, "payload_too_large"},
		{"traversal", `{"workflowId":"../../etc/passwd"}`, "application/json", 400, "validation_error"},
		{"missing input", `{"workflowId":"conformance-identity"}`, "application/json", 400, "validation_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, raw := c.doRaw(http.MethodPost, "/v1/runs", tc.body, map[string]string{"Authorization": "Bearer " + c.Key, "Content-Type": tc.ct})
			require.Equal(t, tc.status, status, "%s", raw)
			cfValidate(t, "error-envelope.schema.json", raw)
			assert.Equal(t, tc.code, cfObj(t, raw)["error"])
		})
	}
	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/..%2F..%2Fsecrets", nil)
	assert.Equal(t, 400, status, "%s", raw)
	// The unversioned paths are OpenWOP v2's (v1's "unversioned root → 400" is retracted).
	status, hdr, raw := cfCall(t, c, c.Key, http.MethodGet, "/runs?limit=1", nil)
	assert.Equal(t, 200, status, "unversioned: %s", raw)
	assert.Equal(t, "2.0", hdr.Get("OpenWOP-Version"))
}

// A long-poll wakes on the workflow's history, not on a timer of its own: it returns
// soon after the delay node completes, well before its timeout.
func TestLongPollWakesOnNewEvents(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-delay", map[string]any{"delayMs": 1500})
	cfWaitStatus(t, c, id, "running")
	evs := cfEvents(t, c, id)
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1].Sequence
	started := time.Now()
	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+id+"/events/poll?timeout=20&lastSequence="+strconv.FormatInt(last, 10), nil)
	elapsed := time.Since(started)
	require.Equal(t, 200, status, "%s", raw)
	got, _ := cfDecodeEvents(t, raw)
	require.NotEmpty(t, got, "new events after %d", last)
	assert.Greater(t, got[0].Sequence, last)
	assert.Less(t, elapsed, 10*time.Second, "poll returned when events arrived, not at its timeout")
	t.Logf("long-poll woke after %s", elapsed)

	// An empty wait ends at the timeout with an empty page.
	cfWaitTerminal(t, c, id)
	all := cfEvents(t, c, id)
	status, _, raw = cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+id+"/events/poll?timeout=1&lastSequence="+strconv.FormatInt(all[len(all)-1].Sequence, 10), nil)
	require.Equal(t, 200, status)
	rest, complete := cfDecodeEvents(t, raw)
	assert.Empty(t, rest)
	assert.True(t, complete)
}

// An SSE reader attached to a suspended run gets the resolve's events live and the
// stream closes at the terminal event.
func TestSSEFollowsALiveRun(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-approval", nil)
	cfWaitStatus(t, c, id, "waiting-approval")
	// Resolve only once the stream is attached (its first frame has arrived), so the
	// events after the resolve can reach the reader only by following the run live.
	status, frames, closed, resolved := cfFollowAndResolve(t, c, "/v1/runs/"+id+"/events?streamMode=updates", 20*time.Second, func() int {
		status, _, _ := c.doRaw(http.MethodPost, "/v1/runs/"+id+"/interrupts/gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}},
			map[string]string{"Authorization": "Bearer " + c.Key})
		return status
	})
	require.Equal(t, 200, status)
	require.NotEmpty(t, frames, "the stream of a waiting run sends its events so far")
	assert.Equal(t, http.StatusOK, resolved, "the resolve sent once the stream was attached")
	assert.True(t, closed, "server closed the stream after the terminal event")
	names := frameNames(frames)
	assert.Contains(t, names, "node.suspended")
	assert.Contains(t, names, "interrupt.resolved")
	assert.Equal(t, "run.completed", names[len(names)-1])
	assert.NotContains(t, names, "node.started", "updates mode filters node.started")
}
