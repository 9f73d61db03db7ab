package packagent

// Routing injected events to a pack (promptpack-workflow.md §8.10). A caller injects an
// event with a resolve whose value is {"event": "<name>", "context": …}. Only a state
// whose orchestration is external or hybrid accepts injected events, and only the
// events of its on_event; while the pack is in such a state the node keeps an
// external-event interrupt pending beside its conversation, and the resolve goes to it.
// Since GateEventRouting:
//
//   - Hybrid states raise that interrupt too (the model keeps serving user turns and may
//     transition by itself), and so does an external or hybrid entry state when the
//     conversation opens.
//   - An event sent while the pack is in a state that accepts none (or not that event)
//     is refused with 409 run_state_conflict, naming the current state and every state
//     that accepts events with its events; nothing is appended. An event no state
//     accepts is 422 validation_error with the same words. Such an event used to be
//     taken for a bare chat reply, and the model answered it.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// injectionOf reads a resume value shaped as an event injection: a JSON object with a
// non-empty string "event" and no members besides "event" and "context".
func injectionOf(raw json.RawMessage) (string, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields["event"] == nil {
		return "", false
	}
	for k := range fields {
		if k != "event" && k != "context" {
			return "", false
		}
	}
	var ev string
	if json.Unmarshal(fields["event"], &ev) != nil || ev == "" {
		return "", false
	}
	return ev, true
}

// MisroutedEvent implements ConversationAgent: a pack state that raised no event
// interrupt accepts no injected events.
func (a *packAgent) MisroutedEvent(_ *workflows.Conversation, value json.RawMessage) *workflows.ResolveCheck {
	ev, ok := injectionOf(value)
	if !ok {
		return nil
	}
	check := a.refuseEvent(ev, a.m.CanInject(ev))
	return &check
}

// ApprovesToolCalls implements ConversationAgent: a pack's tool calls may wait for a
// decision (pack_approvals.go).
func (a *packAgent) ApprovesToolCalls() bool { return true }

// refuseEvent is the refusal of an event the pack cannot take now (409, or 422 when no
// state takes it): why (from CanInject), and which states accept which events.
func (a *packAgent) refuseEvent(event string, why error) workflows.ResolveCheck {
	accepting := a.m.InjectableStates()
	var where []string
	for _, s := range slices.Sorted(maps.Keys(accepting)) {
		where = append(where, fmt.Sprintf("%s (%s): %s", s, a.pack.Workflow.States[s].OrchestrationOrDefault(), strings.Join(accepting[s], ", ")))
	}
	msg := fmt.Sprintf("pack %s cannot take event %q now: ", a.pack.ID, event)
	switch {
	case a.m.Closed():
		msg += fmt.Sprintf("its run has ended (%s)", a.m.Status())
	case a.m.Accepting() == nil:
		msg += fmt.Sprintf("state %q is %s and accepts no injected events", a.m.CurrentState(), a.m.Orchestration())
	case why != nil:
		msg += strings.TrimPrefix(why.Error(), "engine: ")
	}
	if len(where) > 0 {
		msg += "; states that accept injected events: " + strings.Join(where, "; ")
	} else {
		msg += "; no state of the pack accepts injected events"
	}
	code, unprocessable := workflows.CodeRunStateConflict, false
	if !declares(accepting, event) {
		// No state would take it: the request is wrong, not its timing.
		code, unprocessable = protocol.CodeValidation, true
	}
	return workflows.ResolveCheck{Code: code, Unprocessable: unprocessable, Message: msg, Details: protocol.MustJSON(map[string]any{
		"event": event, "state": a.m.CurrentState(), "orchestration": a.m.Orchestration(), "acceptingStates": accepting,
	})}
}

// declares reports whether some state of accepting takes event.
func declares(accepting map[string][]string, event string) bool {
	for _, s := range slices.Sorted(maps.Keys(accepting)) {
		for _, e := range accepting[s] {
			if e == event {
				return true
			}
		}
	}
	return false
}

// acceptsEvents reports whether the pack's current state takes injected events and
// so keeps an event interrupt pending: always for an external state waiting for one,
// and since GateEventRouting for a hybrid state too.
func (a *packAgent) acceptsEvents(c *workflows.Conversation, res *engine.TurnResult) *engine.AwaitingEvent {
	if res != nil && res.Awaiting != nil {
		return res.Awaiting
	}
	w := a.m.Accepting()
	if w == nil || !c.Changed(workflows.GateEventRouting) {
		return nil
	}
	return w
}

// openingInterrupt is the event interrupt an external or hybrid entry state raises
// when the conversation opens (nil otherwise).
func (a *packAgent) openingInterrupt(c *workflows.Conversation) *workflows.AgentInterrupt {
	if a.m.Accepting() == nil || !c.Changed(workflows.GateEventRouting) {
		return nil
	}
	return a.externalInterrupt(a.m.Accepting())
}
