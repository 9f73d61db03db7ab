package packagent

// Cancelling a pack turn. A cancel (CancelSignal, or Temporal cancellation) lands in
// runner.cancelReq (or cancels the run's context) while the pack's engine runs a turn.
// The engine asks Runtime.Stopped before every model round and tool batch, and the
// model or tool activity in flight is cancelled at once:
//
//   - The workflow waits for the activity and for a cancel at the same time; on a
//     cancel it cancels the activity's context and gets a CanceledError back at once
//     (WaitForCancellation false, the SDK's default): the run writes node.cancelled and
//     run.cancelled without waiting for the activity to acknowledge, so a provider
//     that ignores its context cannot hold the cancel up.
//   - The activity learns of the cancel from the answer to its next heartbeat (every
//     activities.HeartbeatInterval, 1 s; the worker lets heartbeats through that
//     often), and the SDK cancels its context, which aborts the provider's HTTP call.
//     Whatever it returns afterwards is discarded.
//
// Runs that recorded a cancel in the middle of a turn before this change went on with
// the turn (GateAgentCancel), and keep doing so on replay.

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/workflows"
)

// cancelPending reports whether the run is being cancelled.
func (rt *packRuntime) cancelPending() bool {
	return rt.c.CancelRequested() || rt.ctx.Err() != nil
}

// Stopped implements engine.Runtime: a pending cancel stops the turn.
// An immediate pause stops it too (workflows/pause.go): the turn is cut, and answered
// anew once the run resumes.
func (rt *packRuntime) Stopped() bool {
	return rt.cancelPending() && rt.c.Changed(workflows.GateAgentCancel) || rt.c.CutPending()
}

// await blocks until f is ready or the run is being cancelled; in the latter case it
// cancels the activity behind f (cancel is the CancelFunc of its context). f.Get then
// returns at once.
func (rt *packRuntime) await(f workflow.Future, cancel workflow.CancelFunc) {
	c := rt.c
	_ = workflow.Await(rt.ctx, func() bool { return f.IsReady() || c.CancelRequested() || c.CutPending() })
	if !f.IsReady() && rt.Stopped() {
		cancel()
	}
}

// awaitActivity is await for an activity, which runs outside the workflow task: the
// run first shows where its turn is (beforeBlock).
func (rt *packRuntime) awaitActivity(f workflow.Future, cancel workflow.CancelFunc) {
	rt.beforeBlock()
	rt.await(f, cancel)
	rt.c.MarkTask()
}

// beforeBlock is called before the turn waits outside the workflow task (an activity,
// a timer): the search attributes show the busy turn's status and the pack's state
// (workflows/turnstatus.go).
func (rt *packRuntime) beforeBlock() {
	if !rt.c.TurnBusy() {
		return
	}
	rt.c.ShowBusy()
	rt.a.setPackAttributes(rt.c, rt.a.m.CurrentState())
}

// stoppedErr turns the CanceledError of an activity the cancel stopped into the
// engine's ErrStopped; any other error is returned as it is.
func (rt *packRuntime) stoppedErr(err error) error {
	if temporal.IsCanceledError(err) && rt.Stopped() {
		return fmt.Errorf("%w: %v", engine.ErrStopped, err)
	}
	return err
}

// stopped is the error of a turn the engine stopped: errCut when an immediate pause
// stopped it (the pack's state rewound to before, so the turn is taken anew once the
// run resumes; workflows/pause.go), else stopReply's.
func (a *packAgent) stopped(c *workflows.Conversation, before engine.State) error {
	if c.PauseCuts() {
		a.m.Rewind(before)
		return c.CutError()
	}
	return a.stopReply(c)
}

// stopReply is the error a pack's Reply or Inject returns for a turn the engine
// stopped: the run is being cancelled (by a signal, or by Temporal).
func (a *packAgent) stopReply(c *workflows.Conversation) error {
	return c.StopError()
}
