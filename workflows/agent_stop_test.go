package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
)

// spinPackYAML is an all-agent loop nothing in the pack bounds: no max_visits, no
// budget, no way out.
const spinPackYAML = `id: spin
name: Spin
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
tools:
  probe: { name: probe, description: Probe., parameters: { type: object, properties: {} } }
prompts:
  plan: { id: plan, name: Plan, version: 1.0.0, system_template: "Plan.", tools: [probe] }
  build: { id: build, name: Build, version: 1.0.0, system_template: "Build." }
workflow:
  version: 2
  entry: plan
  states:
    plan: { prompt_task: plan, control: agent, on_event: { Build: build } }
    build: { prompt_task: build, control: agent, on_event: { Plan: plan } }
`

// spinMock scripts n rounds of the loop: plan probes and moves to build, build moves
// back; the probe tool answers from tool_results.
func spinMock(n int) string {
	var b strings.Builder
	b.WriteString("tool_results:\n  probe: { ok: true }\nrounds:\n")
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			b.WriteString("  - expect_state: plan\n    text: Planning.\n    tool_calls:\n      - { name: probe, args: {} }\n      - { name: workflow__transition, args: { event: Build, context: go } }\n")
		} else {
			b.WriteString("  - expect_state: build\n    tool_calls: [{ name: workflow__transition, args: { event: Plan, context: again } }]\n")
		}
	}
	return b.String()
}

// TestPackHostRoundLimit: with no budget and no max_visits, the host's limit ends the
// turn after its rounds, counted across state changes, the way an exhausted budget
// does: a system turn, cap.breached (loop-iterations), the run failed
// loop_limit_exceeded.
func TestPackHostRoundLimit(t *testing.T) {
	tr, sm := packRun(t, "spin", spinPackYAML, spinMock(40), `{"message":"go"}`)
	tr.in.Limits = &TurnLimits{MaxRounds: 6, MaxToolCalls: 100}
	final := tr.finish()
	require.Equal(t, protocol.StatusFailed, final.Status)
	require.Equal(t, "loop_limit_exceeded", final.Error.Code)
	require.Len(t, sm.rounds, 6)
	evs := tr.events()
	caps := ofType(evs, "cap.breached")
	require.Len(t, caps, 1)
	p := payload(t, caps[0])
	require.Equal(t, "loop-iterations", p["kind"])
	require.Equal(t, "max_rounds_per_turn", p["hostLimit"])
	require.Equal(t, "turn", p["scope"])
	require.EqualValues(t, 6, p["limit"])
	require.EqualValues(t, 6, p["observed"])
	require.Nil(t, p["budget"])
	closed := ofType(evs, protocol.EvConversationClosed)
	require.Len(t, closed, 1)
	require.Contains(t, string(closed[0].Payload), "loop_limit_exceeded")
	require.Contains(t, string(closed[0].Payload), `"role":"system"`)
	require.Equal(t, "budget_exhausted", final.Pack.Status)
}

func TestPackHostToolCallLimit(t *testing.T) {
	tr, sm := packRun(t, "spin", spinPackYAML, spinMock(40), `{"message":"go"}`)
	tr.in.Limits = &TurnLimits{MaxRounds: 100, MaxToolCalls: 7}
	final := tr.finish()
	require.Equal(t, "loop_limit_exceeded", final.Error.Code)
	// plan 2 calls, build 1, plan 2, build 1 = 6; the next plan batch would make 8.
	require.Len(t, sm.rounds, 5)
	require.Len(t, sm.tools, 2)
	p := payload(t, ofType(tr.events(), "cap.breached")[0])
	require.Equal(t, "max_tool_calls_per_turn", p["hostLimit"])
	require.EqualValues(t, 8, p["observed"])
}

// cancelHook sends the run a cancel from inside the model round or tool call it
// names, and (block) keeps that call running until the test ends, as a slow provider
// would; the workflow's cancellation of the activity is recorded.
type cancelHook struct {
	tr        *testRun
	round     int
	tool      string
	block     bool
	temporal  bool // cancel through Temporal (the UI's Cancel) instead of the signal
	release   chan struct{}
	once      sync.Once
	mu        sync.Mutex
	cancelled []string // activity types whose cancellation the workflow requested
}

