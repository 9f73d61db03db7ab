package workflows

// This file holds the RFC 0005 conversation machinery and the seam through which an
// agent (core.conversationGate's simple agent, or a PromptPack pack: package
// packagent) takes part in a conversation. The seam is a contract: see
// ConversationAgent.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// ConversationResolve is RFC 0005's resume value for a conversation:
// {"operation":"exchange"|"close","turn":{…},"outcome":…}. A resume value that is not
// such an object is a bare reply: the host builds the user turn from it.
type ConversationResolve struct {
	Operation string          `json:"operation"`
	Turn      json.RawMessage `json:"turn,omitempty"`
	Outcome   json.RawMessage `json:"outcome,omitempty"`
}

// InjectedEvent is a resolve of an agent's own pending interrupt whose resume value
// carries an "event" field (a PromptPack `orchestration: external` state's on_event).
type InjectedEvent struct {
	Event      string          `json:"event"`
	Context    json.RawMessage `json:"context,omitempty"`
	Raw        json.RawMessage `json:"-"` // the whole resume value
	ResolvedBy string          `json:"-"`
}

// Conversation is one RFC 0005 conversation of a node. It keeps its newest turns
// (recentTurns, recentTurnBytes) and counts them all; every turn is in the run's
// conversation.exchanged events. Its agent reads it and asks the host's services
// through its methods (see ConversationAgent).
type Conversation struct {
	ID           string                 `json:"id"`
	NodeID       string                 `json:"nodeId"`
	AgentID      string                 `json:"agentId"`
	Title        string                 `json:"title,omitempty"`
	Channel      string                 `json:"channel"`
	Participants []protocol.Participant `json:"participants,omitempty"`
	Schema       json.RawMessage        `json:"schema,omitempty"`
	// Turns are the newest turns, TurnCount-len(Turns) to TurnCount-1.
	Turns       []protocol.Turn `json:"turns"`
	TurnCount   int             `json:"turnCount,omitempty"`
	Closed      bool            `json:"closed"`
	Outcome     json.RawMessage `json:"outcome,omitempty"`
	TimeoutMs   int64           `json:"timeoutMs,omitempty"`
	TimeoutCode string          `json:"timeoutCode,omitempty"`
	TimeoutText string          `json:"timeoutText,omitempty"`
	LastEventID string          `json:"lastEventId,omitempty"`

	r       *runner
	node    *Node
	it      *interrupt // the conversation's interrupt
	agentIt *interrupt // the agent's own interrupt, if any
}

// Emit appends an arbitrary run event (e.g. agent.toolCalled, agent.handoff,
// provider.usage) on the conversation's node and returns its eventId. typ must be a
// RunEventType of schemas/run-event.schema.json; causation may be "".
func (c *Conversation) Emit(typ string, payload any, causation string) string {
	return c.r.emit(typ, c.NodeID, payload, causation)
}

// SetPackAttributes keeps the WopPackId search attribute and the TagPackState tag current.
func (c *Conversation) SetPackAttributes(packID, state string) {
	c.r.upsertAttributes(c.r.ctx, []temporal.SearchAttributeUpdate{SAPackID.ValueSet(packID)}, tagSet{TagPackState, state})
}

// SetDetails replaces the workflow's current details (Temporal UI) with text; an
// empty text restores the host's description of the pending interrupts.
func (c *Conversation) SetDetails(text string) {
	if text == "" {
		c.r.describePending()
		return
	}
	c.r.setDetails(text)
}

// Input is the run's input (definition, packs, pack hashes, inputs, owner).
func (c *Conversation) Input() *RunInput { return &c.r.in }

// Node is the conversation's node.
func (c *Conversation) Node() *Node { return c.node }

// Now is the workflow clock in ms since the epoch.
func (c *Conversation) Now() int64 { return workflow.Now(c.r.ctx).UnixMilli() }

// Replaying reports whether the run is a fork replay.
func (c *Conversation) Replaying() bool { return c.r.in.Fork != nil }

