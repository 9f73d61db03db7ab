package engine

import (
	"maps"
	"slices"

	"github.com/wop-dev/wop/packs"
)

// Accepting returns the state the run is in and its sorted events when that state
// accepts injected events now (external or hybrid, not terminal, the run open), else
// nil. Unlike Awaiting it also names a hybrid state, where the model goes on serving
// user turns and may transition by itself.
func (m *Machine) Accepting() *AwaitingEvent {
	if m.Closed() {
		return nil
	}
	if s := m.state(); injectable(s) {
		return &AwaitingEvent{State: m.st.CurrentState, Events: s.Events()}
	}
	return nil
}

// InjectableStates maps every state of the pack that accepts injected events
// (external or hybrid, not terminal) to its sorted events, for messages that tell a
// caller where an event can go.
func (m *Machine) InjectableStates() map[string][]string {
	out := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(m.cfg.Pack.Workflow.States)) {
		if s := m.cfg.Pack.Workflow.States[name]; injectable(s) {
			out[name] = s.Events()
		}
	}
	return out
}

// Orchestration is the orchestration of the current state (internal when absent).
func (m *Machine) Orchestration() string { return m.state().OrchestrationOrDefault() }

func injectable(s *packs.State) bool {
	o := s.OrchestrationOrDefault()
	return (o == packs.OrchestrationExternal || o == packs.OrchestrationHybrid) && !isTerminal(s) && len(s.OnEvent) > 0
}
