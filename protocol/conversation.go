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
