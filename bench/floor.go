package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// The floor: the least a conversational turn can cost on Temporal. A workflow waits
// for a signal, runs one no-op activity and makes the result visible to a query. It
// runs on a worker of its own task queue on the same server and client as the host.
// The reference floor runs its activity as a local activity, as the host runs the
// scripted mock's rounds; the activity floor runs it as an activity task, as the host
// runs a real model's.
const (
	floorTaskQueue    = "wop-bench-floor"
	floorWorkflowName = "WopBenchFloor"
	floorActivityName = "WopBenchFloorNoop"
	floorSignal       = "turn"
	floorQuery        = "done"
	floorStopSignal   = "stop"
)

// floorWorkflow answers every "turn" signal (its turn number) with one activity, a
// local one when local is set, and publishes the last finished turn through the "done"
// query. It ends on "stop".
func floorWorkflow(ctx workflow.Context, local bool) (int, error) {
	done := 0
	if err := workflow.SetQueryHandler(ctx, floorQuery, func() (int, error) { return done, nil }); err != nil {
		return 0, err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	turns := workflow.GetSignalChannel(ctx, floorSignal)
	stop := workflow.GetSignalChannel(ctx, floorStopSignal)
	stopped := false
	for !stopped {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(turns, func(c workflow.ReceiveChannel, _ bool) {
			var n int
			c.Receive(ctx, &n)
			f := workflow.ExecuteActivity
			if local {
				f = workflow.ExecuteLocalActivity
			}
			var out int
			if err := f(ctx, floorActivityName, n).Get(ctx, &out); err == nil {
				done = out
			}
		})
		sel.AddReceive(stop, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			stopped = true
		})
		sel.Select(ctx)
	}
	return done, nil
}

// retryable reports whether a failed call is worth repeating while ctx lasts.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var unavailable *serviceerror.Unavailable
	var exhausted *serviceerror.ResourceExhausted
	var deadline *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &unavailable) || errors.As(err, &exhausted) || errors.As(err, &deadline)
}

// floorActivity is the no-op activity: it returns its input.
func floorActivity(_ context.Context, n int) (int, error) { return n, nil }

// startFloorWorker starts the floor's worker on its own task queue.
func startFloorWorker(c client.Client) (sdkworker.Worker, error) {
	// Tuned as the host's worker is, so the two differ only by what a turn does.
	w := sdkworker.New(c, floorTaskQueue, sdkworker.Options{MaxConcurrentWorkflowTaskPollers: worker.DefaultWorkflowTaskPollers,
		StickyScheduleToStartTimeout: worker.DefaultStickyScheduleToStartTimeout})
	w.RegisterWorkflowWithOptions(floorWorkflow, workflow.RegisterOptions{Name: floorWorkflowName})
	w.RegisterWorkflowWithOptions(updateFloorWorkflow, workflow.RegisterOptions{Name: updateFloorWorkflowName})
	w.RegisterActivityWithOptions(floorActivity, activity.RegisterOptions{Name: floorActivityName})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start the floor worker on task queue %q: %w", floorTaskQueue, err)
	}
	return w, nil
}

// floorConv is one floor "conversation": a floor workflow and its turn counter.
type floorConv struct {
	c    client.Client
	id   string
	turn int
}

