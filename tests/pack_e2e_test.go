package tests

// End-to-end conversations with the example packs (packs/support.yaml, refund.yaml),
// driven over the REST API against the embedded Temporal server, with the real
// activities and the scripted mock model. The mock's expect_user checks read the
// transcript through the run's TranscriptQuery, so a passing script also proves that
// model rounds see the right messages.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// packNode is the node of a served pack's one-node definition.
const packNode = workflows.ServedPackNodeID

// createRun starts a conversation with a pack and returns the run id.
func createRun(t *testing.T, c *apiClient, pack string, inputs map[string]any) string {
	t.Helper()
	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": pack, "inputs": inputs})
	require.Equal(t, http.StatusCreated, status, "create a %s run: %v", pack, body)
	id, _ := body["runId"].(string)
	require.NotEmpty(t, id)
	return id
}

// waitCompleted waits until the run has ended and requires that it completed (a failure
// is reported with its error rather than waited out).
func waitCompleted(t *testing.T, c *apiClient, id string) workflows.Snapshot {
	t.Helper()
	s := waitSnapshot(t, c, id, 30*time.Second, "completed", func(s workflows.Snapshot) bool {
		return s.Status == protocol.StatusCompleted || s.Status == protocol.StatusFailed
	})
	require.Equal(t, protocol.StatusCompleted, s.Status, "error: %+v", s.Error)
	return s
}

// waitRounds waits until the pack has run n model rounds and waits again.
func waitRounds(t *testing.T, c *apiClient, id string, n int, status string) workflows.Snapshot {
	t.Helper()
	return waitSnapshot(t, c, id, 30*time.Second, status, func(s workflows.Snapshot) bool {
		return s.Pack != nil && s.Pack.ModelRounds >= n && s.Status == status
	})
}

// sayTo sends a user message to the pack's conversation.
func sayTo(t *testing.T, c *apiClient, id, text string) {
	t.Helper()
	status, body := postToPack(c, id, map[string]any{"resumeValue": map[string]any{"text": text}})
	require.True(t, status >= 200 && status < 300, "send %q: %d %v", text, status, body)
}

// postToPack posts body as it is to the interrupt of a served pack's node and returns
// the status and the decoded answer.
func postToPack(c *apiClient, id string, body any) (int, map[string]any) {
	c.t.Helper()
	status, _, resp := c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode, body)
	return status, resp
}

// TestPackSupportConversationE2E is the worked example of promptpack-workflow.md §14 over
// HTTP: the first message rides in the run's inputs, the second passes three states
// in one turn and completes the run.
func TestPackSupportConversationE2E(t *testing.T) {
	c := startStack(t)
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	s := waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	require.Equal(t, "verifying", s.Pack.State)

	sayTo(t, c, id, "It's ACC-12345. What's my balance?")
	s = waitCompleted(t, c, id)
	require.Equal(t, "resolution", s.Pack.State)
	require.Equal(t, map[string]int{"verifying": 1, "triage": 1, "resolution": 1}, s.Pack.Visits)
	require.Equal(t, 6, s.Pack.ModelRounds)
	require.Equal(t, 4, s.Pack.ToolCalls)
	require.Positive(t, s.Pack.InputTokens)

	evs := events(t, c, id)
	turns := turnsIn(t, evs)
	require.Len(t, turns, 4)
	require.Equal(t, "support", turns[3].SpeakerID)
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", textOf(t, turns[3]))
	require.Len(t, ofType(evs, "agent.handoff"), 2)
	require.Len(t, ofType(evs, "provider.usage"), 6)
	require.Len(t, ofType(evs, "agent.toolCalled"), 4)
	require.Len(t, ofType(evs, protocol.EvConversationClosed), 1)
	require.Equal(t, protocol.EvRunCompleted, evs[len(evs)-1].Type)

	// The Temporal UI sees the pack and its state as search attributes, and every
	// activity carries a summary (the mock's rounds are local activities, the first
	// one too: their markers carry it).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := c.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	sa := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	require.Contains(t, string(sa["WopPackId"].GetData()), "support")
	require.Equal(t, "resolution", runTag(t, c.Stack.Client(), id, workflows.TagPackState))
	hist := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	summaries, roundActivities := 0, 0
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			if a.GetActivityType().GetName() == "ModelRound" {
				roundActivities++
			}
			require.NotNil(t, ev.GetUserMetadata().GetSummary(), "activity %s has no summary", a.GetActivityType().GetName())
			summaries++
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
			require.NotNil(t, ev.GetUserMetadata().GetSummary(), "local activity marker %d has no summary", ev.GetEventId())
			summaries++
		}
	}
	notices := dispatcherNotices(t, c, id)
	require.Positive(t, notices, "the run tells its tenant's webhook dispatcher of its start and end")
	require.Equal(t, 10+notices, summaries, "6 model rounds, 2 tool calls, the 2 routings of them and the notices")
	require.Zero(t, roundActivities, "every scripted round is local, the conversation's first one too")
	// pack-support.0 is this conversation recorded before first rounds were local.
	replayHistory(t, c, id, "pack-support-first-local")
}

