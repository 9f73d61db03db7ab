package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
)

// scriptedModel stands in for the ModelRound and ToolCall activities: it plays the
// pack's <pack>.mock.yaml as the strict mock provider does (a round off script fails
// MockScriptMismatch), reading user messages from the tail each round carries, and
// records every input it receives.
type scriptedModel struct {
	mu      sync.Mutex
	scripts map[string]*packs.MockScript
	rounds  []convo.ModelRoundInput
	tools   []convo.ToolCallInput
	cursor  packs.MockCursor
	user    packs.MockSeen // the latest user message so far
	// failIfCalled makes every model round fail the test (fork replay).
	failIfCalled bool
	// local lists the rounds that ran as ModelRoundLocal, localRefused the attempts it
	// refused because refuseLocal is set (a worker whose model is not the scripted mock).
	local        []int
	localRefused int
	refuseLocal  bool
	// fail, when set, is what every model round returns.
	fail error
	t    *testing.T
	// before, when set, runs first in every model round and tool call (outside the
	// lock); it may block, e.g. until the round is cancelled.
	before func(ctx context.Context, round int, tool string)
	// toolFail, when set, is what a tool call returns (nil: its result).
	toolFail func(in convo.ToolCallInput) error
	// routeOutage, when set, is the outage policy routes of read tools carry, as a
	// binding's retry_for would give them.
	routeOutage *activities.OutagePolicy
}

func (s *scriptedModel) model(ctx context.Context, in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
	if s.before != nil {
		s.before(ctx, in.Round, "")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds = append(s.rounds, in)
	if s.failIfCalled {
		s.t.Errorf("model round %d in state %q was called on a fork replay", in.Round, in.State)
	}
	if s.fail != nil {
		return nil, s.fail
	}
	for _, m := range in.Transcript.Tail {
		if m.Role == convo.RoleUser {
			s.user.User, s.user.HasUser = m.Text, true
		}
	}
	sc := s.scripts[in.PackID]
	seen := s.user
	seen.State = in.State
	ans, next := sc.Next(s.cursor, seen)
	switch {
	case ans.Exhausted:
		return &convo.ModelRoundResult{Text: sc.Default, Provider: "mock", Model: "scripted-mock"}, nil
	case ans.Round == nil:
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("round %d (line %d): %s", in.Round, ans.Line, ans.OffScript), activities.ErrTypeMockMismatch, nil)
	}
	s.cursor = next
	e := ans.Round
	if e.Error != "" {
		return nil, temporal.NewNonRetryableApplicationError(e.Error, activities.ErrTypeMockFailure, nil)
	}
	out := &convo.ModelRoundResult{Text: e.Text, Provider: "mock", Model: "scripted-mock",
		Usage: convo.Usage{InputTokens: 100, OutputTokens: 20}}
	for i, c := range e.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, convo.ToolCall{ID: fmt.Sprintf("call_%d_%d_%s", in.Round, i, c.Name), Name: c.Name, Args: c.Args})
	}
	return out, nil
}

// modelLocal is the ModelRoundLocal the workflow runs after a round the mock answered:
// the same script, and the transcript must arrive whole.
func (s *scriptedModel) modelLocal(ctx context.Context, in activities.LocalModelRoundInput) (*convo.ModelRoundResult, error) {
	if got, want := len(in.Messages), in.Round.Transcript.To; got != want {
		s.t.Errorf("local model round %d: %d transcript messages, want [0, %d)", in.Round.Round, got, want)
	}
	s.mu.Lock()
	if s.refuseLocal {
		s.localRefused++
		s.mu.Unlock()
		return nil, temporal.NewNonRetryableApplicationError("not the scripted mock", activities.ErrTypeNotLocal, nil)
	}
	s.local = append(s.local, in.Round.Round)
	s.mu.Unlock()
	return s.model(ctx, in.Round)
}

// resume moves the script past rounds a run played before this model saw it (a run
// continued as new, a fork), as the mock provider works them out from the transcript.
func (s *scriptedModel) resume(rounds ...packs.MockSeen) {
	for _, r := range rounds {
		for _, sc := range s.scripts {
			_, s.cursor = sc.Next(s.cursor, r)
		}
		s.user = packs.MockSeen{User: r.User, HasUser: r.HasUser}
	}
}

// greeted is round 0 of the support script: the greeting in state verifying.
var greeted = packs.MockSeen{State: "verifying", User: "Hi, I have a question about my account.", HasUser: true}

func (s *scriptedModel) tool(ctx context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, error) {
	if s.before != nil {
		s.before(ctx, in.Round, in.Tool)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools = append(s.tools, in)
	if s.toolFail != nil {
		if err := s.toolFail(in); err != nil {
			return nil, err
		}
	}
	res, ok := s.scripts[in.PackID].ToolResults[in.Tool]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError("no executor for "+in.Tool, activities.ErrTypeUnknownTool, nil)
	}
	return &convo.ToolCallResult{Content: res}, nil
}

// packRun prepares a run of an example pack (or a pack given as YAML) with the
// scripted activities registered.
func packRun(t *testing.T, name, yamlSrc, mockSrc, inputs string) (*testRun, *scriptedModel) {
	t.Helper()
	return packRunWith(t, name, yamlSrc, mockSrc, inputs, nil)
}

