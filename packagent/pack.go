package packagent

// This file is the PromptPack conversation node (node type vendor.wop.pack): it serves
// the run core's conversation seam (workflows.ConversationAgent) with the Level-2
// engine of package engine.
// The engine decides; this file supplies its effects (model and tool activities,
// workflow.Now, the run event log) and maps its outcomes onto the conversation.
//
// Engine events become run events: a transition is agent.handoff (agent ids
// "<packId>:<state>"), each tool call agent.toolCalled / agent.toolReturned, each model
// round provider.usage plus an agent.decided record of what the model answered (which
// a fork replay reuses), max_visits workflow.loopback-limit, an exhausted budget
// cap.breached. Validator actions go to the workflow log only.
//
// While the engine is in a state that accepts injected events (`orchestration:
// external`, and hybrid) the node raises an external-event interrupt beside the
// conversation; resolving it with {"event", "context"} injects the event. An event sent
// while the state accepts none is refused (pack_events.go).

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// NodeConfig is the config of a vendor.wop.pack node: {"pack": "<pack id>"}, and
// for a pack without a workflow the prompt its conversation holds when the run's
// inputs.prompt names none ({"prompt": "<key>"}; else the pack's DefaultPrompt).
type NodeConfig struct {
	Pack   string `json:"pack"`
	Prompt string `json:"prompt,omitempty"`
	// AgentCall makes the node answer one message with member agent Prompt and complete
	// (a call of that agent, packagents.go).
	AgentCall bool `json:"agentCall,omitempty"`
}

// conversationPrompt is the prompt a run of pack p (which has no workflow) holds: the
// run's inputs.prompt, else the node's config.prompt, else the pack's default.
func conversationPrompt(p *packs.Pack, cfg NodeConfig, vars map[string]any) (string, error) {
	choice, _ := vars[packs.PromptInput].(string)
	if choice == "" {
		choice = cfg.Prompt
	}
	return p.ChoosePrompt(choice)
}

// packAgent is the conversation agent of a vendor.wop.pack node.
type packAgent struct {
	pack   *packs.Pack
	nodeID string
	m      *engine.Machine
	// replay holds the source run's recorded model and tool results on a fork replay.
	replay *packReplay
	// lastProvider is the canonical provider id of the latest round, which picks the
	// activity options of the next one.
	lastProvider string
	// notLocal is set once the worker refused a local round (see localRound).
	notLocal bool
	// publishedState is the state the node's search attributes last showed.
	publishedState string
	// turnKeys and turnActivityIDs are the idempotency keys and activity ids of the
	// current turn's tool calls (tooloutcome.go).
	turnKeys        map[string]string
	turnActivityIDs map[string]bool
	// turnModel is the model that answered the current turn's latest round.
	turnModel *protocol.TurnModel
}

func newPackAgent(ctx workflow.Context, c *workflows.Conversation, n *workflows.Node, saved json.RawMessage) (workflows.ConversationAgent, error) {
	var cfg NodeConfig
	if len(n.Config) > 0 {
		if err := json.Unmarshal(n.Config, &cfg); err != nil {
			return nil, fmt.Errorf("%s config must be {\"pack\": \"<id>\"}: %w", workflows.PackNodeType, err)
		}
	}
	if cfg.Pack == "" {
		return nil, fmt.Errorf("%s node %q: config.pack is required", workflows.PackNodeType, n.ID)
	}
	in := c.Input()
	p, err := decodePack(in, cfg.Pack)
	if err != nil {
		return nil, fmt.Errorf("%s node %q: %w", workflows.PackNodeType, n.ID, err)
	}
	resumed := len(saved) > 0 && string(saved) != "null"
	var st engine.State
	if resumed {
		if err := json.Unmarshal(saved, &st); err != nil {
			return nil, fmt.Errorf("restore pack %q state: %w", p.ID, err)
		}
	}
	vars := runVars(in.Inputs)
	if cfg.AgentCall {
		p = p.AsAgentCall(cfg.Prompt)
	} else if p.Conversational() && c.Changed(workflows.GateConversationPacks) {
		prompt := st.CurrentState // a conversation's one state is named after its prompt
		if !resumed {
			var err error
			if prompt, err = conversationPrompt(p, cfg, vars); err != nil {
				return nil, fmt.Errorf("%s node %q: %w", workflows.PackNodeType, n.ID, err)
			}
		}
		p = p.AsConversation(prompt)
	}
	ecfg := engine.Config{RunID: in.RunID, NodeID: n.ID, Pack: p, Vars: vars, OneTurn: cfg.AgentCall}
	if in.Limits != nil {
		ecfg.Limits = engine.TurnLimits(*in.Limits)
	}
	a := &packAgent{pack: p, nodeID: n.ID}
	if resumed {
		a.m, err = engine.Resume(ecfg, st)
	} else {
		a.m, err = engine.Start(ecfg, workflow.Now(ctx))
	}
	if err != nil {
		return nil, err
	}
	if c.Replaying() {
		if v2 := c.Changed(workflows.GateForkReplay); !v2 || !resumed {
			// A continued fork is past its re-fold (continue-as-new happens between live
			// turns only), so the fold since GateForkReplay needs no records then.
			a.replay = newPackReplay(c.SourceEvents())
			a.replay.v2, a.replay.sourceRunID = v2, in.Fork.SourceRunID
		}
	}
	return a, nil
}

