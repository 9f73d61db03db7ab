package workflows

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wop-dev/wop/protocol"
)

// conversationAction is a validated conversation resolve.
type conversationAction struct {
	Op      string          `json:"op"` // exchange | close
	Turn    *protocol.Turn  `json:"turn,omitempty"`
	Outcome json.RawMessage `json:"outcome,omitempty"`
}

// checkConversationResolve validates a resolve of the conversation interrupt: both
// resume shapes, the turn rules, the roster, the content schema, duplicates. legacy
// checks client turns by the rules before GateRequestIntegrity.
func (r *runner) checkConversationResolve(it *interrupt, req ResolveRequest, legacy bool) (json.RawMessage, string, ResolveCheck) {
	c := it.conv
	bad := func(format string, args ...any) (json.RawMessage, string, ResolveCheck) {
		return nil, "", ResolveCheck{Code: protocol.CodeValidation, Message: fmt.Sprintf(format, args...)}
	}
	if c.Closed {
		return bad("conversation %s is closed", c.ID)
	}
	if req.AtTurn != nil && *req.AtTurn != c.NextTurnIndex() {
		return nil, "", ResolveCheck{Code: protocol.CodeInterruptResolved,
			Message: fmt.Sprintf("this request was issued for turn %d of conversation %s, which is now at turn %d; a signed token carries one exchange, read the run for a fresh one", *req.AtTurn, c.ID, c.NextTurnIndex())}
	}
	var cr ConversationResolve
	var probe map[string]json.RawMessage
	isResolve := json.Unmarshal(req.ResumeValue, &probe) == nil && probe["operation"] != nil
	act := conversationAction{Op: "exchange"}
	if isResolve {
		if err := json.Unmarshal(req.ResumeValue, &cr); err != nil {
			return bad("resumeValue is not a ConversationResolve: %v", err)
		}
		switch cr.Operation {
		case "exchange":
			if len(cr.Turn) == 0 {
				return bad("an exchange needs a turn")
			}
		case "close":
			act.Op = "close"
			act.Outcome = cr.Outcome
		default:
			return bad("operation must be exchange or close, got %q", cr.Operation)
		}
		if len(cr.Turn) > 0 {
			t, check := r.checkClientTurn(c, cr.Turn, req, legacy)
			if !check.OK {
				return nil, "", check
			}
			act.Turn = t
		}
	} else if r.in.TurnShape >= 1 && isBareTurn(probe) {
		// A bare turn ({role, speakerId, content}, as the v2 suite posts one) is the
		// turn itself (roster.go), not a reply whose content it would be.
		t, check := r.checkClientTurn(c, req.ResumeValue, req, legacy)
		if !check.OK {
			return nil, "", check
		}
		act.Turn = t
	} else {
		if len(req.ResumeValue) == 0 {
			return bad("resumeValue is required")
		}
		if err := r.validateAgainst(c.Schema, req.ResumeValue); err != nil {
			return bad("reply does not match the conversation's schema: %v", err)
		}
		idx := c.NextTurnIndex()
		t := protocol.Turn{MessageID: c.messageID(idx, protocol.RoleUser), From: protocol.RoleUser, Content: req.ResumeValue, Ts: req.ReceivedAtMs, Role: protocol.RoleUser, TurnIndex: idx}
		act.Turn = &t
	}
	status := protocol.StatusWaitingApproval
	if act.Op == "close" {
		status = protocol.StatusRunning
	}
	return mustJSON(act), status, ResolveCheck{OK: true}
}

// maxTurnField is the turn schema's maxLength of messageId, from, to, groupId and
// speakerId.
const maxTurnField = 256

