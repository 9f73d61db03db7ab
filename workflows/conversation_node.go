package workflows

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// execConversationNode runs a conversation node (core.conversationGate or an agent
// node type) from opening to close.
func execConversationNode(r *runner, n *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	factory, ok := agentFactoryOf(n.TypeID)
	if !ok {
		return nil, failNode(protocol.CodeCapabilityNotProvided, "node %q has type %q, which has no conversation agent", n.ID, n.TypeID)
	}
	c := r.convOf(n.ID)
	resumed := c != nil && !c.Closed // continued as new inside this conversation
	if !resumed {
		c = &Conversation{ID: fmt.Sprintf("%s:%s:%d", r.in.RunID, n.ID, 0), NodeID: n.ID, Channel: "conversation", Turns: []protocol.Turn{}}
	}
	c.r, c.node = r, n
	var saved json.RawMessage
	if resumed && r.carried != nil {
		saved = r.carried.AgentStates[n.ID]
	}
	agent, err := factory(r.ctx, c, n, saved)
	if err != nil {
		return nil, failNode(protocol.CodeValidation, "node %q: %v", n.ID, err)
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
				cl = &CloseRequest{Outcome: mustJSON(map[string]string{"summary": "mock conversation completed"}), FinalText: "Conversation closed by the host mock."}
			}
			return r.finishClose(c, cl, ResolveRequest{ResolvedBy: "host:mock"})
		}
		if op.Raise != nil {
			_, _, _ = r.applyReply(c, AgentReply{Silent: true, Raise: op.Raise})
		}
		if op.FirstUserText != "" {
			idx := c.NextTurnIndex()
			t := protocol.Turn{MessageID: c.messageID(idx, protocol.RoleUser), From: protocol.RoleUser, Content: mustJSON(map[string]string{"text": op.FirstUserText}), Ts: c.Now(), Role: protocol.RoleUser, TurnIndex: idx}
			c.record(t)
			rep, err := r.agentTurn(c, func() (AgentReply, error) { return agent.Reply(r.ctx, c, t) })
			if err != nil {
				return nil, agentFailure(n.ID, err)
			}
			out, done, err := r.applyReply(c, rep)
			r.endTurn()
			if done || err != nil {
				return out, err
			}
		}
	}
	return r.converse(c, agent)
}

// openConversation raises the conversation interrupt and emits conversation.opened.
func (r *runner) openConversation(c *Conversation, op Opening) error {
	if op.AgentID == "" {
		op.AgentID = "host:" + c.NodeID
	}
	if !agentIDPattern.MatchString(op.AgentID) {
		return failNode(protocol.CodeValidation, "conversation agent id %q must match %s", op.AgentID, agentIDPattern)
	}
	c.AgentID = op.AgentID
	c.Title = cmp.Or(op.Title, "Conversation at "+c.NodeID)
	c.Schema = op.Schema
	c.TimeoutMs = op.TimeoutMs
	c.TimeoutCode, c.TimeoutText = op.TimeoutCode, op.TimeoutText
	if len(op.Participants) > 0 {
		c.Participants = append([]protocol.Participant(nil), op.Participants...)
		if !c.inRoster(c.AgentID) {
			c.Participants = append([]protocol.Participant{{AgentID: c.AgentID}}, c.Participants...)
		}
	}
	for _, p := range c.Participants {
		if !agentIDPattern.MatchString(p.AgentID) {
			return failNode(protocol.CodeValidation, "participant id %q must match %s", p.AgentID, agentIDPattern)
		}
	}
	r.convs = append(r.convs, c)
	start := protocol.ConversationStartData{ConversationID: c.ID, Title: c.Title}
	it := r.raise(c.NodeID, interruptSpec{Kind: protocol.KindConversationStart, Data: start, TimeoutMs: op.TimeoutMs, Reason: "conversation-input",
		Describe: fmt.Sprintf("Conversation %q (%s) with %s is open; send a message to continue.", c.Title, c.ID, c.AgentID)})
	it.conv = c
	c.it = it
	content := op.InitialContent
	if len(content) == 0 {
		content = mustJSON(map[string]string{"text": cmp.Or(op.InitialText, c.Title)})
	}
	t0 := protocol.Turn{MessageID: c.messageID(0, protocol.RoleSystem), From: "system", Content: content, Ts: c.Now(), Role: protocol.RoleSystem, TurnIndex: 0}
	c.appendTurn(t0)
	opened := protocol.ConversationOpened{ConversationID: c.ID, AgentID: c.AgentID, InitialTurn: t0, Schema: c.Schema}
	if len(op.Participants) > 0 && r.in.TurnShape >= 1 && r.changed(GateConversationRoster) {
		opened.Participants = op.Participants // the gate config's roster, unchanged (roster.go)
	}
	c.LastEventID = r.emit(protocol.EvConversationOpened, c.NodeID, opened, it.suspendedEvent)
	c.refreshExchangeData()
	return nil
}

