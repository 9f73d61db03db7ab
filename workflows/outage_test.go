package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// outagePackYAML is a chat that ends when the model hands over to done.
const outagePackYAML = `id: outage
name: Outage
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
tools:
  lookup:
    name: lookup
    description: Look something up.
    parameters: { type: object, properties: { q: { type: string } } }
    action_scope: { effect: read }
  file_ticket:
    name: file_ticket
    description: File a ticket.
    parameters: { type: object, properties: { subject: { type: string } } }
    action_scope: { effect: write }
prompts:
  chat: { id: chat, name: Chat, version: 1.0.0, system_template: "Chat.", tools: [lookup, file_ticket] }
  done: { id: done, name: Done, version: 1.0.0, system_template: "Done." }
workflow:
  version: 2
  entry: chat
  states:
    chat: { prompt_task: chat, on_event: { Finish: done } }
    done: { prompt_task: done, terminal: true }
`

// outageMock answers two chat turns, then hands over to done, whose prompt says goodbye.
const outageMock = `tool_results:
  lookup: { found: true }
  file_ticket: { ticket: T-1 }
rounds:
  - { expect_state: chat, text: "Hello." }
  - { expect_state: chat, text: "Still here." }
  - { expect_state: chat, tool_calls: [{ name: workflow__transition, args: { event: Finish, context: bye } }] }
  - { expect_state: done, text: "Bye." }
`

// The SDK's test environment retries an activity whose policy allows unlimited attempts
// 10 times at most, so the policies here back off far enough for 10 attempts to span
// the outages.

// unavailableErr is a provider outage as the activity reports it: retryable.
var unavailableErr = temporal.NewApplicationError("mock is unavailable (HTTP 503)", activities.ErrTypeUnavailable)

// outageRun is packRun with the scripted rounds always run as activities (a provider
// that is not the mock, as far as local rounds go) and the worker's outage policy.
func outageRun(t *testing.T, policy activities.OutagePolicy, mockSrc, inputs string) (*testRun, *scriptedModel) {
	t.Helper()
	if mockSrc == "" {
		mockSrc = outageMock
	}
	tr, sm := packRunWith(t, "outage", outagePackYAML, mockSrc, inputs, func(cfg *activities.Config, sm *scriptedModel) {
		cfg.ModelOutage = map[string]activities.OutagePolicy{"": policy}
		cfg.Bindings = outageBindings{sm}
	})
	sm.refuseLocal = true
	return tr, sm
}

// outageBindings binds read tools to HTTP with the scripted model's routeOutage, as a
// bindings file with retry_for does; the calls are the scripted ToolCall.
type outageBindings struct{ sm *scriptedModel }

func (b outageBindings) Route(c activities.ToolRouteCall) (activities.ToolRoute, bool) {
	b.sm.mu.Lock()
	defer b.sm.mu.Unlock()
	if b.sm.routeOutage == nil || c.Effect != "read" {
		return activities.ToolRoute{}, false
	}
	pol := *b.sm.routeOutage
	return activities.ToolRoute{Kind: activities.RouteHTTP, Target: "http://lookup/", MaxAttempts: 2, Outage: &pol}, true
}

func (outageBindings) Execute(context.Context, convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	return nil, false, nil
}

// setFail sets (nil clears) what every model round returns, as the provider goes down
// or comes back.
func (s *scriptedModel) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *scriptedModel) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rounds)
}

