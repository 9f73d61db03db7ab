package convo

import "encoding/json"

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

	// Route is the kind of executor that ran the call (one of the activities' Route*
	// constants). It stays in the worker: it is never encoded (json:"-"), so history
	// never holds it; metrics read it through ToolBinding.
	Route string `json:"-"`
}

// ToolBinding is the kind of executor that ran the call (http, mcp, go, mock, none), or
// "" for a result read back from history. The worker's metrics label tool calls with it.
func (r *ToolCallResult) ToolBinding() string {
	if r == nil {
		return ""
	}
	return r.Route
}
