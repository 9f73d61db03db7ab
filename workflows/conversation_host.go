package workflows

// The host's services to a conversation's agent beyond the conversation's own
// (conversation.go): what an agent that calls models and tools inside its turns asks
// of the run, so it can live outside this package (the PromptPack agent, package
// packagent) and still leave every record and every decision about the run's state
// to the run. They run in workflow code, as the agent's methods do.

import (
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// MessageID is the messageId of the conversation's turn index with role:
// "<conversationId>:<turnIndex>:<role>".
func (c *Conversation) MessageID(index int, role string) string { return c.messageID(index, role) }

// AgentInterruptPending reports whether the agent's own interrupt (AgentReply.Raise)
// is pending beside the conversation.
func (c *Conversation) AgentInterruptPending() bool { return c.agentIt != nil }

// AddChild records a child run the agent started (or how one ended) in the run's
// children (Snapshot.Children), as a core.subWorkflow node's is.
func (c *Conversation) AddChild(ch ChildRun) { c.r.addChild(ch) }

// Logger is the run's workflow logger.
func (c *Conversation) Logger() log.Logger { return workflow.GetLogger(c.r.ctx) }

// AwaitToolDecision raises the approval interrupt of a tool call of the conversation's
// node and waits for its decision (approvals_tool.go): nil when the call runs (with
// edited arguments after edit-accept), else the tool result the model reads instead.
// An error means the run is being cancelled.
func (c *Conversation) AwaitToolDecision(ctx workflow.Context, tr ToolDecisionRequest) (*convo.ToolCallResult, error) {
	return c.r.awaitToolDecision(ctx, c.NodeID, tr)
}

// Reemit records the source run's events evs again on a fork replay, in order, each
// caused by the re-recorded event its recorded causation names; an interrupt they
// request counts as the run's, so the next one the run raises at that node gets the
// key the source's next one had.
func (c *Conversation) Reemit(evs []Event) {
	r := c.r
	ids := map[string]string{}
	for _, e := range evs {
		if e.Type == protocol.EvInterruptRequested {
			r.counts[e.NodeID]++
		}
		ids[e.EventID] = r.emit(e.Type, e.NodeID, e.Payload, ids[e.CausationID])
	}
}

// ---- cancellation and pauses within a turn (cancel.go, pause.go) ----

// CancelRequested reports whether a CancelSignal asks the run to cancel.
func (c *Conversation) CancelRequested() bool { return c.r.cancelReq != nil }

// CutPending reports whether an immediate pause wants the running turn cut.
func (c *Conversation) CutPending() bool { return c.r.cutPending() }

// PauseCuts reports whether it is an immediate pause, and no cancel, that stops the
// turn: the agent then rewinds its state to before the turn and returns CutError, and
// the turn is taken anew once the run resumes.
func (c *Conversation) PauseCuts() bool {
	r := c.r
	return r.cancelReq == nil && r.ctx.Err() == nil && r.cutPending()
}

// CutError is the error of a turn an immediate pause cut (see PauseCuts).
func (c *Conversation) CutError() error { return errCut }

// StopError is the error of a turn a cancel stopped: the run is being cancelled (by a
// signal, or by Temporal).
func (c *Conversation) StopError() error {
	if err := c.r.checkCancelled(); err != nil {
		return err
	}
	return errCancelled
}

// ---- a busy turn's status (turnstatus.go) ----

// TurnBusy reports whether the agent's turn is one the run shows as busy.
func (c *Conversation) TurnBusy() bool { return c.r.busy != nil }

// ShowBusy publishes the busy turn's status before the turn waits outside the workflow
// task (an activity, a timer).
func (c *Conversation) ShowBusy() { c.r.showBusy() }

// MarkTask notes that the turn's wait outside the workflow task is over: local work
// from now on counts towards the next yield (YieldDue).
func (c *Conversation) MarkTask() { c.r.taskMark = workflow.Now(c.r.ctx) }

// YieldDue reports whether the busy turn's local work has run in one workflow task
// for localYieldAfter since MarkTask, so the turn should end the task (the Yield
// activity) before more.
func (c *Conversation) YieldDue() bool {
	r := c.r
	return r.busy != nil && workflow.Now(r.ctx).Sub(r.taskMark) >= localYieldAfter
}

// TurnStatusLive reports whether the run shows a busy turn's status as it goes
// (GateTurnStatus's answer): work done within the workflow task then counts as such
// (BeginLocalWait).
func (c *Conversation) TurnStatusLive() bool { return c.r.liveStatus }

// BeginLocalWait and EndLocalWait bracket a wait on work done within the workflow task
// (a local activity, a call the worker answers from memory), which the resolve that
// started the turn waits through (resolve_events.go).
func (c *Conversation) BeginLocalWait() { c.r.localWaits++ }

// EndLocalWait ends what BeginLocalWait began.
func (c *Conversation) EndLocalWait() { c.r.localWaits-- }

// ---- outages (outage.go) ----

// StallRequest is a call that begins to wait out an outage (BeginStall): what waits
// (Stall's Kind, Provider or Tool, CallID, NodeID, State, Round and LastError), since
// its first attempt, until when the run waits, and how often it says so again.
type StallRequest struct {
	Stall
	Since, Until time.Time
	RemindEvery  time.Duration
}

// StallWait is a call waiting out an outage, from BeginStall to EndStall.
type StallWait struct{ s *stall }

// BeginStall records that a call waits out an outage: the workflow.stalled event, the
// stalledOn tag, the current details.
func (c *Conversation) BeginStall(req StallRequest) *StallWait {
	return &StallWait{c.r.beginStall(&stall{Stall: req.Stall, since: req.Since, until: req.Until, remindEvery: req.RemindEvery})}
}

// EndStall records that the call no longer waits.
func (c *Conversation) EndStall(w *StallWait) { c.r.endStall(w.s) }

// AwaitStalled waits for f, the activity of the stalled call w, until it is ready,
// the run is being cancelled or an immediate pause wants the turn cut, recording a
// workflow.stalled reminder at each RemindEvery while it waits.
func (c *Conversation) AwaitStalled(ctx workflow.Context, f workflow.Future, w *StallWait) {
	r, s := c.r, w.s
	ready := func() bool { return f.IsReady() || r.cancelReq != nil || r.cutPending() }
	for !ready() && ctx.Err() == nil {
		due := s.since.Add(time.Duration(s.reminders+1) * s.remindEvery)
		if s.remindEvery <= 0 || !due.Before(s.until) {
			// No reminder is due before the wait ends (the activity's schedule-to-close
			// timeout ends it then).
			_ = workflow.Await(ctx, ready)
			break
		}
		if wait := due.Sub(workflow.Now(ctx)); wait > 0 {
			if ok, err := workflow.AwaitWithTimeout(ctx, wait, ready); ok || err != nil {
				break
			}
		}
		if !ready() {
			s.reminders++
			r.emitStalled(s)
		}
	}
}
