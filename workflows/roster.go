package workflows

// A conversation's roster (RFC 0101; RFC 0239, Draft) at OpenWOP v2, for runs created
// with RunInput.TurnShape 1: conversation.opened carries the gate config's
// participants unchanged (GateConversationRoster); an agent turn whose speakerId is off
// the roster is refused 422 conversation_speaker_not_participant with details.speakerId,
// the turn not taken (the interrupt stays open, nothing is recorded, a later valid turn
// resolves it); a definition whose roster has more than MaxParticipants members is
// refused at create, 422 conversation_roster_exceeded with details.maxParticipants,
// never truncated.

import (
	"encoding/json"
	"fmt"

	"github.com/wop-dev/wop/protocol"
)

// MaxParticipants is the longest roster a conversation takes (discovery's
// multiPartyConversation.maxParticipants).
const MaxParticipants = 32

// RosterExceededError refuses a definition whose conversation roster is too long.
type RosterExceededError struct {
	NodeID string
	Count  int
}

func (e *RosterExceededError) Error() string {
	return fmt.Sprintf("node %q has a roster of %d participants; this host takes at most %d", e.NodeID, e.Count, MaxParticipants)
}

// checkRosters refuses a definition with a conversation roster over MaxParticipants.
func checkRosters(def *Definition) error {
	for _, n := range def.Nodes {
		if n.TypeID != "core.conversationGate" || len(n.Config) == 0 {
			continue
		}
		var cfg struct {
			Participants []json.RawMessage `json:"participants"`
		}
		if json.Unmarshal(n.Config, &cfg) == nil && len(cfg.Participants) > MaxParticipants {
			return &RosterExceededError{NodeID: n.ID, Count: len(cfg.Participants)}
		}
	}
	return nil
}

// turnFields are the keys of a conversation turn (conversation-turn.schema.json).
var turnFields = map[string]bool{"messageId": true, "from": true, "to": true, "groupId": true, "content": true, "ts": true,
	"role": true, "agent": true, "turnIndex": true, "speakerId": true, "parts": true}

// isBareTurn reports whether a resume value (its keys) is a turn sent bare: it has a
// role and a content, and no key a turn does not have.
func isBareTurn(value map[string]json.RawMessage) bool {
	if value["role"] == nil || value["content"] == nil {
		return false
	}
	for k := range value {
		if !turnFields[k] {
			return false
		}
	}
	return true
}

// speakerNotParticipant is the refusal of an agent turn by speaker, who is off c's
// roster.
func speakerNotParticipant(c *Conversation, speaker string) ResolveCheck {
	return ResolveCheck{Code: protocol.CodeConversationSpeakerNotParticipant, Unprocessable: true,
		Message: fmt.Sprintf("speaker %q is not a participant of conversation %s", speaker, c.ID),
		Details: mustJSON(map[string]string{"speakerId": speaker, "field": "turn.speakerId"})}
}