// TestPackRefundExternalEventE2E files a refund, waits in the external state, and lets
// a reviewer's resolve inject the decision; the terminal prompt tells the customer.
func TestPackRefundExternalEventE2E(t *testing.T) {
	c := startStack(t)
	id := createRun(t, c, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "It's order ORD-1042.")
	s := waitRounds(t, c, id, 3, protocol.StatusWaitingExternal)
	require.Equal(t, "awaiting_approval", s.Pack.State)
	require.NotNil(t, s.Interrupt)
	require.Equal(t, "external-event", s.Interrupt.Kind)

	status, _, body := c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"event": "Refunded", "context": "no such event"}})
	require.Contains(t, []int{400, 422}, status, "an unknown event is refused: %v", body)
	assert.Contains(t, body["message"], "Approved, Rejected")

	status, _, body = c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"event": "Approved", "context": "Approved 89.90 USD, ref APR-7731"}})
	require.True(t, status >= 200 && status < 300, "approve: %d %v", status, body)

	// The refund pack acts with approval: issue_refund waits for its own decision.
	s = waitSnapshot(t, c, id, 30*time.Second, "waiting for the refund's approval", func(s workflows.Snapshot) bool {
		return s.Interrupt != nil && s.Interrupt.Kind == "approval"
	})
	require.Equal(t, protocol.StatusWaitingApproval, s.Status)
	require.Contains(t, string(s.Interrupt.Data), `"tool":"issue_refund"`)
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "accept the refund: %v", body)
	s = waitCompleted(t, c, id)
	require.Equal(t, "refunded", s.Pack.State)
	turns := turnsIn(t, events(t, c, id))
	last := textOf(t, turns[len(turns)-1])
	require.True(t, strings.HasPrefix(last, "Good news: your refund of $89.90"), last)
	replayHistory(t, c, id, "pack-refund-approval")
}

// TestPackRefundPaymentRejectedE2E takes the demo's other branch: the reviewer
// approves the refund, but the person deciding on the payment itself rejects the
// issue_refund call. The call does not run, the model reads the rejection, and the
// customer is told that nothing was paid.
func TestPackRefundPaymentRejectedE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := createRun(t, c, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "It's order ORD-1042.")
	waitRounds(t, c, id, 3, protocol.StatusWaitingExternal)
	status, _, body := c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"event": "Approved", "context": "Approved 89.90 USD, ref APR-7731"}})
	require.True(t, status >= 200 && status < 300, "approve: %d %v", status, body)
	waitSnapshot(t, c, id, 30*time.Second, "waiting for the payment's approval", func(s workflows.Snapshot) bool {
		return s.Interrupt != nil && s.Interrupt.Kind == "approval"
	})
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"action": "reject", "feedback": "The card on file was closed; pay by bank transfer."}})
	require.Equal(t, http.StatusOK, status, "reject the payment: %v", body)
	s := waitCompleted(t, c, id)
	require.Equal(t, "refunded", s.Pack.State)
	evs := events(t, c, id)
	paid := 0
	for _, r := range toolReturned(t, evs) {
		if r.Tool == "issue_refund" {
			paid++
			require.Equal(t, "error", r.Status)
			require.Contains(t, string(r.Outcome), `"status":"rejected"`)
		}
	}
	require.Equal(t, 1, paid, "issue_refund's result is in the log")
	turns := turnsIn(t, evs)
	last := textOf(t, turns[len(turns)-1])
	assert.Contains(t, last, "nothing has been paid", "the customer is told the refund was not paid")
	assert.NotContains(t, last, "has been issued")
}