// checkClientTurn validates a client-supplied turn and completes it (turnIndex,
// messageId, ts). Callers write user turns; agent turns only in a conversation with a
// roster, as one of its participants other than the conversation's own agent; system
// turns never (they are the host's). A messageId in the host's namespace
// (<conversationId>:…) must be exactly the id the host gives this turn, so no caller
// squats the id of a later host turn. legacy applies the rules before GateRequestIntegrity:
// any role, any from, unbounded fields.
func (r *runner) checkClientTurn(c *Conversation, raw json.RawMessage, req ResolveRequest, legacy bool) (*protocol.Turn, ResolveCheck) {
	bad := func(field, format string, args ...any) (*protocol.Turn, ResolveCheck) {
		check := ResolveCheck{Code: protocol.CodeValidation, Message: fmt.Sprintf(format, args...)}
		if field != "" {
			check.Details = mustJSON(map[string]string{"field": field})
		}
		return nil, check
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return bad("turn", "turn must be a JSON object: %v", err)
	}
	var t protocol.Turn
	if err := json.Unmarshal(raw, &t); err != nil {
		return bad("turn", "turn is malformed: %v", err)
	}
	if _, ok := fields["content"]; !ok {
		return bad("turn.content", "turn.content is required")
	}
	switch t.Role {
	case protocol.RoleUser, protocol.RoleAgent, protocol.RoleSystem:
	case "":
		t.Role = protocol.RoleUser
	default:
		return bad("turn.role", "turn.role must be user, agent or system, got %q", t.Role)
	}
	if !legacy {
		for _, f := range []struct{ name, value string }{
			{"turn.messageId", t.MessageID}, {"turn.from", t.From}, {"turn.to", t.To}, {"turn.groupId", t.GroupID}, {"turn.speakerId", t.SpeakerID},
		} {
			if len(f.value) > maxTurnField {
				return bad(f.name, "%s is %d bytes long; the turn schema allows at most %d", f.name, len(f.value), maxTurnField)
			}
		}
		if _, ok := fields["parts"]; ok {
			if why := checkParts(t.Parts); why != "" {
				return bad("turn.parts", "turn.parts %s", why)
			}
		}
		if _, ok := fields["messageId"]; ok && t.MessageID == "" {
			return bad("turn.messageId", "turn.messageId must not be empty; omit it and the host assigns one")
		}
		switch t.Role {
		case protocol.RoleSystem:
			return bad("turn.role", "system turns are the host's; callers write user turns")
		case protocol.RoleAgent:
			if len(c.Participants) == 0 {
				return bad("turn.role", "agent turns are the host's: conversation %s has no roster of participants, so callers write user turns", c.ID)
			}
			if c.isHostAgent(t.SpeakerID) || c.isHostAgent(t.From) {
				return bad("turn.speakerId", "%q is the conversation's own agent; only the host speaks for it", c.AgentID)
			}
		case protocol.RoleUser:
			if t.From != "" && t.From != protocol.RoleUser && (!c.inRoster(t.From) || c.isHostAgent(t.From)) {
				return bad("turn.from", "turn.from of a user turn is \"user\" (or a participant of the conversation's roster), got %q", t.From)
			}
		}
	}
	if t.From == "" {
		if t.Role == protocol.RoleAgent && legacy {
			return bad("turn.from", "turn.from is required on agent turns")
		}
		t.From = cmp.Or(t.SpeakerID, protocol.RoleUser)
		if legacy {
			t.From = cmp.Or(req.ResolvedBy, t.Role)
		}
	}
	if t.Role == protocol.RoleAgent {
		if t.SpeakerID == "" {
			return bad("turn.speakerId", "turn.speakerId is required on agent turns")
		}
		if len(c.Participants) > 0 && !c.inRoster(t.SpeakerID) {
			if r.in.TurnShape >= 1 { // RFC 0239's code (roster.go)
				return nil, speakerNotParticipant(c, t.SpeakerID)
			}
			return bad("turn.speakerId", "speaker %q is not a participant of conversation %s", t.SpeakerID, c.ID)
		}
		if !legacy && t.From != t.SpeakerID {
			return bad("turn.from", "turn.from of an agent turn is its speaker %q, got %q", t.SpeakerID, t.From)
		}
	}
	idx := c.NextTurnIndex()
	if _, ok := fields["turnIndex"]; ok && t.TurnIndex != idx {
		if t.MessageID != "" && c.hasMessage(t.MessageID) {
			return nil, ResolveCheck{Code: protocol.CodeInterruptResolved, Message: fmt.Sprintf("turn %s is already recorded", t.MessageID)}
		}
		return bad("turn.turnIndex", "turn.turnIndex must be %d (the next turn), got %d", idx, t.TurnIndex)
	}
	t.TurnIndex = idx
	if t.MessageID == "" {
		t.MessageID = c.messageID(idx, t.Role)
	}
	if c.hasMessage(t.MessageID) {
		return nil, ResolveCheck{Code: protocol.CodeInterruptResolved, Message: fmt.Sprintf("turn %s is already recorded", t.MessageID)}
	}
	if !legacy && strings.HasPrefix(t.MessageID, c.ID+":") && t.MessageID != c.messageID(idx, t.Role) {
		return bad("turn.messageId", "turn.messageId %q is in the host's namespace %s:…; use %q for this turn, an id of your own outside it, or none", t.MessageID, c.ID, c.messageID(idx, t.Role))
	}
	if _, ok := fields["ts"]; !ok {
		t.Ts = req.ReceivedAtMs
	}
	if t.Ts < 0 {
		return bad("turn.ts", "turn.ts must be >= 0")
	}
	if len(t.Content) == 0 {
		t.Content = json.RawMessage("null")
	}
	if err := r.validateAgainst(c.Schema, t.Content); err != nil {
		return bad("turn.content", "turn content does not match the conversation's schema: %v", err)
	}
	return &t, ResolveCheck{OK: true}
}

