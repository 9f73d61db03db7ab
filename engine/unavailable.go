package engine

import (
	"errors"

	"github.com/wop-dev/wop/protocol"
)

// ErrUnavailable is what a Runtime's Model returns (wrapped) when the model could not
// be reached for as long as the host was willing to wait: the turn ends there without
// ending the run (see unavailable).
var ErrUnavailable = errors.New("engine: the model is unavailable")

// TurnError says why a turn ended early without ending the run.
type TurnError struct {
	// Code is a code of package protocol (model_unavailable), from the Runtime error
	// when it carries one.
	Code    string `json:"code"`
	Message string `json:"message"`
}

// unavailable ends the turn when err, the error of a model round, wraps ErrUnavailable:
// what the turn did so far stays (its messages, transitions and reply segments), the
// failed round adds nothing, and the run waits in its current state for the next user
// message, which starts a turn that tries again (its model round reads the unanswered
// message too).
func (m *Machine) unavailable(t *turn, err error) bool {
	if !errors.Is(err, ErrUnavailable) {
		return false
	}
	m.st.Status = m.idleStatus()
	t.res.TurnError = &TurnError{Code: errorCode(err, protocol.CodeModelUnavailable), Message: err.Error()}
	return true
}
