package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// SeamDuringExecution is RunInput.Seam of a run the conformance kill seam starts in
// its during-execution mode (RFC 0158 §B.4; docs/api.md "Conformance seams"): once the
// run's first node has started, it holds in activities.DurabilityHold, whose first
// attempt kills the process. The attempt that returns on the restarted process says
// which incarnation it replaced, and the run records that it was carried on
// (workflow.restored) before it goes on as any run does.
//
// No GetVersion gate guards the hold: only runs the seam starts carry Seam, none of
// them was recorded before the hold existed, and a run without it schedules nothing
// new, so every recorded history replays as it did.
const SeamDuringExecution = "during-execution"

// SeamDuplicateDelivery is RunInput.Seam of a run the kill seam starts in its
// duplicate-delivery mode (RFC 0158 §C): the run's first node performs one outbound
// effect, activities.DurabilityEffect's POST to RunInput.SeamEffectURL, and the
// attempt that performed it kills the process once the effect's outcome is recorded
// (in the activity's heartbeat), so Temporal delivers the same work a second time.
// That attempt, on the restarted process, finds the recorded outcome and returns it
// without calling out: the destination sees the effect once. No GetVersion gate, for
// the reason SeamDuringExecution has none.
const SeamDuplicateDelivery = "duplicate-delivery"

// stageSeam runs the work of the kill seam's mode at node n, the run's first.
func (r *runner) stageSeam(n *Node) error {
	switch r.in.Seam {
	case SeamDuringExecution:
		return r.holdForSeam(n)
	case SeamDuplicateDelivery:
		return r.effectForSeam(n)
	}
	return nil
}

// holdForSeam holds node n of a run the kill seam started, after its node.started.
func (r *runner) holdForSeam(n *Node) error {
	opts := activities.DurabilityHoldOptions()
	opts.Summary = "conformance seam: work held at node " + n.ID + " while its process dies"
	var acts *activities.Activities
	var res activities.DurabilityHoldResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, opts), acts.DurabilityHold,
		activities.DurabilityHoldInput{RunID: r.in.RunID, NodeID: n.ID}).Get(r.ctx, &res)
	if err != nil {
		if r.cancelReq != nil {
			return errCancelled
		}
		return failNode(protocol.CodeRunFailed, "the conformance seam's hold of node %q failed: %v", n.ID, err)
	}
	r.recordRestored(n, res.Attempt, res.Incarnation, res.ReplacedIncarnation)
	return nil
}

// effectForSeam performs node n's one outbound effect for a run the kill seam started
// in duplicate-delivery mode, and records the restoration when a second delivery of
// the work returned the first one's outcome.
func (r *runner) effectForSeam(n *Node) error {
	opts := activities.DurabilityEffectOptions()
	opts.Summary = "conformance seam: one outbound effect of node " + n.ID + ", delivered twice"
	var acts *activities.Activities
	var res activities.DurabilityEffectResult
	in := activities.DurabilityEffectInput{RunID: r.in.RunID, NodeID: n.ID, URL: r.in.SeamEffectURL,
		Key: activities.DurabilityEffectKey(r.in.Owner.Tenant, r.in.RunID, n.ID)}
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, opts), acts.DurabilityEffect, in).Get(r.ctx, &res)
	if err != nil {
		if r.cancelReq != nil {
			return errCancelled
		}
		return failNode(protocol.CodeRunFailed, "the conformance seam's effect at node %q failed: %v", n.ID, err)
	}
	r.recordRestored(n, res.Attempt, res.Incarnation, res.ReplacedIncarnation)
	return nil
}

// recordRestored records workflow.restored at node n when the seam's work returned from
// a later attempt than its first: it was carried over from the incarnation replaced.
func (r *runner) recordRestored(n *Node, attempt int, incarnation, replaced string) {
	if attempt > 1 {
		r.emit(protocol.EvWorkflowRestored, n.ID, protocol.WorkflowRestored{
			Attempt: attempt, EngineVersion: EngineVersion, Incarnation: incarnation,
			NodeID: n.ID, ReplacedIncarnation: replaced,
		}, r.lastNodeEvent(n.ID))
	}
}
