package workflows

// core.conformance.side-effect, the side-effecting node of the conformance fixture
// conformance-replay-side-effect (RFC 0140), and core.conformance.hold, the pure wait
// before it. The node's effect is the ConformanceEffect activity: run live, it is one
// effect of the run's ledger. A replay fork never performs it (OpenWOP replay.md,
// side-effect suppression): the node takes the source run's n-th recorded terminal
// outcome of the same node, keyed (sourceRunId, nodeId, n) with n counting this node's
// executions, node.completed's outputs or node.failed's error; with none recorded it
// fails closed with replay_source_missing, never a synthesized success.

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// execSideEffect runs core.conformance.side-effect.
func execSideEffect(r *runner, n *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	ordinal := r.counts[n.ID+"#effect"]
	r.counts[n.ID+"#effect"] = ordinal + 1
	if f := r.in.Fork; f != nil {
		return recordedOutcome(f, n.ID, ordinal)
	}
	opts := activities.ConformanceEffectOptions()
	opts.Summary = "conformance side effect of node " + n.ID
	var acts *activities.Activities
	var res activities.ConformanceEffectResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, opts), acts.ConformanceEffect,
		activities.ConformanceEffectInput{RunID: r.in.RunID, NodeID: n.ID, Ordinal: ordinal}).Get(r.ctx, &res)
	if err != nil {
		if r.cancelReq != nil {
			return nil, errCancelled
		}
		return nil, failNode(protocol.CodeRunFailed, "the side effect of node %q failed: %v", n.ID, err)
	}
	return map[string]json.RawMessage{"performed": mustJSON(true), "effectKey": mustJSON(res.EffectKey)}, nil
}

// recordedOutcome is the source's n-th terminal outcome of node nodeID (0-based).
func recordedOutcome(f *ForkSource, nodeID string, n int) (map[string]json.RawMessage, error) {
	seen := 0
	for _, e := range f.Events {
		if e.NodeID != nodeID || e.Type != protocol.EvNodeCompleted && e.Type != protocol.EvNodeFailed {
			continue
		}
		if seen++; seen <= n {
			continue
		}
		var p struct {
			Outputs map[string]json.RawMessage `json:"outputs"`
			Error   protocol.RunError          `json:"error"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return nil, failNode(protocol.CodeReplayFailed, "source event %s is unreadable: %v", e.EventID, err)
		}
		if e.Type == protocol.EvNodeFailed {
			return nil, &nodeError{p.Error}
		}
		if p.Outputs == nil {
			p.Outputs = map[string]json.RawMessage{}
		}
		return p.Outputs, nil
	}
	return nil, failNode(protocol.CodeReplaySourceMissing,
		"node %q performs a side effect and source run %s recorded no outcome of its execution %d: a replay never performs it", nodeID, f.SourceRunID, n)
}