// runVars decodes the run's inputs as template variables.
func runVars(raw json.RawMessage) map[string]any {
	vars := map[string]any{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &vars) // non-object inputs carry no variables
	}
	return vars
}

// agentID is the id events use for the pack in a state: "<packId>:<state>".
func (a *packAgent) agentID(state string) string { return a.pack.ID + ":" + state }

// Open implements ConversationAgent: turn 0 names the pack and its entry state; a
// "message" input is the first user turn.
func (a *packAgent) Open(_ workflow.Context, c *workflows.Conversation) (workflows.Opening, error) {
	st := a.m.CurrentState()
	op := workflows.Opening{
		AgentID: a.pack.ID,
		Title:   a.pack.Name,
		InitialContent: protocol.MustJSON(map[string]string{
			"text":  fmt.Sprintf("Conversation with %s (pack %s v%s), starting in state %s.", a.pack.Name, a.pack.ID, a.pack.Version, st),
			"pack":  a.pack.ID,
			"state": st,
		}),
	}
	// max_wall_time_sec is also a durable timer on the whole conversation, so an idle
	// conversation ends when its budget does: closed with a system turn that says so,
	// and the run fails budget_exhausted (DESIGN.md §8).
	if b := a.budget(); b != nil && b.MaxWallTimeSec > 0 {
		op.TimeoutMs = int64(b.MaxWallTimeSec) * 1000
		op.TimeoutCode = protocol.CodeBudgetExhausted
		op.TimeoutText = fmt.Sprintf("The conversation's wall-time budget is exhausted (max_wall_time_sec %d).", b.MaxWallTimeSec)
	}
	var in struct {
		Message json.RawMessage `json:"message"`
	}
	if raw := c.Input().Inputs; len(raw) > 0 && json.Unmarshal(raw, &in) == nil && len(in.Message) > 0 {
		op.FirstUserText = turnText(in.Message)
	}
	op.Raise = a.openingInterrupt(c)
	a.publish(c)
	return op, nil
}

