package api

// Runs Temporal closed without their own terminal event. A run ends with run.completed,
// run.failed or run.cancelled, and closes Completed, Failed or Canceled in Temporal. An
// operator can also terminate it (the Temporal UI, `temporal workflow terminate`), and
// a workflow execution timeout closes it TimedOut: the workflow writes nothing then,
// and its replayed state still reads as waiting. The API reads such a run's status
// from Temporal's close event instead:
//
//	Temporal close   OpenWOP status  error
//	Terminated       cancelled       -
//	TimedOut         failed          run_timeout
//	Failed           failed          the failure's type, else internal_error
//	Canceled         cancelled       -
//
// The snapshot then has no pending interrupt, completedAt is the close time, and
// temporalClose says what Temporal did. Nothing more is written to such a run: a cancel
// answers its terminal status, a resolve 410 interrupt_cancelled.

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/internal/telemetry"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// querySnapshot asks the run for its snapshot. A run that did not close cleanly
// (failed, cancelled, terminated, timed out) is asked once more without that
// condition, and when its log has no terminal event its status comes from Temporal.
func (s *Server) querySnapshot(ctx context.Context, runID string) (*workflows.Snapshot, error) {
	resp, err := s.tc.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: runID, QueryType: workflows.SnapshotQuery,
		QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY,
	})
	if err != nil {
		return nil, s.temporalErr(err, runID)
	}
	if resp.QueryRejected == nil {
		return decodeSnapshot(runID, resp.QueryResult)
	}
	v, err := s.tc.QueryWorkflow(ctx, runID, "", workflows.SnapshotQuery)
	if err != nil {
		return nil, s.temporalErr(err, runID)
	}
	snap, err := decodeSnapshot(runID, v)
	if err != nil || isTerminal(snap.Status) {
		return snap, err
	}
	if err := s.applyTemporalClose(ctx, runID, snap); err != nil {
		return nil, err
	}
	return snap, nil
}

type encodedValue interface{ Get(valuePtr any) error }

func decodeSnapshot(runID string, v encodedValue) (*workflows.Snapshot, error) {
	var snap workflows.Snapshot
	if v == nil {
		return nil, fmt.Errorf("run %s returned no snapshot", runID)
	}
	if err := v.Get(&snap); err != nil {
		return nil, fmt.Errorf("decoding the snapshot of run %s: %w", runID, err)
	}
	// The run's spans in this process name its workflow from now on.
	telemetry.NoteRun(snap.RunID, telemetry.RunInfo{WorkflowID: snap.WorkflowID, Tenant: snap.Owner.Tenant, ParentRunID: snap.ParentRunID})
	return &snap, nil
}

// applyTemporalClose sets the status of a run Temporal closed without its terminal
// event from the close event of its history.
func (s *Server) applyTemporalClose(ctx context.Context, runID string, snap *workflows.Snapshot) error {
	ev, err := s.closeEvent(ctx, runID)
	if err != nil {
		return s.temporalErr(err, runID)
	}
	if ev == nil {
		return nil // still open after all (reset, or a race with the close)
	}
	tc := &workflows.TemporalClose{ClosedAt: ev.GetEventTime().AsTime().UTC().Format(time.RFC3339Nano)}
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		tc.Status, tc.Reason = "Terminated", ev.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
		snap.Status = protocol.StatusCancelled
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		tc.Status = "TimedOut"
		snap.Status = protocol.StatusFailed
		snap.Error = &protocol.RunError{Code: CodeRunTimeout, Message: "Temporal closed the run when its workflow execution timeout elapsed"}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		f := ev.GetWorkflowExecutionFailedEventAttributes().GetFailure()
		tc.Status, tc.Reason = "Failed", f.GetMessage()
		code := f.GetApplicationFailureInfo().GetType()
		if code == "" {
			code = CodeInternal
		}
		snap.Status = protocol.StatusFailed
		snap.Error = &protocol.RunError{Code: code, Message: "the run's workflow failed: " + f.GetMessage()}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		tc.Status = "Canceled"
		snap.Status = protocol.StatusCancelled
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		tc.Status = "Completed"
		snap.Status = protocol.StatusCompleted
	default:
		return nil // continued as new: the query answered the newest execution
	}
	snap.TemporalClose = tc
	snap.CompletedAt = tc.ClosedAt
	snap.Interrupt, snap.Interrupts = nil, nil
	snap.CurrentNodeID = ""
	return nil
}

// closeEvent returns the event that closed the run's latest execution, or nil while it
// is open.
func (s *Server) closeEvent(ctx context.Context, runID string) (*historypb.HistoryEvent, error) {
	it := s.tc.GetWorkflowHistory(ctx, runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	var last *historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		last = ev
	}
	return last, nil
}

// closedResolveError answers a resolve whose signal found the run closed: 410 for a
// run Temporal closed without its terminal event or a cancelled run (their interrupts
// are void), else 409.
func (s *Server) closedResolveError(ctx context.Context, runID string) error {
	snap, err := s.querySnapshot(ctx, runID)
	var ae *Error
	if err != nil && !errors.As(err, &ae) {
		s.log.Warn("Reading a closed run", "runId", runID, "error", err)
	}
	if err == nil && snap.TemporalClose != nil {
		return codeErr(CodeInterruptCancelled, "run %s was closed by Temporal (%s); its interrupts are void", runID, snap.TemporalClose.Status)
	}
	if err == nil && snap.Status == protocol.StatusCancelled {
		return codeErr(CodeInterruptCancelled, "run %s was cancelled before the resolve arrived; its interrupts are void", runID)
	}
	return codeErr(CodeInterruptResolved, "run %s finished before the resolve arrived", runID)
}
