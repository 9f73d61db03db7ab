package chunks

import (
	"context"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
)

// ModelRoundActivity is the activity type whose attempts publish chunks.
const ModelRoundActivity = "ModelRound"

// Target is one model round in flight and the worker running it.
type Target struct {
	// Endpoint is the worker's chunk endpoint.
	Endpoint string
	// Task names what runs there: "<activityId>#<attempt>" for an activity attempt,
	// "wft#<eventId>@<started unix ns>" for a workflow task (whose local activities may
	// be model rounds).
	// A new attempt is a new Task.
	Task string
	// Attempt is the activity attempt running there (0 for a workflow task): its round
	// has been read to its end once a last chunk of this attempt has come.
	Attempt int
}

// Location is what Locate found.
type Location struct {
	// Targets are the rounds in flight whose worker advertises a chunk endpoint.
	Targets []Target
	// Soon is set when a model round is scheduled but not started (waiting for a
	// worker, or backing off before a retry): look again shortly.
	Soon bool
	// NextAttempt, when not zero, is when the earliest round backing off before a retry
	// is scheduled again (Temporal's clock): looking before then finds nothing new.
	NextAttempt time.Time
	// Closed is set when the workflow execution is no longer running.
	Closed bool
}

// WorkflowTask is the latest workflow task the caller saw start in the run's history:
// a round the workflow runs as a local activity runs on that task's worker.
type WorkflowTask struct {
	EventID  int64
	Identity string
}

// Locate asks Temporal where the run's model rounds run now: every pending ModelRound
// activity that has started (its last worker identity), and, while a workflow task is
// in flight, the worker of wft. It costs one DescribeWorkflowExecution.
func Locate(ctx context.Context, tc client.Client, runID string, wft WorkflowTask) (Location, error) {
	d, err := tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return Location{}, err
	}
	var loc Location
	if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		loc.Closed = true
		return loc, nil
	}
	for _, pa := range d.GetPendingActivities() {
		if lastPart(pa.GetActivityType().GetName()) != ModelRoundActivity {
			continue
		}
		switch pa.GetState() {
		case enumspb.PENDING_ACTIVITY_STATE_STARTED, enumspb.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED:
			if ep := EndpointOf(pa.GetLastWorkerIdentity()); ep != "" {
				loc.Targets = append(loc.Targets, Target{Endpoint: ep, Task: pa.GetActivityId() + "#" + strconv.Itoa(int(pa.GetAttempt())),
					Attempt: int(pa.GetAttempt())})
			}
		case enumspb.PENDING_ACTIVITY_STATE_SCHEDULED:
			loc.Soon = true
			if next := pa.GetNextAttemptScheduleTime(); next != nil {
				if t := next.AsTime(); loc.NextAttempt.IsZero() || t.Before(loc.NextAttempt) {
					loc.NextAttempt = t
				}
			}
		}
	}
	if t, ok := workflowTaskTarget(d.GetPendingWorkflowTask(), wft); ok {
		loc.Targets = append(loc.Targets, t)
	}
	return loc, nil
}

// workflowTaskTarget is the target of the workflow task in flight, if one has started
// and wft names a worker with a chunk endpoint. The task is named by when it started
// as well as by wft's event: a Workflow Update's speculative task is in history only
// once it completes, so two of them in a row can follow the same last recorded event,
// and the second must not pass for the first, already read to its end.
func workflowTaskTarget(pwt *workflowpb.PendingWorkflowTaskInfo, wft WorkflowTask) (Target, bool) {
	if pwt == nil || pwt.GetState() != enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED {
		return Target{}, false
	}
	ep := EndpointOf(wft.Identity)
	if ep == "" {
		return Target{}, false
	}
	return Target{Endpoint: ep, Task: "wft#" + strconv.FormatInt(wft.EventID, 10) + "@" + strconv.FormatInt(pwt.GetStartedTime().AsTime().UnixNano(), 10)}, true
}

// lastPart is the part of an activity type name after its last dot (the SDK may
// qualify registered method names).
func lastPart(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}
