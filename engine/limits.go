package engine

import (
	"fmt"

	"github.com/wop-dev/wop/protocol"
)

// TurnLimits are the host's limits on the agent work of one user turn (or one injected
// event), for the loops the pack does not bound itself: they count the rounds and tool
// calls of states on such loops (packs.Pack.UnboundedLoops: control: agent states that
// can hand over to each other for ever, in a pack without engine.budget), across state
// changes, unlike a prompt's max_rounds and max_tool_calls_per_turn, which restart in
// every state segment. Where the pack bounds a loop (max_visits, on_max_visits, any
// engine.budget limit) its bound decides. Zero means no limit.
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

// PackLimitsRuntime is a Runtime that says whether the pack's own bounds decide where
// they bound a loop (see LoopStates). A Runtime without the method takes them; the run
// workflow answers with its gate, asked only where the two readings part, so runs
// recorded before keep counting every round and call of a turn against the host's
// limits.
type PackLimitsRuntime interface {
	PackLimitsWin() bool
}

// packLimitsWin reports whether the pack's bounds decide in this turn.
func packLimitsWin(t *turn) bool {
	if r, ok := t.rt.(PackLimitsRuntime); ok {
		return r.PackLimitsWin()
	}
	return true
}

// inLoop reports whether the current state is on a loop the pack does not bound
// (packs.Pack.UnboundedLoops): only the rounds and tool calls of such states count
// against the host's limits.
func (m *Machine) inLoop() bool {
	if m.loops == nil {
		m.loops = m.cfg.Pack.UnboundedLoopStates()
	}
	return m.loops[m.st.CurrentState]
}

// turnRoundsReached ends the run when the turn has already run the host's limit of
// model rounds in states on loops the pack does not bound, and would run another.
// (Runs recorded before the pack's limits won counted every round of the turn.)
func (m *Machine) turnRoundsReached(t *turn) bool {
	lim := m.cfg.Limits.MaxRounds
	if lim <= 0 || t.rounds < lim {
		return false
	}
	current := t.loopRounds
	if t.loopRounds < lim {
		if packLimitsWin(t) {
			return false
		}
		current = t.rounds
	}
	m.limitReached(t, LimitTurnRounds, current, lim,
		fmt.Sprintf("the host allows %d model rounds per user turn and the turn still goes on in state %q", lim, m.st.CurrentState))
	return true
}

// turnCallsExceeded ends the run when a batch of n tool calls would take the turn past
// the host's limit of tool calls (checked before the batch, like max_tool_calls),
// counting the calls of states on loops the pack does not bound.
func (m *Machine) turnCallsExceeded(t *turn, n int) bool {
	lim := m.cfg.Limits.MaxToolCalls
	if lim <= 0 || t.calls+n <= lim {
		return false
	}
	current := t.loopCalls + n
	if !m.inLoop() || current <= lim {
		if packLimitsWin(t) {
			return false
		}
		current = t.calls + n
	}
	m.limitReached(t, LimitTurnToolCalls, current, lim,
		fmt.Sprintf("the host allows %d tool calls per user turn and the model asked for %d in state %q", lim, current, m.st.CurrentState))
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
