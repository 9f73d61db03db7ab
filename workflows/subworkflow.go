package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// subWorkflowConfig is core.subWorkflow's config.
type subWorkflowConfig struct {
	WorkflowID string          `json:"workflowId"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
}

// ChildRunID derives a child run's id from its parent run, node and attempt; ids that
// would exceed 128 characters are shortened with a hash.
func ChildRunID(parentRunID, nodeID string, attempt int) string {
	id := fmt.Sprintf("%s.%s.%d", parentRunID, nodeID, attempt)
	if len(id) <= 128 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "run_" + hex.EncodeToString(sum[:])[:40]
}

// execSubWorkflow runs the child definition as a child workflow (WorkflowID = child
// runId). Cancelling the parent cancels the child: the parent signals the child
// CancelSignal{reason:"parent-cancelled"} and cancels its context, and
// ParentClosePolicy REQUEST_CANCEL covers a parent that ends any other way.
func execSubWorkflow(r *runner, n *Node, in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	var cfg subWorkflowConfig
	if err := json.Unmarshal(orJSON(n.Config, "{}"), &cfg); err != nil || cfg.WorkflowID == "" {
		return nil, failNode(protocol.CodeValidation, "core.subWorkflow at node %q needs config.workflowId", n.ID)
	}
	def := r.in.Definitions[cfg.WorkflowID]
	if def == nil {
		return nil, failNode(protocol.CodeValidation, "core.subWorkflow at node %q: definition %q was not attached to the run", n.ID, cfg.WorkflowID)
	}
	inputs := cfg.Inputs
	if len(in) > 0 {
		inputs = mustJSON(in)
	}
	childID := ChildRunID(r.in.RunID, n.ID, r.counts[n.ID+"#child"])
	r.counts[n.ID+"#child"]++
	childIn := RunInput{
		RunID: childID, Definition: def, Definitions: r.in.Definitions, Packs: r.in.Packs, PackHashes: r.in.PackHashes,
		Inputs: inputs, Owner: r.in.Owner, Tags: r.in.Tags, ParentRunID: r.in.RunID, Limits: r.in.Limits,
		Era: r.in.Era, Notices: r.in.Notices, TurnShape: r.in.TurnShape, Attributes: r.in.Attributes,
	}
	cctx, cancelChild := workflow.WithCancel(r.ctx)
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
		WorkflowID:        childID,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		StaticSummary:     fmt.Sprintf("Child run of %s (node %s): %s", r.in.RunID, n.ID, def.ID),
	})
	fut := workflow.ExecuteChildWorkflow(cctx, RunWorkflowName, childIn)
	r.addChild(ChildRun{RunID: childID, NodeID: n.ID, Status: protocol.StatusRunning})
	var (
		done   bool
		result Snapshot
		resErr error
	)
	workflow.Go(r.ctx, func(g workflow.Context) {
		resErr = fut.Get(g, &result)
		if snap, ok := SnapshotFromError(resErr); ok {
			result, resErr = *snap, nil // a child that failed or was cancelled
		}
		done = true
	})
	if _, err := r.await(0, func() bool { return done }); err != nil {
		dctx, _ := workflow.NewDisconnectedContext(r.ctx)
		by := ""
		if r.cancelReq != nil {
			by = r.cancelReq.CancelledBy
		}
		_ = fut.SignalChildWorkflow(dctx, CancelSignal, CancelRequest{Reason: "parent-cancelled", CancelledBy: by}).Get(dctx, nil)
		cancelChild()
		_ = workflow.Await(dctx, func() bool { return done })
		r.addChild(ChildRun{RunID: childID, NodeID: n.ID, Status: protocol.StatusCancelled})
		return nil, err
	}
	cancelChild()
	if resErr != nil {
		r.addChild(ChildRun{RunID: childID, NodeID: n.ID, Status: protocol.StatusFailed})
		return nil, failNode(protocol.CodeChildRunFailed, "child run %s failed: %v", childID, resErr)
	}
	r.addChild(ChildRun{RunID: childID, NodeID: n.ID, Status: result.Status})
	switch result.Status {
	case protocol.StatusCompleted:
		return map[string]json.RawMessage{"childRunId": mustJSON(childID), "variables": mustJSON(result.Variables)}, nil
	case protocol.StatusFailed:
		msg := "child run failed"
		if result.Error != nil {
			msg = result.Error.Code + ": " + result.Error.Message
		}
		return nil, failNode(protocol.CodeChildRunFailed, "child run %s failed: %s", childID, msg)
	default:
		return nil, failNode(protocol.CodeChildRunFailed, "child run %s ended %s", childID, result.Status)
	}
}

// addChild records or updates a child run, keeping its node id.
func (r *runner) addChild(cr ChildRun) {
	for i := range r.childRuns {
		if r.childRuns[i].RunID == cr.RunID {
			r.childRuns[i].Status = cr.Status
			if cr.NodeID != "" {
				r.childRuns[i].NodeID = cr.NodeID
			}
			r.refreshStatus()
			return
		}
	}
	r.childRuns = append(r.childRuns, cr)
	r.refreshStatus()
}
