package workflows

import (
	"bytes"
	"cmp"
	"encoding/json"

	"github.com/wop-dev/wop/protocol"
)

// Fork replay (RunInput.Fork, mode "replay"): the new run executes the same definition
// but takes every human decision from the source log instead of waiting for one:
//   - approval gates get one resolve per recorded approval.received (votes included);
//   - other interrupts get their recorded interrupt.resolved resume values;
//   - conversation nodes re-fold the recorded conversation.* events verbatim (same
//     conversationId, turns, messageIds, ts and outcome) without calling the agent's
//     Open or Reply, so no model is called and the channels are byte-identical to the
//     source's. Agents that implement TurnObserver see each replayed turn, and
//     Conversation.SourceEvents exposes the node's recorded events (agent.*,
//     provider.usage, …) to them. A source conversation that never closed continues
//     live after the recorded turns; since GateForkReplay a last user turn the
//     source never answered is answered then (see packagent/pack_replay.go).
// FromSeq is recorded on the run but the replay always re-folds from sequence 0.

// forkIndex holds the recorded resolutions of the source run.
type forkIndex struct {
	resolves map[string][]ResolveRequest // nodeId → recorded resolves, in log order
	convs    map[string][]Event          // nodeId → recorded conversation.* events
}

func newForkIndex(f *ForkSource) *forkIndex {
	fi := &forkIndex{resolves: map[string][]ResolveRequest{}, convs: map[string][]Event{}}
	approvalNodes := map[string]bool{}
	convNodes := map[string]bool{}
	for _, e := range f.Events {
		switch e.Type {
		case protocol.EvApprovalRequested:
			approvalNodes[e.NodeID] = true
		case protocol.EvConversationOpened:
			convNodes[e.NodeID] = true
		}
	}
	for _, e := range f.Events {
		switch {
		case convNodes[e.NodeID]:
			if e.Type == protocol.EvConversationOpened || e.Type == protocol.EvConversationExchanged || e.Type == protocol.EvConversationClosed {
				fi.convs[e.NodeID] = append(fi.convs[e.NodeID], e)
			}
		case approvalNodes[e.NodeID] && e.Type == protocol.EvApprovalReceived:
			var p map[string]json.RawMessage
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			var action, by string
			// Fields of an event the run recorded; an absent one reads as "".
			_ = json.Unmarshal(p["action"], &action)
			_ = json.Unmarshal(p["decidedBy"], &by)
			if action == "timeout" {
				continue
			}
			v := map[string]json.RawMessage{"action": p["action"]}
			for _, k := range []string{"decidedBy", "feedback", "refineFeedback", "editedArtifactData", "comment"} {
				if p[k] != nil {
					v[k] = p[k]
				}
			}
			if by != "" {
				v["voter"] = mustJSON(by)
			}
			fi.resolves[e.NodeID] = append(fi.resolves[e.NodeID], ResolveRequest{RequestID: "fork:" + e.EventID, NodeID: e.NodeID, ResumeValue: mustJSON(v), ResolvedBy: by, Via: "fork"})
		case !approvalNodes[e.NodeID] && e.Type == protocol.EvInterruptResolved:
			var p struct {
				ResumeValue json.RawMessage `json:"resumeValue"`
				ResolvedBy  string          `json:"resolvedBy"`
			}
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			fi.resolves[e.NodeID] = append(fi.resolves[e.NodeID], ResolveRequest{RequestID: "fork:" + e.EventID, NodeID: e.NodeID, ResumeValue: p.ResumeValue, ResolvedBy: p.ResolvedBy, Via: "fork"})
		}
	}
	return fi
}

// next pops the next recorded resolve for nodeID while the node has a pending
// (non-conversation) interrupt.
func (fi *forkIndex) next(r *runner, nodeID string) (ResolveRequest, bool) {
	q := fi.resolves[nodeID]
	if len(q) == 0 {
		return ResolveRequest{}, false
	}
	pending := false
	for _, it := range r.pending {
		if it.NodeID == nodeID && it.conv == nil && !it.agent {
			pending = true
		}
	}
	if !pending {
		return ResolveRequest{}, false
	}
	fi.resolves[nodeID] = q[1:]
	return q[0], true
}

// forkSourceConversation returns the recorded conversation events of nodeID.
func (r *runner) forkSourceConversation(nodeID string) []Event {
	if r.forkIdx == nil {
		return nil
	}
	return r.forkIdx.convs[nodeID]
}

