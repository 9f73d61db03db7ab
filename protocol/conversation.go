package protocol

import "encoding/json"

// Turn is one conversation turn (schemas/conversation-turn.schema.json). Agent turns
// carry SpeakerID. Content is any JSON value; agents reply with {"text", "state"}.
type Turn struct {
	MessageID string          `json:"messageId"`
	From      string          `json:"from"`
	To        string          `json:"to,omitempty"`
	GroupID   string          `json:"groupId,omitempty"`
	Content   json.RawMessage `json:"content"`
	Ts        int64           `json:"ts"`
	Role      string          `json:"role"`
	TurnIndex int             `json:"turnIndex"`
	SpeakerID string          `json:"speakerId,omitempty"`
	// Parts is the turn's content as A2A v1.0.1 Parts (RFC 0205 §B), beside Content.
	Parts []Part `json:"parts,omitempty"`
	// Agent is the agent reference of an agent turn (RFC 0002 AgentRef), with the
	// model that answered it (RFC 0109; identifiers only).
	Agent *TurnAgent `json:"agent,omitempty"`
}

// Part is one A2A v1.0.1 Part: exactly one of text, raw (base64), url or data.
type Part struct {
	Text      string          `json:"text,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TurnAgent is a turn's agent reference.
type TurnAgent struct {
	AgentID      string     `json:"agentId,omitempty"`
	AgentSharing string     `json:"agentSharing,omitempty"`
	MemoryRef    string     `json:"memoryRef,omitempty"`
	Model        *TurnModel `json:"model,omitempty"`
}

// TurnModel is the model that answered a turn: its provider and model identifiers,
// never a prompt, a completion, an endpoint or a credential.
type TurnModel struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// Turn roles.
const (
	RoleUser   = "user"
	RoleAgent  = "agent"
	RoleSystem = "system"
)

// Participant is one member of a conversation's speaking roster (RFC 0101).
type Participant struct {
	AgentID string `json:"agentId"`
	Name    string `json:"name,omitempty"`
}
