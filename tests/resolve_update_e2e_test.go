package tests

// The resolve update (workflows.ResolveUpdate): the one Temporal call a resolve makes
// where the worker has the handler. These tests check what it must keep of the query +
// signal path it replaces: a refused request leaves nothing in history, a repeated
// request id is applied once, updates racing continue-as-new are neither lost nor
// applied twice, and a worker without the handler is answered through the signal.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// wfUpdate sends req as the API does: one ResolveUpdate whose Update ID is the request id.
func wfUpdate(s *stack.Stack, runID string, u workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res workflows.ResolveUpdateResult
	h, err := s.Client().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: runID, UpdateID: u.Request.RequestID, UpdateName: workflows.ResolveUpdate,
		Args: []any{u}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	return res, err
}

// refusedCheck returns the check a ResolveUpdate's validator refused with.
func refusedCheck(t *testing.T, err error) workflows.ResolveCheck {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "a refusal, got %v", err)
	require.Equal(t, workflows.ErrTypeResolveRefused, ae.Type())
	var check workflows.ResolveCheck
	require.NoError(t, ae.Details(&check))
	return check
}

// historyCounts counts the events of a run's current execution, its update
// acceptances and its signals.
type historyCounts struct{ events, updates, signals int }

// countHistory counts the run's history once the run is idle: no workflow task pending
// and no signal to another workflow (a webhook notice) still on its way, so the
// history grows only with what the test sends.
func countHistory(t *testing.T, s *stack.Stack, runID string) historyCounts {
	t.Helper()
	var n historyCounts
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n = historyCounts{}
		outgoing := 0
		it := s.Client().GetWorkflowHistory(context.Background(), runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if !assert.NoError(c, err) {
				return
			}
			n.events++
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				n.updates++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				n.signals++
			case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
				outgoing++
			case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED, enumspb.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED:
				outgoing--
			}
		}
		assert.Zero(c, outgoing, "signals to other workflows on their way")
		desc, err := s.Client().DescribeWorkflowExecution(context.Background(), runID, "")
		if assert.NoError(c, err) {
			assert.Nil(c, desc.GetPendingWorkflowTask())
			assert.Equal(c, int64(n.events), desc.GetWorkflowExecutionInfo().GetHistoryLength())
		}
	}, 15*time.Second, 20*time.Millisecond)
	return n
}