func newCancelHook(t *testing.T, tr *testRun, sm *scriptedModel, round int, tool string, block bool) *cancelHook {
	h := &cancelHook{tr: tr, round: round, tool: tool, block: block, release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	sm.before = h.before
	tr.env.SetOnActivityCanceledListener(func(info *activity.Info) {
		h.mu.Lock()
		h.cancelled = append(h.cancelled, info.ActivityType.Name)
		h.mu.Unlock()
	})
	return h
}

func (h *cancelHook) before(ctx context.Context, round int, tool string) {
	if round != h.round || tool != h.tool {
		return
	}
	h.once.Do(func() {
		if h.temporal {
			h.tr.env.CancelWorkflow()
		} else {
			h.tr.env.SignalWorkflow(CancelSignal, CancelRequest{Reason: "stop it", CancelledBy: "key_test"})
		}
	})
	if h.block {
		select {
		case <-ctx.Done():
		case <-h.release:
		}
	}
}

func (h *cancelHook) requested() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.cancelled...)
}

// TestPackCancelStopsTheModelRoundInFlight: a cancel during a model round that never
// answers cancels the round's activity and ends the run at once.
func TestPackCancelStopsTheModelRoundInFlight(t *testing.T) {
	for _, viaTemporal := range []bool{false, true} {
		tr, sm := packRun(t, "spin", spinPackYAML, spinMock(40), `{"message":"go"}`)
		sm.refuseLocal = true // a model that can hang is a real provider's: its rounds are activities
		h := newCancelHook(t, tr, sm, 3, "", true)
		h.temporal = viaTemporal
		final := tr.finish()
		require.Equal(t, protocol.StatusCancelled, final.Status, "temporal %v", viaTemporal)
		require.Equal(t, []string{"ModelRound"}, h.requested(), "the round in flight is cancelled")
		require.Len(t, sm.rounds, 3, "rounds 0-2 answered; round 3 never did")
		evs := tr.events()
		require.Equal(t, []string{protocol.EvNodeCancelled, protocol.EvRunCancelled}, types(evs[len(evs)-2:]))
		require.Len(t, ofType(evs, "provider.usage"), 3)
		require.Empty(t, ofType(evs, protocol.EvConversationClosed), "a cancelled run ends with node.cancelled, not a conversation turn")
		if !viaTemporal {
			require.Equal(t, "stop it", payload(t, evs[len(evs)-1])["reason"])
		}
	}
}

// TestPackCancelBetweenRounds: a cancel sent while a round answers at once stops the
// loop there: no later round runs. (The test environment delivers the signal before
// the round's result, so the round counts as cancelled in flight; the engine's tests
// cover the check between rounds on its own.)
func TestPackCancelBetweenRounds(t *testing.T) {
	tr, sm := packRun(t, "spin", spinPackYAML, spinMock(40), `{"message":"go"}`)
	newCancelHook(t, tr, sm, 4, "", false)
	final := tr.finish()
	require.Equal(t, protocol.StatusCancelled, final.Status)
	require.Len(t, sm.rounds, 5, "no round after round 4 ran")
	require.Len(t, ofType(tr.events(), "provider.usage"), 4, "the interrupted round 4 is not counted")
}

// TestPackCancelStopsTheToolCallInFlight: a cancel during a tool call cancels it.
func TestPackCancelStopsTheToolCallInFlight(t *testing.T) {
	tr, sm := packRun(t, "spin", spinPackYAML, spinMock(40), `{"message":"go"}`)
	h := newCancelHook(t, tr, sm, 2, "probe", true)
	final := tr.finish()
	require.Equal(t, protocol.StatusCancelled, final.Status)
	require.Equal(t, []string{"ToolCall"}, h.requested())
	require.Len(t, sm.rounds, 3)
	probes := 0
	for _, e := range ofType(tr.events(), "agent.toolReturned") {
		if payload(t, e)["toolName"] == "probe" {
			probes++
		}
	}
	require.Equal(t, 1, probes, "only round 0's probe returned")
}

