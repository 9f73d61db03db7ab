package workflows

// How a failed activity reads: its OpenWOP code and a message a person can read.
// Temporal's wrapping (activity type, event ids, worker identity) stays in the
// worker's log. A node's error says it, and so does an agent's turn.

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// ActivityErrorCode is the OpenWOP code of a failed activity: the code of its
// application error type (activities.ErrorCode), activity_timeout, or "" (the engine
// then says model_error or tool_error).
func ActivityErrorCode(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" {
		return activities.ErrorCode(appErr.Type())
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return protocol.CodeActivityTimeout
	}
	return ""
}

// ActivityMessage is the readable part of a failed activity's error: the application
// error's own message, or what timed out.
func ActivityMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Message() != "" {
		return appErr.Message()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		// "StartToClose" reads as "start-to-close".
		var kind strings.Builder
		for i, r := range te.TimeoutType().String() {
			if i > 0 && unicode.IsUpper(r) {
				kind.WriteByte('-')
			}
			kind.WriteRune(unicode.ToLower(r))
		}
		return fmt.Sprintf("it timed out (%s timeout)", kind.String())
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && errors.Unwrap(actErr) != nil {
		return errors.Unwrap(actErr).Error()
	}
	return err.Error()
}