// TestPackModelOutageIsWaitedOut: the provider is down for 25 minutes; the first round
// fails its quick attempts, the run reports the stall (workflow.stalled, then a
// reminder every 10 minutes, the snapshot's Stalled, status running) and keeps trying
// until the provider answers, then the conversation goes on to its end.
func TestPackModelOutageIsWaitedOut(t *testing.T) {
	policy := activities.OutagePolicy{RetryFor: 2 * time.Hour, InitialInterval: time.Minute, MaxInterval: 10 * time.Minute, RemindEvery: 10 * time.Minute}
	tr, sm := outageRun(t, policy, "", `{"message":"hi"}`)
	sm.setFail(unavailableErr)
	var during Snapshot
	var callsDuring int
	tr.at(15*time.Minute, func() { during, callsDuring = tr.snapshot(), sm.calls() })
	tr.at(25*time.Minute, func() { sm.setFail(nil) })
	tr.at(30*time.Minute, func() { tr.say("are you back?") })
	tr.at(31*time.Minute, func() { tr.say("bye") })
	final := tr.finish()

	require.Equal(t, protocol.StatusCompleted, final.Status, "the outage did not end the run: %+v", final.Error)
	require.Nil(t, final.Stalled)
	require.Equal(t, protocol.StatusRunning, during.Status, "a run waiting out an outage is running, not waiting on its user")
	require.NotNil(t, during.Stalled, "the snapshot says what the run waits for")
	require.Equal(t, "model", during.Stalled.Kind)
	require.Equal(t, activities.ProviderMock, during.Stalled.Provider)
	require.Equal(t, protocol.CodeModelUnavailable, during.Stalled.LastError.Code)
	require.Contains(t, during.Stalled.LastError.Message, "HTTP 503")
	require.Contains(t, during.Stalled.Detail, "Stalled")
	require.Greater(t, callsDuring, activities.QuickAttempts, "the round is retried past its quick attempts")

	evs := tr.events()
	stalled := ofType(evs, protocol.EvWorkflowStalled)
	require.Len(t, stalled, 3, "the stall, then reminders at 10 and 20 minutes")
	first := payload(t, stalled[0])
	require.Equal(t, "model-unavailable", first["reason"])
	require.Equal(t, activities.ProviderMock, first["provider"])
	require.Equal(t, ServedPackNodeID, first["lastNodeId"])
	require.EqualValues(t, 2, payload(t, stalled[2])["reminder"])
	require.GreaterOrEqual(t, payload(t, stalled[2])["stalledForMs"], float64(20*time.Minute/time.Millisecond))

	var texts []string
	for _, turn := range turnsOf(t, evs) {
		require.NotEqual(t, protocol.RoleSystem, turn.Role, "no turn failed: %s", turn.Content)
		if turn.Role == protocol.RoleAgent {
			texts = append(texts, contentOf(t, turn)["text"])
		}
	}
	require.Equal(t, []string{"Hello.", "Still here.", "Bye."}, texts, "the first message is answered once the provider is back")
}

