package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wop-dev/wop/convo"
)

// Typed turns a Go function into a tool executor: the call's arguments object is decoded
// into In (a struct with json tags, or a map), and the returned Out, encoded as JSON, is
// the tool result. Arguments that do not decode into In are an error result the model
// reads. An error made with Fail is an error result too, at once; any other error fails
// the attempt, which Temporal retries as the tool's action_scope and binding allow, and
// after the last attempt the model reads the error's message.
func Typed[In, Out any](fn func(ctx context.Context, args In) (Out, error)) Func {
	return func(ctx context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, error) {
		var args In
		raw := bytes.TrimSpace(in.Args)
		if len(raw) == 0 {
			raw = []byte(`{}`)
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			return errorResult(map[string]string{"error": fmt.Sprintf("the arguments of %s do not fit its parameters: %v", in.Tool, err)}), nil
		}
		out, err := fn(ctx, args)
		var fail *failure
		if errors.As(err, &fail) {
			return errorResult(map[string]string{"error": fail.msg}), nil
		}
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode the result of %s: %w", in.Tool, err)
		}
		return &convo.ToolCallResult{Content: b}, nil
	}
}

// Fail returns an error that a Typed function returns to give the model an error
// result it can act on ("no such account"), without retrying the call.
func Fail(format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...)}
}

type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }
