package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
)

func childSnapshot(t *testing.T, tr *testRun, id string) Snapshot {
	t.Helper()
	v, err := tr.env.QueryWorkflowByID(id, SnapshotQuery)
	require.NoError(t, err)
	var s Snapshot
	require.NoError(t, v.Get(&s))
	return s
}

func childEvents(t *testing.T, tr *testRun, id string) []Event {
	t.Helper()
	v, err := tr.env.QueryWorkflowByID(id, EventsQuery, EventsRequest{After: -1})
	require.NoError(t, err)
	var p EventsPage
	require.NoError(t, v.Get(&p))
	return p.Events
}

func TestParentReportsChildWaitingAndCancelCascades(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-parent-child-cancel", ""))
	childID := ChildRunID("run-conformance-interrupt-parent-child-cancel", "child", 0)
	var parentWaiting, childWaiting Snapshot
	tr.at(time.Second, func() {
		parentWaiting = tr.snapshot()
		childWaiting = childSnapshot(t, tr, childID)
		tr.env.SignalWorkflow(CancelSignal, CancelRequest{Reason: "stop", CancelledBy: "key_test"})
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusWaitingApproval, parentWaiting.Status)
	require.Equal(t, "child", parentWaiting.CurrentNodeID)
	require.Equal(t, []ChildRun{{RunID: childID, NodeID: "child", Status: protocol.StatusWaitingApproval}}, parentWaiting.ChildRuns)
	require.Equal(t, protocol.StatusWaitingApproval, childWaiting.Status)
	require.Equal(t, "child-gate", childWaiting.CurrentNodeID)
	require.Equal(t, "run-conformance-interrupt-parent-child-cancel", childWaiting.ParentRunID)

	require.Equal(t, protocol.StatusCancelled, s.Status)
	require.Equal(t, protocol.StatusCancelled, s.ChildRuns[0].Status)
	child := childSnapshot(t, tr, childID)
	require.Equal(t, protocol.StatusCancelled, child.Status)
	cevs := childEvents(t, tr, childID)
	checkEventLog(t, childID, cevs)
	recordForSchemaCheck(t, cevs)
	last := payload(t, cevs[len(cevs)-1])
	require.Equal(t, "parent-cancelled", last["reason"])
	require.Equal(t, "run-conformance-interrupt-parent-child-cancel", last["parentRunId"])
	v, err := tr.env.QueryWorkflowByID(childID, ValidateResolveQuery, ResolveRequest{NodeID: "child-gate", ResumeValue: json.RawMessage(`{"action":"accept"}`)})
	require.NoError(t, err)
	var c ResolveCheck
	require.NoError(t, v.Get(&c))
	require.Equal(t, refusal(protocol.CodeInterruptCancelled, false), refusal(c.Code, c.Unprocessable))
}

func TestChildCompletesParent(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-parent-child-cancel", ""))
	childID := ChildRunID("run-conformance-interrupt-parent-child-cancel", "child", 0)
	tr.at(time.Second, func() {
		require.NoError(t, tr.env.SignalWorkflowByID(childID, ResolveSignal, ResolveRequest{NodeID: "child-gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "key_test"}))
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.Equal(t, protocol.StatusCompleted, s.ChildRuns[0].Status)
	require.JSONEq(t, `"`+childID+`"`, string(s.Variables["childRunId"]))
}
