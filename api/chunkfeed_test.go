package api

import (
	"testing"

	historypb "go.temporal.io/api/history/v1"

	"github.com/wop-dev/wop/chunks"
)

// A long poll of a run's history ends with the workflow task in flight as a transient
// WorkflowTaskStarted that names no worker; the feed keeps the worker of the task
// before it (the sticky worker that task runs on), so a round that starts in it is
// read from that worker's chunk endpoint instead of being missed.
func TestHistoryFollowerKeepsTheWorkerOfATransientTask(t *testing.T) {
	const worker = "7@host@ chunks=http://127.0.0.1:1"
	started := func(id int64, identity string) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, Attributes: &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{
			WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{Identity: identity},
		}}
	}
	completed := func(id int64, identity string) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
			WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{Identity: identity},
		}}
	}
	marker := &historypb.HistoryEvent{EventId: 5, Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{
		MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "Version"},
	}}
	var h historyFollower
	for _, ev := range []*historypb.HistoryEvent{started(3, worker), completed(4, worker), marker, started(23, "")} {
		h.saw(ev)
	}
	if got, want := h.workflowTask(), (chunks.WorkflowTask{EventID: 23, Identity: worker}); got != want {
		t.Fatalf("after a transient task: %+v, want %+v", got, want)
	}
	if ep := chunks.EndpointOf(h.workflowTask().Identity); ep != "http://127.0.0.1:1" {
		t.Fatalf("endpoint %q", ep)
	}

	// A task another worker started names that worker.
	const other = "8@host@ chunks=http://127.0.0.1:2"
	h.saw(started(30, other))
	if got := h.workflowTask(); got.EventID != 30 || got.Identity != other {
		t.Fatalf("after another worker's task: %+v", got)
	}
}
