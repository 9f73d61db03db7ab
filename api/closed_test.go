package api

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// A run an operator terminated in Temporal still reads as waiting when its workflow is
// asked; the API reports it cancelled from Temporal's close event, and writes nothing
// more to it.
func TestTemporalTerminatedRun(t *testing.T) {
	env := newTestEnv(t)
	closedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: "r_term", Status: protocol.StatusWaitingApproval, CurrentNodeID: "gate",
			Interrupts: []workflows.PendingInterrupt{{NodeID: "gate", InterruptID: "int_1", Kind: "approval", Key: "r_term:gate:0"}}},
		events: noopEvents("r_term")[:2],
		check:  workflows.ResolveCheck{OK: true, RunStatus: "running"},
		closed: &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, EventTime: timestamppb.New(closedAt),
			Attributes: &historypb.HistoryEvent_WorkflowExecutionTerminatedEventAttributes{
				WorkflowExecutionTerminatedEventAttributes: &historypb.WorkflowExecutionTerminatedEventAttributes{Reason: "stuck"}}},
	})
	run.snap.Interrupt = &run.snap.Interrupts[0]

	rec := env.do("GET", "/v1/runs/r_term", fullKey, "")
	if rec.Code != 200 {
		t.Fatalf("GET: %d %s", rec.Code, rec.Body)
	}
	snap := decode[workflows.Snapshot](t, rec.Body.Bytes())
	if snap.Status != protocol.StatusCancelled || snap.TemporalClose == nil || snap.TemporalClose.Status != "Terminated" ||
		snap.TemporalClose.Reason != "stuck" || snap.Interrupt != nil || len(snap.Interrupts) != 0 || snap.CompletedAt != "2026-01-02T03:04:05Z" {
		t.Fatalf("snapshot %s", rec.Body)
	}
	validateSchema(t, "run-snapshot.schema.json", rec.Body.Bytes())

	rec = env.do("POST", "/v1/runs/r_term:cancel", fullKey, "")
	if got := decode[map[string]string](t, rec.Body.Bytes()); rec.Code != 200 || got["status"] != protocol.StatusCancelled {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	env.expectError(env.do("POST", "/v1/runs/r_term/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)
	if len(run.signals) != 0 {
		t.Errorf("signals reached a closed run: %v", run.signals)
	}

	rec = env.do("GET", "/v1/runs/r_term/events", fullKey, "", "Accept", "application/json")
	if got := decode[EventsResponse](t, rec.Body.Bytes()); rec.Code != 200 || !got.IsComplete || len(got.Events) != 2 {
		t.Fatalf("events: %d %s", rec.Code, rec.Body)
	}
}

func TestTemporalTimedOutRun(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{
		snap:   workflows.Snapshot{RunID: "r_to", Status: protocol.StatusRunning},
		events: noopEvents("r_to")[:2],
		closed: &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, EventTime: timestamppb.Now()},
	})
	rec := env.do("GET", "/v1/runs/r_to", fullKey, "")
	snap := decode[workflows.Snapshot](t, rec.Body.Bytes())
	if rec.Code != 200 || snap.Status != protocol.StatusFailed || snap.Error == nil || snap.Error.Code != CodeRunTimeout || snap.TemporalClose.Status != "TimedOut" {
		t.Fatalf("GET: %d %s", rec.Code, rec.Body)
	}
}

// A run that closed with its own terminal event is reported as it says.
func TestCleanlyCancelledRunKeepsItsSnapshot(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{
		snap:   workflows.Snapshot{RunID: "r_cc", Status: protocol.StatusCancelled, CompletedAt: "2026-01-01T00:00:00Z"},
		closed: &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED, EventTime: timestamppb.Now()},
	})
	rec := env.do("GET", "/v1/runs/r_cc", fullKey, "")
	snap := decode[workflows.Snapshot](t, rec.Body.Bytes())
	if rec.Code != 200 || snap.Status != protocol.StatusCancelled || snap.TemporalClose != nil || snap.CompletedAt != "2026-01-01T00:00:00Z" {
		t.Fatalf("GET: %d %s", rec.Code, rec.Body)
	}
}
