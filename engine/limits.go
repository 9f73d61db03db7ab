package engine

import (
	"fmt"

	"github.com/wop-dev/wop/protocol"
)

// TurnLimits are the host's limits on the agent work of one user turn (or one injected
// event), applied whatever the pack declares. They count across state changes, unlike
// a prompt's max_rounds and max_tool_calls_per_turn, which restart in every state
// segment; the pack's own limits and budget still end the turn first when they are
// lower. Zero means no limit.
type TurnLimits struct {
	// MaxRounds is the number of model rounds a turn may run.
	MaxRounds int `json:"maxRoundsPerTurn,omitempty"`
	// MaxToolCalls is the number of tool calls (workflow__* calls included) a turn
	// may make.
	MaxToolCalls int `json:"maxToolCallsPerTurn,omitempty"`
}

// Host limit names (BudgetEvent.Limit with Host set).
const (
	LimitTurnRounds    = "max_rounds_per_turn"
	LimitTurnToolCalls = "max_tool_calls_per_turn"
)

// Defaults a host applies when its operator sets no limit.
const (
	DefaultHostMaxRoundsPerTurn    = 25
	DefaultHostMaxToolCallsPerTurn = 50
)

// turnRoundsReached ends the run when the turn has already run the host's limit of
// model rounds and would run another.
func (m *Machine) turnRoundsReached(t *turn) bool {
	lim := m.cfg.Limits.MaxRounds
	if lim <= 0 || t.rounds < lim {
		return false
	}
	m.limitReached(t, LimitTurnRounds, t.rounds, lim,
		fmt.Sprintf("the host allows %d model rounds per user turn and the turn still goes on in state %q", lim, m.st.CurrentState))
	return true
}

// turnCallsExceeded ends the run when a batch of n tool calls would take the turn past
// the host's limit of tool calls (checked before the batch, like max_tool_calls).
func (m *Machine) turnCallsExceeded(t *turn, n int) bool {
	lim := m.cfg.Limits.MaxToolCalls
	if lim <= 0 || t.calls+n <= lim {
		return false
	}
	m.limitReached(t, LimitTurnToolCalls, t.calls+n, lim,
		fmt.Sprintf("the host allows %d tool calls per user turn and the model asked for %d in state %q", lim, t.calls+n, m.st.CurrentState))
	return true
}

// limitReached ends the run as an exhausted budget does (status budget_exhausted),
// with code loop_limit_exceeded and a budget event marked Host.
func (m *Machine) limitReached(t *turn, limit string, current, maxv int, why string) {
	m.st.Status = StatusBudgetExhausted
	m.st.ErrorCode = protocol.CodeLoopLimitExceeded
	m.st.ErrorMessage = "turn limit reached: " + why
	m.st.TerminalReason = m.st.ErrorMessage
	t.rt.Emit(Event{Kind: EventBudgetExhausted, State: m.st.CurrentState, Budget: &BudgetEvent{
		Limit: limit, Current: current, Max: maxv, Transitions: m.st.Transitions, Host: true,
	}})
}
