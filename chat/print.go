package chat

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/wop-dev/wop/protocol"
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
	MessageID string          `json:"messageId"`
	Role      string          `json:"role"`
	From      string          `json:"from"`
	SpeakerID string          `json:"speakerId"`
	Content   json.RawMessage `json:"content"`
}

// show draws one event if the user should see it, and reports whether it ends the run
// and with which exit code.
func (s *session) show(ctx context.Context, ev event) (exit int, terminal bool) {
	var re runEvent
	if err := json.Unmarshal(ev.data, &re); err != nil {
		s.v.emit(kindError, "", fmt.Sprintf("wop chat: skipped a malformed event (id %s): %v", ev.id, err))
		return ExitOK, false
	}
	typ := re.Type
	if typ == "" {
		typ = ev.typ
	}
	if re.Type == "" {
		re.Type = typ
	}
	if typ != protocol.EvMessageChunk {
		// A durable event. A turn's own event comes after every reply held back; any
		// other may release the replies of later rounds once it is shown.
		if turnEvent(typ) {
			s.releaseHeld()
		}
		defer s.sawDurable(re)
	}
	defer func() {
		if terminal {
			s.mu.Lock()
			s.ended, s.endCode = true, exit
			s.mu.Unlock()
		}
	}()
	switch typ {
	case protocol.EvConversationOpened:
		var p struct {
			InitialTurn turn `json:"initialTurn"`
		}
		// The opening is no reply: an indicator running for a first message stays.
		if json.Unmarshal(re.Payload, &p) == nil {
			if text := contentText(p.InitialTurn.Content); text != "" {
				s.v.emit(kindSystem, "", "· "+text)
			}
		}
	case protocol.EvConversationExchanged:
		var p struct {
			Turn turn `json:"turn"`
		}
		if json.Unmarshal(re.Payload, &p) == nil {
			s.showTurn(p.Turn)
		}
	case protocol.EvConversationClosed:
		var p struct {
			FinalTurn turn `json:"finalTurn"`
		}
		_ = json.Unmarshal(re.Payload, &p)
		if contentText(p.FinalTurn.Content) == "" {
			p.FinalTurn = turn{Role: "system", Content: json.RawMessage(`{"text":"The conversation is closed."}`)}
		}
		s.showTurn(p.FinalTurn)
	case protocol.EvMessageChunk:
		s.showChunk(re)
	case protocol.EvAgentHandoff:
		s.showHandoff(re.Payload)
	case protocol.EvAgentToolCalled:
		s.showToolCall(re.Payload)
	case protocol.EvAgentToolReturned:
		s.showToolResult(re.Payload)
	case protocol.EvInterruptRequested:
		s.showWait(ctx, re)
	case protocol.EvRunCompleted:
		s.v.stopThinking()
		s.v.emit(kindSystem, "", fmt.Sprintf("· Run %s completed.", s.runID))
		return ExitOK, true
	case protocol.EvRunFailed:
		var p struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(re.Payload, &p)
		s.v.stopThinking()
		s.mu.Lock()
		said := p.Error.Message != "" && strings.Contains(s.lastSystem, p.Error.Message)
		s.mu.Unlock()
		if said {
			s.v.emit(kindSystem, "", fmt.Sprintf("· Run %s failed (%s).", s.runID, cmp.Or(p.Error.Code, "unknown")))
		} else {
			s.v.emit(kindSystem, "", fmt.Sprintf("· Run %s failed: %s (%s).", s.runID, cmp.Or(p.Error.Message, "unknown"), cmp.Or(p.Error.Code, "unknown")))
		}
		return ExitFailed, true
	case protocol.EvRunCancelled:
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(re.Payload, &p)
		s.v.stopThinking()
		if p.Reason != "" {
			s.v.emit(kindSystem, "", fmt.Sprintf("· Run %s cancelled: %s.", s.runID, p.Reason))
		} else {
			s.v.emit(kindSystem, "", fmt.Sprintf("· Run %s cancelled.", s.runID))
		}
		return ExitFailed, true
	}
	return ExitOK, false
}

// showTurn draws an agent turn as "speaker: text", a user turn as "you: text" (unless
// this chat sent it, so the terminal shows it already), and a system turn as "· text".
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
		s.v.stopThinking()
		s.mu.Lock()
		streamed := s.streamed
		s.streamed = streamedReply{}
		s.mu.Unlock()
		// A reply the terminal shows already as it streamed is not printed again.
		if !streamed.is(t.MessageID, who, text) {
			s.v.emit(kindAgent, who, text)
		}
		s.notifyReply()
	case "user":
		if !s.ownEcho(text) {
			s.v.emit(kindUser, "you", text)
		}
	case "system":
		s.mu.Lock()
		s.lastSystem = text
		s.mu.Unlock()
		s.v.stopThinking()
		s.v.emit(kindSystem, "", "· "+text)
		s.notifyReply()
	}
}