func startFloor(ctx context.Context, c client.Client, id string, local bool) (*floorConv, error) {
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: floorTaskQueue, WorkflowExecutionTimeout: time.Hour, WorkflowTaskTimeout: workflows.RunWorkflowTaskTimeout,
	}, floorWorkflowName, local)
	if err != nil {
		return nil, fmt.Errorf("start floor workflow %s: %w", id, err)
	}
	f := &floorConv{c: c, id: id}
	// The first workflow task has run once the query answers; a turn measured before
	// that would include the workflow's start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := f.done(ctx); err == nil {
			return f, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("floor workflow %s never answered its query: %w", id, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// done queries the last finished turn. A query that times out or finds the server
// busy is asked again while ctx lasts: under load the server answers a query only
// after the workflow task in flight, and one slow answer is a slow turn, not a failure.
func (f *floorConv) done(ctx context.Context) (int, error) {
	var v converter.EncodedValue
	var err error
	for {
		if v, err = f.c.QueryWorkflow(ctx, f.id, "", floorQuery); err == nil || !retryable(ctx, err) {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	var n int
	if err := v.Get(&n); err != nil {
		return 0, err
	}
	return n, nil
}

// exchange sends the next turn and waits until the query shows it finished. The reader
// waits exactly as the host API's event reader does (api/events.go): query; when the
// result is not there yet, follow the workflow's history with the server's long poll and
// query again on every wake. It returns the time from the signal to the visible result.
func (f *floorConv) exchange(ctx context.Context) (time.Duration, error) {
	f.turn++
	want := f.turn
	start := time.Now()
	if err := f.c.SignalWorkflow(ctx, f.id, "", floorSignal, want); err != nil {
		return 0, fmt.Errorf("signal floor workflow %s: %w", f.id, err)
	}
	if n, err := f.done(ctx); err != nil {
		return 0, fmt.Errorf("query floor workflow %s: %w", f.id, err)
	} else if n >= want {
		return time.Since(start), nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		it := f.c.GetWorkflowHistory(wctx, f.id, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return
			}
			// As the API's feed: only a completed workflow task can have changed
			// what the query answers.
			if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				continue
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	for {
		select {
		case <-wake:
		case <-ended:
			return 0, fmt.Errorf("floor workflow %s: history ended before turn %d finished", f.id, want)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		n, err := f.done(ctx)
		if err != nil {
			return 0, fmt.Errorf("query floor workflow %s: %w", f.id, err)
		}
		if n >= want {
			return time.Since(start), nil
		}
	}
}

func (f *floorConv) stop(ctx context.Context) {
	_ = f.c.SignalWorkflow(ctx, f.id, "", floorStopSignal, nil)
}

// The fair floor: what the host's own primitive costs on bare Temporal. A resolve is one
// Workflow Update whose handler runs the turn's round as a local activity and returns
// its outcome with the update's result; this floor is the same with nothing else: one
// Update, validated (the turn must be the next one), whose handler runs the no-op local
// activity and returns its result. It runs on the floor's worker, tuned as the host's.
const (
	updateFloorWorkflowName = "WopBenchFloorUpdate"
	updateFloorUpdate       = "turn"
)

// updateFloorWorkflow answers every "turn" update (its turn number) with one no-op
// local activity and returns its result; it ends on the "stop" signal once no update
// is in flight.
func updateFloorWorkflow(ctx workflow.Context) (int, error) {
	done, inFlight := 0, 0
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	err := workflow.SetUpdateHandlerWithOptions(ctx, updateFloorUpdate, func(ctx workflow.Context, n int) (int, error) {
		inFlight++
		defer func() { inFlight-- }()
		var out int
		if err := workflow.ExecuteLocalActivity(lctx, floorActivityName, n).Get(ctx, &out); err != nil {
			return 0, err
		}
		done = out
		return out, nil
	}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, n int) error {
		if n != done+1 {
			return fmt.Errorf("turn %d is not the next one (%d)", n, done+1)
		}
		return nil
	}})
	if err != nil {
		return 0, err
	}
	workflow.GetSignalChannel(ctx, floorStopSignal).Receive(ctx, nil)
	if err := workflow.Await(ctx, func() bool { return inFlight == 0 }); err != nil {
		return 0, err
	}
	return done, nil
}

// updateFloorConv is one fair-floor "conversation".
type updateFloorConv struct {
	c    client.Client
	id   string
	turn int
}

func startUpdateFloor(ctx context.Context, c client.Client, id string) (*updateFloorConv, error) {
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: floorTaskQueue, WorkflowExecutionTimeout: time.Hour, WorkflowTaskTimeout: workflows.RunWorkflowTaskTimeout,
	}, updateFloorWorkflowName); err != nil {
		return nil, fmt.Errorf("start update floor workflow %s: %w", id, err)
	}
	return &updateFloorConv{c: c, id: id}, nil
}

// exchange sends the next turn as an update and returns the time until its result.
func (f *updateFloorConv) exchange(ctx context.Context) (time.Duration, error) {
	f.turn++
	start := time.Now()
	h, err := f.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: f.id, UpdateName: updateFloorUpdate, Args: []any{f.turn},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var n int
	if err == nil {
		err = h.Get(ctx, &n)
	}
	if err != nil {
		return 0, fmt.Errorf("update floor workflow %s turn %d: %w", f.id, f.turn, err)
	}
	if n != f.turn {
		return 0, fmt.Errorf("update floor workflow %s answered turn %d with %d", f.id, f.turn, n)
	}
	return time.Since(start), nil
}

func (f *updateFloorConv) stop(ctx context.Context) {
	_ = f.c.SignalWorkflow(ctx, f.id, "", floorStopSignal, nil)
}
