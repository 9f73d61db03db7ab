package workflows

// This file holds the RFC 0005 conversation machinery and the seam through which an
// agent (core.conversationGate's simple agent, or a PromptPack pack in pack*.go) takes
// part in a conversation. The seam is a contract: see conversationAgent.

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
)

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

// ---------------------------------------------------------------------------------
// The agent seam.
// ---------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------
// Host services an agent may use (methods on *conversation).
// ---------------------------------------------------------------------------------

// conversation is one RFC 0005 conversation of a node. It keeps its newest turns
// (recentTurns, recentTurnBytes) and counts them all; every turn is in the run's
// conversation.exchanged events.
type conversation struct {
	ID           string          `json:"id"`
	NodeID       string          `json:"nodeId"`
	AgentID      string          `json:"agentId"`
	Title        string          `json:"title,omitempty"`
	Channel      string          `json:"channel"`
	Participants []Participant   `json:"participants,omitempty"`
	Schema       json.RawMessage `json:"schema,omitempty"`
	// Turns are the newest turns, TurnCount-len(Turns) to TurnCount-1.
	Turns       []Turn          `json:"turns"`
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
func (c *conversation) Emit(typ string, payload any, causation string) string {
	return c.r.emit(typ, c.NodeID, payload, causation)
}

// SetPackAttributes keeps the WopPackId / WopPackState search attributes current.
func (c *conversation) SetPackAttributes(packID, state string) {
	_ = workflow.UpsertTypedSearchAttributes(c.r.ctx, SAPackID.ValueSet(packID), SAPackState.ValueSet(state))
}

// SetDetails replaces the workflow's current details (Temporal UI) with text; an
// empty text restores the host's description of the pending interrupts.
func (c *conversation) SetDetails(text string) {
	if text == "" {
		c.r.describePending()
		return
	}
	c.r.setDetails(text)
}

// Input is the run's input (definition, packs, pack hashes, inputs, owner).
func (c *conversation) Input() *RunInput { return &c.r.in }

// Node is the conversation's node.
func (c *conversation) Node() *Node { return c.node }

// Now is the workflow clock in ms since the epoch.
func (c *conversation) Now() int64 { return workflow.Now(c.r.ctx).UnixMilli() }

// Replaying reports whether the run is a fork replay.
func (c *conversation) Replaying() bool { return c.r.in.Fork != nil }

// SourceEvents returns the source run's events of this node on a fork replay (nil
// otherwise), so an agent can reuse recorded results (model replies, tool results).
func (c *conversation) SourceEvents() []Event {
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
func (c *conversation) NextTurnIndex() int { return c.TurnCount }

// The newest turns a conversation keeps (the snapshot's channel and the carried
// state): at most recentTurns of them, and at most recentTurnBytes of content, but
// always the newest one.
const (
	recentTurns     = 20
	recentTurnBytes = 256 << 10
)

// appendTurn adds a turn to the conversation's newest turns and counts it.
func (c *conversation) appendTurn(t Turn) {
	c.Turns = append(c.Turns, t)
	c.TurnCount++
	c.trimTurns()
}

// trimTurns drops the oldest kept turns beyond the bounds.
func (c *conversation) trimTurns() {
	keep, size := 0, 0
	for i := len(c.Turns) - 1; i >= 0; i-- {
		size += len(c.Turns[i].Content) + len(c.Turns[i].MessageID) + 128
		if keep > 0 && (keep >= recentTurns || size > recentTurnBytes) {
			break
		}
		keep++
	}
	if keep < len(c.Turns) {
		c.Turns = append([]Turn(nil), c.Turns[len(c.Turns)-keep:]...)
	}
}

// restored completes a conversation decoded from a carried state: the earlier shape
// (0) carried every turn and no count.
func (c *conversation) restored(shape int) {
	if c.Turns == nil {
		c.Turns = []Turn{}
	}
	if shape == 0 {
		c.TurnCount = len(c.Turns)
		c.trimTurns()
	}
}

// ---------------------------------------------------------------------------------
// Host side.
// ---------------------------------------------------------------------------------

var agentIDPattern = regexp.MustCompile(`^[A-Za-z0-9._~:-]{1,128}$`)

func (c *conversation) messageID(index int, role string) string {
	return fmt.Sprintf("%s:%d:%s", c.ID, index, role)
}

// hasMessage reports whether a turn with messageId id is recorded: one of the newest
// turns, or an id of the host's form ("<conversationId>:<turnIndex>:<role>") naming an
// index already taken. A client-chosen messageId of an older turn is not remembered.
func (c *conversation) hasMessage(id string) bool {
	for _, t := range c.Turns {
		if t.MessageID == id {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(id, c.ID+":"); ok {
		if idx, role, ok := strings.Cut(rest, ":"); ok && (role == RoleUser || role == RoleAgent || role == RoleSystem) {
			if n, err := strconv.Atoi(idx); err == nil && n >= 0 && n < c.TurnCount {
				return true
			}
		}
	}
	return false
}

func (c *conversation) inRoster(id string) bool {
	for _, p := range c.Participants {
		if p.AgentID == id {
			return true
		}
	}
	return false
}

// record appends a turn and its event.
func (c *conversation) record(t Turn) {
	c.r.countTurn(c.Turns, t)
	c.appendTurn(t)
	c.LastEventID = c.r.emit(EvConversationExchanged, c.NodeID, map[string]any{
		"conversationId": c.ID, "turnIndex": t.TurnIndex, "turn": t,
	}, c.LastEventID)
	c.refreshExchangeData()
}

// refreshExchangeData keeps the pending interrupt's data in the
// conversation.exchange shape with the next turn index.
func (c *conversation) refreshExchangeData() {
	if c.it == nil {
		return
	}
	d := map[string]any{"conversationId": c.ID, "prompt": "Your message", "turnIndex": c.NextTurnIndex()}
	if len(c.Schema) > 0 {
		d["outcomeSchema"] = c.Schema
	}
	c.it.Kind = "conversation.exchange"
	c.it.Data = mustJSON(d)
}

func (c *conversation) agentTurn(rep agentReply) Turn {
	content := rep.Content
	if len(content) == 0 {
		body := map[string]string{"text": rep.Text}
		if rep.State != "" {
			body["state"] = rep.State
		}
		content = mustJSON(body)
	}
	speaker := orDefault(rep.SpeakerID, c.AgentID)
	idx := c.NextTurnIndex()
	return Turn{MessageID: c.messageID(idx, RoleAgent), From: speaker, Content: content, Ts: c.Now(), Role: RoleAgent, TurnIndex: idx, SpeakerID: speaker}
}

func (c *conversation) systemTurn(text string) Turn {
	idx := c.NextTurnIndex()
	return Turn{MessageID: c.messageID(idx, RoleSystem), From: "system", Content: mustJSON(map[string]string{"text": text}), Ts: c.Now(), Role: RoleSystem, TurnIndex: idx}
}

// close records the final turn and conversation.closed, then resolves the
// conversation's interrupt (interrupt.resolved → node.resumed).
func (c *conversation) close(final Turn, outcome json.RawMessage, req ResolveRequest) {
	if len(outcome) == 0 {
		outcome = json.RawMessage("null")
	}
	c.appendTurn(final)
	c.Closed = true
	c.Outcome = outcome
	c.LastEventID = c.r.emit(EvConversationClosed, c.NodeID, map[string]any{
		"conversationId": c.ID, "turnIndex": final.TurnIndex, "finalTurn": final, "outcome": outcome,
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

func (r *runner) convOf(nodeID string) *conversation {
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
	byName := map[string][]Turn{}
	var names []string
	seen := map[string]bool{}
	for _, c := range r.convs {
		if _, ok := byName[c.Channel]; !ok {
			names = append(names, c.Channel)
			byName[c.Channel] = []Turn{}
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

// ---------------------------------------------------------------------------------
// The conversation node.
// ---------------------------------------------------------------------------------

// execConversationNode runs a conversation node (core.conversationGate or an agent
// node type) from opening to close.
func execConversationNode(r *runner, n *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	factory, ok := agentFactories[n.TypeID]
	if !ok {
		return nil, failNode("capability_not_provided", "node %q has type %q, which has no conversation agent", n.ID, n.TypeID)
	}
	c := r.convOf(n.ID)
	resumed := c != nil && !c.Closed // continued as new inside this conversation
	if !resumed {
		c = &conversation{ID: fmt.Sprintf("%s:%s:%d", r.in.RunID, n.ID, 0), NodeID: n.ID, Channel: "conversation", Turns: []Turn{}}
	}
	c.r, c.node = r, n
	var saved json.RawMessage
	if resumed && r.carried != nil {
		saved = r.carried.AgentStates[n.ID]
	}
	agent, err := factory(r.ctx, c, n, saved)
	if err != nil {
		return nil, failNode("validation_error", "node %q: %v", n.ID, err)
	}
	r.agents[n.ID] = agent
	if !resumed {
		if src := r.forkSourceConversation(n.ID); src != nil {
			return r.replayConversation(c, agent, src)
		}
		op, err := agent.Open(r.ctx, c)
		if err != nil {
			return nil, agentFailure(n.ID, err)
		}
		if err := r.openConversation(c, op); err != nil {
			return nil, err
		}
		if op.AutoResume {
			if !op.AutoReply.Silent {
				c.record(c.agentTurn(op.AutoReply))
			}
			cl := op.AutoReply.Close
			if cl == nil {
				cl = &closeRequest{Outcome: mustJSON(map[string]string{"summary": "mock conversation completed"}), FinalText: "Conversation closed by the host mock."}
			}
			return r.finishClose(c, cl, ResolveRequest{ResolvedBy: "host:mock"})
		}
		if op.Raise != nil {
			_, _, _ = r.applyReply(c, agentReply{Silent: true, Raise: op.Raise})
		}
		if op.FirstUserText != "" {
			idx := c.NextTurnIndex()
			t := Turn{MessageID: c.messageID(idx, RoleUser), From: RoleUser, Content: mustJSON(map[string]string{"text": op.FirstUserText}), Ts: c.Now(), Role: RoleUser, TurnIndex: idx}
			c.record(t)
			rep, err := agent.Reply(r.ctx, c, t)
			if err != nil {
				return nil, agentFailure(n.ID, err)
			}
			if out, done, err := r.applyReply(c, rep); done || err != nil {
				return out, err
			}
		}
	}
	return r.converse(c, agent)
}

// openConversation raises the conversation interrupt and emits conversation.opened.
func (r *runner) openConversation(c *conversation, op opening) error {
	if op.AgentID == "" {
		op.AgentID = "host:" + c.NodeID
	}
	if !agentIDPattern.MatchString(op.AgentID) {
		return failNode("validation_error", "conversation agent id %q must match %s", op.AgentID, agentIDPattern)
	}
	c.AgentID = op.AgentID
	c.Title = orDefault(op.Title, "Conversation at "+c.NodeID)
	c.Schema = op.Schema
	c.TimeoutMs = op.TimeoutMs
	c.TimeoutCode, c.TimeoutText = op.TimeoutCode, op.TimeoutText
	if len(op.Participants) > 0 {
		c.Participants = append([]Participant(nil), op.Participants...)
		if !c.inRoster(c.AgentID) {
			c.Participants = append([]Participant{{AgentID: c.AgentID}}, c.Participants...)
		}
	}
	for _, p := range c.Participants {
		if !agentIDPattern.MatchString(p.AgentID) {
			return failNode("validation_error", "participant id %q must match %s", p.AgentID, agentIDPattern)
		}
	}
	r.convs = append(r.convs, c)
	start := map[string]any{"conversationId": c.ID, "title": c.Title}
	it := r.raise(c.NodeID, interruptSpec{Kind: "conversation.start", Data: start, TimeoutMs: op.TimeoutMs, Reason: "conversation-input",
		Describe: fmt.Sprintf("Conversation %q (%s) with %s is open; send a message to continue.", c.Title, c.ID, c.AgentID)})
	it.conv = c
	c.it = it
	content := op.InitialContent
	if len(content) == 0 {
		content = mustJSON(map[string]string{"text": orDefault(op.InitialText, c.Title)})
	}
	t0 := Turn{MessageID: c.messageID(0, RoleSystem), From: "system", Content: content, Ts: c.Now(), Role: RoleSystem, TurnIndex: 0}
	c.appendTurn(t0)
	opened := map[string]any{"conversationId": c.ID, "agentId": c.AgentID, "initialTurn": t0}
	if len(c.Schema) > 0 {
		opened["schema"] = c.Schema
	}
	c.LastEventID = r.emit(EvConversationOpened, c.NodeID, opened, it.suspendedEvent)
	c.refreshExchangeData()
	return nil
}

// converse is the conversation loop: one resolve at a time, in arrival order.
func (r *runner) converse(c *conversation, agent conversationAgent) (map[string]json.RawMessage, error) {
	for {
		if err := r.maybeContinueAsNew(); err != nil {
			return nil, err
		}
		req, target, value, timedOut, err := r.nextResolve(c.NodeID)
		var ne *nodeError
		if errors.As(err, &ne) && ne.Code == "history_limit_exceeded" {
			c.close(c.systemTurn("Conversation closed: "+ne.Message+"."), nil, ResolveRequest{ResolvedBy: "system"})
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if timedOut != nil {
			why := fmt.Sprintf("Conversation timed out after %d ms without being closed.", c.TimeoutMs)
			code := "interrupt_timeout"
			if timedOut.agent {
				why = fmt.Sprintf("The %s wait of the conversation timed out after %d ms.", timedOut.Kind, timedOut.TimeoutMs)
			} else if c.TimeoutCode != "" {
				code, why = c.TimeoutCode, orDefault(c.TimeoutText, why)
			}
			c.close(c.systemTurn(why), nil, ResolveRequest{ResolvedBy: "system"})
			return nil, failNode(code, "%s", why)
		}
		if target.agent {
			ev, _ := parseInjected(req) // checkAgentResolve accepted it: it parses
			c.agentIt = nil
			r.settle(target)
			r.emitResolved(target, req, value)
			rep, err := agent.Inject(r.ctx, c, ev)
			if err != nil {
				return nil, agentFailure(c.NodeID, err)
			}
			if out, done, err := r.applyReply(c, rep); done || err != nil {
				return out, err
			}
			continue
		}
		var act conversationAction
		if err := json.Unmarshal(value, &act); err != nil {
			return nil, fmt.Errorf("decode conversation action: %w", err)
		}
		if act.Turn != nil && act.Turn.Ts == 0 && req.ReceivedAtMs == 0 {
			act.Turn.Ts = c.Now()
		}
		if act.Op == "close" {
			final := c.systemTurn("Conversation closed by " + orDefault(req.ResolvedBy, "the client") + ".")
			if act.Turn != nil {
				final = *act.Turn
			}
			c.close(final, act.Outcome, req)
			return r.conversationOutputs(c), nil
		}
		c.record(*act.Turn)
		if act.Turn.Role != RoleUser {
			continue
		}
		rep, err := agent.Reply(r.ctx, c, *act.Turn)
		if err != nil {
			return nil, agentFailure(c.NodeID, err)
		}
		if out, done, err := r.applyReply(c, rep); done || err != nil {
			return out, err
		}
	}
}

// applyReply records an agent reply and applies its interrupt and close requests.
func (r *runner) applyReply(c *conversation, rep agentReply) (map[string]json.RawMessage, bool, error) {
	if !rep.Silent && (rep.Text != "" || len(rep.Content) > 0) {
		c.record(c.agentTurn(rep))
	}
	if rep.Clear && c.agentIt != nil {
		r.settle(c.agentIt)
		c.agentIt = nil
	}
	if rep.Raise != nil && rep.Close == nil {
		if c.agentIt != nil {
			r.settle(c.agentIt)
		}
		ai := rep.Raise
		kind := orDefault(ai.Kind, "external-event")
		var data any = ai.Data
		if kind == "external-event" {
			corr := orJSON(ai.Correlation, "{}")
			data = map[string]any{"eventType": orDefault(ai.EventType, "agent.event"), "correlation": corr}
		}
		c.agentIt = r.raise(c.NodeID, interruptSpec{Kind: kind, Data: data, ResumeSchema: ai.ResumeSchema, TimeoutMs: ai.TimeoutMs, Agent: true,
			Describe: orDefault(ai.Describe, "The agent waits for an injected event {event, context}.")})
	}
	if rep.Close != nil {
		out, err := r.finishClose(c, rep.Close, ResolveRequest{ResolvedBy: c.AgentID})
		return out, true, err
	}
	return nil, false, nil
}

// finishClose closes the conversation on the agent's request.
func (r *runner) finishClose(c *conversation, cl *closeRequest, req ResolveRequest) (map[string]json.RawMessage, error) {
	outcome := cl.Outcome
	if cl.Error != nil {
		outcome = nil
	}
	text := cl.FinalText
	if text == "" {
		text = "Conversation closed."
		if cl.Error != nil {
			text = "Conversation closed: " + cl.Error.Message
		}
	}
	c.close(c.systemTurn(text), outcome, req)
	if cl.Error != nil {
		return nil, &nodeError{*cl.Error}
	}
	return r.conversationOutputs(c), nil
}

func (r *runner) conversationOutputs(c *conversation) map[string]json.RawMessage {
	return map[string]json.RawMessage{"conversationId": mustJSON(c.ID), "outcome": orJSON(c.Outcome, "null"), "turnCount": mustJSON(c.TurnCount)}
}

// agentFailure turns an agent error into a node failure: an activity's application error
// lends its OpenWOP code (activities.ErrorCode) and its own message; anything else is
// agent_error.
func agentFailure(nodeID string, err error) error {
	if errors.Is(err, errCancelled) || temporal.IsCanceledError(err) {
		return errCancelled
	}
	var ne *nodeError
	if errors.As(err, &ne) {
		return ne
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() != "" {
		code := orDefault(activities.ErrorCode(appErr.Type()), "agent_error")
		return failNode(code, "agent of node %q failed: %s", nodeID, activityMessage(err))
	}
	return failNode("agent_error", "agent of node %q failed: %v", nodeID, err)
}
