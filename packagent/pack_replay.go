package packagent

// ---- fork replay of a pack node ----
//
// A fork replay re-folds the source run's conversation (workflows/fork.go) and, for a
// pack node, folds the same user turns and injected events into a fresh engine, answering every
// model round and tool call from the source's records (agent.decided and
// agent.toolReturned). The fork runs on the source run's pack (the API starts it with
// the source's RunInput packs, by hash), so the engine can follow the recording. Since
// GateForkReplay:
//
//   - The fold keeps causal order: an injected event is folded before the recorded
//     conversation event that follows it, and a user turn right after its
//     conversation.exchanged, so agent events come after the turn that caused them.
//   - A replayed round emits agent.decided (marked replayed) but no provider.usage, and
//     adds no tokens to the pack's usage: the source run spent and reported them, and a
//     per-run sum of provider.usage counts what each run spent.
//   - No model or tool is called for a turn the source answered. When the engine asks
//     for a round or tool result the source did not record, a recorded round ran in
//     another state, a recorded reply or final state differs, or recorded rounds are
//     left unused, the replay cannot follow the recording: the node writes
//     replay.diverged (once; RFC 0005 §G), stops folding the engine, and goes on
//     re-folding the recorded conversation. A live continuation after a divergence
//     closes the conversation with error replay_diverged instead of answering from an
//     engine that left the recording.
//   - The last user turn of a recording that ends unanswered (the source was cancelled
//     mid-turn, or is still working) is answered live once the recording is re-folded,
//     reusing the rounds and tool results the source recorded of it.
// Forks recorded before keep the earlier fold (observeLegacy).

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// CodeReplayDiverged is the error code of a pack that cannot follow its source's
// recording on a fork replay.
const CodeReplayDiverged = protocol.CodeReplayDiverged

// packReplay holds what a source run recorded for a pack node: its model rounds
// (agent.decided) and tool results (agent.toolReturned), and the order of the user
// turns and injected events that drove it.
type packReplay struct {
	rounds map[int]*convo.ModelRoundResult
	tools  map[string]*convo.ToolCallResult
	called map[string]bool // the call ids of the source's agent.toolCalled
	src    []workflows.Event
	cursor int // next source event to fold into the engine

	// The fold since GateForkReplay (v2).
	v2          bool
	sourceRunID string
	roundStates map[int]string          // the state each recorded round ran in
	roundEvents map[int]workflows.Event // the agent.decided of each recorded round
	used        map[int]bool            // recorded rounds the replay consumed
	at          workflows.Event         // the source event being folded
	last        *engine.TurnResult
	// pendingSeq is the source sequence of a last user turn the source never answered
	// (-1: none); the host answers it live after the fold, reusing what was recorded.
	pendingSeq int64
	live       bool // the recording is re-folded; the conversation goes on live
	diverged   bool
	// decisions holds, per call id, the recorded decision of each of its approvals
	// (their events, in log order), consumed in order (replayDecision).
	decisions map[string][][]workflows.Event
}