// TestResolveUpdateConversationAndContinueAsNew drives a conversation through resolve
// updates only, with the run continuing as new after every few events: refused updates
// leave no history, exchanges sent at once (racing the continue-as-new) are each
// applied once, and a repeated request id is answered with its first outcome. Its
// histories are the corpus's run driven by updates.
func TestResolveUpdateConversationAndContinueAsNew(t *testing.T) {
	s := wfStack(t)
	const id = "e2e-council-update"
	run := wfStart(t, s, id, "conformance-conversation-council", "", func(in *workflows.RunInput) { in.ContinueAsNewAfterEvents = 6 })
	wfWaitStatus(t, s, id, protocol.StatusWaitingApproval)
	exchange := func(reqID, text string) workflows.ResolveUpdateRequest {
		return workflows.ResolveUpdateRequest{Tenant: "t1", CheckTenant: true, Attempt: reqID + "-a",
			Request: workflows.ResolveRequest{RequestID: reqID, NodeID: "convo", ResumeValue: json.RawMessage(`{"text":"` + text + `"}`), ReceivedAtMs: 1000}}
	}

	// Refusals: a bad turn, an unknown node, another tenant. None is in history.
	before := countHistory(t, s, id)
	bad := exchange("bad", "")
	bad.Request.ResumeValue = json.RawMessage(`{"operation":"exchange","turn":{"content":{"nope":1}}}`)
	_, err := wfUpdate(s, id, bad)
	assert.Equal(t, api.CodeValidation, refusedCheck(t, err).Code)
	nowhere := exchange("nowhere", "hi")
	nowhere.Request.NodeID = "no-such-node"
	_, err = wfUpdate(s, id, nowhere)
	assert.Equal(t, api.CodeInterruptNotFound, refusedCheck(t, err).Code)
	other := exchange("other-tenant", "hi")
	other.Tenant = "t2"
	_, err = wfUpdate(s, id, other)
	check := refusedCheck(t, err)
	assert.Equal(t, workflows.ResolveCheck{Tenant: "t1"}, check, "another tenant learns nothing but that the run is not theirs")
	after := countHistory(t, s, id)
	assert.Equal(t, before.updates, after.updates, "a refused update leaves no history")
	assert.Equal(t, before.signals, after.signals)
	// Temporal persists the first update's workflow task, empty, when the run's last
	// task wrote commands (its last event is not WorkflowTaskCompleted); nothing of
	// the refused updates is in it.
	it := s.Client().GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for n := 0; it.HasNext(); n++ {
		ev, err := it.Next()
		require.NoError(t, err)
		if n >= before.events {
			assert.Contains(t, []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
				enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED}, ev.GetEventType(), "event %d after the refusals", ev.GetEventId())
		}
	}
	assert.LessOrEqual(t, after.events-before.events, 3, "at most one empty workflow task")

	// Exchanges sent at once while the run continues as new after every turn.
	texts := []string{"one", "two", "three", "four", "five", "six"}
	results := make([]workflows.ResolveUpdateResult, len(texts))
	errs := make([]error, len(texts))
	var wg sync.WaitGroup
	for i, text := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = wfUpdate(s, id, exchange(fmt.Sprintf("m%d", i), text))
		}()
	}
	wg.Wait()
	applied := map[string]bool{}
	for i := range texts {
		require.NoError(t, errs[i], "exchange %q", texts[i])
		o := results[i].Outcome
		require.NotNil(t, o, "exchange %q has its outcome", texts[i])
		require.True(t, o.Applied, "exchange %q: %+v", texts[i], o)
		require.Equal(t, fmt.Sprintf("m%d", i), o.RequestID)
		require.Equal(t, fmt.Sprintf("m%d-a", i), results[i].Attempt)
		applied[texts[i]] = true
	}

	// The same request id again, after the run continued as new: answered from the
	// carried outcome by the validator, nothing applied again.
	again, err := wfUpdate(s, id, exchange("m0", "one"))
	if err != nil {
		c := refusedCheck(t, err)
		require.True(t, c.Replayed)
		require.NotNil(t, c.Outcome)
		assert.True(t, c.Outcome.Applied)
	} else {
		require.NotNil(t, again.Outcome)
		assert.True(t, again.Outcome.Applied)
	}

	closeReq := workflows.ResolveUpdateRequest{Tenant: "t1", CheckTenant: true, Attempt: "close-a",
		Request: workflows.ResolveRequest{RequestID: "close", NodeID: "convo", ResumeValue: json.RawMessage(`{"operation":"close","outcome":{"ok":true}}`)}}
	res, err := wfUpdate(s, id, closeReq)
	require.NoError(t, err)
	require.NotNil(t, res.Outcome)
	require.True(t, res.Outcome.Applied)

	snap := wfResult(t, run)
	require.Equal(t, protocol.StatusCompleted, snap.Status)
	var turns []protocol.Turn
	require.NoError(t, json.Unmarshal(snap.Channels["conversation"], &turns))
	users := map[string]int{}
	for _, turn := range turns {
		if turn.Role == protocol.RoleUser {
			var c struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(turn.Content, &c)
			users[c.Text]++
		}
	}
	for _, text := range texts {
		assert.Equal(t, 1, users[text], "user turn %q recorded once", text)
	}
	require.Len(t, turns, 1+2*len(texts)+1)
	evs := wfEvents(t, s, id)
	for i, e := range evs {
		require.Equal(t, int64(i), e.Sequence)
	}
	desc, err := s.Client().DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	require.NotEqual(t, run.GetFirstExecutionRunID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the run continued as new")
	wfRecord(t, s, run, "conformance-conversation-update")
}

// renamingClient sends the resolve update under a name no worker handles: a worker that
// predates ResolveUpdate, as during a rolling deploy.
type renamingClient struct {
	client.Client
	mu   sync.Mutex
	errs []error
}

func (c *renamingClient) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if o.UpdateName == workflows.ResolveUpdate {
		o.UpdateName = "openwop.resolve-update-of-a-later-release"
	}
	h, err := c.Client.UpdateWorkflow(ctx, o)
	if err == nil {
		err = h.Get(ctx, nil)
		if err == nil {
			return h, nil
		}
	}
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
	return nil, err
}