// TestPackOrdersToolFailedE2E: the orders demo with an order service that answers an
// error. The model reads the tool's error result and tells the customer that tracking
// is unreachable, instead of the shipped answer.
func TestPackOrdersToolFailedE2E(t *testing.T) {
	t.Parallel()
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such route", http.StatusNotFound)
	}))
	t.Cleanup(svc.Close)
	c := startPrivateStack(t, stackOptions{ToolsFile: writeBindings(t, "tools:\n  track_order:\n    http: { url: \""+svc.URL+"/track_order\" }\n")})
	id := createRun(t, c, "orders", map[string]any{"message": "Where is my order ORD-1042?"})
	s := waitCompleted(t, c, id)
	require.Equal(t, "goodbye", s.Pack.State)
	evs := events(t, c, id)
	tracked := 0
	for _, r := range toolReturned(t, evs) {
		if r.Tool == "track_order" {
			tracked++
			require.Equal(t, "error", r.Status, "track_order failed: %s", r.Outcome)
		}
	}
	require.Equal(t, 1, tracked)
	turns := turnsIn(t, evs)
	require.GreaterOrEqual(t, len(turns), 2)
	reply := textOf(t, turns[1])
	assert.Contains(t, reply, "can't reach our order tracking")
	assert.NotContains(t, reply, "has shipped")
}

// TestPackCodeFixLoopE2E runs RFC 0014 Example 2: every state is control: agent, so after
// the go-ahead the compile → test → fix loop runs to its terminal state within one turn,
// bounded by max_visits, and one reply tells the user what happened.
func TestPackCodeFixLoopE2E(t *testing.T) {
	c := startStack(t)
	id := createRun(t, c, "code-fix", map[string]any{"message": "The ledger build is red since the date parsing change. Can you fix it?"})
	s := waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	require.Equal(t, "compile", s.Pack.State)

	sayTo(t, c, id, "Yes, go ahead.")
	s = waitCompleted(t, c, id)
	require.Equal(t, 2, s.Pack.Visits["fix"], "fix ran twice, below its max_visits")
	require.Equal(t, 3, s.Pack.Visits["compile"])
	require.Equal(t, 3, s.Pack.Visits["test"])

	evs := events(t, c, id)
	turns := turnsIn(t, evs)
	require.Len(t, turns, 4, "two user turns, two agent replies: the loop ran inside one turn")
	require.Equal(t, "agent", turns[3].Role)
	require.NotEmpty(t, textOf(t, turns[3]))
	require.Len(t, ofType(evs, "agent.handoff"), s.Pack.TotalVisits-1, "one handoff per transition")
	require.Equal(t, protocol.EvRunCompleted, evs[len(evs)-1].Type)
	replayHistory(t, c, id, "pack-code-fix")
}

// TestPackSurvivesWorkerRestartE2E stops the worker mid-conversation and signals the next
// message, twice with one request id, while no worker runs (the API validates resolves
// with a query, which needs a worker, so the signal goes through the Temporal client).
// Started again, the worker answers the turn exactly once.
func TestPackSurvivesWorkerRestartE2E(t *testing.T) {
	c := startPrivateStack(t, stackOptions{DataDir: t.TempDir()})
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)

	c.Stack.StopWorker()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := workflows.ResolveRequest{
		RequestID: "msg-2", NodeID: packNode, ResolvedBy: "key_test", ReceivedAtMs: time.Now().UnixMilli(), Via: "rest",
		ResumeValue: json.RawMessage(`{"text":"It's ACC-12345. What's my balance?"}`),
	}
	for range 2 {
		require.NoError(t, c.Stack.Client().SignalWorkflow(ctx, id, "", workflows.ResolveSignal, req))
	}
	require.NoError(t, c.Stack.StartWorker())

	s := waitCompleted(t, c, id)
	turns := turnsIn(t, events(t, c, id))
	require.Len(t, turns, 4, "no turn lost or duplicated")
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", textOf(t, turns[3]))
	require.Equal(t, 6, s.Pack.ModelRounds)
}