func newPackReplay(src []workflows.Event) *packReplay {
	pr := &packReplay{rounds: map[int]*convo.ModelRoundResult{}, tools: map[string]*convo.ToolCallResult{}, called: map[string]bool{}, src: src,
		roundStates: map[int]string{}, roundEvents: map[int]workflows.Event{}, used: map[int]bool{}, pendingSeq: -1,
		decisions: recordedDecisions(src)}
	for _, e := range src {
		switch e.Type {
		case protocol.EvAgentDecided:
			var p struct {
				Decision packRoundRecord `json:"decision"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.Decision.Kind != "model_round" {
				continue
			}
			d := p.Decision
			pr.rounds[d.Round] = &convo.ModelRoundResult{
				Text: d.Text, ToolCalls: d.ToolCalls, Provider: d.Provider, Model: d.Model, Usage: d.Usage, FinishReason: d.FinishReason,
			}
			pr.roundStates[d.Round], pr.roundEvents[d.Round] = d.State, e
		case protocol.EvAgentToolCalled:
			var p struct {
				CallID string `json:"callId"`
			}
			if json.Unmarshal(e.Payload, &p) == nil && p.CallID != "" {
				pr.called[p.CallID] = true
			}
		case protocol.EvAgentToolReturned:
			var p struct {
				CallID  string          `json:"callId"`
				Outcome json.RawMessage `json:"outcome"`
				Status  string          `json:"status"`
				System  bool            `json:"system"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.CallID == "" {
				continue
			}
			pr.tools[p.CallID] = &convo.ToolCallResult{Content: p.Outcome, IsError: p.Status == "error"}
		}
	}
	return pr
}

func (pr *packReplay) model(round int) (*convo.ModelRoundResult, bool) {
	r, ok := pr.rounds[round]
	if !ok {
		return nil, false
	}
	cp := *r
	return &cp, true
}

func (pr *packReplay) tool(callID string) (*convo.ToolCallResult, bool) {
	r, ok := pr.tools[callID]
	return r, ok
}

// replayError fails the engine's turn when the replay cannot follow the recording
// (replay_diverged) or would have to perform an effect the source recorded no outcome
// of (replay_source_missing); the engine lends the code to the failed turn.
type replayError struct{ code, msg string }

func (e *replayError) Error() string     { return e.msg }
func (e *replayError) ErrorCode() string { return e.code }

// replayedModel answers a model round from the source run's record on a fork replay:
// recorded reports whether it did (out is then set).
func (rt *packRuntime) replayedModel(in convo.ModelRoundInput, out *convo.ModelRoundResult) (recorded bool, err error) {
	pr := rt.a.replay
	if pr == nil {
		return false, nil
	}
	if !pr.v2 {
		if r, ok := pr.model(in.Round); ok {
			*out = *r
			return true, nil
		}
		rt.a.replay = nil // past the recorded rounds: the run goes on live
		return false, nil
	}
	r, ok := pr.model(in.Round)
	if pr.live {
		// Only the unanswered last turn reuses what the source recorded of it.
		if ok && pr.pendingRound(in.Round) && pr.roundStates[in.Round] == in.State && !pr.used[in.Round] {
			pr.used[in.Round] = true
			*out = *r
			return true, nil
		}
		return false, nil
	}
	if n := pr.unavailableNotice(); n != nil && (!ok || pr.roundEvents[in.Round].Sequence > n.seq) {
		// The source's turn ended here without an answer, the model unavailable
		// (pack_outage.go): the replay's turn ends the same way.
		return false, &activityError{code: protocol.CodeModelUnavailable, msg: n.message, err: errors.Join(engine.ErrUnavailable, errors.New(n.message))}
	}
	switch {
	case pr.diverged:
		return false, &replayError{code: CodeReplayDiverged, msg: "the fork replay has diverged from its source"}
	case !ok:
		return false, rt.diverge("extra", protocol.EvAgentDecided, pr.at,
			"the replay needs model round %d in state %q, which the source run did not record", in.Round, in.State)
	case pr.roundStates[in.Round] != in.State:
		return false, rt.diverge("output", protocol.EvAgentDecided, pr.roundEvents[in.Round],
			"model round %d ran in state %q in the source run but in state %q in the replay", in.Round, pr.roundStates[in.Round], in.State)
	}
	pr.used[in.Round] = true
	*out = *r
	return true, nil
}

// failedTurn is a system turn by which the source said a turn got no answer.
type failedTurn struct {
	seq     int64
	message string
}

// unavailableNotice is the system turn that ended the turn of the source event being
// folded (a user turn, an injected event) when it says the model was unavailable: the
// first conversation event the source recorded after it but the agent's own turn (what
// it said before the failure).
func (pr *packReplay) unavailableNotice() *failedTurn {
	for _, e := range pr.src {
		if e.Sequence <= pr.at.Sequence || e.Type != protocol.EvConversationExchanged && e.Type != protocol.EvConversationClosed {
			continue
		}
		var p struct {
			Turn struct {
				Role    string `json:"role"`
				Content struct {
					Error *protocol.RunError `json:"error"`
				} `json:"content"`
			} `json:"turn"`
		}
		if e.Type != protocol.EvConversationExchanged || json.Unmarshal(e.Payload, &p) != nil {
			return nil
		}
		switch {
		case p.Turn.Role == protocol.RoleAgent:
			continue
		case p.Turn.Role == protocol.RoleSystem && p.Turn.Content.Error != nil && p.Turn.Content.Error.Code == protocol.CodeModelUnavailable:
			return &failedTurn{seq: e.Sequence, message: p.Turn.Content.Error.Message}
		}
		return nil
	}
	return nil
}

// pendingRound reports whether recorded round n belongs to the unanswered last turn.
func (pr *packReplay) pendingRound(n int) bool {
	return pr.pendingSeq >= 0 && pr.roundEvents[n].Sequence > pr.pendingSeq
}

// recordedDecisions finds the approvals of tool calls in a node's recorded events: per
// call id, for each approval.requested that opened one (its first, not an escalation's
// or an edit's), the events from its node.suspended to its node.resumed that belong
// to it: those naming its interrupt (by id, or by key for interrupt.requested), and
// the approval.received of the call (votes included), in log order.
func recordedDecisions(src []workflows.Event) map[string][][]workflows.Event {
	type ref struct {
		InterruptID string `json:"interruptId"`
		CallID      string `json:"callId"`
		Key         string `json:"key"`
	}
	refOf := func(e workflows.Event) ref {
		var r ref
		_ = json.Unmarshal(e.Payload, &r) // a recorded event; one without these fields names no approval
		return r
	}
	out := map[string][][]workflows.Event{}
	seen := map[string]bool{}
	for _, e := range src {
		r := refOf(e)
		if e.Type != protocol.EvApprovalRequested || r.CallID == "" || r.InterruptID == "" || seen[r.InterruptID] {
			continue
		}
		seen[r.InterruptID] = true
		var evs []workflows.Event
		open, key := false, ""
		for _, f := range src {
			fr := refOf(f)
			// interrupt.requested names its interrupt by the key node.suspended gave.
			mine := fr.InterruptID == r.InterruptID || key != "" && fr.Key == key
			if f.Type == protocol.EvNodeSuspended && fr.InterruptID == r.InterruptID {
				open, key = true, fr.Key
			}
			if open && (mine || f.Type == protocol.EvApprovalReceived && fr.CallID == r.CallID) {
				evs = append(evs, f)
			}
			if f.Type == protocol.EvNodeResumed && mine {
				break
			}
		}
		if open {
			out[r.CallID] = append(out[r.CallID], evs)
		}
	}
	return out
}

// replayDecision re-emits, event for event, the decision the source run recorded on
// the approval of tool call callID, whose result the replay takes from the record: the
// fork's log shows who approved or rejected the call, and when, as the source's does
// (GateForkDecisions, asked only for a call with a recorded decision). Payloads are
// the source's, verbatim; causation links point at the fork's own copies. The node's
// interrupt count moves on as the source's did, so an interrupt the fork raises later
// gets the key the source's next one had.
func (rt *packRuntime) replayDecision(callID string) {
	pr := rt.a.replay
	if pr == nil || !pr.v2 || len(pr.decisions[callID]) == 0 || !rt.c.Changed(workflows.GateForkDecisions) {
		return
	}
	evs := pr.decisions[callID][0]
	pr.decisions[callID] = pr.decisions[callID][1:]
	rt.c.Reemit(evs)
}

// replayedTool answers a tool call from the source run's record on a fork replay.
// A call of a tool that may act (its effect is not read) that the source made
// (agent.toolCalled) but recorded no outcome of (its run was cancelled, or its worker
// lost, while the call was in flight) may have been applied: since
// GateForkSourceMissing the replay never performs it, in the fold or in the unanswered
// last turn, and fails the turn closed with replay_source_missing (OpenWOP replay.md,
// side-effect suppression), which fails the pack's node and the run. A read is no
// effect and keeps the earlier handling.
func (rt *packRuntime) replayedTool(in convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	pr := rt.a.replay
	if pr == nil || pr.v2 && pr.live && pr.pendingSeq < 0 {
		return nil, false, nil
	}
	if r, ok := pr.tool(in.CallID); ok {
		return r, true, nil
	}
	if pr.v2 && pr.called[in.CallID] && rt.a.pack.Tools[in.Tool].Effect() != packs.EffectRead && rt.c.Changed(workflows.GateForkSourceMissing) {
		return nil, false, &replayError{code: protocol.CodeReplaySourceMissing, msg: fmt.Sprintf(
			"tool %s (call %s) performs a side effect and source run %s recorded no outcome of it: a replay never performs it", in.Tool, in.CallID, pr.sourceRunID)}
	}
	if !pr.v2 || pr.live {
		return nil, false, nil
	}
	return nil, false, rt.diverge("extra", protocol.EvAgentToolReturned, pr.at,
		"the replay calls tool %s (call %s), which the source run did not record", in.Tool, in.CallID)
}

// decided is the agent.decided payload of a model round.
func (rt *packRuntime) decided(in convo.ModelRoundInput, out *convo.ModelRoundResult, replayed bool) protocol.AgentDecided {
	return protocol.AgentDecided{
		AgentID: rt.a.agentID(in.State),
		Decision: packRoundRecord{
			Kind: "model_round", Round: in.Round, State: in.State, Text: out.Text, ToolCalls: out.ToolCalls,
			Provider: out.Provider, Model: out.Model, Usage: out.Usage, FinishReason: out.FinishReason,
		},
		Replayed: replayed && rt.a.replay != nil && rt.a.replay.v2,
	}
}

// diverge writes replay.diverged for the node (once) and stops the fold; it returns
// the error that fails the engine's turn in progress.
func (rt *packRuntime) diverge(kind, point string, at workflows.Event, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	rt.a.divergeAt(rt.c, kind, point, at, msg)
	return &replayError{code: CodeReplayDiverged, msg: "replay diverged: " + msg}
}

func (a *packAgent) divergeAt(c *workflows.Conversation, kind, point string, at workflows.Event, msg string) {
	pr := a.replay
	if pr.diverged {
		return
	}
	pr.diverged = true
	p := protocol.ReplayDiverged{
		SourceRunID: pr.sourceRunID, AtSequence: max(at.Sequence, 0), DivergenceKind: kind, DivergencePoint: point,
		NodeID: &a.nodeID, Reason: msg,
	}
	if at.EventID != "" {
		p.OriginalEventID = &at.EventID
	}
	c.Emit(protocol.EvReplayDiverged, p, "")
	c.Logger().Warn("Fork replay diverged", "node", a.nodeID, "sourceRunId", pr.sourceRunID, "reason", msg)
}

// FoldBefore implements ReplayFolder: the injected events the source recorded before e
// are folded into the engine before the host re-emits e.
func (a *packAgent) FoldBefore(ctx workflow.Context, c *workflows.Conversation, e workflows.Event) {
	pr := a.replay
	if pr == nil || !pr.v2 {
		return
	}
	for pr.cursor < len(pr.src) && pr.src[pr.cursor].EventID != e.EventID {
		if ev := pr.src[pr.cursor]; ev.Type == protocol.EvInterruptResolved {
			a.foldInjection(ctx, c, ev)
		}
		pr.cursor++
	}
}

// Observe implements TurnObserver: on a fork replay the host re-folds the recorded
// turns without calling Reply; the pack folds the same user turns and injected events
// into its engine, answering every model round and tool call from the source run's
// records, so its state matches the source and no model is called again.
func (a *packAgent) Observe(ctx workflow.Context, c *workflows.Conversation, t protocol.Turn) {
	pr := a.replay
	if pr == nil {
		return
	}
	if !pr.v2 {
		a.observeLegacy(ctx, c, t)
		return
	}
	defer a.publish(c)
	for pr.cursor < len(pr.src) {
		e := pr.src[pr.cursor]
		pr.cursor++
		switch e.Type {
		case protocol.EvInterruptResolved:
			a.foldInjection(ctx, c, e)
		case protocol.EvConversationOpened:
			var p struct {
				InitialTurn protocol.Turn `json:"initialTurn"`
			}
			if json.Unmarshal(e.Payload, &p) == nil && p.InitialTurn.MessageID == t.MessageID {
				return
			}
		case protocol.EvConversationExchanged:
			var p struct {
				Turn protocol.Turn `json:"turn"`
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.Turn.MessageID != t.MessageID {
				continue
			}
			pr.at = e
			switch p.Turn.Role {
			case protocol.RoleUser:
				a.foldUserTurn(ctx, c, e, p.Turn)
			case protocol.RoleAgent:
				a.checkReply(c, e, p.Turn)
			}
			return
		case protocol.EvConversationClosed:
			pr.at = e
			a.checkClose(c, e)
			return
		}
	}
}

// foldUserTurn runs the engine's turn for a recorded user turn.
func (a *packAgent) foldUserTurn(ctx workflow.Context, c *workflows.Conversation, e workflows.Event, t protocol.Turn) {
	pr := a.replay
	pr.last = nil
	if pr.diverged {
		return
	}
	if a.m.Closed() {
		a.divergeAt(c, "extra", protocol.EvConversationExchanged, e, fmt.Sprintf("the source conversation goes on with turn %d, but the replay's pack has ended (%s)", t.TurnIndex, a.m.Status()))
		return
	}
	if !pr.answeredLater() {
		pr.pendingSeq = e.Sequence // answered live after the fold (replayConversation)
		return
	}
	res, err := a.m.Turn(a.runtime(ctx, c), turnText(t.Content))
	if err != nil {
		a.divergeAt(c, "output", protocol.EvConversationExchanged, e, fmt.Sprintf("the replay's pack could not take turn %d: %v", t.TurnIndex, err))
		return
	}
	pr.last = res
}

// answeredLater reports whether the source recorded any conversation event after the
// one being folded: otherwise the user turn is the last of a recording that ends
// unanswered.
func (pr *packReplay) answeredLater() bool {
	for _, e := range pr.src[pr.cursor:] {
		if e.Type == protocol.EvConversationExchanged || e.Type == protocol.EvConversationClosed {
			return true
		}
	}
	return false
}

// foldInjection applies an event injected into the source run (interrupt.resolved of
// the pack's event interrupt).
func (a *packAgent) foldInjection(ctx workflow.Context, c *workflows.Conversation, e workflows.Event) {
	pr := a.replay
	var p struct {
		ResumeValue json.RawMessage `json:"resumeValue"`
	}
	var ev workflows.InjectedEvent
	if pr.diverged || json.Unmarshal(e.Payload, &p) != nil || json.Unmarshal(p.ResumeValue, &ev) != nil || ev.Event == "" {
		return
	}
	pr.at, pr.last = e, nil
	if err := a.m.CanInject(ev.Event); err != nil {
		a.divergeAt(c, "output", protocol.EvInterruptResolved, e, fmt.Sprintf("the source injected event %q, which the replay's pack refuses: %v", ev.Event, err))
		return
	}
	res, err := a.m.Inject(a.runtime(ctx, c), ev.Event, injectedContext(ev.Context))
	if err != nil {
		a.divergeAt(c, "output", protocol.EvInterruptResolved, e, fmt.Sprintf("the replay's pack could not take event %q: %v", ev.Event, err))
		return
	}
	pr.last = res
}

// checkReply compares a recorded agent turn with the reply the replay's engine gave.
func (a *packAgent) checkReply(c *workflows.Conversation, e workflows.Event, t protocol.Turn) {
	pr := a.replay
	last := pr.last
	pr.last = nil
	if pr.diverged || last == nil {
		return
	}
	var body struct {
		Text  string `json:"text"`
		State string `json:"state"`
	}
	_ = json.Unmarshal(t.Content, &body) // a recorded turn; content without a text compares as ""
	if body.Text != last.Reply || body.State != "" && body.State != last.State {
		a.divergeAt(c, "output", protocol.EvConversationExchanged, e, fmt.Sprintf("turn %d: the source answered in state %q, the replay in state %q with another text", t.TurnIndex, body.State, last.State))
	}
}

// checkClose compares the source's conversation.closed with the replay's engine: a
// pack that completed must have completed in the same state.
func (a *packAgent) checkClose(c *workflows.Conversation, e workflows.Event) {
	pr := a.replay
	if pr.diverged {
		return
	}
	var p struct {
		Outcome struct {
			FinalState string `json:"finalState"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(e.Payload, &p) // a recorded event; without a final state there is nothing to compare
	if want := p.Outcome.FinalState; want != "" && (a.m.Status() != engine.StatusCompleted || a.m.CurrentState() != want) {
		a.divergeAt(c, "output", protocol.EvConversationClosed, e, fmt.Sprintf("the source pack completed in state %q; the replay's is %s in state %q", want, a.m.Status(), a.m.CurrentState()))
	}
}

// ReplayDone implements ReplayFolder: recorded rounds the replay never asked for mean
// it did not follow the recording; after the fold, rounds go to the model.
func (a *packAgent) ReplayDone(_ workflow.Context, c *workflows.Conversation, _ bool) {
	pr := a.replay
	if pr == nil || !pr.v2 {
		return
	}
	for _, n := range slices.Sorted(maps.Keys(pr.rounds)) {
		if !pr.used[n] && !pr.pendingRound(n) {
			a.divergeAt(c, "missing", protocol.EvAgentDecided, pr.roundEvents[n], fmt.Sprintf("the source recorded model round %d in state %q, which the replay never ran", n, pr.roundStates[n]))
			break
		}
	}
	pr.live = true
	a.publish(c)
}

// observeLegacy is the fold of forks recorded before GateForkReplay.
func (a *packAgent) observeLegacy(ctx workflow.Context, c *workflows.Conversation, t protocol.Turn) {
	pr := a.replay
	for pr.cursor < len(pr.src) {
		e := pr.src[pr.cursor]
		pr.cursor++
		switch e.Type {
		case protocol.EvConversationExchanged:
			var p struct {
				Turn protocol.Turn `json:"turn"`
			}
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			if p.Turn.Role == protocol.RoleUser && !a.m.Closed() {
				if _, err := a.m.Turn(a.runtime(ctx, c), turnText(p.Turn.Content)); err != nil {
					workflow.GetLogger(ctx).Warn("Fork replay: the pack could not fold a recorded user turn", "node", a.nodeID, "error", err)
				}
			}
			if p.Turn.MessageID == t.MessageID {
				a.publish(c)
				return
			}
		case protocol.EvInterruptResolved:
			var p struct {
				ResumeValue json.RawMessage `json:"resumeValue"`
			}
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			var ev workflows.InjectedEvent
			if json.Unmarshal(p.ResumeValue, &ev) != nil || ev.Event == "" || a.m.CanInject(ev.Event) != nil {
				continue
			}
			if _, err := a.m.Inject(a.runtime(ctx, c), ev.Event, injectedContext(ev.Context)); err != nil {
				workflow.GetLogger(ctx).Warn("Fork replay: the pack could not fold a recorded event", "node", a.nodeID, "error", err)
			}
		case protocol.EvConversationClosed:
			a.publish(c)
			return
		}
	}
	a.publish(c)
}
