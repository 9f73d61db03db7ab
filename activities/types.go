package activities

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Message is one provider-neutral transcript entry (promptpack-workflow.md §5.3).
type Message struct {
	Role       string     `json:"role"` // system | user | assistant | tool
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant messages
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool results
	Name       string     `json:"name,omitempty"`         // tool name, on tool results
	IsError    bool       `json:"is_error,omitempty"`     // tool results
	State      string     `json:"state,omitempty"`        // workflow state that produced the message
}

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ToolCall is one call the model asked for.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"` // a JSON object
}

// ToolSpec is a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema object
}

// TranscriptRef points at the messages a model round must see, without carrying them
// all: the activity reads them from the run (a query on the run's workflow), so the
// history of a run grows by a constant amount per round instead of by the whole
// transcript. Only the messages added since the run's previous round travel (Tail), so a
// worker that keeps the transcript from earlier rounds (TranscriptCache) needs no query.
type TranscriptRef struct {
	RunID string `json:"runId"` // workflow id
	// Key identifies one transcript of the run (a conversation, or one state's context
	// when a transient state resets it).
	Key string `json:"key"`
	// The round sees messages [From, To) of that transcript. From moves forward when a
	// transient state resets its context; messages are never rewritten.
	From int `json:"from"`
	To   int `json:"to"`
	// Tail is messages [To-len(Tail), To) of the transcript (TranscriptTail), and Digest
	// the TranscriptDigest of messages [0, To). Rounds scheduled before they existed, and
	// queries, carry neither.
	Tail   []Message `json:"tail,omitempty"`
	Digest string    `json:"digest,omitempty"`
	// MaxBytes and MaxMessages, when > 0, bound what a TranscriptSource returns: the
	// newest messages of [From, To) within the bounds, starting at a user message
	// (TranscriptBudget). The ModelRound activity sets them; the workflow does not.
	MaxBytes    int `json:"maxBytes,omitempty"`
	MaxMessages int `json:"maxMessages,omitempty"`
}

// TranscriptQuery is the name of the run workflow's query that answers a TranscriptRef
// with the messages it points at ([]Message), when the execution it reaches holds them
// all. Readers use TranscriptPageQuery, which also reaches earlier executions.
const TranscriptQuery = "openwop.transcript"

// TranscriptPageQuery is the name of the run workflow's query that answers a
// TranscriptPageRequest with a TranscriptPage. It works on every execution of the run,
// closed ones included (QueryWorkflow with that execution's run id).
const TranscriptPageQuery = "openwop.transcript-page"

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
	Messages []Message `json:"messages"`
	Start    int       `json:"start"`
	Base     int       `json:"base"`
	Len      int       `json:"len"`
	Earlier  []Segment `json:"earlier,omitempty"`
}

// DefaultTranscriptPageBytes bounds a TranscriptPage when its request names no bound.
const DefaultTranscriptPageBytes = 1 << 20

// Segment is a closed execution of a run that continued as new: its Temporal run id
// and the run events it holds, [FirstSequence, LastSequence]. A run keeps the newest
// of them in its state (workflows.MaxSegmentLinks) and every execution answers
// queries, so earlier ones are found through the oldest execution a run knows of.
type Segment struct {
	RunID         string `json:"runId"`
	FirstSequence int64  `json:"firstSequence"`
	LastSequence  int64  `json:"lastSequence"`
}

