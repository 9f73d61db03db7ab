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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/wop-dev/wop/workflows"
)

// packNode is the node of a served pack's one-node definition.
const packNode = workflows.ServedPackNodeID

// pkCreate starts a conversation with a pack and returns the run id.
func pkCreate(t *testing.T, c *apiClient, pack string, inputs map[string]any) string {
	t.Helper()
	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": pack, "inputs": inputs})
	require.Equal(t, http.StatusCreated, status, "create a %s run: %v", pack, body)
	id, _ := body["runId"].(string)
	require.NotEmpty(t, id)
	return id
}

// pkSnapshot decodes GET /v1/runs/{id}.
func pkSnapshot(t *testing.T, c *apiClient, id string) workflows.Snapshot {
	t.Helper()
	status, _, raw := c.doRaw(http.MethodGet, "/v1/runs/"+id, nil, map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusOK, status, "snapshot: %s", raw)
	var s workflows.Snapshot
	require.NoError(t, json.Unmarshal(raw, &s), "snapshot: %s", raw)
	return s
}

// pkWait polls the snapshot until pred holds.
func pkWait(t *testing.T, c *apiClient, id, what string, pred func(workflows.Snapshot) bool) workflows.Snapshot {
	t.Helper()
	var last workflows.Snapshot
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		last = pkSnapshot(t, c, id)
		assert.True(ct, pred(last), "run %s is not %s yet: status %s, pack %+v", id, what, last.Status, last.Pack)
	}, 30*time.Second, 100*time.Millisecond)
	return last
}

// pkCompleted waits until the run has ended and requires that it completed (a failure
// is reported with its error rather than waited out).
func pkCompleted(t *testing.T, c *apiClient, id string) workflows.Snapshot {
	t.Helper()
	s := pkWait(t, c, id, "completed", func(s workflows.Snapshot) bool {
		return s.Status == workflows.StatusCompleted || s.Status == workflows.StatusFailed
	})
	require.Equal(t, workflows.StatusCompleted, s.Status, "error: %+v", s.Error)
	return s
}

// pkRounds waits until the pack has run n model rounds and waits again.
func pkRounds(t *testing.T, c *apiClient, id string, n int, status string) workflows.Snapshot {
	t.Helper()
	return pkWait(t, c, id, status, func(s workflows.Snapshot) bool {
		return s.Pack != nil && s.Pack.ModelRounds >= n && s.Status == status
	})
}

// pkSay sends a user message to the pack's conversation.
func pkSay(t *testing.T, c *apiClient, id, text string) {
	t.Helper()
	status, _, body := c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode, map[string]any{"resumeValue": map[string]any{"text": text}})
	require.True(t, status >= 200 && status < 300, "send %q: %d %v", text, status, body)
}

// pkEvents reads the whole event log.
func pkEvents(t *testing.T, c *apiClient, id string) []workflows.Event {
	t.Helper()
	status, _, raw := c.doRaw(http.MethodGet, "/v1/runs/"+id+"/events", nil, map[string]string{"Authorization": "Bearer " + c.Key, "Accept": "application/json"})
	require.Equal(t, http.StatusOK, status, "events: %s", raw)
	var page struct {
		Events []workflows.Event `json:"events"`
	}
	require.NoError(t, json.Unmarshal(raw, &page))
	return page.Events
}