// turnText extracts the text of a turn's content: {"text": …}, a JSON string, or the
// raw JSON.
func turnText(content json.RawMessage) string {
	var body struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(content, &body) == nil && body.Text != nil {
		return *body.Text
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	return string(content)
}

// Reply implements ConversationAgent: one engine turn per user message.
func (a *packAgent) Reply(ctx workflow.Context, c *workflows.Conversation, user protocol.Turn) (workflows.AgentReply, error) {
	if a.m.Closed() {
		if st := a.m.State(); st.ErrorCode == CodeReplayDiverged {
			// A fork replay that left its source's recording (pack_replay.go).
			return workflows.AgentReply{Silent: true, Close: &workflows.CloseRequest{
				Error:     &protocol.RunError{Code: CodeReplayDiverged, Message: "the fork replay diverged from its source run: " + st.ErrorMessage},
				FinalText: "Conversation closed: the fork replay diverged from its source run, so the pack cannot go on.",
			}}, nil
		}
		return workflows.AgentReply{Text: "This conversation has ended.", State: a.m.CurrentState(), SpeakerID: a.pack.ID}, nil
	}
	a.newTurn()
	before := a.m.State()
	res, err := a.m.Turn(a.runtime(ctx, c), turnText(user.Content))
	if err != nil {
		return workflows.AgentReply{}, err
	}
	if res.Status == engine.StatusStopped {
		return workflows.AgentReply{}, a.stopped(c, before)
	}
	return a.reply(c, res, false), nil
}

// CheckInject implements ConversationAgent.
// An event the current state does not take is refused as a misrouted one is (409, or
// 422 when no state takes it).
func (a *packAgent) CheckInject(_ *workflows.Conversation, ev workflows.InjectedEvent) error {
	if err := a.m.CanInject(ev.Event); err != nil {
		return &workflows.RefusedCheck{Check: a.refuseEvent(ev.Event, err)}
	}
	return nil
}

// Inject implements ConversationAgent: the event moves the state machine; a terminal
// target's prompt tells the user the outcome.
func (a *packAgent) Inject(ctx workflow.Context, c *workflows.Conversation, ev workflows.InjectedEvent) (workflows.AgentReply, error) {
	a.newTurn()
	before := a.m.State()
	res, err := a.m.Inject(a.runtime(ctx, c), ev.Event, injectedContext(ev.Context))
	if err != nil {
		return workflows.AgentReply{}, err
	}
	if res.Status == engine.StatusStopped {
		return workflows.AgentReply{}, a.stopped(c, before)
	}
	return a.reply(c, res, true), nil
}

// injectedContext is the text of an injected event's context (a JSON string, or the
// raw JSON of any other value).
func injectedContext(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// reply maps a TurnResult onto the conversation.
func (a *packAgent) reply(c *workflows.Conversation, res *engine.TurnResult, injected bool) workflows.AgentReply {
	rep := workflows.AgentReply{Text: res.Reply, State: res.State, SpeakerID: a.pack.ID,
		Content: protocol.MustJSON(map[string]string{"text": res.Reply, "state": res.State}), Model: a.turnModel}
	// An injected event into a non-terminal state runs no round: nothing to say.
	if injected && len(res.Segments) == 0 && !res.Done() {
		rep.Silent = true
	}
	if te := res.TurnError; te != nil {
		// The model could not be reached (pack_outage.go): what the turn said so far is
		// the agent's turn, and a system turn says why the rest is missing.
		rep.Silent = res.Reply == ""
		rep.Notice = &workflows.TurnNotice{
			Text:  fmt.Sprintf("This message got no answer: %s. The conversation stays open: send another message to try again.", te.Message),
			Error: &protocol.RunError{Code: te.Code, Message: te.Message},
		}
	}
	switch res.Status {
	case engine.StatusAwaitingEvent, engine.StatusAwaitingUser:
		if w := a.acceptsEvents(c, res); w != nil {
			if !c.AgentInterruptPending() || len(res.Transitions) > 0 {
				rep.Raise = a.externalInterrupt(w)
			}
		} else {
			rep.Clear = c.AgentInterruptPending()
		}
	case engine.StatusCompleted:
		st := a.m.Counters()
		rep.Close = &workflows.CloseRequest{
			Outcome: protocol.MustJSON(map[string]any{
				"pack": a.pack.ID, "finalState": res.State, "status": res.Status, "reply": res.Reply, "artifacts": orEmpty(st.Artifacts),
			}),
			FinalText: fmt.Sprintf("The %s workflow completed in state %s.", a.pack.Name, res.State),
		}
	default: // max_visits_exceeded, budget_exhausted, failed
		code := res.ErrorCode
		if code == "" {
			code = res.Status
		}
		rep.Close = &workflows.CloseRequest{
			Error:     &protocol.RunError{Code: code, Message: res.ErrorMessage},
			FinalText: fmt.Sprintf("Conversation closed: %s (%s).", res.ErrorMessage, code),
		}
	}
	if rep.Close != nil && res.Reply == "" {
		rep.Silent = true // nothing was said: only the system final turn
	}
	a.publish(c)
	return rep
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// externalInterrupt is the interrupt a pack raises in an external state: resolving it
// with {"event", "context"} injects the event.
func (a *packAgent) externalInterrupt(w *engine.AwaitingEvent) *workflows.AgentInterrupt {
	events := []string{}
	state := a.m.CurrentState()
	if w != nil {
		events, state = w.Events, w.State
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"event":   map[string]any{"type": "string", "enum": events},
			"context": map[string]any{"type": "string"},
		},
		"required": []string{"event"},
	}
	describe := fmt.Sprintf("Pack %s waits in external state %s for one of the events %s; resolve with {\"event\": …, \"context\": …}.",
		a.pack.ID, state, strings.Join(events, ", "))
	if st := a.pack.Workflow.States[state]; st != nil && st.OrchestrationOrDefault() == packs.OrchestrationHybrid {
		describe = fmt.Sprintf("Pack %s is in hybrid state %s: it answers messages and accepts the events %s; inject one with {\"event\": …, \"context\": …}.",
			a.pack.ID, state, strings.Join(events, ", "))
	}
	return &workflows.AgentInterrupt{
		Kind:         protocol.KindExternalEvent,
		EventType:    protocol.EventTypePackEvent,
		ResumeSchema: protocol.MustJSON(schema),
		Describe:     describe,
	}
}

// publish keeps the search attributes and the current details current.
func (a *packAgent) publish(c *workflows.Conversation) {
	st := a.m.Counters()
	a.setPackAttributes(c, st.CurrentState)
	var b strings.Builder
	fmt.Fprintf(&b, "Pack %s v%s in state **%s** (%s). Visits %d", a.pack.ID, a.pack.Version, st.CurrentState, st.Status, st.TotalVisits)
	if bud := a.budget(); bud != nil && bud.MaxTotalVisits > 0 {
		fmt.Fprintf(&b, "/%d", bud.MaxTotalVisits)
	}
	fmt.Fprintf(&b, ", tool calls %d", st.TotalToolCalls)
	if bud := a.budget(); bud != nil && bud.MaxToolCalls > 0 {
		fmt.Fprintf(&b, "/%d", bud.MaxToolCalls)
	}
	fmt.Fprintf(&b, ", model rounds %d, tokens %d in / %d out.", st.ModelRounds, st.Usage.InputTokens, st.Usage.OutputTokens)
	if w := a.m.Awaiting(); w != nil {
		fmt.Fprintf(&b, " Waiting for an injected event: %s.", strings.Join(w.Events, ", "))
	}
	c.SetDetails(b.String())
}

// decodePack is the pack id of the run's input, decoded from the JSON the run carries,
// with its Hash (not serialised with the pack) from RunInput.PackHashes.
func decodePack(in *workflows.RunInput, id string) (*packs.Pack, error) {
	b := in.Packs[id]
	var p *packs.Pack
	if len(b) > 0 {
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("pack %q of the run's input: %w", id, err)
		}
	}
	if p == nil {
		return nil, fmt.Errorf("pack %q is not part of the run's input", id)
	}
	if p.Hash == "" {
		p.Hash = in.PackHashes[p.ID]
	}
	return p, nil
}

func (a *packAgent) budget() *workflows.PackBudget {
	if a.pack.Workflow != nil && a.pack.Workflow.Engine != nil {
		return (*workflows.PackBudget)(a.pack.Workflow.Engine.Budget)
	}
	return nil
}

// TranscriptPage implements ConversationAgent: model rounds read the engine's
// transcript, the messages this execution holds.
func (a *packAgent) TranscriptPage(req activities.TranscriptPageRequest) (activities.TranscriptPage, error) {
	if req.Key != a.nodeID {
		return activities.TranscriptPage{}, fmt.Errorf("pack node %q has no transcript %q", a.nodeID, req.Key)
	}
	n := a.m.TranscriptLen()
	if req.From < 0 || req.To > n || req.From > req.To {
		return activities.TranscriptPage{}, fmt.Errorf("pack node %q: transcript range [%d, %d) is outside [0, %d)", a.nodeID, req.From, req.To, n)
	}
	msgs, start := a.m.TranscriptPage(req.From, req.To, req.MaxBytes)
	return activities.TranscriptPage{Messages: msgs, Start: start, Base: a.m.TranscriptBase(), Len: n}, nil
}

// Status implements ConversationAgent.
func (a *packAgent) Status() *workflows.PackStatus {
	st := a.m.Counters()
	return &workflows.PackStatus{
		PackID:       a.pack.ID,
		PackVersion:  a.pack.Version,
		PackHash:     a.pack.Hash,
		NodeID:       a.nodeID,
		State:        st.CurrentState,
		Status:       st.Status,
		Visits:       st.VisitCounts,
		TotalVisits:  st.TotalVisits,
		ToolCalls:    st.TotalToolCalls,
		ModelRounds:  st.ModelRounds,
		InputTokens:  st.Usage.InputTokens,
		OutputTokens: st.Usage.OutputTokens,
		Budget:       a.budget(),
		Artifacts:    st.Artifacts,
	}
}

// Save implements ConversationAgent: the engine state is carried across
// continue-as-new, its transcript cut to the latest round's messages (Checkpoint).
func (a *packAgent) Save() (json.RawMessage, error) {
	raw, err := json.Marshal(a.m.Checkpoint())
	if err != nil {
		return nil, fmt.Errorf("save pack %q state: %w", a.pack.ID, err)
	}
	return raw, nil
}

// runtime builds the engine Runtime of one turn.
func (a *packAgent) runtime(ctx workflow.Context, c *workflows.Conversation) *packRuntime {
	return &packRuntime{ctx: ctx, c: c, a: a}
}

// ---- the engine's Runtime ----

// packRuntime implements engine.Runtime with activities, workflow.Now and run events.
type packRuntime struct {
	ctx workflow.Context
	c   *workflows.Conversation
	a   *packAgent
	// silent drops events (fork replay re-folds without re-emitting).
	silent bool
	// replayedRound is set when the latest model round came from the source run's
	// record (a fork replay): its provider.usage is not emitted again.
	replayedRound bool
}

// activityError is a failed activity as the engine sees it: an OpenWOP error code and
// a message a person can read. Temporal's wrapping (activity type, event ids, worker
// identity) stays in the worker's log.
type activityError struct {
	code string
	msg  string
	err  error
}

func (e *activityError) Error() string     { return e.msg }
func (e *activityError) Unwrap() error     { return e.err }
func (e *activityError) ErrorCode() string { return e.code }

// newActivityError wraps a failed activity; what, when set, names the call (a tool).
func (rt *packRuntime) newActivityError(what string, err error) error {
	workflow.GetLogger(rt.ctx).Warn("Activity failed", "pack", rt.a.pack.ID, "call", what, "error", err)
	msg := workflows.ActivityMessage(err)
	if what != "" {
		msg = what + ": " + msg
	}
	return &activityError{code: workflows.ActivityErrorCode(err), msg: msg, err: err}
}

// Model implements engine.Runtime: one ModelRound activity, a local one after a round
// the scripted mock answered (localround.go), or, on a fork replay, the source run's
// recorded result (pack_replay.go). A cancel of the run cancels the activity in flight
// (pack_cancel.go).
func (rt *packRuntime) Model(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
	var out convo.ModelRoundResult
	recorded, err := rt.replayedModel(in, &out)
	if err != nil {
		return nil, err
	}
	if !recorded {
		// The reply's streamed chunks name the agent turn it is for. The input is not
		// part of what a replay compares, so runs recorded without it replay unchanged.
		in.MessageID = rt.c.MessageID(rt.c.NextTurnIndex(), protocol.RoleAgent)
		local, ok, err := rt.localRound(in)
		if ok {
			out = local
		} else if err == nil {
			if err := checkActivityInput(in); err != nil {
				return nil, err
			}
			opts := activities.ModelRoundOptions(cmp.Or(rt.a.lastProvider, in.Provider))
			opts.Summary = activities.ModelRoundSummary(in)
			actx, cancel := workflow.WithCancel(rt.ctx)
			actx = workflow.WithActivityOptions(actx, opts)
			var acts *activities.Activities
			started := workflow.Now(rt.ctx)
			f := workflow.ExecuteActivity(actx, acts.ModelRound, in)
			rt.awaitActivity(f, cancel)
			err = f.Get(actx, &out)
			if outageError(err) && !rt.Stopped() && rt.c.Changed(workflows.GateOutage) {
				err = rt.outlastModel(in, started, err, &out) // pack_outage.go
			}
		}
		if err != nil {
			if temporal.IsCanceledError(err) {
				return nil, rt.stoppedErr(err)
			}
			if errors.Is(err, engine.ErrUnavailable) || errors.Is(err, engine.ErrStopped) {
				return nil, err // the turn ends without an answer (pack_outage.go), or stops
			}
			return nil, rt.newActivityError("", err)
		}
	}
	rt.a.lastProvider = out.Provider
	if out.Provider != "" && out.Model != "" {
		rt.a.turnModel = &protocol.TurnModel{Provider: out.Provider, Model: out.Model}
	}
	// The round as the model answered it, so a fork replay can reuse it.
	rt.emit(protocol.EvAgentDecided, rt.decided(in, &out, recorded))
	if recorded && rt.a.replay != nil && rt.a.replay.v2 {
		rt.replayedRound = true
		out.Usage = convo.Usage{} // spent by the source run, not by this one
	}
	return &out, nil
}

// maxActivityInputBytes bounds a model round's input: the rendered prompt, the tools
// and the transcript tail. Inputs are small by construction (artifacts, replies and
// tool arguments are bounded); one past this would be refused by Temporal, so the
// round fails with payload_too_large instead.
const maxActivityInputBytes = 1 << 20

func checkActivityInput(in convo.ModelRoundInput) error {
	b, err := json.Marshal(in)
	if err != nil {
		return &activityError{msg: "encode the round's input: " + err.Error(), err: err}
	}
	if len(b) > maxActivityInputBytes {
		msg := fmt.Sprintf("the round's input is %d bytes, more than the %d a model round may take", len(b), maxActivityInputBytes)
		return &activityError{code: protocol.CodePayloadTooLarge, msg: msg, err: errors.New(msg)}
	}
	return nil
}

// Tools implements engine.Runtime: the batch's tool calls run concurrently; results
// come back in call order. Runs that began before tool bindings were routed keep the
// ToolCall-only path (legacyTools); the others route each batch (packtools.go). A cancel
// of the run cancels the calls in flight (pack_cancel.go).
func (rt *packRuntime) Tools(calls []convo.ToolCallInput) ([]*convo.ToolCallResult, error) {
	run := rt.routedTools
	if !rt.c.Changed(workflows.GateToolRoutes) {
		run = rt.legacyTools
	}
	for _, c := range calls {
		if rt.isAgentCall(c) {
			return rt.agentCallTools(calls, run)
		}
	}
	return run(calls)
}

// legacyTools runs every call as a ToolCall activity on the host's task queue; a call
// that fails after its retries fails the turn.
func (rt *packRuntime) legacyTools(calls []convo.ToolCallInput) ([]*convo.ToolCallResult, error) {
	out := make([]*convo.ToolCallResult, len(calls))
	futures := make([]workflow.Future, len(calls))
	actx, cancel := workflow.WithCancel(rt.ctx)
	for i, in := range calls {
		r, recorded, err := rt.replayedTool(in)
		if err != nil {
			return nil, err
		}
		if recorded {
			out[i] = r
			continue
		}
		opts := activities.ToolCallOptions()
		opts.Summary = activities.ToolCallSummary(in)
		var acts *activities.Activities
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(actx, opts), acts.ToolCall, in)
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		rt.awaitActivity(f, cancel)
		var r convo.ToolCallResult
		if err := f.Get(rt.ctx, &r); err != nil {
			if temporal.IsCanceledError(err) {
				return nil, rt.stoppedErr(err)
			}
			return nil, rt.newActivityError(fmt.Sprintf("tool %s (call %s)", calls[i].Tool, calls[i].CallID), err)
		}
		out[i] = &r
	}
	return out, nil
}