// ModelRoundInput is the input of the ModelRound activity.
type ModelRoundInput struct {
	RunID    string `json:"runId"`
	PackID   string `json:"packId"`
	PackHash string `json:"packHash"`
	NodeID   string `json:"nodeId"`
	State    string `json:"state"`  // workflow state the round runs in
	Prompt   string `json:"prompt"` // prompt key (prompt_task)
	// Round is the 0-based index of this model round within the run; tool-call ids are
	// built from it (the scripted mock finds its place in the transcript instead).
	Round int `json:"round"`
	// Provider is the logical provider key (RFC 0012/0017), "default" when unset.
	Provider   string          `json:"provider,omitempty"`
	System     string          `json:"system"` // rendered system prompt
	Tools      []ToolSpec      `json:"tools,omitempty"`
	ToolChoice string          `json:"toolChoice,omitempty"` // auto | required | none
	Parameters json.RawMessage `json:"parameters,omitempty"` // packs.Parameters as JSON
	Transcript TranscriptRef   `json:"transcript"`
	// ModelOverrides are the prompt's model_overrides by model name, templates rendered
	// (packs.RenderOverrides). The round applies the one named after its provider's model.
	ModelOverrides map[string]ModelOverride `json:"modelOverrides,omitempty"`
	// MessageID is the conversation message the round's text is for (the agent turn
	// the reply becomes part of); the round's streamed chunks carry it. Rounds scheduled
	// before it existed carry none.
	MessageID string `json:"messageId,omitempty"`
}

// ModelOverride is what a prompt's model_overrides entry changes for one model: a full
// system prompt that replaces System, or a prefix and suffix around it, and parameters
// merged over Parameters (PromptPack §3, model_overrides).
type ModelOverride struct {
	System     string          `json:"system,omitempty"`
	Prefix     string          `json:"prefix,omitempty"`
	Suffix     string          `json:"suffix,omitempty"`
	Parameters json.RawMessage `json:"parameters,omitempty"` // packs.Parameters as JSON
}

// apply returns in changed by the override: System replaced, or wrapped by Prefix and
// Suffix; each parameter the override sets replaces the prompt's.
func (o ModelOverride) apply(in ModelRoundInput) (ModelRoundInput, error) {
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

// Usage is the token usage of one round.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// ModelRoundResult is what one model round produced.
type ModelRoundResult struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	Provider  string     `json:"provider"` // canonical provider id: openai, anthropic, mock, ...
	Model     string     `json:"model"`
	Usage     Usage      `json:"usage"`
	// FinishReason as the provider reported it (stop, tool_calls, length, ...).
	FinishReason string `json:"finishReason,omitempty"`
}

// ToolCallInput is the input of the ToolCall activity.
type ToolCallInput struct {
	RunID    string          `json:"runId"`
	PackID   string          `json:"packId"`
	PackHash string          `json:"packHash"`
	NodeID   string          `json:"nodeId"`
	State    string          `json:"state"`
	Round    int             `json:"round"` // the model round that asked for the call
	CallID   string          `json:"callId"`
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args"`
	// IdempotencyKey is the same for every attempt of this call (ToolIdempotencyKey); an
	// HTTP binding sends it as the Idempotency-Key header. Calls scheduled before it
	// existed carry none; the activity then derives one without the tenant.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// ToolCallResult is the result of one tool call. A tool that fails in a way the model
// should see (bad arguments, a business error) returns IsError with Content describing
// it; infrastructure failures are returned as activity errors and retried.
type ToolCallResult struct {
	Content json.RawMessage `json:"content"`
	IsError bool            `json:"isError,omitempty"`

	// route is the kind of executor that ran the call (a Route* constant). It stays in
	// the worker: metrics read it through ToolBinding, history never holds it.
	route string
}

// ToolBinding is the kind of executor that ran the call (http, mcp, go, mock, none), or
// "" for a result read back from history. The worker's metrics label tool calls with it.
func (r *ToolCallResult) ToolBinding() string {
	if r == nil {
		return ""
	}
	return r.route
}

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
	ErrTypeBadRequest:      "model_bad_request",
	ErrTypeAuth:            "model_authentication",
	ErrTypeMockMismatch:    "mock_script_mismatch",
	ErrTypeMockExhausted:   "mock_script_exhausted",
	ErrTypeMockFailure:     "mock_scripted_failure",
	ErrTypeUnknownProvider: "unknown_provider",
	ErrTypeUnknownTool:     "unknown_tool",
	ErrTypeBadResponse:     "model_malformed_response",
	ErrTypeRateLimited:     "model_rate_limited",
	ErrTypeUnavailable:     "model_unavailable",
}

// ErrorCode returns the OpenWOP error code of an activity error type (one of the
// ErrType* constants), or "" for a type it does not know.
func ErrorCode(errType string) string { return errorCodes[errType] }
