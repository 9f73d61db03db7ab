package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestWorkflowE2EEventRecords: every execution of a run that continued as new writes
// the events it emitted into its own history (SideEffect markers holding
// workflows.EventsRecord), all of them, once, in order, and the link the next
// execution carries says so; what the markers hold is what the execution answers for
// its events. Its histories are the corpus's run with event records
// (WOP_RECORD_HISTORIES=1).
func TestWorkflowE2EEventRecords(t *testing.T) {
	s := wfStack(t)
	const id = "e2e-records"
	run := wfStart(t, s, id, "conformance-conversation-council", "", func(in *workflows.RunInput) { in.ContinueAsNewAfterEvents = 6 })
	wfWaitStatus(t, s, id, protocol.StatusWaitingApproval)
	for i, text := range []string{"one", "two", "three", "four", "five"} {
		c := wfResolve(t, s, id, workflows.ResolveRequest{RequestID: fmt.Sprintf("m%d", i), NodeID: "convo", ResumeValue: json.RawMessage(`{"text":"` + text + `"}`), ReceivedAtMs: int64(1000 + i)})
		require.True(t, c.OK, c.Message)
		wfWaitSnapshot(t, s, id, fmt.Sprintf("with %d turns", 1+2*(i+1)), func(snap workflows.Snapshot) bool {
			return len(snap.Conversations) == 1 && snap.Conversations[0].TurnCount == 1+2*(i+1)
		})
	}
	require.True(t, wfResolve(t, s, id, workflows.ResolveRequest{RequestID: "close", NodeID: "convo", ResumeValue: json.RawMessage(`{"operation":"close","outcome":{"ok":true}}`)}).OK)
	require.Equal(t, protocol.StatusCompleted, wfResult(t, run).Status)
	all := wfEvents(t, s, id)

	// Walk the chain: each closed execution's markers hold its events, and the next
	// execution's first link names its range and says it recorded them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recorded []workflows.Event
	closed := 0
	for rid := run.GetFirstExecutionRunID(); rid != ""; {
		it := s.Client().GetWorkflowHistory(ctx, id, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var mine []workflows.Event
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "SideEffect" {
				rec, ok, err := workflows.EventsRecordFrom(m.GetDetails()["data"])
				require.NoError(t, err)
				require.True(t, ok, "a SideEffect of the run is an event record")
				require.Equal(t, "binary/plain", string(m.GetDetails()["data"].GetPayloads()[0].GetMetadata()["encoding"]), "records are compressed")
				require.NotEmpty(t, rec.Events)
				mine = append(mine, rec.Events...)
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
				var in workflows.RunInput
				require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in))
				earlier, _, err := workflows.CarriedLinks(in.Carried)
				require.NoError(t, err)
				require.NotEmpty(t, earlier)
				link := earlier[0]
				require.Equal(t, rid, link.RunID)
				require.True(t, link.Recorded, "the link to execution %s says it recorded its events", rid)
				require.NotEmpty(t, mine, "execution %s recorded its events", rid)
				require.Equal(t, link.FirstSequence, mine[0].Sequence)
				require.Equal(t, link.LastSequence, mine[len(mine)-1].Sequence)
				closed++
			}
		}
		if next != "" {
			recorded = append(recorded, mine...)
		}
		rid = next
	}
	require.GreaterOrEqual(t, closed, 2, "the run continued as new at least twice")
	require.Equal(t, all[:len(recorded)], recorded, "the closed executions' records are the log's events before the last execution, each once, in order")
	wfRecord(t, s, run, "conformance-conversation-records")
}