// SourceEvents returns the source run's events of this node on a fork replay (nil
// otherwise), so an agent can reuse recorded results (model replies, tool results).
func (c *Conversation) SourceEvents() []Event {
	if c.r.in.Fork == nil {
		return nil
	}
	var out []Event
	for _, e := range c.r.in.Fork.Events {
		if e.NodeID == c.NodeID {
			out = append(out, e)
		}
	}
	return out
}

// NextTurnIndex is the index the next turn gets.
func (c *Conversation) NextTurnIndex() int { return c.TurnCount }

// The newest turns a conversation keeps (the snapshot's channel and the carried
// state): at most recentTurns of them, and at most recentTurnBytes of content, but
// always the newest one.
const (
	recentTurns     = 20
	recentTurnBytes = 256 << 10
)

// appendTurn adds a turn to the conversation's newest turns and counts it.
func (c *Conversation) appendTurn(t protocol.Turn) {
	c.Turns = append(c.Turns, t)
	c.TurnCount++
	c.trimTurns()
}

// trimTurns drops the oldest kept turns beyond the bounds.
func (c *Conversation) trimTurns() {
	keep, size := 0, 0
	for i := len(c.Turns) - 1; i >= 0; i-- {
		size += len(c.Turns[i].Content) + len(c.Turns[i].MessageID) + 128
		if keep > 0 && (keep >= recentTurns || size > recentTurnBytes) {
			break
		}
		keep++
	}
	if keep < len(c.Turns) {
		c.Turns = append([]protocol.Turn(nil), c.Turns[len(c.Turns)-keep:]...)
	}
}

// restored completes a conversation decoded from a carried state: the earlier shape
// (0) carried every turn and no count.
func (c *Conversation) restored(shape int) {
	if c.Turns == nil {
		c.Turns = []protocol.Turn{}
	}
	if shape == 0 {
		c.TurnCount = len(c.Turns)
		c.trimTurns()
	}
}

var agentIDPattern = regexp.MustCompile(`^[A-Za-z0-9._~:-]{1,128}$`)

func (c *Conversation) messageID(index int, role string) string {
	return fmt.Sprintf("%s:%d:%s", c.ID, index, role)
}

