package convo

import "encoding/json"

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
	// Signature is the provider's opaque token for the call (Gemini's thought
	// signature, base64), which the provider needs back with the call in later rounds;
	// empty for every other provider.
	Signature string `json:"signature,omitempty"`
}

// ToolSpec is a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema object
}

// Usage is the token usage of one round.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// MessageBytes is the size a message counts for in pages and budgets: its texts, tool
// calls and a fixed overhead for the encoding.
func MessageBytes(m *Message) int {
	n := 64 + len(m.Role) + len(m.Text) + len(m.ToolCallID) + len(m.Name) + len(m.State)
	for _, tc := range m.ToolCalls {
		n += 32 + len(tc.ID) + len(tc.Name) + len(tc.Args)
	}
	return n
}

// MessagesSize estimates the memory messages hold (MessageBytes and the slice entry).
func MessagesSize(msgs []Message) int {
	n := 0
	for i := range msgs {
		n += 64 + MessageBytes(&msgs[i])
	}
	return n
}
