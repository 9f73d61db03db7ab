package chunks

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Two Workflow Updates in a row each run in a speculative workflow task that history
// records only once it completes, so both follow the same last recorded task started:
// they are still two targets, or the second's rounds would pass for the first's, read
// to its end, and never be read.
func TestWorkflowTaskTargetsOfTwoSpeculativeTasksDiffer(t *testing.T) {
	wft := WorkflowTask{EventID: 23, Identity: "7@host@ chunks=http://127.0.0.1:1"}
	t0 := time.Date(2026, 12, 4, 6, 24, 42, 0, time.UTC)
	started := func(at time.Time) *workflowpb.PendingWorkflowTaskInfo {
		return &workflowpb.PendingWorkflowTaskInfo{State: enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED, StartedTime: timestamppb.New(at)}
	}
	first, ok := workflowTaskTarget(started(t0), wft)
	if !ok || first.Endpoint != "http://127.0.0.1:1" {
		t.Fatalf("first task: %+v %v", first, ok)
	}
	second, ok := workflowTaskTarget(started(t0.Add(70*time.Millisecond)), wft)
	if !ok {
		t.Fatal("second task: no target")
	}
	if first.Task == second.Task {
		t.Fatalf("both tasks are %q", first.Task)
	}
	if again, _ := workflowTaskTarget(started(t0), wft); again.Task != first.Task {
		t.Fatalf("the same task looked at twice: %q then %q", first.Task, again.Task)
	}

	scheduled := &workflowpb.PendingWorkflowTaskInfo{State: enumspb.PENDING_WORKFLOW_TASK_STATE_SCHEDULED}
	if tg, ok := workflowTaskTarget(scheduled, wft); ok {
		t.Fatalf("a task not started is a target: %+v", tg)
	}
	if tg, ok := workflowTaskTarget(started(t0), WorkflowTask{EventID: 23}); ok {
		t.Fatalf("a task without a known worker is a target: %+v", tg)
	}
}
