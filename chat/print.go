package chat

import (
	"encoding/json"
	"strings"
)

// runEvent is the part of an OpenWOP run event document the chat reads.
type runEvent struct {
	Type     string          `json:"type"`
	Sequence int64           `json:"sequence"`
	NodeID   string          `json:"nodeId"`
	Payload  json.RawMessage `json:"payload"`
}

// turn is a conversation turn (conversation-turn.schema.json), as far as it is shown.
type turn struct {
	Role      string          `json:"role"`
	From      string          `json:"from"`
	SpeakerID string          `json:"speakerId"`
	Content   json.RawMessage `json:"content"`
}

// show prints one event if the user should see it, and reports whether it ends the
// run and with which exit code.
func (s *session) show(ev event) (exit int, terminal bool) {
	var re runEvent
	if err := json.Unmarshal(ev.data, &re); err != nil {
		s.errorf("wop chat: skipped a malformed event (id %s): %v\n", ev.id, err)
		return ExitOK, false
	}
	typ := re.Type
	if typ == "" {
		typ = ev.typ
	}
	switch typ {
	case "conversation.opened":
		var p struct {
			InitialTurn turn `json:"initialTurn"`
		}
		if json.Unmarshal(re.Payload, &p) == nil {
			s.showTurn(p.InitialTurn)
		}
	case "conversation.exchanged":
		var p struct {
			Turn turn `json:"turn"`
		}
		if json.Unmarshal(re.Payload, &p) == nil {
			s.showTurn(p.Turn)
		}
	case "conversation.closed":
		var p struct {
			FinalTurn turn `json:"finalTurn"`
		}
		if json.Unmarshal(re.Payload, &p) == nil {
			s.showTurn(p.FinalTurn)
		}
		s.printf("· The conversation is closed.\n")
	case "agent.handoff":
		var p struct {
			FromState string `json:"fromState"`
			ToState   string `json:"toState"`
			Event     string `json:"event"`
			Origin    string `json:"origin"`
		}
		if json.Unmarshal(re.Payload, &p) == nil && p.ToState != "" {
			line := "── state " + p.FromState + " → " + p.ToState
			if p.Event != "" {
				line += " (" + p.Event
				if p.Origin == "external" {
					line += ", external"
				}
				line += ")"
			}
			s.printf("%s\n", line)
		}
	case "interrupt.requested":
		var p struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(re.Payload, &p) == nil && p.Kind != "" && !strings.HasPrefix(p.Kind, "conversation") {
			s.printf("· The run waits for %s at node %s; it is resolved through the API, not here.\n", p.Kind, re.NodeID)
		}
	case "run.completed":
		s.printf("· Run completed.\n")
		return ExitOK, true
	case "run.failed":
		var p struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(re.Payload, &p)
		s.printf("· Run failed: %s (%s).\n", orUnknown(p.Error.Message), orUnknown(p.Error.Code))
		return ExitFailed, true
	case "run.cancelled":
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(re.Payload, &p)
		if p.Reason != "" {
			s.printf("· Run cancelled: %s.\n", p.Reason)
		} else {
			s.printf("· Run cancelled.\n")
		}
		return ExitFailed, true
	}
	return ExitOK, false
}

// showTurn prints an agent turn as "speaker: text" and a system turn as "· text".
// The user's own turns are not echoed.
func (s *session) showTurn(t turn) {
	text := contentText(t.Content)
	if text == "" {
		return
	}
	switch t.Role {
	case "agent":
		who := t.SpeakerID
		if who == "" {
			who = t.From
		}
		if who == "" {
			who = "agent"
		}
		s.printf("%s: %s\n", who, text)
		s.notifyReply()
	case "system":
		s.printf("· %s\n", text)
		s.notifyReply()
	}
}

// notifyReply records that a reply was shown, for a chat waiting on one.
func (s *session) notifyReply() {
	select {
	case s.replied <- struct{}{}:
	default:
	}
}

// contentText returns a turn's text: content.text, a string content, or the content
// as JSON.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var obj struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Text != nil {
		return strings.TrimSpace(*obj.Text)
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return strings.TrimSpace(str)
	}
	return string(raw)
}