// showHandoff draws a state change: "── state a → b (Event)".
func (s *session) showHandoff(raw json.RawMessage) {
	var p struct {
		FromState string `json:"fromState"`
		ToState   string `json:"toState"`
		Event     string `json:"event"`
		Origin    string `json:"origin"`
	}
	if json.Unmarshal(raw, &p) != nil || p.ToState == "" {
		return
	}
	line := "── state " + p.FromState + " → " + p.ToState
	if p.Event != "" {
		line += " (" + p.Event
		if p.Origin == "external" {
			line += ", external"
		}
		line += ")"
	}
	s.v.emit(kindState, "", line)
}

// System tools of a pack: the transition shows as its state change, an artifact as
// one short line.
const (
	toolTransition  = "workflow__transition"
	toolSetArtifact = "workflow__set_artifact"
)

// showToolCall draws a tool call compactly: "  ⚙ name(arg: value, …)".
func (s *session) showToolCall(raw json.RawMessage) {
	var p struct {
		ToolName string          `json:"toolName"`
		Inputs   json.RawMessage `json:"inputs"`
	}
	if json.Unmarshal(raw, &p) != nil || p.ToolName == "" || p.ToolName == toolTransition {
		return
	}
	if p.ToolName == toolSetArtifact {
		var a struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(p.Inputs, &a)
		s.v.emit(kindTool, "", "  ⚙ artifact "+a.Name+" set")
		return
	}
	s.v.emit(kindTool, "", "  ⚙ "+p.ToolName+"("+compactArgs(p.Inputs, 70)+")")
}

// showToolResult draws only the tool calls that failed.
func (s *session) showToolResult(raw json.RawMessage) {
	var p struct {
		ToolName string          `json:"toolName"`
		Status   string          `json:"status"`
		Outcome  json.RawMessage `json:"outcome"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Status != "error" || p.ToolName == toolTransition {
		return
	}
	s.v.emit(kindTool, "", "  ⚙ "+p.ToolName+" failed: "+clip(contentText(p.Outcome), 100))
}

// showWait draws an interrupt the chat does not answer (an external event, an
// approval) while it is pending, with the call that resolves it. Conversation
// interrupts are the chat's own; past interrupts (on reattach) are left out.
func (s *session) showWait(ctx context.Context, re runEvent) {
	var p struct {
		Kind string `json:"kind"`
		Key  string `json:"key"`
	}
	if json.Unmarshal(re.Payload, &p) != nil || p.Kind == "" || strings.HasPrefix(p.Kind, "conversation") {
		return
	}
	snap, err := s.readSnapshot(ctx)
	if err != nil {
		return
	}
	for _, it := range snap.Interrupts {
		if it.Key != p.Key {
			continue
		}
		body := `{"resumeValue":{…}}`
		if evs := it.events(); len(evs) > 0 {
			body = fmt.Sprintf(`{"resumeValue":{"event":%q,"context":"…"}}`, evs[0])
		}
		s.v.stopThinking()
		if tool, args, approvers, ok := it.toolCall(); ok {
			who := "anyone who may resolve interrupts"
			if len(approvers) > 0 {
				who = strings.Join(approvers, ", ")
			}
			expires := ""
			if it.ExpiresAt != "" {
				expires = ", until " + it.ExpiresAt
			}
			s.v.emit(kindWait, "", fmt.Sprintf("⏸ %s(%s) waits for approval by %s%s. Decide through the API, for example:\n"+
				"    curl -s -X POST %s/v1/runs/%s/interrupts/%s -H \"Authorization: Bearer $WOP_API_KEY\" -H 'Content-Type: application/json' -d '{\"resumeValue\":{\"action\":\"accept\"}}'\n"+
				"  (or {\"action\":\"reject\",\"feedback\":\"why\"}, or {\"action\":\"edit-accept\",\"editedArtifactData\":{\"arguments\":{…}}}). Messages are not sent until it is decided.",
				tool, compactArgs(args, 70), who, expires, s.c.base, s.runID, it.NodeID))
			return
		}
		s.v.emit(kindWait, "", fmt.Sprintf("⏸ The run waits for %s at node %s. It is resolved through the API, for example:\n"+
			"    curl -s -X POST %s/v1/runs/%s/interrupts/%s -H \"Authorization: Bearer $WOP_API_KEY\" -H 'Content-Type: application/json' -d '%s'\n"+
			"  Lines you type are not sent meanwhile; start one with /say to message the agent.",
			describeWait(it), it.NodeID, s.c.base, s.runID, it.NodeID, body))
		return
	}
}

// compactArgs renders a JSON object of arguments as "k: v, k: v", cut at n characters.
func compactArgs(raw json.RawMessage, n int) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return clip(string(raw), n)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := string(obj[k])
		var str string
		if json.Unmarshal(obj[k], &str) == nil {
			v = str
		}
		parts = append(parts, k+": "+strings.ReplaceAll(v, "\n", " "))
	}
	return clip(strings.Join(parts, ", "), n)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// notifyReply records that a reply was shown, for a chat waiting on one: a reply counts
// once every message this chat sent is in the conversation, so it answers the last one.
func (s *session) notifyReply() {
	s.mu.Lock()
	if len(s.sent) == 0 {
		s.answered = s.sends
	}
	s.mu.Unlock()
	s.v.expectInput(true)
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