// converse is the conversation loop: one resolve at a time, in arrival order.
func (r *runner) converse(c *Conversation, agent ConversationAgent) (map[string]json.RawMessage, error) {
	for {
		if err := r.maybeContinueAsNew(); err != nil {
			return nil, err
		}
		req, target, value, timedOut, err := r.nextResolve(c.NodeID)
		var ne *nodeError
		if errors.As(err, &ne) && ne.Code == protocol.CodeHistoryLimitExceeded {
			c.close(c.systemTurn("Conversation closed: "+ne.Message+"."), nil, ResolveRequest{ResolvedBy: "system"})
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if timedOut != nil {
			why := fmt.Sprintf("Conversation timed out after %d ms without being closed.", c.TimeoutMs)
			code := protocol.CodeInterruptTimeout
			if timedOut.agent {
				why = fmt.Sprintf("The %s wait of the conversation timed out after %d ms.", timedOut.Kind, timedOut.TimeoutMs)
			} else if c.TimeoutCode != "" {
				code, why = c.TimeoutCode, cmp.Or(c.TimeoutText, why)
			}
			c.close(c.systemTurn(why), nil, ResolveRequest{ResolvedBy: "system"})
			return nil, failNode(code, "%s", why)
		}
		if target.agent {
			ev, _ := parseInjected(req) // checkAgentResolve accepted it: it parses
			c.agentIt = nil
			r.settle(target)
			r.emitResolved(target, req, value)
			r.startTurnRequest(req)
			rep, err := r.agentTurn(c, func() (AgentReply, error) { return agent.Inject(r.ctx, c, ev) })
			if err != nil {
				return nil, agentFailure(c.NodeID, err)
			}
			out, done, err := r.applyReply(c, rep)
			r.endTurn()
			if done || err != nil {
				return out, err
			}
			continue
		}
		// The action is decoded from the JSON the check encoded it in, which normalizes
		// the client's bytes to the encoding the run reads them in (docs/DECISIONS.md).
		var act conversationAction
		if err := json.Unmarshal(value, &act); err != nil {
			return nil, fmt.Errorf("decode conversation action: %w", err)
		}
		if act.Turn != nil && act.Turn.Ts == 0 && req.ReceivedAtMs == 0 {
			act.Turn.Ts = c.Now()
		}
		if act.Op == "close" {
			final := c.systemTurn("Conversation closed by " + cmp.Or(req.ResolvedBy, "the client") + ".")
			if act.Turn != nil {
				final = *act.Turn
			}
			c.close(final, act.Outcome, req)
			return r.conversationOutputs(c), nil
		}
		c.record(*act.Turn)
		if act.Turn.Role != protocol.RoleUser {
			continue
		}
		r.startTurnRequest(req)
		rep, err := r.agentTurn(c, func() (AgentReply, error) { return agent.Reply(r.ctx, c, *act.Turn) })
		if err != nil {
			return nil, agentFailure(c.NodeID, err)
		}
		out, done, err := r.applyReply(c, rep)
		r.endTurn()
		if done || err != nil {
			return out, err
		}
	}
}

// applyReply records an agent reply and applies its interrupt and close requests.
func (r *runner) applyReply(c *Conversation, rep AgentReply) (map[string]json.RawMessage, bool, error) {
	if !rep.Silent && (rep.Text != "" || len(rep.Content) > 0) {
		c.record(c.agentTurn(rep))
	}
	if n := rep.Notice; n != nil {
		t := c.systemTurn(n.Text)
		body := map[string]any{"text": n.Text}
		if n.Error != nil {
			body["error"] = map[string]any{"code": n.Error.Code, "message": n.Error.Message, "retryable": true}
		}
		t.Content = mustJSON(body)
		c.record(t)
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
		kind := cmp.Or(ai.Kind, protocol.KindExternalEvent)
		var data any = ai.Data
		if kind == protocol.KindExternalEvent {
			corr := orJSON(ai.Correlation, "{}")
			data = protocol.ExternalEventData{EventType: cmp.Or(ai.EventType, protocol.EventTypeAgentEvent), Correlation: corr}
		}
		c.agentIt = r.raise(c.NodeID, interruptSpec{Kind: kind, Data: data, ResumeSchema: ai.ResumeSchema, TimeoutMs: ai.TimeoutMs, Agent: true,
			Describe: cmp.Or(ai.Describe, "The agent waits for an injected event {event, context}.")})
	}
	if rep.Close != nil {
		out, err := r.finishClose(c, rep.Close, ResolveRequest{ResolvedBy: c.AgentID})
		return out, true, err
	}
	return nil, false, nil
}

// finishClose closes the conversation on the agent's request.
func (r *runner) finishClose(c *Conversation, cl *CloseRequest, req ResolveRequest) (map[string]json.RawMessage, error) {
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

func (r *runner) conversationOutputs(c *Conversation) map[string]json.RawMessage {
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
		code := cmp.Or(activities.ErrorCode(appErr.Type()), protocol.CodeAgentError)
		return failNode(code, "agent of node %q failed: %s", nodeID, ActivityMessage(err))
	}
	return failNode(protocol.CodeAgentError, "agent of node %q failed: %v", nodeID, err)
}