// isHostAgent reports whether id is one the host speaks as: the conversation's own
// agent (a pack's id and its per-state ids "<packId>:<state>") or the system.
func (c *Conversation) isHostAgent(id string) bool {
	return id == c.AgentID || strings.HasPrefix(id, c.AgentID+":") || id == protocol.RoleSystem
}

// checkAgentResolve validates a resolve of an agent's own interrupt.
func (r *runner) checkAgentResolve(it *interrupt, req ResolveRequest) (json.RawMessage, ResolveCheck) {
	ev, err := parseInjected(req)
	if err == nil {
		if it.Kind == protocol.KindExternalEvent {
			if v, check := r.checkExternal(it, req); !check.OK {
				return v, check
			}
		}
		if a := r.agents[it.NodeID]; a != nil {
			err = a.CheckInject(r.convOf(it.NodeID), ev)
		}
		var refused *RefusedCheck
		if errors.As(err, &refused) {
			return nil, refused.Check
		}
	}
	if err != nil {
		return nil, ResolveCheck{Code: protocol.CodeValidation, Message: err.Error()}
	}
	return req.ResumeValue, ResolveCheck{OK: true}
}

func parseInjected(req ResolveRequest) (InjectedEvent, error) {
	var ev InjectedEvent
	if err := json.Unmarshal(req.ResumeValue, &ev); err != nil || ev.Event == "" {
		return ev, fmt.Errorf(`resumeValue must be {"event": "<name>", "context": …}`)
	}
	ev.Raw = req.ResumeValue
	ev.ResolvedBy = req.ResolvedBy
	return ev, nil
}

// CodeRunStateConflict is the error code of an injected event the agent cannot take
// in its current state (for a pack, a state that does not accept it).
const CodeRunStateConflict = protocol.CodeRunStateConflict

// misroutedEvent refuses an event injection addressed to a conversation's interrupt,
// which is where it lands when the agent raised no event interrupt of its own (a pack
// whose state accepts no injected events): the agent's MisroutedEvent decides. Nil when
// the resolve is no such injection, or for runs that took it as a chat reply
// (legacyEventRouting).
func (r *runner) misroutedEvent(it *interrupt, req ResolveRequest) *ResolveCheck {
	if r.legacyEventRouting || it.conv == nil || it.conv.Closed {
		return nil
	}
	a := r.agents[it.NodeID]
	if a == nil {
		return nil
	}
	check := a.MisroutedEvent(it.conv, req.ResumeValue)
	if check != nil {
		check.misrouted = true
	}
	return check
}
