package activities

import (
	"context"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
)

// workflowService is what a Temporal client offers beyond WorkflowClient for
// resetStickyOnRetry (client.Client has it; tests' fakes need not).
type workflowService interface {
	WorkflowService() workflowservice.WorkflowServiceClient
}

// resetStickyOnRetry tells Temporal to forget the sticky queue of the run of a model
// round's second or later attempt. Such an attempt most often follows one Temporal
// counted lost: the worker that ran it died, and that worker is usually the one
// holding the run in its cache, whose sticky queue nobody polls any more. The round's
// transcript query and the workflow task that records its result would each wait
// there for the sticky schedule-to-start timeout (a second each) before going to the
// shared queue; with the sticky queue forgotten, both go to the shared queue at once.
// After a provider's error, on a live worker, the only cost is that the run's next
// workflow task replays its history on whichever worker takes it. A failure to reset
// is logged and the round goes on.
func (a *Activities) resetStickyOnRetry(ctx context.Context) {
	if !activity.IsActivity(ctx) {
		return
	}
	info := activity.GetInfo(ctx)
	ws, ok := a.signals.(workflowService)
	if !ok || info.IsLocalActivity || info.Attempt < 2 {
		return
	}
	_, err := ws.WorkflowService().ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{
		Namespace: info.Namespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: info.WorkflowExecution.ID, RunId: info.WorkflowExecution.RunID},
	})
	if err != nil {
		a.logger.Warn("Could not reset the sticky queue of a retried model round's run", "runId", info.WorkflowExecution.ID,
			"attempt", info.Attempt, "error", err)
	}
}