// replayConversation re-folds a recorded conversation (see the comment at the top).
func (r *runner) replayConversation(c *Conversation, agent ConversationAgent, src []Event) (map[string]json.RawMessage, error) {
	var opened struct {
		ConversationID string          `json:"conversationId"`
		AgentID        string          `json:"agentId"`
		InitialTurn    protocol.Turn   `json:"initialTurn"`
		Schema         json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(src[0].Payload, &opened); err != nil {
		return nil, failNode(protocol.CodeReplayFailed, "source conversation.opened of node %q is unreadable: %v", c.NodeID, err)
	}
	c.ID = opened.ConversationID
	c.AgentID = cmp.Or(opened.AgentID, "host:"+c.NodeID)
	c.Title = "Replay of " + opened.ConversationID
	c.Schema = opened.Schema
	r.convs = append(r.convs, c)
	it := r.raise(c.NodeID, interruptSpec{Kind: protocol.KindConversationStart, Data: protocol.ConversationStartData{ConversationID: c.ID, Title: c.Title}, Reason: "conversation-input",
		Describe: "Replaying conversation " + c.ID + " from the source run."})
	it.conv = c
	c.it = it
	c.appendTurn(opened.InitialTurn)
	c.LastEventID = r.emit(protocol.EvConversationOpened, c.NodeID, src[0].Payload, it.suspendedEvent)
	c.refreshExchangeData()
	obs, _ := agent.(TurnObserver)
	if obs != nil {
		obs.Observe(r.ctx, c, opened.InitialTurn)
	}
	folder, _ := agent.(ReplayFolder)
	last := opened.InitialTurn
	for _, e := range src[1:] {
		if folder != nil {
			folder.FoldBefore(r.ctx, c, e)
		}
		switch e.Type {
		case protocol.EvConversationExchanged:
			var p struct {
				Turn protocol.Turn `json:"turn"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return nil, failNode(protocol.CodeReplayFailed, "source event %s is unreadable: %v", e.EventID, err)
			}
			c.appendTurn(p.Turn)
			last = p.Turn
			c.LastEventID = r.emit(protocol.EvConversationExchanged, c.NodeID, e.Payload, c.LastEventID)
			c.refreshExchangeData()
			if obs != nil {
				obs.Observe(r.ctx, c, p.Turn)
			}
		case protocol.EvConversationClosed:
			var p struct {
				FinalTurn protocol.Turn   `json:"finalTurn"`
				Outcome   json.RawMessage `json:"outcome"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return nil, failNode(protocol.CodeReplayFailed, "source event %s is unreadable: %v", e.EventID, err)
			}
			if obs != nil {
				obs.Observe(r.ctx, c, p.FinalTurn)
			}
			c.close(p.FinalTurn, p.Outcome, ResolveRequest{ResolvedBy: "replay"})
			if folder != nil {
				folder.ReplayDone(r.ctx, c, true)
			}
			if ne := r.sourceNodeFailure(c.NodeID); ne != nil {
				return nil, ne
			}
			return r.conversationOutputs(c), nil
		}
	}
	if folder != nil {
		folder.ReplayDone(r.ctx, c, false)
	}
	if last.Role == protocol.RoleUser && r.changed(GateForkReplay) {
		// The source never answered its last user turn (cancelled mid-turn, or still
		// working): it is answered now, as a live turn would be.
		rep, err := agent.Reply(r.ctx, c, last)
		if err != nil {
			return nil, agentFailure(c.NodeID, err)
		}
		if out, done, err := r.applyReply(c, rep); done || err != nil {
			return out, err
		}
	}
	return r.converse(c, agent)
}

// checkForkInputs writes replay.diverged right after a replay fork's run.started when
// the fork runs on other inputs than its source's run.started recorded (the fork
// request named them): the recorded decisions are replayed against them all the same,
// and the log says from where the replay no longer follows its source (OpenWOP
// replay.md: divergence continues and is reported). Asked only for such a fork
// (GateForkInputs), so forks on their source's inputs record nothing new.
func (r *runner) checkForkInputs(startedID string) {
	f := r.in.Fork
	if f == nil {
		return
	}
	for _, e := range f.Events {
		if e.Type != protocol.EvRunStarted {
			continue
		}
		var p struct {
			Inputs json.RawMessage `json:"inputs"`
		}
		_ = json.Unmarshal(e.Payload, &p) // a recorded run.started; without inputs it compares as none
		src, mine := orJSON(p.Inputs, "{}"), orJSON(r.in.Inputs, "{}")
		if bytes.Equal(canonicalJSON(src), canonicalJSON(mine)) || !r.changed(GateForkInputs) {
			return
		}
		r.emit(protocol.EvReplayDiverged, "", protocol.ReplayDiverged{
			SourceRunID: f.SourceRunID, AtSequence: e.Sequence, OriginalEventID: &e.EventID, ReplayEventID: startedID,
			DivergenceKind: "input", DivergencePoint: protocol.EvRunStarted,
			Reason: "the fork runs on other inputs than its source's run.started recorded",
		}, startedID)
		return
	}
}

// sourceNodeFailure returns the failure the source run recorded for node nodeID
// (node.failed), so a replayed conversation that closed with an error fails its node
// as the source's did. Forks recorded before GateForkReplay completed the node.
func (r *runner) sourceNodeFailure(nodeID string) error {
	for _, e := range r.in.Fork.Events {
		if e.Type != protocol.EvNodeFailed || e.NodeID != nodeID {
			continue
		}
		var p struct {
			Error protocol.RunError `json:"error"`
		}
		if json.Unmarshal(e.Payload, &p) != nil || p.Error.Code == "" || !r.changed(GateForkReplay) {
			return nil
		}
		return &nodeError{p.Error}
	}
	return nil
}