func pkOfType(evs []workflows.Event, typ string) []workflows.Event {
	var out []workflows.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// pkTurns returns the conversation turns recorded as conversation.exchanged.
func pkTurns(t *testing.T, evs []workflows.Event) []workflows.Turn {
	t.Helper()
	var out []workflows.Turn
	for _, e := range pkOfType(evs, workflows.EvConversationExchanged) {
		var p struct {
			Turn workflows.Turn `json:"turn"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		out = append(out, p.Turn)
	}
	return out
}

func pkText(t *testing.T, turn workflows.Turn) string {
	t.Helper()
	var body struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(turn.Content, &body))
	return body.Text
}

// pkReplay fetches the run's Temporal history and replays it against the current
// workflow code: the pack node must make the same decisions again (determinism). With
// WOP_RECORD_HISTORIES=1 it also writes the history to
// workflows/testdata/pack-<name>.0.history.json, where
// workflows.TestReplayRecordedHistories replays it on every test run.
func pkReplay(t *testing.T, c *apiClient, id, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.Run, workflow.RegisterOptions{Name: workflows.RunWorkflowName})
	require.NoError(t, r.ReplayWorkflowHistory(nil, hist), "replay of run %s (%d history events)", id, len(hist.Events))
	if os.Getenv("WOP_RECORD_HISTORIES") == "1" {
		b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
		require.NoError(t, err)
		file := filepath.Join("..", "workflows", "testdata", "pack-"+name+".0.history.json")
		require.NoError(t, os.WriteFile(file, b, 0o644))
	}
}

// TestPackSupportConversationE2E is the worked example of promptpack-workflow.md §14 over
// HTTP: the first message rides in the run's inputs, the second passes three states
// in one turn and completes the run.
func TestPackSupportConversationE2E(t *testing.T) {
	c := startStack(t)
	id := pkCreate(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	s := pkRounds(t, c, id, 1, workflows.StatusWaitingApproval)
	require.Equal(t, "verifying", s.Pack.State)

	pkSay(t, c, id, "It's ACC-12345. What's my balance?")
	s = pkCompleted(t, c, id)
	require.Equal(t, "resolution", s.Pack.State)
	require.Equal(t, map[string]int{"verifying": 1, "triage": 1, "resolution": 1}, s.Pack.Visits)
	require.Equal(t, 6, s.Pack.ModelRounds)
	require.Equal(t, 4, s.Pack.ToolCalls)
	require.Positive(t, s.Pack.InputTokens)

	evs := pkEvents(t, c, id)
	turns := pkTurns(t, evs)
	require.Len(t, turns, 4)
	require.Equal(t, "support", turns[3].SpeakerID)
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", pkText(t, turns[3]))
	require.Len(t, pkOfType(evs, "agent.handoff"), 2)
	require.Len(t, pkOfType(evs, "provider.usage"), 6)
	require.Len(t, pkOfType(evs, "agent.toolCalled"), 4)
	require.Len(t, pkOfType(evs, workflows.EvConversationClosed), 1)
	require.Equal(t, workflows.EvRunCompleted, evs[len(evs)-1].Type)

	// The Temporal UI sees the pack and its state as search attributes, and every
	// activity carries a summary.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := c.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	sa := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	require.Contains(t, string(sa["WopPackId"].GetData()), "support")
	require.Contains(t, string(sa["WopPackState"].GetData()), "resolution")
	hist := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	summaries := 0
	for hist.HasNext() {
		ev, err := hist.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			require.NotNil(t, ev.GetUserMetadata().GetSummary(), "activity %s has no summary", a.GetActivityType().GetName())
			summaries++
		}
	}
	require.Equal(t, 8, summaries, "6 model rounds and 2 tool calls")
	pkReplay(t, c, id, "support")
}

// TestPackRefundExternalEventE2E files a refund, waits in the external state, and lets
// a reviewer's resolve inject the decision; the terminal prompt tells the customer.
func TestPackRefundExternalEventE2E(t *testing.T) {
	c := startStack(t)
	id := pkCreate(t, c, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	pkRounds(t, c, id, 1, workflows.StatusWaitingApproval)
	pkSay(t, c, id, "It's order ORD-1042.")
	s := pkRounds(t, c, id, 3, workflows.StatusWaitingExternal)
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
	s = pkWait(t, c, id, "waiting for the refund's approval", func(s workflows.Snapshot) bool {
		return s.Interrupt != nil && s.Interrupt.Kind == "approval"
	})
	require.Equal(t, workflows.StatusWaitingApproval, s.Status)
	require.Contains(t, string(s.Interrupt.Data), `"tool":"issue_refund"`)
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "accept the refund: %v", body)
	s = pkCompleted(t, c, id)
	require.Equal(t, "refunded", s.Pack.State)
	turns := pkTurns(t, pkEvents(t, c, id))
	last := pkText(t, turns[len(turns)-1])
	require.True(t, strings.HasPrefix(last, "Good news: your refund of $89.90"), last)
	pkReplay(t, c, id, "refund-approval")
}

// TestPackCodeFixLoopE2E runs RFC 0014 Example 2: every state is control: agent, so after
// the go-ahead the compile → test → fix loop runs to its terminal state within one turn,
// bounded by max_visits, and one reply tells the user what happened.
func TestPackCodeFixLoopE2E(t *testing.T) {
	c := startStack(t)
	id := pkCreate(t, c, "code-fix", map[string]any{"message": "The ledger build is red since the date parsing change. Can you fix it?"})
	s := pkRounds(t, c, id, 1, workflows.StatusWaitingApproval)
	require.Equal(t, "compile", s.Pack.State)

	pkSay(t, c, id, "Yes, go ahead.")
	s = pkCompleted(t, c, id)
	require.Equal(t, 2, s.Pack.Visits["fix"], "fix ran twice, below its max_visits")
	require.Equal(t, 3, s.Pack.Visits["compile"])
	require.Equal(t, 3, s.Pack.Visits["test"])

	evs := pkEvents(t, c, id)
	turns := pkTurns(t, evs)
	require.Len(t, turns, 4, "two user turns, two agent replies: the loop ran inside one turn")
	require.Equal(t, "agent", turns[3].Role)
	require.NotEmpty(t, pkText(t, turns[3]))
	require.Len(t, pkOfType(evs, "agent.handoff"), s.Pack.TotalVisits-1, "one handoff per transition")
	require.Equal(t, workflows.EvRunCompleted, evs[len(evs)-1].Type)
	pkReplay(t, c, id, "code-fix")
}

// TestPackSurvivesWorkerRestartE2E stops the worker mid-conversation and signals the next
// message, twice with one request id, while no worker runs (the API validates resolves
// with a query, which needs a worker, so the signal goes through the Temporal client).
// Started again, the worker answers the turn exactly once.
func TestPackSurvivesWorkerRestartE2E(t *testing.T) {
	c := startPrivateStack(t, stackOptions{DataDir: t.TempDir()})
	id := pkCreate(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	pkRounds(t, c, id, 1, workflows.StatusWaitingApproval)

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

	s := pkCompleted(t, c, id)
	turns := pkTurns(t, pkEvents(t, c, id))
	require.Len(t, turns, 4, "no turn lost or duplicated")
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", pkText(t, turns[3]))
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
	id := pkCreate(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	pkRounds(t, c, id, 1, workflows.StatusWaitingApproval)
	pkSay(t, c, id, "I don't remember my account number, can you look me up by name?")
	pkRounds(t, c, id, 2, workflows.StatusWaitingApproval)
	pkSay(t, c, id, "Found it: ACC-12345.")
	pkRounds(t, c, id, 4, workflows.StatusWaitingApproval)
	pkSay(t, c, id, "What can you do?")
	s := pkRounds(t, c, id, 5, workflows.StatusWaitingApproval)
	require.Equal(t, "verifying", s.Pack.State)
	pkSay(t, c, id, "I see a card payment I don't recognise.")
	s = pkCompleted(t, c, id)
	require.Equal(t, "handoff", s.Pack.State)
	require.Equal(t, 9, s.Pack.ModelRounds)

	agent := agentTexts(t, pkTurns(t, pkEvents(t, c, id)))
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
	rf := pkCreate(t, c, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	pkRounds(t, c, rf, 1, workflows.StatusWaitingApproval)
	pkSay(t, c, rf, "It's order ORD-1042.")
	pkRounds(t, c, rf, 3, workflows.StatusWaitingExternal)
	pkSay(t, c, rf, "Any news on my refund?")
	pkRounds(t, c, rf, 4, workflows.StatusWaitingExternal)
	pkSay(t, c, rf, "Can I pay with a gift card next time?")
	pkRounds(t, c, rf, 5, workflows.StatusWaitingExternal)

	status, _, body := c.do(http.MethodPost, "/v1/runs/"+rf+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"event": "Approved", "context": "Approved 89.90 USD, ref APR-7731"}})
	require.True(t, status >= 200 && status < 300, "approve: %d %v", status, body)
	// issue_refund waits for its approval (the pack acts with approval).
	pkWait(t, c, rf, "waiting for the refund's approval", func(s workflows.Snapshot) bool { return s.Interrupt != nil && s.Interrupt.Kind == "approval" })
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+rf+"/interrupts/"+packNode, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "accept the refund: %v", body)
	s := pkCompleted(t, c, rf)
	require.Equal(t, "refunded", s.Pack.State)
	agent := agentTexts(t, pkTurns(t, pkEvents(t, c, rf)))
	require.Len(t, agent, 5)
	assert.Contains(t, agent[2], "no decision yet")
	assert.Contains(t, agent[3], "I can't change or speed up the decision")
	assert.True(t, strings.HasPrefix(agent[4], "Good news"), agent[4])
}

func agentTexts(t *testing.T, turns []workflows.Turn) []string {
	t.Helper()
	var out []string
	for _, tu := range turns {
		if tu.Role == workflows.RoleAgent {
			out = append(out, pkText(t, tu))
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

	id := pkCreate(t, c, "greeter", map[string]any{"message": "hi"})
	pkRounds(t, c, id, 1, workflows.StatusWaitingApproval)
	pkSay(t, c, id, "What's the weather like?")
	pkRounds(t, c, id, 2, workflows.StatusWaitingApproval)
	pkSay(t, c, id, "OK, bye!")
	pkCompleted(t, c, id)
	agent := agentTexts(t, pkTurns(t, pkEvents(t, c, id)))
	require.Equal(t, []string{"Welcome!", "That is off my script.", "Goodbye!"}, agent)

	strict := pkCreate(t, c, "greeter-strict", map[string]any{"message": "hi"})
	pkRounds(t, c, strict, 1, workflows.StatusWaitingApproval)
	pkSay(t, c, strict, "What's the weather like?")
	s := pkWait(t, c, strict, "failed", func(s workflows.Snapshot) bool { return s.Status == workflows.StatusFailed })
	require.NotNil(t, s.Error)
	assert.Equal(t, "mock_script_mismatch", s.Error.Code)
	assert.Contains(t, s.Error.Message, "greeter-strict.mock.yaml:7")
	assert.Contains(t, s.Error.Message, `expected the latest user message to contain "bye" but it is "What's the weather like?"`)
	assert.NotContains(t, s.Error.Message, "scheduledEventID")
}