// hasMessage reports whether a turn with messageId id is recorded: one of the newest
// turns, or an id of the host's form ("<conversationId>:<turnIndex>:<role>") naming an
// index already taken. A client-chosen messageId of an older turn is not remembered.
func (c *Conversation) hasMessage(id string) bool {
	for _, t := range c.Turns {
		if t.MessageID == id {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(id, c.ID+":"); ok {
		if idx, role, ok := strings.Cut(rest, ":"); ok && (role == protocol.RoleUser || role == protocol.RoleAgent || role == protocol.RoleSystem) {
			if n, err := strconv.Atoi(idx); err == nil && n >= 0 && n < c.TurnCount {
				return true
			}
		}
	}
	return false
}

func (c *Conversation) inRoster(id string) bool {
	for _, p := range c.Participants {
		if p.AgentID == id {
			return true
		}
	}
	return false
}

// record appends a turn and its event.
func (c *Conversation) record(t protocol.Turn) {
	c.r.countTurn(c.Turns, t)
	c.appendTurn(t)
	c.LastEventID = c.r.emit(protocol.EvConversationExchanged, c.NodeID, protocol.ConversationExchanged{
		ConversationID: c.ID, TurnIndex: t.TurnIndex, Turn: t,
	}, c.LastEventID)
	c.refreshExchangeData()
}

// refreshExchangeData keeps the pending interrupt's data in the
// conversation.exchange shape with the next turn index.
func (c *Conversation) refreshExchangeData() {
	if c.it == nil {
		return
	}
	d := map[string]any{"conversationId": c.ID, "prompt": "Your message", "turnIndex": c.NextTurnIndex()}
	if len(c.Schema) > 0 {
		d["outcomeSchema"] = c.Schema
	}
	c.it.Kind = protocol.KindConversationExchange
	c.it.Data = mustJSON(d)
}

func (c *Conversation) agentTurn(rep AgentReply) protocol.Turn {
	content := rep.Content
	if len(content) == 0 {
		body := map[string]string{"text": rep.Text}
		if rep.State != "" {
			body["state"] = rep.State
		}
		content = mustJSON(body)
	}
	speaker := cmp.Or(rep.SpeakerID, c.AgentID)
	idx := c.NextTurnIndex()
	t := protocol.Turn{MessageID: c.messageID(idx, protocol.RoleAgent), From: speaker, Content: content, Ts: c.Now(), Role: protocol.RoleAgent, TurnIndex: idx, SpeakerID: speaker}
	c.r.shapeAgentTurn(&t, rep)
	return t
}

func (c *Conversation) systemTurn(text string) protocol.Turn {
	idx := c.NextTurnIndex()
	return protocol.Turn{MessageID: c.messageID(idx, protocol.RoleSystem), From: "system", Content: mustJSON(map[string]string{"text": text}), Ts: c.Now(), Role: protocol.RoleSystem, TurnIndex: idx}
}

// close records the final turn and conversation.closed, then resolves the
// conversation's interrupt (interrupt.resolved → node.resumed).
func (c *Conversation) close(final protocol.Turn, outcome json.RawMessage, req ResolveRequest) {
	if len(outcome) == 0 {
		outcome = json.RawMessage("null")
	}
	c.appendTurn(final)
	c.Closed = true
	c.Outcome = outcome
	c.LastEventID = c.r.emit(protocol.EvConversationClosed, c.NodeID, protocol.ConversationClosed{
		ConversationID: c.ID, TurnIndex: final.TurnIndex, FinalTurn: final, Outcome: outcome,
	}, c.LastEventID)
	if c.agentIt != nil {
		c.r.settle(c.agentIt)
		c.agentIt = nil
	}
	if c.it != nil {
		it := c.it
		c.r.settle(it)
		value := mustJSON(map[string]any{"operation": "close", "outcome": outcome})
		resolved := c.r.emitResolved(it, req, value)
		c.r.emitResumed(it, value, resolved)
		c.it = nil
	}
}

func (r *runner) convOf(nodeID string) *Conversation {
	for i := len(r.convs) - 1; i >= 0; i-- {
		if r.convs[i].NodeID == nodeID {
			return r.convs[i]
		}
	}
	return nil
}

// channels folds the conversations' newest turns through the message reducer
// (idempotent on messageId) into the channel each conversation writes (default
// "conversation"). A long conversation's older turns are in its events; see
// conversationInfos.
func (r *runner) channels() map[string]json.RawMessage {
	if len(r.convs) == 0 {
		return nil
	}
	byName := map[string][]protocol.Turn{}
	var names []string
	seen := map[string]bool{}
	for _, c := range r.convs {
		if _, ok := byName[c.Channel]; !ok {
			names = append(names, c.Channel)
			byName[c.Channel] = []protocol.Turn{}
		}
		for _, t := range c.Turns {
			if seen[c.Channel+"\x00"+t.MessageID] {
				continue
			}
			seen[c.Channel+"\x00"+t.MessageID] = true
			byName[c.Channel] = append(byName[c.Channel], t)
		}
	}
	out := make(map[string]json.RawMessage, len(names))
	for _, n := range names {
		out[n] = mustJSON(byName[n])
	}
	return out
}

// conversationInfos describes each conversation for the snapshot.
func (r *runner) conversationInfos() []ConversationInfo {
	var out []ConversationInfo
	for _, c := range r.convs {
		out = append(out, ConversationInfo{ConversationID: c.ID, NodeID: c.NodeID, Channel: c.Channel,
			TurnCount: c.TurnCount, FirstTurnIndex: c.TurnCount - len(c.Turns), Closed: c.Closed})
	}
	return out
}
