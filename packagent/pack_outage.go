package packagent

// Waiting out an outage. A model round on a real provider makes a few quick attempts
// (activities.ModelRoundOptions); one that still fails with a retryable error (the
// provider refuses connections, answers 5xx or 429, times out) does not end the run:
//
//  1. The ModelOutagePolicy local activity answers the worker's policy for the
//     provider (how long to wait, how often to try); Temporal records the answer.
//  2. The run is stalled: a workflow.stalled event (again every RemindEvery while it
//     waits), the Snapshot's Stalled, the stalledOn tag of WopTags
//     ("model:<provider>" or "tool:<name>") and the Temporal UI's current details say
//     what it waits for, since when, until when, and the last error.
//  3. The round is scheduled again with unlimited attempts backing off to the policy's
//     MaxInterval, within what is left of RetryFor (counted from the round's first
//     attempt). Temporal retries it server side: the wait adds a few events to the
//     history, not one per attempt. A cancel of the run cancels it at once.
//  4. When the provider answers, the stall clears and the turn goes on. When RetryFor
//     passes first, the turn ends without its answer (engine.ErrUnavailable): a system
//     turn tells the user the model is unavailable, the conversation stays open, and
//     the next message tries again. A permanent error (400, 401, 403) fails as before.
//
// A tool call whose binding sets retry_for (activities.ToolRoute.Outage) waits out an
// outage of its target the same way; past retry_for the model gets its error result.
//
// Runs recorded before this (GateOutage, asked when a round or call first fails
// that way) failed the run (a model round) or gave the model the error (a tool call).

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// outageError reports whether err, a failed activity, gave up on a retryable failure
// (its attempts or its time ran out), as an outage does: not a cancellation, not a
// non-retryable failure (a 400, 401 or 403, a mock's error), not a panic.
func outageError(err error) bool {
	if err == nil || temporal.IsCanceledError(err) {
		return false
	}
	var actErr *temporal.ActivityError
	if !errors.As(err, &actErr) || actErr.RetryState() == enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE {
		return false
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && (appErr.NonRetryable() || slices.Contains(activities.NonRetryableErrorTypes, appErr.Type())) {
		return false
	}
	var panicErr *temporal.PanicError
	return !errors.As(err, &panicErr)
}

// lastFailure is the readable failure of a call that gave up: the last attempt's error
// rather than the timeout that ended the wait; its code, or def.
func lastFailure(err error, def string) (code, msg string) {
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE {
		if cause := errors.Unwrap(te); cause != nil {
			err = cause
		}
	}
	return cmp.Or(workflows.ActivityErrorCode(err), def), workflows.ActivityMessage(err)
}

// outlastModel waits out the outage of the provider of round in, whose quick attempts
// (begun at started) failed with first. It returns the round's result once the provider
// answers, the ErrUnavailable activity error when the policy's time passes first, or
// the error that ended the wait otherwise (a cancellation, a permanent error).
func (rt *packRuntime) outlastModel(in convo.ModelRoundInput, started time.Time, first error, out *convo.ModelRoundResult) error {
	lctx := workflow.WithLocalActivityOptions(rt.ctx, activities.ModelOutageOptions())
	var acts *activities.Activities
	var pol activities.ModelOutageResult
	if err := workflow.ExecuteLocalActivity(lctx, acts.ModelOutagePolicy, activities.ModelOutageInput{ProviderKey: in.Provider, PackID: in.PackID}).Get(lctx, &pol); err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		return rt.unavailable(first, 0)
	}
	remaining := pol.Policy.RetryFor - workflow.Now(rt.ctx).Sub(started)
	if remaining <= 0 {
		return rt.unavailable(first, pol.Policy.RetryFor)
	}
	code, msg := lastFailure(first, protocol.CodeModelUnavailable)
	s := rt.c.BeginStall(workflows.StallRequest{Stall: workflows.Stall{Kind: "model", Provider: pol.Provider, NodeID: rt.a.nodeID, State: in.State, Round: in.Round,
		LastError: &protocol.RunError{Code: code, Message: msg}}, Since: started, Until: started.Add(pol.Policy.RetryFor), RemindEvery: pol.Policy.RemindEvery})
	defer rt.c.EndStall(s)
	rt.beforeBlock()

	opts := activities.OutageRetryOptions(activities.ModelRoundOptions(pol.Provider), pol.Policy, remaining)
	opts.Summary = activities.ModelRoundSummary(in) + " · waiting out an outage"
	actx, cancel := workflow.WithCancel(rt.ctx)
	actx = workflow.WithActivityOptions(actx, opts)
	f := workflow.ExecuteActivity(actx, acts.ModelRound, in)
	rt.awaitStalled(f, cancel, s)
	err := f.Get(actx, out)
	switch {
	case err == nil, temporal.IsCanceledError(err):
		return err
	case outageError(err):
		return rt.unavailable(err, pol.Policy.RetryFor)
	}
	return err
}

// unavailable is the error of a model round the run gave up waiting for: the turn ends
// without its answer (engine.ErrUnavailable), and the user is told why.
func (rt *packRuntime) unavailable(err error, waited time.Duration) error {
	_, msg := lastFailure(err, protocol.CodeModelUnavailable)
	text := "the model is unavailable: " + msg
	if waited > 0 {
		text += fmt.Sprintf(" (retried for %s)", waited)
	}
	workflow.GetLogger(rt.ctx).Warn("Model unavailable; the turn ends without an answer", "pack", rt.a.pack.ID, "error", err)
	return &activityError{code: protocol.CodeModelUnavailable, msg: text, err: errors.Join(engine.ErrUnavailable, err)}
}

// outlastTool waits out the outage of the target of call in (route), whose attempts
// (begun at started) failed with first. It returns the future of the call's last
// activity: the one that failed, or the one that waited.
func (rt *packRuntime) outlastTool(ctx workflow.Context, in convo.ToolCallInput, route activities.ToolRoute, activityID string, started time.Time,
	first workflow.Future, cancel workflow.CancelFunc) workflow.Future {
	pol := *route.Outage
	remaining := pol.RetryFor - workflow.Now(rt.ctx).Sub(started)
	if remaining <= 0 {
		return first
	}
	code, msg := lastFailure(first.Get(rt.ctx, nil), protocol.CodeToolError)
	s := rt.c.BeginStall(workflows.StallRequest{Stall: workflows.Stall{Kind: "tool", Tool: in.Tool, CallID: in.CallID, NodeID: rt.a.nodeID, State: in.State, Round: in.Round,
		LastError: &protocol.RunError{Code: code, Message: msg}}, Since: started, Until: started.Add(pol.RetryFor), RemindEvery: pol.RemindEvery})
	defer rt.c.EndStall(s)
	rt.beforeBlock()
	f := rt.startToolWith(ctx, in, route, activityID, &pol, remaining)
	rt.awaitStalled(f, cancel, s)
	return f
}

// awaitStalled waits for f as rt.await does, recording s's reminders while it waits
// (Conversation.AwaitStalled).
func (rt *packRuntime) awaitStalled(f workflow.Future, cancel workflow.CancelFunc, s *workflows.StallWait) {
	rt.c.AwaitStalled(rt.ctx, f, s)
	if !f.IsReady() && rt.Stopped() {
		cancel()
	}
	rt.c.MarkTask()
}
