package activities

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// TranscriptPageRequest asks one execution of a run for messages [From, To) of a
// transcript. The answer holds the newest of them that the execution has, at most
// MaxBytes of them (DefaultTranscriptPageBytes when 0), and at least one.
type TranscriptPageRequest struct {
	Key      string `json:"key"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	MaxBytes int    `json:"maxBytes,omitempty"`
}

// TranscriptPage is one execution's answer to a TranscriptPageRequest: Messages are
// [Start, Start+len(Messages)) of the transcript. The execution holds messages [Base,
// Len); those before Base are held by earlier executions of the run, newest first in
// Earlier (Earlier[0] is the execution this one continued).
type TranscriptPage struct {
	Messages []convo.Message `json:"messages"`
	Start    int             `json:"start"`
	Base     int             `json:"base"`
	Len      int             `json:"len"`
	Earlier  []Segment       `json:"earlier,omitempty"`
}

// DefaultTranscriptPageBytes bounds a TranscriptPage when its request names no bound.
const DefaultTranscriptPageBytes = 1 << 20

// Segment is a closed execution of a run that continued as new: its Temporal run id
// and the run events it holds, [FirstSequence, LastSequence]. A run keeps the newest
// of them in its state (workflows.MaxSegmentLinks) and a sparse index of older ones,
// and every execution's start event carries its own, so any earlier execution is
// found in a few reads of start events.
type Segment struct {
	RunID         string `json:"runId"`
	FirstSequence int64  `json:"firstSequence"`
	LastSequence  int64  `json:"lastSequence"`
	// Recorded: the execution wrote every event of its range into its own Temporal
	// history (workflows.EventsRecord markers), so a reader decodes them from the
	// history instead of querying the closed execution, which makes a worker replay it.
	Recorded bool `json:"recorded,omitempty"`
}

// applyOverride returns in changed by the override o: System replaced, or wrapped by Prefix and
// Suffix; each parameter the override sets replaces the prompt's.
func applyOverride(o convo.ModelOverride, in convo.ModelRoundInput) (convo.ModelRoundInput, error) {
	if o.System != "" {
		in.System = o.System
	} else {
		in.System = o.Prefix + in.System + o.Suffix
	}
	if len(o.Parameters) == 0 {
		return in, nil
	}
	merged := map[string]json.RawMessage{}
	if len(in.Parameters) > 0 {
		if err := json.Unmarshal(in.Parameters, &merged); err != nil {
			return in, fmt.Errorf("prompt parameters: %w", err)
		}
	}
	var over map[string]json.RawMessage
	if err := json.Unmarshal(o.Parameters, &over); err != nil {
		return in, fmt.Errorf("override parameters: %w", err)
	}
	maps.Copy(merged, over)
	b, err := json.Marshal(merged)
	if err != nil {
		return in, err
	}
	in.Parameters = b
	return in, nil
}

// modelNamer is a provider that knows the model it calls, so a round can apply the
// prompt's model_overrides entry for it.
type modelNamer interface{ ModelName() string }

// Error types of non-retryable application errors raised by activities. Workflows
// branch on them with errors.As(*temporal.ApplicationError).Type().
const (
	ErrTypeBadRequest      = "ModelBadRequest"     // 400 from the provider, malformed request
	ErrTypeAuth            = "ModelAuthentication" // 401/403: invalid or missing key
	ErrTypeMockMismatch    = "MockScriptMismatch"  // expect_state (or another scripted check) failed
	ErrTypeMockExhausted   = "MockScriptExhausted" // script ran out with fail_when_exhausted
	ErrTypeMockFailure     = "MockScriptedFailure" // the script asked this round to fail
	ErrTypeUnknownProvider = "UnknownProvider"     // no provider configured for the key
	ErrTypeUnknownTool     = "UnknownTool"         // no executor for the tool
	ErrTypeBadResponse     = "ModelMalformedResponse"
)

// Error types of retryable application errors raised by activities. They are retried
// by the activity's RetryPolicy; NextRetryDelay honours the provider's Retry-After.
const (
	ErrTypeRateLimited = "ModelRateLimited" // 429 from the provider
	ErrTypeUnavailable = "ModelUnavailable" // 5xx, 408, 409, or the provider unreachable
)

// errorCodes maps the ErrType* application error types to the OpenWOP error codes
// (snake_case) that a run failed by them reports in error.code. The types stay what
// they are inside Temporal (retry policies name them); the run's error speaks OpenWOP.
var errorCodes = map[string]string{
	ErrTypeBadRequest:      protocol.CodeModelBadRequest,
	ErrTypeAuth:            protocol.CodeModelAuthentication,
	ErrTypeMockMismatch:    protocol.CodeMockScriptMismatch,
	ErrTypeMockExhausted:   protocol.CodeMockScriptExhausted,
	ErrTypeMockFailure:     protocol.CodeMockScriptedFailure,
	ErrTypeUnknownProvider: protocol.CodeUnknownProvider,
	ErrTypeUnknownTool:     protocol.CodeUnknownTool,
	ErrTypeBadResponse:     protocol.CodeModelMalformedResponse,
	ErrTypeRateLimited:     protocol.CodeModelRateLimited,
	ErrTypeUnavailable:     protocol.CodeModelUnavailable,
}

// ErrorCode returns the OpenWOP error code of an activity error type (one of the
// ErrType* constants), or "" for a type it does not know.
func ErrorCode(errType string) string { return errorCodes[errType] }