// TestPackModelOutagePastTheLimitFailsTheTurn: the provider stays down past the
// policy's 30 minutes: the turn ends with a system turn that says the model is
// unavailable, the conversation stays open, and the next message (once the provider
// is back) is answered, its round reading both messages.
func TestPackModelOutagePastTheLimitFailsTheTurn(t *testing.T) {
	policy := activities.OutagePolicy{RetryFor: 30 * time.Minute, InitialInterval: time.Minute, MaxInterval: 10 * time.Minute, RemindEvery: 10 * time.Minute}
	tr, sm := outageRun(t, policy, "", `{"message":"hi"}`)
	sm.setFail(unavailableErr)
	var after Snapshot
	tr.at(35*time.Minute, func() { after = tr.snapshot() })
	tr.at(40*time.Minute, func() { sm.setFail(nil) })
	tr.at(45*time.Minute, func() { tr.say("are you back?") })
	tr.at(46*time.Minute, func() { tr.say("more") })
	tr.at(47*time.Minute, func() { tr.say("bye") })
	final := tr.finish()

	require.Equal(t, protocol.StatusWaitingApproval, after.Status, "the conversation waits for its user again")
	require.Nil(t, after.Stalled)
	require.Nil(t, after.Error)
	require.NotNil(t, after.Interrupt, "the conversation is open")
	require.Equal(t, protocol.StatusCompleted, final.Status)

	evs := tr.events()
	turns := turnsOf(t, evs)
	var notice *protocol.Turn
	for i := range turns {
		if turns[i].Role == protocol.RoleSystem && turns[i].TurnIndex > 0 {
			notice = &turns[i]
			break
		}
	}
	require.NotNil(t, notice, "a system turn says why the message got no answer")
	require.Equal(t, 2, notice.TurnIndex, "right after the unanswered message")
	var body struct {
		Text  string `json:"text"`
		Error struct {
			Code      string `json:"code"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(notice.Content, &body))
	require.Contains(t, body.Text, "the model is unavailable")
	require.Contains(t, body.Text, "retried for 30m0s")
	require.Equal(t, protocol.CodeModelUnavailable, body.Error.Code)
	require.True(t, body.Error.Retryable)
	byIndex := map[int]protocol.Turn{}
	for _, turn := range turns {
		byIndex[turn.TurnIndex] = turn
	}
	require.Equal(t, protocol.RoleUser, byIndex[notice.TurnIndex+1].Role)
	require.Equal(t, protocol.RoleAgent, byIndex[notice.TurnIndex+2].Role, "the next message is answered")
	require.Equal(t, "Hello.", contentOf(t, byIndex[notice.TurnIndex+2])["text"])

	sm.mu.Lock()
	retried := sm.rounds[len(sm.rounds)-4] // the round that answered "are you back?"
	sm.mu.Unlock()
	var users []string
	for _, m := range retried.Transcript.Tail {
		if m.Role == convo.RoleUser {
			users = append(users, m.Text)
		}
	}
	require.Equal(t, []string{"hi", "are you back?"}, users, "the retried round reads the unanswered message and the new one")
	stalled := ofType(evs, protocol.EvWorkflowStalled)
	require.Len(t, stalled, 3, "the stall, then reminders at 10 and 20 minutes; none at the limit")
}

// TestPackModelOutageWithoutWaiting: a policy that does not wait (retry for 0) ends the
// turn after the quick attempts, with no stall.
func TestPackModelOutageWithoutWaiting(t *testing.T) {
	tr, sm := outageRun(t, activities.OutagePolicy{}, "", `{"message":"hi"}`)
	sm.setFail(unavailableErr)
	tr.at(time.Minute, func() { sm.setFail(nil); tr.say("again") })
	tr.at(2*time.Minute, func() { tr.say("more") })
	tr.at(3*time.Minute, func() { tr.say("bye") })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Empty(t, ofType(tr.events(), protocol.EvWorkflowStalled))
	require.Equal(t, activities.QuickAttempts+4, sm.calls(), "the quick attempts, then the three rounds after")
}

// TestPackModelOutageIsCancellable: a cancel ends a run that waits out an outage at once.
func TestPackModelOutageIsCancellable(t *testing.T) {
	policy := activities.OutagePolicy{RetryFor: 24 * time.Hour, InitialInterval: time.Minute, MaxInterval: 10 * time.Minute, RemindEvery: time.Hour}
	tr, sm := outageRun(t, policy, "", `{"message":"hi"}`)
	sm.setFail(unavailableErr)
	tr.at(10*time.Minute, func() {
		tr.env.SignalWorkflow(CancelSignal, CancelRequest{Reason: "give up", CancelledBy: "key_test"})
	})
	final := tr.finish()
	require.Equal(t, protocol.StatusCancelled, final.Status)
	require.Nil(t, final.Stalled)
	evs := tr.events()
	require.Len(t, ofType(evs, protocol.EvWorkflowStalled), 1)
	ts, err := time.Parse(time.RFC3339Nano, evs[len(evs)-1].Timestamp)
	require.NoError(t, err)
	st, err := time.Parse(time.RFC3339Nano, evs[0].Timestamp)
	require.NoError(t, err)
	require.Less(t, ts.Sub(st), 11*time.Minute, "cancelled at once, not at the next attempt or the limit")
}

// TestPackModelPermanentErrorFailsFast: a 401 is not an outage: the run fails at once.
func TestPackModelPermanentErrorFailsFast(t *testing.T) {
	tr, sm := outageRun(t, activities.OutagePolicy{RetryFor: time.Hour}, "", `{"message":"hi"}`)
	sm.setFail(temporal.NewNonRetryableApplicationError("mock rejected the API key (HTTP 401)", activities.ErrTypeAuth, nil))
	final := tr.finish()
	require.Equal(t, protocol.StatusFailed, final.Status)
	require.Equal(t, protocol.CodeModelAuthentication, final.Error.Code)
	require.Equal(t, 1, sm.calls())
	require.Empty(t, ofType(tr.events(), protocol.EvWorkflowStalled))
}

// toolMock calls lookup (read) and file_ticket (write), reads the results, then the
// model calls file_ticket again with the same arguments.
const toolMock = `tool_results:
  lookup: { found: true }
  file_ticket: { ticket: T-1 }
rounds:
  - { expect_state: chat, tool_calls: [{ name: lookup, args: { q: order } }, { name: file_ticket, args: { subject: broken } }] }
  - { expect_state: chat, tool_calls: [{ name: file_ticket, args: { subject: broken } }, { name: file_ticket, args: { subject: other } }] }
  - { expect_state: chat, text: "Filed." }
  - { expect_state: chat, tool_calls: [{ name: workflow__transition, args: { event: Finish, context: bye } }] }
  - { expect_state: done, text: "Bye." }
`

// TestPackToolOutcomeUnknown: a write tool's call that may have been applied (its
// executor lost the answer) reads "outcome unknown" with its idempotency key, a read
// tool's failure reads as a failure, and the model's repeat of the write in the same
// turn carries the first call's key; another write gets its own.
func TestPackToolOutcomeUnknown(t *testing.T) {
	tr, sm := outageRun(t, activities.OutagePolicy{RetryFor: time.Hour}, toolMock, `{"message":"file it"}`)
	sm.toolFail = func(in convo.ToolCallInput) error {
		if in.Round == 0 {
			return temporal.NewApplicationError("POST http://tickets/: no answer within 30s", activities.ErrTypeOutcomeUnknown)
		}
		return nil
	}
	tr.at(time.Hour, func() { tr.say("bye") })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)

	var returned []Event
	for _, e := range ofType(tr.events(), "agent.toolReturned") {
		if payload(t, e)["toolName"] != "workflow__transition" {
			returned = append(returned, e)
		}
	}
	require.Len(t, returned, 4)
	out := func(i int) map[string]any {
		var m map[string]any
		require.NoError(t, json.Unmarshal(mustJSON(payload(t, returned[i])["outcome"]), &m))
		return m
	}
	lookup, ticket := out(0), out(1)
	require.Contains(t, lookup["error"], "tool lookup failed", "a read tool's failure is a failure (%d attempts)", activities.DefaultToolAttempts)
	require.Equal(t, "outcome_unknown", ticket["status"]) // packagent.ToolStatusOutcomeUnknown
	key, _ := ticket["idempotencyKey"].(string)
	require.NotEmpty(t, key)
	require.Contains(t, ticket["error"], "outcome unknown, do not repeat; idempotency key "+key)

	sm.mu.Lock()
	defer sm.mu.Unlock()
	keys := map[string]map[int]string{} // arguments → round → key (every attempt of a call carries its key)
	for _, c := range sm.tools {
		if c.Tool != "file_ticket" {
			continue
		}
		args := canonicalArgs(t, c.Args)
		if keys[args] == nil {
			keys[args] = map[int]string{}
		}
		if prev, ok := keys[args][c.Round]; ok {
			require.Equal(t, prev, c.IdempotencyKey, "every attempt of a call carries one key")
		}
		keys[args][c.Round] = c.IdempotencyKey
	}
	require.Equal(t, map[int]string{0: key, 1: key}, keys[`{"subject":"broken"}`], "the repeat in round 1 carries the first call's key")
	require.Len(t, keys[`{"subject":"other"}`], 1)
	require.NotEqual(t, key, keys[`{"subject":"other"}`][1], "another write has its own key")
}

// TestPackToolOutageIsWaitedOut: a read tool whose route says retry_for is retried
// through its target's outage, the run stalled meanwhile; the model reads its result.
func TestPackToolOutageIsWaitedOut(t *testing.T) {
	tr, sm := outageRun(t, activities.OutagePolicy{RetryFor: time.Hour}, toolMock, `{"message":"file it"}`)
	sm.routeOutage = &activities.OutagePolicy{RetryFor: time.Hour, InitialInterval: time.Minute, MaxInterval: 5 * time.Minute, RemindEvery: 5 * time.Minute}
	up := false
	sm.toolFail = func(in convo.ToolCallInput) error {
		if in.Tool == "lookup" && !up {
			return temporal.NewApplicationError("POST http://lookup/ answered HTTP 503", "ToolUnavailable")
		}
		return nil
	}
	var during Snapshot
	tr.at(7*time.Minute, func() { during = tr.snapshot() })
	tr.at(12*time.Minute, func() { sm.mu.Lock(); up = true; sm.mu.Unlock() })
	tr.at(2*time.Hour, func() { tr.say("bye") })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.NotNil(t, during.Stalled)
	require.Equal(t, "tool", during.Stalled.Kind)
	require.Equal(t, "lookup", during.Stalled.Tool)
	require.Equal(t, protocol.CodeToolError, during.Stalled.LastError.Code)
	require.Contains(t, during.Stalled.LastError.Message, "HTTP 503")
	require.Equal(t, protocol.StatusRunning, during.Status)
	evs := tr.events()
	stalled := ofType(evs, protocol.EvWorkflowStalled)
	require.Len(t, stalled, 3, "the stall, reminders at 5 and 10 minutes")
	require.Equal(t, "tool-unavailable", payload(t, stalled[0])["reason"])
	require.Equal(t, "lookup", payload(t, stalled[0])["tool"])
	returned := ofType(evs, "agent.toolReturned")
	require.True(t, strings.Contains(string(returned[0].Payload), `"found":true`), "the model reads the result: %s", returned[0].Payload)
}

// TestPackForkOfATurnTheModelMissed: a fork replay of a run whose turn failed for an
// unavailable model folds that turn as failed too, and follows the rest of the
// recording without calling a model or diverging.
func TestPackForkOfATurnTheModelMissed(t *testing.T) {
	policy := activities.OutagePolicy{RetryFor: 30 * time.Minute, InitialInterval: time.Minute, MaxInterval: 10 * time.Minute, RemindEvery: time.Hour}
	tr, sm := outageRun(t, policy, "", `{"message":"hi"}`)
	sm.setFail(unavailableErr)
	tr.at(40*time.Minute, func() { sm.setFail(nil) })
	tr.at(45*time.Minute, func() { tr.say("are you back?") })
	tr.at(46*time.Minute, func() { tr.say("more") })
	tr.at(47*time.Minute, func() { tr.say("bye") })
	src := tr.finish()
	require.Equal(t, protocol.StatusCompleted, src.Status)
	srcEvents := tr.events()

	fork, fsm := forkOf(t, tr, "outage", outagePackYAML, outageMock, srcEvents)
	fsm.failIfCalled = true
	out := fork.finish()
	require.Equal(t, protocol.StatusCompleted, out.Status)
	require.Empty(t, ofType(fork.events(), protocol.EvReplayDiverged))
	require.Equal(t, src.Channels, out.Channels)
	require.Equal(t, src.Pack.ModelRounds, out.Pack.ModelRounds)
}

// canonicalArgs is raw with its objects' keys sorted and no insignificant space, so
// the calls of one tool with the same arguments group together.
func canonicalArgs(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