// Now implements engine.Runtime.
func (rt *packRuntime) Now() time.Time { return workflow.Now(rt.ctx) }

// SkillsOffered implements engine.SkillsRuntime: asked at the first round in a state
// that has skills.
func (rt *packRuntime) SkillsOffered() bool { return rt.c.Changed(workflows.GatePackSkills) }

// ValidatorParamsRead implements engine.ValidatorsRuntime: asked at the first validator
// whose direction, expect_match or params.message the earlier reading ignored.
func (rt *packRuntime) ValidatorParamsRead() bool { return rt.c.Changed(workflows.GateValidatorParams) }

// PackLimitsWin implements engine.PackLimitsRuntime; the engine asks only where the
// host's per-turn limit would end a turn the pack's own bounds let go on.
func (rt *packRuntime) PackLimitsWin() bool { return rt.c.Changed(workflows.GatePackLimits) }

// Emit implements engine.Runtime: engine events become OpenWOP run events.
func (rt *packRuntime) Emit(ev engine.Event) {
	a := rt.a
	switch ev.Kind {
	case engine.EventTransition:
		t := ev.Transition
		p := protocol.AgentHandoff{
			FromAgentID: a.agentID(t.From), ToAgentID: a.agentID(t.To), Reason: t.Event,
			Event: t.Event, Context: t.Context, Origin: t.Origin, FromState: t.From, ToState: t.To,
			Visits: t.Visits, TotalVisits: t.TotalVisits, ToolCalls: t.ToolCalls, Transitions: t.Transitions,
			HostExtras: t.HostExtras,
		}
		if t.Redirected {
			p.Redirected, p.OriginalTarget = true, t.OriginalTarget
		}
		rt.emit(protocol.EvAgentHandoff, p)
	case engine.EventModelRound:
		if rt.replayedRound {
			rt.replayedRound = false
			return // the source run spent it and reported it
		}
		r := ev.Round
		provider, model := cmp.Or(r.Provider, "unknown"), cmp.Or(r.Model, "unknown")
		rt.emit(protocol.EvProviderUsage, protocol.ProviderUsage{
			Provider: provider, Model: model, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
			TotalTokens: r.InputTokens + r.OutputTokens, NodeID: a.nodeID,
		})
	case engine.EventToolCall:
		t := ev.ToolCall
		rt.emit(protocol.EvAgentToolCalled, protocol.AgentToolCalled{
			AgentID: a.agentID(ev.State), ToolName: t.Tool, CallID: t.CallID, Inputs: t.Args, Round: t.Round, System: t.System,
		})
	case engine.EventToolResult:
		t := ev.ToolResult
		status := "ok"
		if t.IsError {
			status = "error"
		}
		rt.emit(protocol.EvAgentToolReturned, protocol.AgentToolReturned{
			AgentID: a.agentID(ev.State), ToolName: t.Tool, CallID: t.CallID, Outcome: t.Content, Status: status, Round: t.Round,
		})
	case engine.EventMaxVisits:
		mv := ev.MaxVisits
		rt.emit(protocol.EvLoopbackLimit, protocol.LoopbackLimit{
			NodeID: a.nodeID, Iterations: max(mv.VisitCount, 1), Limit: mv.MaxVisits, State: mv.OriginalTarget,
			FromState: mv.From, Event: mv.Event, RedirectedTo: mv.RedirectedTo, Terminated: mv.Terminated,
		})
	case engine.EventBudgetExhausted:
		b := ev.Budget
		kind, limit, observed := "loop-iterations", b.Max, b.Current
		if b.Limit == engine.LimitWallTime {
			kind, limit, observed = "run-duration", b.Max*1000, b.Current*1000
		}
		p := protocol.CapBreached{Kind: kind, Limit: limit, Observed: observed, NodeID: a.nodeID, State: ev.State, Transitions: b.Transitions}
		if b.Host {
			p.HostLimit, p.Scope = b.Limit, "turn"
		} else {
			p.Budget = b.Limit
		}
		rt.emit(protocol.EvCapBreached, p)
	case engine.EventValidator:
		v := ev.Validator
		workflow.GetLogger(rt.ctx).Info("Validator enforced", "pack", a.pack.ID, "state", ev.State, "validator", v.Type, "action", v.Action, "reason", v.Reason)
	}
}

func (rt *packRuntime) emit(typ string, payload any) {
	if rt.silent {
		return
	}
	rt.c.Emit(typ, payload, "")
}

// packRoundRecord is the decision of an agent.decided event: one model round as the
// model answered it.
type packRoundRecord struct {
	Kind         string           `json:"kind"` // "model_round"
	Round        int              `json:"round"`
	State        string           `json:"state"`
	Text         string           `json:"text,omitempty"`
	ToolCalls    []convo.ToolCall `json:"toolCalls,omitempty"`
	Provider     string           `json:"provider"`
	Model        string           `json:"model"`
	Usage        convo.Usage      `json:"usage"`
	FinishReason string           `json:"finishReason,omitempty"`
}
