package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// onHold answers the DurabilityHold activity with res and counts its calls.
func onHold(tr *testRun, res activities.DurabilityHoldResult) *int {
	calls := 0
	tr.env.RegisterActivityWithOptions(func(_ context.Context, in activities.DurabilityHoldInput) (*activities.DurabilityHoldResult, error) {
		calls++
		require.Equal(tr.t, activities.DurabilityHoldInput{RunID: tr.in.RunID, NodeID: "noop"}, in)
		return &res, nil
	}, activity.RegisterOptions{Name: "DurabilityHold"})
	return &calls
}

func seamRun(t *testing.T, seam string) *testRun {
	in := fixtureInput(t, "conformance-noop", "")
	in.Seam = seam
	return newTestRun(t, in)
}

// A run the kill seam started holds its first node after node.started; when the hold
// returns from a later attempt, the run records workflow.restored, naming both
// incarnations, before it completes as any run does.
func TestSeamRunRecordsItsRestoration(t *testing.T) {
	tr := seamRun(t, SeamDuringExecution)
	calls := onHold(tr, activities.DurabilityHoldResult{Attempt: 2, Incarnation: "inc-b", ReplacedIncarnation: "inc-a"})
	s := tr.execute()
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.Equal(t, 1, *calls)
	evs := tr.events()
	require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvWorkflowRestored, protocol.EvNodeCompleted, protocol.EvRunCompleted}, types(evs))
	restored := evs[2]
	require.Equal(t, "noop", restored.NodeID)
	require.Equal(t, evs[1].EventID, restored.CausationID)
	require.JSONEq(t, `{"attempt":2,"engineVersion":"wop/1","incarnation":"inc-b","nodeId":"noop","replacedIncarnation":"inc-a"}`, string(restored.Payload))
}

// A hold that returns from its first attempt was never carried over: no
// workflow.restored. A run the seam did not start holds nothing.
func TestSeamRunWithoutADeathRecordsNoRestoration(t *testing.T) {
	tr := seamRun(t, SeamDuringExecution)
	calls := onHold(tr, activities.DurabilityHoldResult{Attempt: 1, Incarnation: "inc-a"})
	tr.execute()
	require.Equal(t, 1, *calls)
	require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvNodeCompleted, protocol.EvRunCompleted}, types(tr.events()))

	plain := seamRun(t, "")
	calls = onHold(plain, activities.DurabilityHoldResult{Attempt: 2})
	plain.execute()
	require.Zero(t, *calls, "only a run the seam started holds")
	require.Empty(t, ofType(plain.events(), protocol.EvWorkflowRestored))
}

// A run the kill seam started in duplicate-delivery mode performs its first node's
// effect once, aimed at the seam's destination with the effect's key; the second
// delivery's answer (a later attempt returning the first's recorded outcome) is
// recorded as workflow.restored. A failed effect fails the node.
func TestSeamRunPerformsOneEffect(t *testing.T) {
	tr := seamRun(t, SeamDuplicateDelivery)
	tr.in.SeamEffectURL = "http://127.0.0.1:9/effect/abc"
	calls := 0
	tr.env.RegisterActivityWithOptions(func(_ context.Context, in activities.DurabilityEffectInput) (*activities.DurabilityEffectResult, error) {
		calls++
		require.Equal(t, activities.DurabilityEffectInput{RunID: tr.in.RunID, NodeID: "noop", URL: "http://127.0.0.1:9/effect/abc",
			Key: activities.DurabilityEffectKey(tr.in.Owner.Tenant, tr.in.RunID, "noop")}, in)
		return &activities.DurabilityEffectResult{Attempt: 2, Incarnation: "inc-b", ReplacedIncarnation: "inc-a", PerformedAttempt: 1, Status: 204}, nil
	}, activity.RegisterOptions{Name: "DurabilityEffect"})
	holds := onHold(tr, activities.DurabilityHoldResult{Attempt: 2})
	s := tr.execute()
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.Equal(t, 1, calls)
	require.Zero(t, *holds, "duplicate-delivery holds nothing besides its effect")
	evs := tr.events()
	require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvWorkflowRestored, protocol.EvNodeCompleted, protocol.EvRunCompleted}, types(evs))
	require.JSONEq(t, `{"attempt":2,"engineVersion":"wop/1","incarnation":"inc-b","nodeId":"noop","replacedIncarnation":"inc-a"}`, string(evs[2].Payload))

	failed := seamRun(t, SeamDuplicateDelivery)
	failed.env.RegisterActivityWithOptions(func(context.Context, activities.DurabilityEffectInput) (*activities.DurabilityEffectResult, error) {
		return nil, temporal.NewNonRetryableApplicationError("the seam's effect destination answered 400", activities.ErrTypeSeamEffectRefused, nil)
	}, activity.RegisterOptions{Name: "DurabilityEffect"})
	s = failed.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Contains(t, s.Error.Message, "the conformance seam's effect at node \"noop\" failed")
}