// newAPIOver serves a further API process, as newAPIWith does, over the Temporal client tc.
func newAPIOver(t *testing.T, c *apiClient, tc client.Client) *apiClient {
	t.Helper()
	cfg := api.Config{Keys: []api.Key{{ID: "test", Secret: c.Key, Tenant: "default", Scopes: api.AllScopes}}, TokenSecret: []byte(randomHex(16))}
	_, url, err := serveAPI(t, c, cfg, furtherAPI{Temporal: tc, OwnServer: true})
	require.NoError(t, err)
	return clientAt(t, c, url, c.Key, 60*time.Second)
}

// TestResolveFallsBackToSignalWithoutTheUpdate: a run whose worker rejects the resolve
// update as unknown is resolved by the validation query and the signal, and answered
// with its recorded outcome, as before the update.
func TestResolveFallsBackToSignalWithoutTheUpdate(t *testing.T) {
	t.Parallel()
	a := startStack(t)
	rc := &renamingClient{Client: a.Stack.Client()}
	b := newAPIOver(t, a, rc)
	id := cfCreate(t, a, "conformance-conversation-council", nil)
	cfWaitStatus(t, a, id, "waiting-approval")
	status, body := post(b, b.Key, "/v1/runs/"+id+"/interrupts/convo", map[string]any{"resumeValue": map[string]any{"text": "through the signal"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	status, body = post(b, b.Key, "/v1/runs/"+id+"/interrupts/no-such-node", map[string]any{"resumeValue": map[string]any{"text": "x"}})
	require.Equal(t, http.StatusNotFound, status, "%v", body)
	rc.mu.Lock()
	errs := rc.errs
	rc.mu.Unlock()
	require.Len(t, errs, 2)
	for _, err := range errs {
		assert.True(t, api.IsUnknownUpdate(err), "the worker's rejection reads as an unknown update: %v", err)
	}
	n := countHistory(t, a.Stack, id)
	assert.Equal(t, 1, n.signals, "the exchange was signalled")
	assert.Zero(t, n.updates)
	found := 0
	for _, e := range cfEvents(t, a, id) {
		if e.Type == "conversation.exchanged" && strings.Contains(string(e.Payload), "through the signal") && strings.Contains(string(e.Payload), `"role":"user"`) {
			found++
		}
	}
	assert.Equal(t, 1, found)
}

// TestResolveOverHTTPIsOneUpdate: an exchange over HTTP is one accepted update and no
// signal; the same Idempotency-Key again is answered with the first outcome and the
// replay header, and applies nothing; a refused exchange adds nothing to history.
func TestResolveOverHTTPIsOneUpdate(t *testing.T) {
	t.Parallel()
	a := startStack(t)
	id := cfCreate(t, a, "conformance-conversation-council", nil)
	cfWaitStatus(t, a, id, "waiting-approval")
	path := "/v1/runs/" + id + "/interrupts/convo"
	h := map[string]string{"Authorization": "Bearer " + a.Key, "Content-Type": "application/json", "Idempotency-Key": "update-once"}
	status, hdr, raw := a.doRaw(http.MethodPost, path, map[string]any{"resumeValue": map[string]any{"text": "just once"}}, h)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	assert.Empty(t, hdr.Get(api.HeaderIdempotentReplay))
	first := countHistory(t, a.Stack, id)
	assert.Equal(t, 1, first.updates)
	assert.Zero(t, first.signals)
	status, hdr, raw2 := a.doRaw(http.MethodPost, path, map[string]any{"resumeValue": map[string]any{"text": "just once"}}, h)
	require.Equal(t, http.StatusOK, status, "%s", raw2)
	assert.Equal(t, "true", hdr.Get(api.HeaderIdempotentReplay))
	assert.JSONEq(t, string(raw), string(raw2))
	status, _, raw = a.doRaw(http.MethodPost, "/v1/runs/"+id+"/interrupts/no-such-node", map[string]any{"resumeValue": map[string]any{"text": "x"}}, map[string]string{"Authorization": "Bearer " + a.Key, "Content-Type": "application/json"})
	require.Equal(t, http.StatusNotFound, status, "%s", raw)
	assert.Equal(t, first, countHistory(t, a.Stack, id), "neither the repeat nor the refusal adds to history")
	found := 0
	for _, e := range cfEvents(t, a, id) {
		if e.Type == "conversation.exchanged" && strings.Contains(string(e.Payload), "just once") && strings.Contains(string(e.Payload), `"role":"user"`) {
			found++
		}
	}
	assert.Equal(t, 1, found)
}