// packRunWith is packRun whose routing activities (RouteTools, ModelOutagePolicy) are
// built from the configuration tweak makes.
func packRunWith(t *testing.T, name, yamlSrc, mockSrc, inputs string, tweak func(*activities.Config, *scriptedModel)) (*testRun, *scriptedModel) {
	t.Helper()
	var p *packs.Pack
	var script *packs.MockScript
	if yamlSrc == "" {
		l, diags, err := packs.LoadFile(filepath.Join("..", "packs", name+".yaml"))
		require.NoError(t, err, "%s", diags)
		p, script = l.Pack, l.Mock
	} else {
		var diags packs.Diagnostics
		var err error
		p, diags, err = packs.Parse(name+".yaml", []byte(yamlSrc))
		require.NoError(t, err, "%s", diags)
		script, diags, err = packs.ParseMock(name+".mock.yaml", []byte(mockSrc))
		require.NoError(t, err, "%s", diags)
	}
	cat, err := NewCatalog(CatalogOptions{Packs: []ServedPack{ServePack(p)}})
	require.NoError(t, err)
	var raw json.RawMessage
	if inputs != "" {
		raw = json.RawMessage(inputs)
	}
	in, err := cat.NewRunInput(RunRequest{RunID: "run-" + p.ID, WorkflowID: p.ID, Inputs: raw, Owner: Owner{Tenant: "t1", Principal: "key_test"}})
	require.NoError(t, err)
	tr := newTestRun(t, *in)
	sm := &scriptedModel{scripts: map[string]*packs.MockScript{p.ID: script}, t: t}
	tr.env.RegisterActivityWithOptions(sm.model, activity.RegisterOptions{Name: "ModelRound"})
	tr.env.RegisterActivityWithOptions(sm.modelLocal, activity.RegisterOptions{Name: "ModelRoundLocal"})
	tr.env.RegisterActivityWithOptions(sm.tool, activity.RegisterOptions{Name: "ToolCall"})
	// Tool calls are routed by the real RouteTools: no bindings, so the host's ToolCall.
	cfg := activities.Config{Transcripts: noTranscripts{}, MockScripts: sm.scripts}
	if tweak != nil {
		tweak(&cfg, sm)
	}
	router, err := activities.New(cfg)
	require.NoError(t, err)
	tr.env.RegisterActivityWithOptions(router.RouteTools, activity.RegisterOptions{Name: "RouteTools"})
	tr.env.RegisterActivityWithOptions(router.ModelOutagePolicy, activity.RegisterOptions{Name: "ModelOutagePolicy"})
	return tr, sm
}

// noTranscripts is the transcript source of activities that never run a model round.
type noTranscripts struct{}

func (noTranscripts) Transcript(context.Context, convo.TranscriptRef) ([]convo.Message, error) {
	return nil, errors.New("no transcripts here")
}

// finish runs the workflow to its end, checks the log invariants and the event
// schemas, and returns the final snapshot (failed runs return a snapshot too).
func (tr *testRun) finish() Snapshot {
	tr.t.Helper()
	tr.env.ExecuteWorkflow(RunWorkflowName, tr.in)
	require.True(tr.t, tr.env.IsWorkflowCompleted(), "workflow did not complete")
	s := finalSnapshot(tr.t, tr.env)
	evs := tr.events()
	checkEventLog(tr.t, tr.in.RunID, evs)
	recordForSchemaCheck(tr.t, evs) // every event and payload against the OpenWOP schemas
	return s
}

func (tr *testRun) say(text string) {
	tr.resolve(ServedPackNodeID, mustJSONString(map[string]string{"text": text}))
}

func mustJSONString(v any) string { return string(mustJSON(v)) }

