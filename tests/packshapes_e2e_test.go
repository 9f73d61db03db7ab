package tests

// Every valid pack runs: public example packs of each shape (testdata/shapepacks, from
// PromptKit's examples and the PromptPack RFCs; SOURCES.md there names them and their
// licences) driven over HTTP against the embedded stack on the strict scripted mock. A
// pack without a workflow is a conversation with one prompt (inputs.prompt chooses);
// the create checks refuse, with a 400 naming them, what would make such a run fail as
// it starts; a loop the pack bounds with max_visits reaches its on_max_visits state past
// the host's per-turn limit.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// shapePacksDir holds the packs of this file.
const shapePacksDir = "testdata/shapepacks"

func startShapeStack(t *testing.T) *apiClient {
	t.Helper()
	return startPrivateStack(t, stackOptions{PacksDir: shapePacksDir})
}

// converse starts a run of pack with inputs (its message the first turn), then says each
// of more, waiting for the pack's answer each time; it returns the run id and the
// agent's replies.
func converse(t *testing.T, c *apiClient, pack string, inputs map[string]any, more ...string) (string, []string) {
	t.Helper()
	id := createRun(t, c, pack, inputs)
	s := waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	for _, text := range more {
		rounds := s.Pack.ModelRounds
		sayTo(t, c, id, text)
		s = waitRounds(t, c, id, rounds+1, protocol.StatusWaitingApproval)
	}
	return id, agentTexts(t, turnsIn(t, events(t, c, id)))
}

// createRefused posts a create that must be refused with 400 and returns its details.
func createRefused(t *testing.T, c *apiClient, pack string, inputs map[string]any) (string, map[string]any) {
	t.Helper()
	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": pack, "inputs": inputs})
	require.Equal(t, http.StatusBadRequest, status, "create %s: %v", pack, body)
	msg, _ := body["message"].(string)
	details, _ := body["details"].(map[string]any)
	return msg, details
}

// TestShapeSinglePromptPackE2E: PromptKit's tools example, one prompt and no workflow,
// answers three messages with its tools.
func TestShapeSinglePromptPackE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	id, replies := converse(t, c, "tools-example", map[string]any{"message": "What's the weather in Paris?"},
		"And what time is it there?", "Thanks!")
	require.Equal(t, []string{"It is 18°C and sunny in Paris.", "It is 14:05 in Paris.", "You're welcome!"}, replies)
	s := snapshot(t, c, id)
	require.Equal(t, "assistant", s.Pack.State)
	require.Equal(t, map[string]int{"assistant": 1}, s.Pack.Visits)
	require.Equal(t, 2, s.Pack.ToolCalls)
	evs := events(t, c, id)
	require.Len(t, ofType(evs, "agent.toolCalled"), 2)
	require.Empty(t, ofType(evs, "agent.handoff"), "a conversation has no transitions")
	replayHistory(t, c, id, "pack-conversation-single")
}

// TestShapeMultiPromptPackE2E: PromptKit's openai-realtime example has two prompts; a
// run holds the first of the file unless inputs.prompt names another, and an unknown
// one is refused at create.
func TestShapeMultiPromptPackE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	id, replies := converse(t, c, "openai-realtime-example", map[string]any{"message": "hello"}, "What's the weather?")
	require.Equal(t, []string{"Hi there! How can I help?", "I can't check the weather, but I'm happy to chat."}, replies)
	require.Equal(t, "assistant", snapshot(t, c, id).Pack.State)

	id, replies = converse(t, c, "openai-realtime-example", map[string]any{"prompt": "translator", "message": "good morning"}, "thank you")
	require.Equal(t, []string{"Buenos días.", "Gracias."}, replies)
	require.Equal(t, "translator", snapshot(t, c, id).Pack.State)
	replayHistory(t, c, id, "pack-conversation-prompt")

	msg, details := createRefused(t, c, "openai-realtime-example", map[string]any{"prompt": "translater"})
	assert.Contains(t, msg, `has no prompt "translater"`)
	assert.Contains(t, msg, `did you mean "translator"?`)
	assert.Equal(t, []any{"inputs.prompt"}, details["fields"])
}

// TestShapeRequiredVariablesE2E: PromptKit's hello example requires user_name; a create
// without it is refused with the variable's name, before a run exists.
func TestShapeRequiredVariablesE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	msg, details := createRefused(t, c, "hello-example", map[string]any{"message": "hi"})
	assert.Contains(t, msg, `required variable "user_name" is missing`)
	assert.Equal(t, []any{"inputs.user_name"}, details["fields"])
	assert.Equal(t, "hello-example", details["pack"])

	id, replies := converse(t, c, "hello-example", map[string]any{"user_name": "Ada", "message": "hi"}, "What's my name?")
	require.Equal(t, []string{"Hello Ada, lovely to meet you!", "Your name is Ada."}, replies)
	// The refused create started no run: the pack's only run is the one above.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		status, _, list := c.do(http.MethodGet, "/v1/runs?workflowId=hello-example", nil)
		runs, _ := list["runs"].([]any)
		if assert.Equal(ct, http.StatusOK, status) && assert.Len(ct, runs, 1) {
			assert.Equal(ct, id, runs[0].(map[string]any)["runId"])
		}
	}, 20*time.Second, 100*time.Millisecond)
}

