package engine

import "errors"

// ErrStopped is what a Runtime's Model or Tools returns (wrapped or not) when the host
// stopped the call in flight, e.g. because the run is being cancelled.
var ErrStopped = errors.New("engine: the host stopped the turn")

// stopped ends the turn with status stopped when the host asks for it (Runtime.Stopped)
// or when err, the error of the effect just run, wraps ErrStopped. A stopped turn
// keeps the state as it was, adds no message, emits nothing, and closes the run:
// the host is ending it.
func (m *Machine) stopped(t *turn, err error) bool {
	if !errors.Is(err, ErrStopped) && !t.rt.Stopped() {
		return false
	}
	m.st.Status = StatusStopped
	m.st.ErrorCode = ""
	m.st.ErrorMessage = ""
	m.st.TerminalReason = "the host stopped the run during a turn"
	return true
}