// TestPackSupportFiveTurnsE2E holds the five-turn conversation of the support script's
// branches (strict: every round must be on script): no account number at hand, the number
// alone, a question, then a payment the customer does not recognise, which passes the
// transient triage state (whose model round reads the transcript from before its context
// window to know where the script stands) and ends in the hand-off.
func TestPackSupportFiveTurnsE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "I don't remember my account number, can you look me up by name?")
	waitRounds(t, c, id, 2, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "Found it: ACC-12345.")
	waitRounds(t, c, id, 4, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "What can you do?")
	s := waitRounds(t, c, id, 5, protocol.StatusWaitingApproval)
	require.Equal(t, "verifying", s.Pack.State)
	sayTo(t, c, id, "I see a card payment I don't recognise.")
	s = waitCompleted(t, c, id)
	require.Equal(t, "handoff", s.Pack.State)
	require.Equal(t, 9, s.Pack.ModelRounds)

	agent := agentTexts(t, turnsIn(t, events(t, c, id)))
	require.Len(t, agent, 5, "one reply per user turn")
	assert.Contains(t, agent[1], "can't look accounts up by name")
	assert.Contains(t, agent[2], "Your account ending 2345 is verified")
	assert.Contains(t, agent[3], "I can tell you your current balance", "the question is answered at the branch point, which waits")
	assert.Contains(t, agent[4], "ticket HT-20931")
}

// TestPackRefundAnswersWhileItWaitsE2E: the refund pack answers the customer while the
// request waits for the reviewer ("Any news on my refund?" is what its pending prompt is
// for), then completes on the approval.
func TestPackRefundAnswersWhileItWaitsE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	rf := createRun(t, c, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	waitRounds(t, c, rf, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, rf, "It's order ORD-1042.")
	waitRounds(t, c, rf, 3, protocol.StatusWaitingExternal)
	sayTo(t, c, rf, "Any news on my refund?")
	waitRounds(t, c, rf, 4, protocol.StatusWaitingExternal)
	sayTo(t, c, rf, "Can I pay with a gift card next time?")
	waitRounds(t, c, rf, 5, protocol.StatusWaitingExternal)

	status, _, body := c.do(http.MethodPost, "/v1/runs/"+rf+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"event": "Approved", "context": "Approved 89.90 USD, ref APR-7731"}})
	require.True(t, status >= 200 && status < 300, "approve: %d %v", status, body)
	// issue_refund waits for its approval (the pack acts with approval).
	waitSnapshot(t, c, rf, 30*time.Second, "waiting for the refund's approval", func(s workflows.Snapshot) bool { return s.Interrupt != nil && s.Interrupt.Kind == "approval" })
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+rf+"/interrupts/"+packNode, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "accept the refund: %v", body)
	s := waitCompleted(t, c, rf)
	require.Equal(t, "refunded", s.Pack.State)
	agent := agentTexts(t, turnsIn(t, events(t, c, rf)))
	require.Len(t, agent, 5)
	assert.Contains(t, agent[2], "no decision yet")
	assert.Contains(t, agent[3], "I can't change or speed up the decision")
	assert.True(t, strings.HasPrefix(agent[4], "Good news"), agent[4])
}

func agentTexts(t *testing.T, turns []protocol.Turn) []string {
	t.Helper()
	var out []string
	for _, tu := range turns {
		if tu.Role == protocol.RoleAgent {
			out = append(out, textOf(t, tu))
		}
	}
	return out
}

// TestPackMockForgivesOffScriptE2E: on a host whose mock is not strict (wop dev's
// default), a message the script does not expect gets the script's default reply, the
// run goes on, and the script still answers the message it waits for. A script that says
// strict: true fails such a round instead, with an OpenWOP code and the script's words.
func TestPackMockForgivesOffScriptE2E(t *testing.T) {
	t.Parallel()
	c := startPrivateStack(t, stackOptions{ForgivingMock: true, PacksDir: "testdata/mockpacks"})

	id := createRun(t, c, "greeter", map[string]any{"message": "hi"})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "What's the weather like?")
	waitRounds(t, c, id, 2, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "OK, bye!")
	waitCompleted(t, c, id)
	agent := agentTexts(t, turnsIn(t, events(t, c, id)))
	require.Equal(t, []string{"Welcome!", "That is off my script.", "Goodbye!"}, agent)

	strict := createRun(t, c, "greeter-strict", map[string]any{"message": "hi"})
	waitRounds(t, c, strict, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, strict, "What's the weather like?")
	s := waitSnapshot(t, c, strict, 30*time.Second, "failed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusFailed })
	require.NotNil(t, s.Error)
	assert.Equal(t, "mock_script_mismatch", s.Error.Code)
	assert.Contains(t, s.Error.Message, "greeter-strict.mock.yaml:7")
	assert.Contains(t, s.Error.Message, `expected the latest user message to contain "bye" but it is "What's the weather like?"`)
	assert.NotContains(t, s.Error.Message, "scheduledEventID")
}
