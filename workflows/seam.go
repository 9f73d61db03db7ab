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
	if res.Attempt > 1 {
		r.emit(protocol.EvWorkflowRestored, n.ID, protocol.WorkflowRestored{
			Attempt: res.Attempt, EngineVersion: EngineVersion, Incarnation: res.Incarnation,
			NodeID: n.ID, ReplacedIncarnation: res.ReplacedIncarnation,
		}, r.lastNodeEvent(n.ID))
	}
	return nil
}
