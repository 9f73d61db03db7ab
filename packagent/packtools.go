package packagent

// This file runs a pack's tool calls where the worker's bindings say (package tools).
// The workflow never reads the bindings: the RouteTools local activity answers, for each
// call of a batch, where it runs, and Temporal records that answer in the history. A
// replay reads the recorded routes, so a binding changed while a run waits never breaks
// it; the change applies from the run's next batch. A call routed to an activity binding
// is scheduled here, on the binding's task queue, with the call's arguments object as
// the single input; every other call is a ToolCall activity on the host's queue.
//
// A call whose activity fails after its retries becomes an error result the model reads
// (it may try something else); only cancellation ends the turn.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/workflows"
)

// routedTools routes the batch's live calls (a fork replay answers the others from the
// source run's records) and runs them concurrently.
func (rt *packRuntime) routedTools(calls []convo.ToolCallInput) ([]*convo.ToolCallResult, error) {
	out := make([]*convo.ToolCallResult, len(calls))
	var live []int
	for i, in := range calls {
		r, recorded, err := rt.replayedTool(in)
		if err != nil {
			return nil, err
		}
		if recorded {
			rt.replayDecision(in.CallID)
			out[i] = r
			continue
		}
		live = append(live, i)
	}
	if len(live) == 0 {
		return out, nil
	}
	tenant := rt.c.Input().Owner.Tenant
	req := activities.RouteToolsInput{RunID: calls[live[0]].RunID, PackID: rt.a.pack.ID}
	for _, i := range live {
		calls[i].IdempotencyKey = rt.idempotencyKey(tenant, calls[i])
		req.Calls = append(req.Calls, activities.ToolRouteCall{
			CallID: calls[i].CallID, Tool: calls[i].Tool, Effect: rt.a.pack.Tools[calls[i].Tool].Effect(),
		})
	}
	opts := activities.RouteToolsOptions()
	names := make([]string, len(req.Calls))
	for i, c := range req.Calls {
		names[i] = c.Tool
	}
	// The Temporal UI shows it on the local activity's marker (metadata only: replay
	// does not compare it).
	opts.Summary = "route tool calls: " + strings.Join(names, ", ")
	lctx := workflow.WithLocalActivityOptions(rt.ctx, opts)
	var acts *activities.Activities
	var routes activities.RouteToolsResult
	f := workflow.ExecuteLocalActivity(lctx, acts.RouteTools, req)
	if rt.c.TurnStatusLive() {
		// Work within the workflow task, which the resolve that started the turn waits
		// through (workflows/resolve_events.go).
		rt.c.BeginLocalWait()
		_ = workflow.Await(rt.ctx, f.IsReady)
		rt.c.EndLocalWait()
	}
	if err := f.Get(lctx, &routes); err != nil {
		if temporal.IsCanceledError(err) {
			return nil, err
		}
		return nil, rt.newActivityError("route the tool calls", err)
	}
	if len(routes.Routes) != len(live) {
		return nil, rt.newActivityError("route the tool calls", fmt.Errorf("%d calls got %d routes", len(live), len(routes.Routes)))
	}

	// The tool calls run outside the workflow task: the run shows where its turn is.
	rt.beforeBlock()
	// Calls that need a person's decision wait for it first (pack_approvals.go).
	decided, err := rt.approveCalls(calls, live, routes.Routes)
	if err != nil {
		return nil, err
	}

	futures := make([]workflow.Future, len(live))
	started := make([]time.Time, len(live))
	actIDs := make([]string, len(live))
	ids := map[string]bool{}
	actx, cancel := workflow.WithCancel(rt.ctx) // a cancel of the run cancels the calls (pack_cancel.go)
	for j, i := range live {
		if decided != nil && decided[j] != nil {
			continue // rejected or expired: not run
		}
		started[j] = workflow.Now(rt.ctx)
		if routes.Routes[j].Activity != nil {
			actIDs[j] = batchActivityID(calls[i].IdempotencyKey, ids)
		}
		futures[j] = rt.startToolWith(actx, calls[i], routes.Routes[j], actIDs[j], nil, 0)
	}
	for j, i := range live {
		if decided != nil && decided[j] != nil {
			out[i] = decided[j]
			continue
		}
		// A call the worker answers from memory (the mock's tool_results, no executor)
		// counts as work of the turn the resolve that started it waits through
		// (workflows/resolve_events.go); any other call releases it.
		quick := rt.c.TurnStatusLive() && (routes.Routes[j].Kind == activities.RouteMock || routes.Routes[j].Kind == activities.RouteNone)
		if quick {
			rt.c.BeginLocalWait()
		}
		rt.awaitActivity(futures[j], cancel)
		if quick {
			rt.c.EndLocalWait()
		}
		if route := routes.Routes[j]; route.Outage != nil {
			if err := futures[j].Get(rt.ctx, nil); outageError(err) && rt.c.Changed(workflows.GateOutage) {
				futures[j] = rt.outlastTool(actx, calls[i], route, actIDs[j], started[j], futures[j], cancel)
			}
		}
		r, err := rt.toolOutcome(futures[j], calls[i], routes.Routes[j])
		if err != nil {
			return nil, rt.stoppedErr(err)
		}
		out[i] = r
	}
	return out, nil
}