// hybridPackYAML enters a hybrid review state from an internal one; review also serves
// chat and may transition by itself.
const hybridPackYAML = `id: hybrid
name: Hybrid
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  intake: { id: intake, name: Intake, version: 1.0.0, system_template: "Intake." }
  review: { id: review, name: Review, version: 1.0.0, system_template: "Review. {{workflow_context}}" }
  done: { id: done, name: Done, version: 1.0.0, system_template: "Done." }
workflow:
  version: 2
  entry: intake
  states:
    intake: { prompt_task: intake, on_event: { Submit: review } }
    review: { prompt_task: review, orchestration: hybrid, on_event: { Approve: done, Reopen: intake } }
    done: { prompt_task: done, terminal: true }
`

const hybridMock = `rounds:
  - expect_state: intake
    text: Tell me more.
  - expect_state: intake
    text: Submitting.
    tool_calls: [{ name: workflow__transition, args: { event: Submit, context: "order 7" } }]
  - expect_state: review
    text: Still under review.
  - expect_state: done
    text: Approved, all done.
`

// TestPackEventRouting: an event sent while the pack is in an internal state is
// refused (409 run_state_conflict naming the states that take events) and appends
// nothing; a hybrid state raises its event interrupt, answers chat, and takes the
// event.
func TestPackEventRouting(t *testing.T) {
	tr, sm := packRun(t, "hybrid", hybridPackYAML, hybridMock, `{"message":"hi"}`)
	var refused, refusedAlias ResolveCheck
	var before, inHybrid Snapshot
	var eventsBefore, eventsAfterRefusal int
	var hybridCheck, unknownCheck ResolveCheck
	tr.at(time.Second, func() {
		before = tr.snapshot()
		eventsBefore = len(tr.events())
		refused = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"event":"Approve","context":"ok"}`)})
		refusedAlias = tr.check(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: before.Interrupt.InterruptID, ResumeValue: json.RawMessage(`{"event":"Approve"}`)})
		// Sent anyway, the workflow drops it too.
		tr.resolve(ServedPackNodeID, `{"event":"Approve","context":"ok"}`)
	})
	tr.at(2*time.Second, func() {
		eventsAfterRefusal = len(tr.events())
		tr.say("order 7, please submit")
	})
	tr.at(3*time.Second, func() {
		inHybrid = tr.snapshot()
		tr.say("any news?")
	})
	tr.at(4*time.Second, func() {
		s := tr.snapshot()
		unknownCheck = tr.check(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: externalOf(s).InterruptID, ResumeValue: json.RawMessage(`{"event":"Ship"}`)})
		hybridCheck = tr.check(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: externalOf(s).InterruptID, ResumeValue: json.RawMessage(`{"event":"Approve","context":"fine"}`)})
		tr.resolveReq(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: externalOf(s).InterruptID, ResolvedBy: "reviewer",
			ResumeValue: json.RawMessage(`{"event":"Approve","context":"fine"}`)})
	})
	final := tr.finish()

	require.Equal(t, "intake", before.Pack.State)
	require.False(t, refused.OK)
	require.Equal(t, refusal(CodeRunStateConflict, false), refusal(refused.Code, refused.Unprocessable))
	require.Equal(t, CodeRunStateConflict, refused.Code)
	require.Contains(t, refused.Message, `state "intake" is internal and accepts no injected events`)
	require.Contains(t, refused.Message, "review (hybrid): Approve, Reopen")
	var details map[string]any
	require.NoError(t, json.Unmarshal(refused.Details, &details))
	require.Equal(t, map[string]any{"review": []any{"Approve", "Reopen"}}, details["acceptingStates"])
	require.Equal(t, "intake", details["state"])
	require.Equal(t, CodeRunStateConflict, refusedAlias.Code)
	require.Equal(t, eventsBefore, eventsAfterRefusal, "a refused event appends nothing")

	require.Equal(t, "review", inHybrid.Pack.State)
	require.Equal(t, protocol.StatusWaitingExternal, inHybrid.Status)
	it := externalOf(inHybrid)
	require.NotNil(t, it, "the hybrid state raised its event interrupt")
	require.Contains(t, string(it.ResumeSchema), `"Approve","Reopen"`)
	require.Equal(t, "validation_error", unknownCheck.Code, "no state takes Ship")
	require.Equal(t, refusal(protocol.CodeValidation, true), refusal(unknownCheck.Code, unknownCheck.Unprocessable))
	require.Contains(t, unknownCheck.Message, `has no event "Ship"`)
	require.Contains(t, unknownCheck.Message, "review (hybrid): Approve, Reopen")
	require.True(t, hybridCheck.OK, "%+v", hybridCheck)

	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, "done", final.Pack.State)
	require.Len(t, sm.rounds, 4)
	texts := []string{}
	for _, tn := range turnsOf(t, tr.events()) {
		texts = append(texts, contentOf(t, tn)["text"])
	}
	require.Equal(t, []string{"hi", "Tell me more.", "order 7, please submit", "Submitting.", "any news?", "Still under review.", "Approved, all done."}, texts,
		"the refused event never became a chat turn")
	handoffs := ofType(tr.events(), "agent.handoff")
	require.Equal(t, "external", payload(t, handoffs[len(handoffs)-1])["origin"])
}

func externalOf(s Snapshot) *PendingInterrupt {
	for i := range s.Interrupts {
		if s.Interrupts[i].Kind == "external-event" {
			return &s.Interrupts[i]
		}
	}
	return nil
}

// TestPackExternalEntryRaisesAtOpen: a pack whose entry state takes events can be sent
// one before anybody says anything.
func TestPackExternalEntryRaisesAtOpen(t *testing.T) {
	src := strings.Replace(hybridPackYAML, "entry: intake", "entry: review", 1)
	tr, _ := packRun(t, "hybrid", src, "rounds:\n  - expect_state: done\n    text: Approved at once.\n", "")
	var opened Snapshot
	tr.at(time.Second, func() {
		opened = tr.snapshot()
		tr.resolveReq(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: externalOf(opened).InterruptID, ResumeValue: json.RawMessage(`{"event":"Approve"}`)})
	})
	final := tr.finish()
	require.NotNil(t, externalOf(opened))
	require.Equal(t, protocol.StatusWaitingExternal, opened.Status)
	require.Equal(t, protocol.StatusCompleted, final.Status)
}

// forkOf prepares a replay fork of a finished test run of pack name.
func forkOf(t *testing.T, src *testRun, name, yamlSrc, mockSrc string, srcEvents []Event) (*testRun, *scriptedModel) {
	t.Helper()
	in := src.in
	in.RunID = src.in.RunID + "-fork"
	in.Fork = &ForkSource{SourceRunID: src.in.RunID, Events: srcEvents}
	fork, sm := packRun(t, name, yamlSrc, mockSrc, "")
	fork.in = in
	fork.env.SetStartWorkflowOptions(startOpts(in.RunID))
	return fork, sm
}

func without(types []string, drop string) []string {
	var out []string
	for _, t := range types {
		if t != drop {
			out = append(out, t)
		}
	}
	return out
}

// TestPackForkFoldsInCausalOrder: the fork's log is the source's, event for event,
// except that no provider.usage is written again: every agent event follows the turn
// that caused it, and a per-run sum of usage counts what each run spent.
func TestPackForkFoldsInCausalOrder(t *testing.T) {
	tr, _ := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	tr.at(time.Minute, func() { tr.say("It's ACC-12345. What's my balance?") })
	src := tr.finish()
	srcEvents := tr.events()
	fork, sm := forkOf(t, tr, "support", "", "", srcEvents)
	sm.failIfCalled = true
	out := fork.finish()
	evs := fork.events()
	require.Equal(t, without(types(srcEvents), "provider.usage"), types(evs))
	require.Empty(t, ofType(evs, "provider.usage"))
	require.Empty(t, ofType(evs, protocol.EvReplayDiverged))
	for _, e := range ofType(evs, "agent.decided") {
		require.Equal(t, true, payload(t, e)["replayed"])
	}
	require.Equal(t, src.Channels, out.Channels)
	require.Equal(t, src.Pack.ModelRounds, out.Pack.ModelRounds)
	require.Zero(t, out.Pack.InputTokens, "the fork spent no tokens")
	require.Positive(t, src.Pack.InputTokens)
}

// TestPackForkReportsDivergence: a recording the engine cannot follow (a round the
// source ran in another state) gets one replay.diverged; no model is called and the
// recorded conversation is still re-folded verbatim.
func TestPackForkReportsDivergence(t *testing.T) {
	tr, _ := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	tr.at(time.Minute, func() { tr.say("It's ACC-12345. What's my balance?") })
	src := tr.finish()
	srcEvents := tr.events()
	// Make the source say its round 2 ran in another state.
	tampered := append([]Event(nil), srcEvents...)
	var at Event
	for i, e := range tampered {
		if e.Type != "agent.decided" || !strings.Contains(string(e.Payload), `"round":2,`) {
			continue
		}
		e.Payload = json.RawMessage(strings.Replace(string(e.Payload), `"state":"verifying"`, `"state":"elsewhere"`, 1))
		tampered[i], at = e, e
	}
	require.NotEmpty(t, at.EventID)
	fork, sm := forkOf(t, tr, "support", "", "", tampered)
	sm.failIfCalled = true
	out := fork.finish()
	div := ofType(fork.events(), protocol.EvReplayDiverged)
	require.Len(t, div, 1)
	p := payload(t, div[0])
	require.Equal(t, tr.in.RunID, p["sourceRunId"])
	require.EqualValues(t, at.Sequence, p["atSequence"])
	require.Equal(t, at.EventID, p["originalEventId"])
	require.Equal(t, "output", p["divergenceKind"])
	require.Equal(t, "agent.decided", p["divergencePoint"])
	require.Contains(t, p["reason"], `model round 2 ran in state "elsewhere" in the source run but in state "verifying"`)
	require.Equal(t, src.Channels, out.Channels, "the recorded conversation is re-folded verbatim")
	require.Equal(t, "failed", out.Pack.Status, "the pack stopped where the recording left it")
}

// TestPackForkOfFailedRun: a source whose pack failed replays to the same failure.
func TestPackForkOfFailedRun(t *testing.T) {
	tr, _ := packRun(t, "spin", spinPackYAML, spinMock(40), `{"message":"go"}`)
	tr.in.Limits = &TurnLimits{MaxRounds: 4}
	require.Equal(t, protocol.StatusFailed, tr.finish().Status)
	fork, sm := forkOf(t, tr, "spin", spinPackYAML, spinMock(40), tr.events())
	sm.failIfCalled = true
	out := fork.finish()
	require.Equal(t, protocol.StatusFailed, out.Status)
	require.Equal(t, "loop_limit_exceeded", out.Error.Code)
	require.Empty(t, ofType(fork.events(), protocol.EvReplayDiverged))
}

// TestPackForkOfRunCancelledMidTurn: the source was cancelled while a round ran; the
// fork re-folds the rounds it recorded and answers the rest of that turn live.
func TestPackForkOfRunCancelledMidTurn(t *testing.T) {
	tr, sm := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	newCancelHook(t, tr, sm, 3, "", true)
	tr.at(time.Minute, func() { tr.say("It's ACC-12345. What's my balance?") })
	require.Equal(t, protocol.StatusCancelled, tr.finish().Status)
	srcEvents := tr.events()
	fork, fsm := forkOf(t, tr, "support", "", "", srcEvents)
	balance := packs.MockSeen{State: "verifying", User: "It's ACC-12345. What's my balance?", HasUser: true}
	fsm.resume(greeted, balance, balance) // rounds 0-2 come from the record
	out := fork.finish()                  // ends when the answered turn completes the pack
	require.Equal(t, protocol.StatusCompleted, out.Status)
	require.Equal(t, 3, fsm.rounds[0].Round, "rounds 0-2 come from the source's record")
	require.Empty(t, ofType(fork.events(), protocol.EvReplayDiverged))
}