// TestShapeProviderReferencesE2E: RFC 0017's pack names provider drafter on one prompt
// (it runs on the primary model of a host without a drafter), and RFC 0012's needs an
// embedding model this host cannot bind, so its create is refused naming it.
func TestShapeProviderReferencesE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	id, replies := converse(t, c, "rfc0017-two-llms",
		map[string]any{"prompt": "refund_confirmation", "order_id": "ORD-7", "message": "Please confirm my refund."}, "When will it arrive?")
	require.Equal(t, []string{"Your refund for order ORD-7 is on its way. It should reach you within five days.", "Within five working days."}, replies)
	require.Equal(t, "refund_confirmation", snapshot(t, c, id).Pack.State)

	msg, details := createRefused(t, c, "rfc0012-rag", map[string]any{"message": "hi"})
	assert.Contains(t, msg, `"embeddings" (role embedding)`)
	assert.NotContains(t, msg, "reranker", "an optional requirement does not stop a run")
	assert.Equal(t, []any{"requires.providers.embeddings"}, details["fields"])
}

// TestShapeAgentsPackE2E: RFC 0007's vision assistant has no workflow and an agents
// block; its entry agent holds the conversation and calls the describer agent as a
// tool, which runs as a child run and answers the call.
func TestShapeAgentsPackE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	id, replies := converse(t, c, "vision-assistant", map[string]any{"message": "What can you do?"}, "Please describe my photo.", "thanks")
	require.Equal(t, []string{"I help you understand images; send me one.", "It shows a red bicycle leaning against a white wall.", "Any time."}, replies)
	s := snapshot(t, c, id)
	require.Equal(t, "coordinator", s.Pack.State)
	require.Len(t, s.ChildRuns, 1)
	child := s.ChildRuns[0]
	require.Equal(t, protocol.StatusCompleted, child.Status)
	returned := ofType(events(t, c, id), "agent.toolReturned")
	require.Len(t, returned, 1)
	assert.Contains(t, string(returned[0].Payload), "A red bicycle leans against a white wall")
	assert.Contains(t, string(returned[0].Payload), child.RunID)

	// The child run is the describer answering the call's message, completed.
	cs := snapshot(t, c, child.RunID)
	require.Equal(t, protocol.StatusCompleted, cs.Status)
	require.Equal(t, "describer", cs.Pack.State)
	require.Equal(t, []string{"A red bicycle leans against a white wall in afternoon light."}, agentTexts(t, turnsIn(t, events(t, c, child.RunID))))
	replayHistory(t, c, id, "pack-agents-call")
	replayHistory(t, c, child.RunID, "pack-agents-called")
}

// TestShapeMaxVisitsLoopReachesItsRedirectE2E: a control: agent loop bounded by
// max_visits 30 runs its 30 rounds in one turn, past the host's default limit of 25
// rounds per turn, and its on_max_visits state answers and completes the run.
func TestShapeMaxVisitsLoopReachesItsRedirectE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	id := createRun(t, c, "loop-report", map[string]any{"message": "Fix it."})
	s := waitCompleted(t, c, id)
	require.Equal(t, "report", s.Pack.State)
	require.Equal(t, 31, s.Pack.ModelRounds)
	require.Greater(t, s.Pack.ModelRounds, engine.DefaultHostMaxRoundsPerTurn)
	require.Equal(t, map[string]int{"work": 30, "report": 1}, s.Pack.Visits)
	evs := events(t, c, id)
	require.Empty(t, ofType(evs, "cap.breached"))
	require.Equal(t, []string{"After 30 attempts nothing worked; here is what I tried."}, agentTexts(t, turnsIn(t, evs)))
	replayHistory(t, c, id, "pack-max-visits-redirect")
}

// TestShapeSkillsPackE2E: RFC 0008's mixed skill sources, loaded from the folders beside
// the pack and inline; the model activates two skills on demand, and the closing state
// (skills: none) ends the run.
func TestShapeSkillsPackE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	id, replies := converse(t, c, "enterprise-support", map[string]any{"message": "My issue is still not resolved."}, "Tell me how you talk to customers.")
	require.Equal(t, []string{"I'm sorry this is taking so long. Let me collect the case details for an escalation ticket.", "We keep it warm and brief."}, replies)
	sayTo(t, c, id, "OK, thanks!")
	s := waitCompleted(t, c, id)
	require.Equal(t, "closing", s.Pack.State)
	evs := events(t, c, id)
	called := ofType(evs, "agent.toolCalled")
	require.Len(t, called, 3)
	assert.Contains(t, string(called[0].Payload), "skill__activate")
	assert.Contains(t, string(called[1].Payload), "brand-tone")
	replayHistory(t, c, id, "pack-skills")
}