// batchActivityID is the ActivityID of a call routed to an activity binding: its
// idempotency key, so the team's activity reads it from its activity info; a provider
// that repeats a call id in one round, or a call that repeats another of its batch,
// gets a suffix rather than a clash (ids holds those of the batch).
func batchActivityID(key string, ids map[string]bool) string {
	id := key
	for n := 2; ids[id]; n++ {
		id = fmt.Sprintf("%s-%d", key, n)
	}
	ids[id] = true
	return id
}

// startToolWith schedules one call where its route says, on ctx (activityID is the
// ActivityID of a call routed to an activity binding); with outage set, as the wait
// through an outage of its target that may last remaining (pack_outage.go).
func (rt *packRuntime) startToolWith(ctx workflow.Context, in convo.ToolCallInput, route activities.ToolRoute, activityID string,
	outage *activities.OutagePolicy, remaining time.Duration) workflow.Future {
	summary := activities.ToolCallSummary(in)
	if route.Target != "" {
		summary += " · " + route.Target
	}
	if outage != nil {
		summary += " · waiting out an outage"
	}
	if t := route.Activity; t != nil {
		rt.reuseActivityID(ctx, activityID)
		opts := workflow.ActivityOptions{
			ActivityID:             activityID,
			TaskQueue:              t.TaskQueue,
			StartToCloseTimeout:    t.StartToCloseTimeout,
			ScheduleToCloseTimeout: t.ScheduleToCloseTimeout,
			HeartbeatTimeout:       t.HeartbeatTimeout,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
				MaximumAttempts: max(route.MaxAttempts, 1),
			},
			Summary: summary,
		}
		if opts.StartToCloseTimeout == 0 && opts.ScheduleToCloseTimeout == 0 {
			opts.StartToCloseTimeout = activities.ToolCallOptions().StartToCloseTimeout
		}
		if outage != nil {
			opts = activities.OutageRetryOptions(opts, *outage, remaining)
		}
		args := in.Args
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), t.Type, args)
	}
	opts := activities.ToolCallOptions()
	if route.StartToCloseTimeout > 0 {
		opts.StartToCloseTimeout = route.StartToCloseTimeout
	}
	if route.MaxAttempts > 0 {
		opts.RetryPolicy.MaximumAttempts = route.MaxAttempts
	}
	if outage != nil {
		opts = activities.OutageRetryOptions(opts, *outage, remaining)
	}
	opts.Summary = summary
	var acts *activities.Activities
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), acts.ToolCall, in)
}

// toolOutcome waits for one call: its result, or an error result when its activity
// failed after its retries. Only a cancellation is returned as an error. A call of a
// write, external or undeclared tool that may have been applied gets the unknown
// outcome result (unknownOutcome).
func (rt *packRuntime) toolOutcome(f workflow.Future, in convo.ToolCallInput, route activities.ToolRoute) (*convo.ToolCallResult, error) {
	ctx := rt.ctx
	var err error
	if route.Activity != nil {
		var raw json.RawMessage
		if err = f.Get(ctx, &raw); err == nil {
			if len(raw) == 0 {
				raw = json.RawMessage(`null`)
			}
			return &convo.ToolCallResult{Content: raw}, nil
		}
	} else {
		var r convo.ToolCallResult
		if err = f.Get(ctx, &r); err == nil {
			return &r, nil
		}
	}
	if temporal.IsCanceledError(err) {
		return nil, err
	}
	if mayHaveApplied(err) && rt.a.pack.Tools[in.Tool].Effect() != "read" && rt.c.Changed(workflows.GateToolOutcome) {
		return unknownOutcome(in, err), nil
	}
	msg := fmt.Sprintf("tool %s failed: %s", in.Tool, failureMessage(err))
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED && route.MaxAttempts > 1 {
		msg += fmt.Sprintf(" (%d attempts)", route.MaxAttempts)
	}
	b, _ := json.Marshal(map[string]string{"error": msg})
	return &convo.ToolCallResult{Content: b, IsError: true}, nil
}

// failureMessage is what the model reads of a failed tool activity: the application
// error's message, or which timeout expired; never the activity's ids or worker.
func failureMessage(err error) string {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		kind := map[enumspb.TimeoutType]string{
			enumspb.TIMEOUT_TYPE_START_TO_CLOSE:    "start-to-close",
			enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START: "schedule-to-start",
			enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE: "schedule-to-close",
			enumspb.TIMEOUT_TYPE_HEARTBEAT:         "heartbeat",
		}[te.TimeoutType()]
		if kind == "" {
			kind = "activity"
		}
		return "no result before its " + kind + " timeout"
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	var panicErr *temporal.PanicError
	if errors.As(err, &panicErr) {
		return "the tool's activity panicked: " + panicErr.Error()
	}
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		if cause := errors.Unwrap(actErr); cause != nil {
			return cause.Error()
		}
	}
	return err.Error()
}