// turns returns the conversation turns recorded in the log, in order.
func turnsOf(t *testing.T, evs []Event) []protocol.Turn {
	var out []protocol.Turn
	for _, e := range ofType(evs, protocol.EvConversationExchanged) {
		var p struct {
			Turn protocol.Turn `json:"turn"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		out = append(out, p.Turn)
	}
	return out
}

func contentOf(t *testing.T, turn protocol.Turn) map[string]string {
	var m map[string]string
	require.NoError(t, json.Unmarshal(turn.Content, &m))
	return m
}

// TestPackSupportConversation drives the support pack: the first message comes from
// the run's inputs, the second is the worked example of promptpack-workflow.md §14.
func TestPackSupportConversation(t *testing.T) {
	tr, sm := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	var mid Snapshot
	var transcript []convo.Message
	tr.at(time.Minute, func() {
		mid = tr.snapshot()
		v, err := tr.env.QueryWorkflow(TranscriptQuery, convo.TranscriptRef{RunID: tr.in.RunID, Key: ServedPackNodeID, From: 0, To: 2})
		require.NoError(t, err)
		require.NoError(t, v.Get(&transcript))
		tr.say("It's ACC-12345. What's my balance?")
	})
	final := tr.finish()
	evs := tr.events()

	// After turn 1 the run waits for the user in verifying.
	require.Equal(t, protocol.StatusWaitingApproval, mid.Status)
	require.NotNil(t, mid.Pack)
	require.Equal(t, "verifying", mid.Pack.State)
	require.Equal(t, 1, mid.Pack.ModelRounds)
	require.Len(t, transcript, 2)
	require.Equal(t, convo.RoleUser, transcript[0].Role)
	require.Equal(t, "Hi, I have a question about my account.", transcript[0].Text)

	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.NotNil(t, final.Pack)
	require.Equal(t, "resolution", final.Pack.State)
	require.Equal(t, map[string]int{"verifying": 1, "triage": 1, "resolution": 1}, final.Pack.Visits)
	require.Equal(t, 4, final.Pack.ToolCalls)
	require.Equal(t, 6, final.Pack.ModelRounds)
	require.Equal(t, 600, final.Pack.InputTokens)

	turns := turnsOf(t, evs)
	require.Len(t, turns, 4) // user, agent, user, agent (turn 0 is in conversation.opened)
	require.Equal(t, []string{protocol.RoleUser, protocol.RoleAgent, protocol.RoleUser, protocol.RoleAgent}, []string{turns[0].Role, turns[1].Role, turns[2].Role, turns[3].Role})
	for i, turn := range turns {
		require.Equal(t, i+1, turn.TurnIndex)
	}
	require.Equal(t, "support", turns[1].SpeakerID)
	last := contentOf(t, turns[3])
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", last["text"])
	require.Equal(t, "resolution", last["state"])

	opened := ofType(evs, protocol.EvConversationOpened)
	require.Len(t, opened, 1)
	var op struct {
		AgentID     string        `json:"agentId"`
		InitialTurn protocol.Turn `json:"initialTurn"`
	}
	require.NoError(t, json.Unmarshal(opened[0].Payload, &op))
	require.Equal(t, "support", op.AgentID)
	require.Equal(t, protocol.RoleSystem, op.InitialTurn.Role)
	require.Contains(t, string(op.InitialTurn.Content), "verifying")

	handoffs := ofType(evs, "agent.handoff")
	require.Len(t, handoffs, 2)
	h := payload(t, handoffs[0])
	require.Equal(t, "support:verifying", h["fromAgentId"])
	require.Equal(t, "support:triage", h["toAgentId"])
	require.Equal(t, "AccountVerified", h["event"])
	require.EqualValues(t, 2, h["totalVisits"])
	require.Len(t, ofType(evs, "provider.usage"), 6)
	require.Len(t, ofType(evs, "agent.toolCalled"), 4)
	require.Len(t, ofType(evs, "agent.toolReturned"), 4)

	// Model rounds got a reference to the transcript, never the transcript itself.
	require.Len(t, sm.rounds, 6)
	for i, r := range sm.rounds {
		require.Equal(t, i, r.Round)
		require.Equal(t, ServedPackNodeID, r.Transcript.Key)
		require.Equal(t, tr.in.RunID, r.Transcript.RunID)
	}
	require.Equal(t, "triage", sm.rounds[3].State)
	require.Equal(t, 7, sm.rounds[3].Transcript.From, "triage is transient: its context starts at the copied user message")
	require.Equal(t, 8, sm.rounds[3].Transcript.To)
	require.Len(t, sm.tools, 2)
	require.Equal(t, []string{"verify_account", "get_balance"}, []string{sm.tools[0].Tool, sm.tools[1].Tool})

	closed := ofType(evs, protocol.EvConversationClosed)
	require.Len(t, closed, 1)
	var cl struct {
		Outcome map[string]any `json:"outcome"`
	}
	require.NoError(t, json.Unmarshal(closed[0].Payload, &cl))
	require.Equal(t, "resolution", cl.Outcome["finalState"])
	require.Equal(t, protocol.EvRunCompleted, evs[len(evs)-1].Type)
}

// TestPackRefundExternalWait waits two weeks (test clock) in an external state, then a
// reviewer's resolve injects Approved and the terminal prompt tells the user.
func TestPackRefundExternalWait(t *testing.T) {
	tr, sm := packRun(t, "refund", "", "", `{"message":"Hi, I'd like a refund, my jacket arrived torn."}`)
	var waiting Snapshot
	var badCheck, goodCheck ResolveCheck
	var start time.Time
	tr.at(time.Second, func() {
		start = tr.env.Now()
		tr.say("It's order ORD-1042.")
	})
	tr.at(time.Hour, func() {
		waiting = tr.snapshot()
		badCheck = tr.check(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: waiting.Interrupt.InterruptID, ResumeValue: json.RawMessage(`{"event":"Refunded"}`)})
		goodCheck = tr.check(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: waiting.Interrupt.InterruptID, ResumeValue: json.RawMessage(`{"event":"Approved","context":"x"}`)})
	})
	var end time.Time
	tr.at(14*24*time.Hour, func() {
		end = tr.env.Now()
		tr.resolveReq(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: waiting.Interrupt.InterruptID, ResolvedBy: "finance",
			ResumeValue: json.RawMessage(`{"event":"Approved","context":"Approved 89.90 USD, ref APR-7731"}`)})
	})
	// The pack acts with approval: issue_refund (external) waits for its own decision.
	var payment Snapshot
	tr.at(14*24*time.Hour+time.Hour, func() {
		payment = tr.snapshot()
		tr.resolveReq(ResolveRequest{NodeID: ServedPackNodeID, ResolvedBy: "finance-lead", ResumeValue: json.RawMessage(`{"action":"accept"}`)})
	})
	final := tr.finish()
	require.Equal(t, protocol.StatusWaitingApproval, payment.Status)
	require.Equal(t, "approval", payment.Interrupt.Kind)
	require.Contains(t, string(payment.Interrupt.Data), `"tool":"issue_refund"`)
	require.GreaterOrEqual(t, end.Sub(start), 13*24*time.Hour)

	require.Equal(t, protocol.StatusWaitingExternal, waiting.Status)
	require.Equal(t, "awaiting_approval", waiting.Pack.State)
	require.Equal(t, "awaiting_event", waiting.Pack.Status)
	require.NotNil(t, waiting.Interrupt)
	require.Equal(t, "external-event", waiting.Interrupt.Kind)
	require.Contains(t, string(waiting.Interrupt.ResumeSchema), `"Approved","Rejected"`)
	require.False(t, badCheck.OK)
	require.Contains(t, badCheck.Message, "valid events: Approved, Rejected")
	require.True(t, goodCheck.OK, "%+v", goodCheck)

	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, "refunded", final.Pack.State)
	evs := tr.events()
	turns := turnsOf(t, evs)
	lastAgent := contentOf(t, turns[len(turns)-1])
	require.True(t, strings.HasPrefix(lastAgent["text"], "Good news: your refund of $89.90"), lastAgent["text"])
	require.Len(t, sm.rounds, 5)
	require.Equal(t, "issue_refund", sm.tools[1].Tool)
	var args map[string]string
	require.NoError(t, json.Unmarshal(sm.tools[1].Args, &args))
	require.Equal(t, "APR-7731", args["approval_reference"])
	handoffs := ofType(evs, "agent.handoff")
	require.Equal(t, "external", payload(t, handoffs[len(handoffs)-1])["origin"])
}

const loopPackYAML = `id: loop
name: Loop
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  plan: { id: plan, name: Plan, version: 1.0.0, system_template: "Plan." }
  build: { id: build, name: Build, version: 1.0.0, system_template: "Build. {{workflow_context}}" }
  done: { id: done, name: Done, version: 1.0.0, system_template: "Done." }
workflow:
  version: 2
  entry: plan
  states:
    plan: { prompt_task: plan, control: agent, max_visits: 2, on_event: { Build: build } }
    build: { prompt_task: build, control: agent, on_event: { Replan: plan, Finish: done } }
    done: { prompt_task: done, terminal: true }
`

const loopMock = `rounds:
  - expect_state: plan
    text: Planning.
    tool_calls: [{ name: workflow__transition, args: { event: Build, context: "v1" } }]
  - expect_state: build
    tool_calls: [{ name: workflow__transition, args: { event: Replan, context: "again" } }]
  - expect_state: plan
    text: Planning again.
    tool_calls: [{ name: workflow__transition, args: { event: Build, context: "v2" } }]
  - expect_state: build
    tool_calls: [{ name: workflow__transition, args: { event: Replan, context: "third" } }]
`

// TestPackMaxVisitsEndsRun: an all-agent loop stopped by max_visits closes the
// conversation with a system turn and fails the run max_visits_exceeded.
func TestPackMaxVisitsEndsRun(t *testing.T) {
	tr, sm := packRun(t, "loop", loopPackYAML, loopMock, `{"message":"go"}`)
	final := tr.finish()
	require.Equal(t, protocol.StatusFailed, final.Status)
	evs := tr.events()
	require.Len(t, sm.rounds, 4)
	failed := ofType(evs, protocol.EvRunFailed)
	require.Len(t, failed, 1)
	require.Contains(t, string(failed[0].Payload), "max_visits_exceeded")
	lim := ofType(evs, "workflow.loopback-limit")
	require.Len(t, lim, 1)
	require.Equal(t, true, payload(t, lim[0])["terminated"])
	closed := ofType(evs, protocol.EvConversationClosed)
	require.Len(t, closed, 1)
	var cl struct {
		FinalTurn protocol.Turn   `json:"finalTurn"`
		Outcome   json.RawMessage `json:"outcome"`
	}
	require.NoError(t, json.Unmarshal(closed[0].Payload, &cl))
	require.Equal(t, "null", string(cl.Outcome))
	require.Equal(t, protocol.RoleSystem, cl.FinalTurn.Role)
	require.Contains(t, string(cl.FinalTurn.Content), "max_visits")
	// The text said before the failure still reached the user.
	turns := turnsOf(t, evs)
	require.Equal(t, "Planning.\n\nPlanning again.", contentOf(t, turns[len(turns)-1])["text"])
	snap := tr.snapshot()
	require.Equal(t, protocol.StatusFailed, snap.Status)
	require.Equal(t, "max_visits_exceeded", snap.Error.Code)
}

// TestPackBudgetEndsRun: the same loop under a visit budget ends budget_exhausted.
func TestPackBudgetEndsRun(t *testing.T) {
	src := strings.Replace(loopPackYAML, "  entry: plan\n", "  entry: plan\n  engine: { budget: { max_total_visits: 3 } }\n", 1)
	tr, _ := packRun(t, "loop", src, loopMock, `{"message":"go"}`)
	require.Equal(t, protocol.StatusFailed, tr.finish().Status)
	evs := tr.events()
	caps := ofType(evs, "cap.breached")
	require.Len(t, caps, 1)
	p := payload(t, caps[0])
	require.Equal(t, "max_total_visits", p["budget"])
	require.EqualValues(t, 3, p["limit"])
	require.Equal(t, "budget_exhausted", tr.snapshot().Error.Code)
}

// TestPackModelFailure: a permanent model error closes the conversation and fails the
// run with the activity's error type as the code.
func TestPackModelFailure(t *testing.T) {
	tr, _ := packRun(t, "loop", loopPackYAML, "rounds:\n  - error: provider rejected the key\n", `{"message":"go"}`)
	require.Equal(t, protocol.StatusFailed, tr.finish().Status)
	snap := tr.snapshot()
	require.Equal(t, "mock_scripted_failure", snap.Error.Code)
	closed := ofType(tr.events(), protocol.EvConversationClosed)
	require.Len(t, closed, 1)
	require.Contains(t, string(closed[0].Payload), "provider rejected the key")
}

// TestPackFailureSpeaksOpenWOP: an activity's error type becomes a snake_case OpenWOP
// code, and the message is the activity's own words without Temporal's wrapping.
func TestPackFailureSpeaksOpenWOP(t *testing.T) {
	for typ, code := range map[string]string{
		activities.ErrTypeAuth:         "model_authentication",
		activities.ErrTypeMockMismatch: "mock_script_mismatch",
		activities.ErrTypeBadRequest:   "model_bad_request",
		"SomethingUnknown":             "model_error",
	} {
		t.Run(typ, func(t *testing.T) {
			tr, sm := packRun(t, "loop", loopPackYAML, loopMock, `{"message":"go"}`)
			sm.fail = temporal.NewNonRetryableApplicationError("openai rejected the API key (HTTP 401)", typ, nil)
			require.Equal(t, protocol.StatusFailed, tr.finish().Status)
			snap := tr.snapshot()
			require.Equal(t, code, snap.Error.Code)
			require.Equal(t, `model round 0 in state "plan" failed: openai rejected the API key (HTTP 401)`, snap.Error.Message)
			for _, e := range tr.events() {
				for _, internal := range []string{"scheduledEventID", "activity error", typ + ","} {
					require.NotContains(t, string(e.Payload), internal, "event %s", e.Type)
				}
			}
		})
	}
}

// TestPackMissingVariables: a required variable without a value is refused before the
// run exists (NewRunInput names it); a run whose input lacks it anyway (built without
// the catalog's check) fails at start.
func TestPackMissingVariables(t *testing.T) {
	src := strings.Replace(loopPackYAML, `system_template: "Plan." }`,
		`system_template: "Plan for {{customer}}.", variables: [{ name: customer, type: string, required: true }] }`, 1)
	p, diags, err := packs.Parse("loop.yaml", []byte(src))
	require.NoError(t, err, "%s", diags)
	cat, err := NewCatalog(CatalogOptions{Packs: []ServedPack{ServePack(p)}})
	require.NoError(t, err)
	_, err = cat.NewRunInput(RunRequest{RunID: "run-x", WorkflowID: p.ID, Inputs: json.RawMessage(`{"message":"go"}`)})
	var pe *PackRunError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, []string{"inputs.customer"}, pe.Fields)
	require.Contains(t, err.Error(), `required variable "customer" is missing`)

	tr, sm := packRun(t, "loop", src, loopMock, `{"message":"go","customer":"Ada"}`)
	tr.in.Inputs = json.RawMessage(`{"message":"go"}`)
	require.Equal(t, protocol.StatusFailed, tr.finish().Status)
	require.Contains(t, tr.snapshot().Error.Message, `required variable "customer" is missing`)
	require.Empty(t, sm.rounds)
}

// TestPackForkReplay re-runs a finished support conversation as a fork: no model or
// tool is called and the conversation channel is identical.
func TestPackForkReplay(t *testing.T) {
	tr, _ := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	tr.at(time.Minute, func() { tr.say("It's ACC-12345. What's my balance?") })
	src := tr.finish()
	srcEvents := tr.events()

	in := tr.in
	in.RunID = "run-support-fork"
	in.Fork = &ForkSource{SourceRunID: tr.in.RunID, Events: srcEvents}
	fork, sm := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	fork.in = in
	fork.env.SetStartWorkflowOptions(startOpts(in.RunID))
	sm.failIfCalled = true
	out := fork.finish()
	require.Empty(t, sm.rounds)
	require.Empty(t, sm.tools)
	require.Equal(t, src.Channels, out.Channels)
	require.Equal(t, src.Pack.Visits, out.Pack.Visits)
	require.Equal(t, "resolution", out.Pack.State)
}

// TestPackContinueAsNew continues the run as new between turns: the engine state
// travels in the carried state, and the next turn goes on where the first left off
// (model round indexes, visits and tokens continue; nothing is asked twice).
func TestPackContinueAsNew(t *testing.T) {
	tr, sm := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	tr.in.ContinueAsNewAfterEvents = 1
	tr.env.ExecuteWorkflow(RunWorkflowName, tr.in)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, tr.env.GetWorkflowError(), &can)
	var next RunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotEmpty(t, next.Carried)
	require.Len(t, sm.rounds, 1)

	next.ContinueAsNewAfterEvents = 0
	tr2, sm2 := packRun(t, "support", "", "", "")
	sm2.resume(greeted)
	tr2.in = next
	tr2.prev = tr
	tr2.at(time.Minute, func() { tr2.say("It's ACC-12345. What's my balance?") })
	final := tr2.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Len(t, sm2.rounds, 5)
	require.Equal(t, 1, sm2.rounds[0].Round, "the script cursor continues after continue-as-new")
	require.Equal(t, 6, final.Pack.ModelRounds)
	require.Equal(t, 600, final.Pack.InputTokens)
	turns := turnsOf(t, tr2.events())
	require.Len(t, turns, 4)
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", contentOf(t, turns[3])["text"])
}

// TestPackMockRoundsRunLocally: once the scripted mock has answered a round, the node's
// next rounds run as the ModelRoundLocal local activity, with the whole transcript in
// their input; the run's outcome is the one the activity rounds give.
func TestPackMockRoundsRunLocally(t *testing.T) {
	tr, sm := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	tr.at(time.Minute, func() { tr.say("It's ACC-12345. What's my balance?") })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, 6, final.Pack.ModelRounds)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, sm.local, "every round runs locally, the first one too (firstLocalVersion)")
	require.Len(t, sm.rounds, 6)
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", contentOf(t, turnsOf(t, tr.events())[3])["text"])
}

// TestPackLocalRoundRefusedFallsBack: a worker whose model is not the scripted mock
// refuses the local round; the round runs as the ModelRound activity, and the node does
// not ask for a local round again.
func TestPackLocalRoundRefusedFallsBack(t *testing.T) {
	tr, sm := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	sm.refuseLocal = true
	tr.at(time.Minute, func() { tr.say("It's ACC-12345. What's my balance?") })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, 6, final.Pack.ModelRounds)
	require.Empty(t, sm.local)
	require.Equal(t, 1, sm.localRefused)
	require.Len(t, sm.rounds, 6, "every round ran once, as an activity")
}

const chatPackYAML = `id: chat
name: Chat
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  chat: { id: chat, name: Chat, version: 1.0.0, system_template: "Chat." }
  done: { id: done, name: Done, version: 1.0.0, system_template: "Bye." }
workflow:
  version: 2
  entry: chat
  engine: { budget: { max_wall_time_sec: 300 } }
  states:
    chat: { prompt_task: chat, on_event: { Done: done } }
    done: { prompt_task: done, terminal: true }
`

// TestPackWallTimeTimer: max_wall_time_sec is a durable timer; an idle conversation
// closes when it fires, with a system turn saying why, and the run fails
// budget_exhausted like any other exhausted budget.
func TestPackWallTimeTimer(t *testing.T) {
	tr, sm := packRun(t, "chat", chatPackYAML, "rounds:\n  - text: Hello!\n", `{"message":"hi"}`)
	final := tr.finish()
	require.Equal(t, protocol.StatusFailed, final.Status)
	require.Equal(t, "budget_exhausted", final.Error.Code)
	require.Len(t, sm.rounds, 1)
	closed := ofType(tr.events(), protocol.EvConversationClosed)
	require.Len(t, closed, 1)
	require.Contains(t, string(closed[0].Payload), "wall-time budget is exhausted (max_wall_time_sec 300)")
	require.Contains(t, string(closed[0].Payload), `"outcome":null`)
}

// TestPackStateAttributeSetOnChange: the packState tag is upserted when the pack's state
// changes, not at every turn (each upsert is a history event and a visibility write).
func TestPackStateAttributeSetOnChange(t *testing.T) {
	tr, sm := packRun(t, "chat", chatPackYAML, "rounds:\n  - text: Hello!\n", `{"message":"hi"}`)
	var states []string
	tr.env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
		if sa, ok := args.Get(0).(temporal.SearchAttributes); ok {
			// The pack's upsert sets WopPackId beside the tags; a status change's does not.
			if _, ok := sa.GetKeyword(SAPackID); ok {
				tags, _ := sa.GetKeywordList(SATags)
				states = append(states, TagValue(tags, TagPackState))
			}
		}
	})
	for i := 1; i <= 3; i++ {
		tr.at(time.Duration(i)*time.Minute, func() { tr.say(fmt.Sprintf("message %d", i)) })
	}
	tr.finish()
	require.Len(t, sm.rounds, 4, "the opening message and three more")
	require.Equal(t, []string{"chat"}, states, "one upsert for the one state of four turns")
}

// TestPackForkReplayGoesLive forks a conversation that was still open: the recorded
// turn is re-folded from the source's records, and the next message is answered live,
// continuing the model round numbering where the source stopped.
func TestPackForkReplayGoesLive(t *testing.T) {
	tr, _ := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	var srcEvents []Event
	tr.at(time.Minute, func() {
		srcEvents = tr.events()
		tr.env.CancelWorkflow()
	})
	tr.env.ExecuteWorkflow(RunWorkflowName, tr.in)
	require.NotEmpty(t, srcEvents)
	require.Len(t, ofType(srcEvents, protocol.EvConversationClosed), 0)

	in := tr.in
	in.RunID = "run-support-fork-live"
	in.Fork = &ForkSource{SourceRunID: tr.in.RunID, Events: srcEvents}
	fork, sm := packRun(t, "support", "", "", "")
	sm.resume(greeted)
	fork.in = in
	fork.env.SetStartWorkflowOptions(startOpts(in.RunID))
	fork.at(time.Minute, func() { fork.say("It's ACC-12345. What's my balance?") })
	out := fork.finish()
	require.Equal(t, protocol.StatusCompleted, out.Status)
	require.Len(t, sm.rounds, 5, "round 0 comes from the source's record")
	require.Equal(t, 1, sm.rounds[0].Round)
	turns := turnsOf(t, fork.events())
	require.Len(t, turns, 4)
	require.Equal(t, "Let me check that account.\n\nYour balance is $42.00.", contentOf(t, turns[3])["text"])
}

func TestActivityMessageOfATimeout(t *testing.T) {
	err := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
	require.Equal(t, "it timed out (start-to-close timeout)", ActivityMessage(err))
	require.Equal(t, "activity_timeout", ActivityErrorCode(err))
}

// loopReportYAML bounds a control: agent self-loop with max_visits 3, on_max_visits
// report (terminal); loopReportMock loops until the redirect.
const loopReportYAML = `id: loop-report
name: Loop report
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  work: { id: work, name: Work, version: 1.0.0, system_template: "Try." }
  report: { id: report, name: Report, version: 1.0.0, system_template: "Report." }
workflow:
  version: 2
  entry: work
  states:
    work: { prompt_task: work, control: agent, max_visits: 3, on_max_visits: report, on_event: { Again: work } }
    report: { prompt_task: report, terminal: true }
`

const loopReportMock = `rounds:
  - &again { expect_state: work, tool_calls: [{ name: workflow__transition, args: { event: Again, context: more } }] }
  - *again
  - *again
  - expect_state: report
    text: Three tries.
`

// TestPackLimitsWin: under a host limit of 2 rounds per turn, the loop the pack bounds
// (max_visits 3) runs its three rounds and reaches report; a run recorded before the
// pack's limits won stops at the host's limit.
func TestPackLimitsWin(t *testing.T) {
	tr, sm := packRun(t, "loop-report", loopReportYAML, loopReportMock, `{"message":"go"}`)
	tr.in.Limits = &TurnLimits{MaxRounds: 2}
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status, "%+v", final.Error)
	require.Len(t, sm.rounds, 4)
	require.Equal(t, "report", final.Pack.State)

	old, sm := packRun(t, "loop-report", loopReportYAML, loopReportMock, `{"message":"go"}`)
	old.in.Limits = &TurnLimits{MaxRounds: 2}
	old.env.OnGetVersion(GatePackLimits, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	final = old.finish()
	require.Equal(t, protocol.StatusFailed, final.Status)
	require.Equal(t, protocol.CodeLoopLimitExceeded, final.Error.Code)
	require.Len(t, sm.rounds, 2)
}

// TestPackConversationBeforeTheGate: a run of a pack without a workflow recorded before
// such packs ran as conversations failed as its node started.
func TestPackConversationBeforeTheGate(t *testing.T) {
	tr, sm := packRun(t, "chat", "id: chat\nname: Chat\nversion: 1.0.0\ntemplate_engine: { version: v1, syntax: \"{{variable}}\" }\n"+
		"prompts:\n  chat: { id: chat, name: Chat, version: 1.0.0, system_template: Chat. }\n", "rounds:\n  - text: Hi.\n", `{"message":"hello"}`)
	tr.env.OnGetVersion(GateConversationPacks, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	final := tr.finish()
	require.Equal(t, protocol.StatusFailed, final.Status)
	require.Contains(t, final.Error.Message, "has no workflow")
	require.Empty(t, sm.rounds)
}

// skillsPackYAML is a one-state conversation pack with an inline skill (RFC 0008).
const skillsPackYAML = `id: skilled
name: Skilled
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
skills:
  - { name: tone, description: How we talk., instructions: Be brief. }
prompts:
  chat: { id: chat, name: Chat, version: 1.0.0, system_template: Chat. }
` + chatDoneWorkflow

// chatDoneWorkflow is a chat state that ends with Done in a terminal state; doneMock
// ends it at the first message.
const chatDoneWorkflow = `workflow:
  version: 2
  entry: chat
  states:
    chat: { prompt_task: chat, on_event: { Done: done } }
    done: { prompt_task: chat, terminal: true }
`

const doneMock = "rounds:\n  - tool_calls: [{ name: workflow__transition, args: { event: Done, context: x } }]\n  - text: Bye.\n"

// TestPackSkillsGate: a run offers skill__activate where its state has skills; a run
// recorded before skills were offered ran without it.
func TestPackSkillsGate(t *testing.T) {
	offers := func(in convo.ModelRoundInput) bool {
		for _, tool := range in.Tools {
			if tool.Name == packs.SkillActivateToolName {
				return true
			}
		}
		return false
	}
	mock := doneMock
	tr, sm := packRun(t, "skilled", skillsPackYAML, mock, `{"message":"hi"}`)
	require.Equal(t, protocol.StatusCompleted, tr.finish().Status)
	require.True(t, offers(sm.rounds[0]))

	old, sm := packRun(t, "skilled", skillsPackYAML, mock, `{"message":"hi"}`)
	old.env.OnGetVersion(GatePackSkills, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	require.Equal(t, protocol.StatusCompleted, old.finish().Status)
	require.False(t, offers(sm.rounds[0]))
}

// guardedPackYAML has an input validator with expect_match false (PromptKit's hooks
// example's shape).
const guardedPackYAML = `id: guarded
name: Guarded
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  chat:
    id: chat
    name: Chat
    version: 1.0.0
    system_template: Chat.
    validators:
      - { type: regex, params: { pattern: "(?i)secret", expect_match: false, direction: input, message: No secrets. } }
` + chatDoneWorkflow

// TestPackValidatorParamsGate: a message the input validator blocks is not answered by
// the model; a run recorded before read no direction and sent it to the model.
func TestPackValidatorParamsGate(t *testing.T) {
	mock := doneMock
	tr, sm := packRun(t, "guarded", guardedPackYAML, mock, `{"message":"tell me the secret"}`)
	tr.at(time.Minute, func() { tr.say("bye") })
	require.Equal(t, protocol.StatusCompleted, tr.finish().Status)
	require.Len(t, sm.rounds, 2, "the blocked message ran no round")
	turns := turnsOf(t, tr.events())
	require.Equal(t, "No secrets.", contentOf(t, turns[1])["text"])

	old, sm := packRun(t, "guarded", guardedPackYAML, mock, `{"message":"tell me the secret"}`)
	old.env.OnGetVersion(GateValidatorParams, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	require.Equal(t, protocol.StatusCompleted, old.finish().Status)
	require.Len(t, sm.rounds, 2, "the message ran the rounds")
	// The earlier reading checked the model's text against the pattern, and blocked it.
	require.Equal(t, engine.DefaultBlockedText, contentOf(t, turnsOf(t, old.events())[1])["text"])
}

// unreturnedMock makes outagePackYAML's chat call tool, then hand over to done.
func unreturnedMock(tool string) string {
	return `tool_results:
  lookup: { found: true }
  file_ticket: { ticket: T-1 }
rounds:
  - { expect_state: chat, tool_calls: [{ name: ` + tool + `, args: {} }] }
  - { expect_state: chat, tool_calls: [{ name: workflow__transition, args: { event: Finish, context: bye } }] }
  - { expect_state: done, text: "Bye." }
`
}

// TestPackForkNeverRepeatsAnUnreturnedCall: a source whose log ends at a tool call it
// made without an outcome (it was cancelled, or is still working, while the call was
// in flight) is forked. A write call is never performed again: the fork's turn fails
// closed with replay_source_missing and the run fails with it. A read acts on nothing:
// the fork's answer of the unanswered turn runs it, as forks always did.
func TestPackForkNeverRepeatsAnUnreturnedCall(t *testing.T) {
	for _, tc := range []struct {
		tool   string
		repeat bool
	}{{"file_ticket", false}, {"lookup", true}} {
		t.Run(tc.tool, func(t *testing.T) {
			mock := unreturnedMock(tc.tool)
			tr, _ := packRun(t, "outage", outagePackYAML, mock, `{"message":"hi"}`)
			require.Equal(t, protocol.StatusCompleted, tr.finish().Status)
			var srcEvents []Event
			for _, e := range tr.events() {
				srcEvents = append(srcEvents, e)
				if e.Type == protocol.EvAgentToolCalled {
					break // the log ends while the call is in flight
				}
			}
			require.Equal(t, protocol.EvAgentToolCalled, srcEvents[len(srcEvents)-1].Type)
			fork, sm := forkOf(t, tr, "outage", outagePackYAML, mock, srcEvents)
			out := fork.finish()
			evs := fork.events()
			if !tc.repeat {
				require.Empty(t, sm.tools, "the write is not performed again")
				require.Empty(t, sm.rounds, "the recorded round is reused and the turn ends there")
				require.Equal(t, protocol.StatusFailed, out.Status)
				require.Equal(t, protocol.CodeReplaySourceMissing, fork.snapshot().Error.Code)
				require.Contains(t, fork.snapshot().Error.Message, "call_0_0_file_ticket")
				require.Empty(t, ofType(evs, protocol.EvReplayDiverged))
				return
			}
			require.NotEmpty(t, sm.tools)
			require.Equal(t, "call_0_0_lookup", sm.tools[0].CallID, "the read runs live")
			require.Equal(t, protocol.StatusCompleted, out.Status)
		})
	}
}