// promptKitPacksDir holds every example pack PromptKit ships (engine/testdata/promptkit,
// NOTICE.md there), none with a mock script: the mock answers with its fixed reply.
const promptKitPacksDir = "../engine/testdata/promptkit"

// TestShapeEveryPromptKitExampleAnswersE2E: each of PromptKit's 39 example packs, served
// as they are, accepts a run (with its required variables) and answers its first
// message over HTTP; a create without a required variable is refused, naming it.
func TestShapeEveryPromptKitExampleAnswersE2E(t *testing.T) {
	t.Parallel()
	loaded, diags, err := packs.LoadDir(promptKitPacksDir)
	require.NoError(t, err, "%s", diags)
	require.Len(t, loaded, 39)
	c := startPrivateStack(t, stackOptions{PacksDir: promptKitPacksDir})
	for _, l := range loaded {
		p := l.Pack
		run := p
		if p.Conversational() {
			run = p.AsConversation(p.DefaultPrompt())
		}
		inputs := map[string]any{"message": "Hello!"}
		var required []string
		for _, key := range run.UsedPromptKeys() {
			for _, v := range run.Prompts[key].Variables {
				if v.Required && len(v.Default) == 0 {
					required = append(required, v.Name)
					inputs[v.Name] = "example " + v.Name
				}
			}
		}
		if len(required) > 0 {
			without := map[string]any{"message": "Hello!"}
			_, details := createRefused(t, c, p.ID, without)
			assert.Contains(t, details["fields"], "inputs."+required[0], "pack %s", p.ID)
		}
		id := createRun(t, c, p.ID, inputs)
		s := waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
		require.Equal(t, run.Workflow.Entry, s.Pack.State, "pack %s", p.ID)
		replies := agentTexts(t, turnsIn(t, events(t, c, id)))
		require.Len(t, replies, 1, "pack %s", p.ID)
		assert.Contains(t, replies[0], p.ID, "pack %s answers with the mock's fixed reply, which names it", p.ID)
	}
}

// TestShapeConversationContinuesAsNewE2E: a conversation with a pack without a workflow
// continues as new between turns and goes on with the same prompt; it ends when
// cancelled.
func TestShapeConversationContinuesAsNewE2E(t *testing.T) {
	t.Parallel()
	c := startShapeStack(t)
	s := c.Stack
	id := "e2e-conversation-can-" + randomHex(4)
	run := wfStart(t, s, id, "tools-example", `{"message":"What's the weather in Paris?"}`, func(in *workflows.RunInput) {
		in.ContinueAsNewAfterEvents = 4
	})
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		desc, err := s.Client().DescribeWorkflowExecution(context.Background(), id, "")
		if assert.NoError(ct, err) {
			assert.NotEqual(ct, run.GetFirstExecutionRunID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the run continued as new after its first turn")
		}
	}, 15*time.Second, 50*time.Millisecond)
	for i, text := range []string{"And what time is it there?", "Thanks!"} {
		wfWaitStatus(t, s, id, protocol.StatusWaitingApproval)
		check := wfResolve(t, s, id, workflows.ResolveRequest{RequestID: fmt.Sprint("m", i), NodeID: packNode,
			ResumeValue: json.RawMessage(`{"text":` + strconv.Quote(text) + `}`), ReceivedAtMs: int64(1000 * (i + 1))})
		require.True(t, check.OK, check.Message)
		wfWaitSnapshot(t, s, id, "answered", func(snap workflows.Snapshot) bool {
			return snap.Pack != nil && snap.Pack.ModelRounds >= 3+i && snap.Status == protocol.StatusWaitingApproval
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Client().SignalWorkflow(ctx, id, "", workflows.CancelSignal, workflows.CancelRequest{Reason: "done"}))
	snap := wfResult(t, run)
	require.Equal(t, protocol.StatusCancelled, snap.Status)
	require.Equal(t, "assistant", snap.Pack.State)
	require.Equal(t, 5, snap.Pack.ModelRounds)
	var replies []string
	for _, e := range wfEvents(t, s, id) {
		if e.Type == protocol.EvConversationExchanged && strings.Contains(string(e.Payload), `"role":"agent"`) {
			replies = append(replies, string(e.Payload))
		}
	}
	require.Len(t, replies, 3)
	assert.Contains(t, replies[2], "You're welcome!")
	wfRecord(t, s, run, "pack-conversation-continued")
}
