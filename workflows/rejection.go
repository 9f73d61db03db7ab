package workflows

// An approval gate's rejection (RFC 0223; interrupt.md §Rejection), for core.approvalGate
// and core.interrupt of kind approval. Since GateApprovalRejection:
//
//   - interrupt.resolved of a rejection records it: action (the deciding vote's, or
//     "timeout"), decision "rejected", and reason "timeout" for a timeout. A granted
//     gate's interrupt.resolved is as it was (the gate is asked at rejections only).
//   - A timeout (a non-zero timeoutMs elapsed) resolves the gate rejected, whatever the
//     data's onTimeout says: a timeout never grants and never extends.
//   - A rejected gate fails its node with approval_rejected, retryable false, never
//     retried, unless the node's config says "onReject": "output": the node then
//     completes with the rejection as its output ({action, decision, votes}) for its
//     edges to read.
//   - The failed node is a failed source: it takes no all_success, any_success or
//     none_failed edge. When one of its outgoing edges has trigger rule all_complete or
//     any_failed the run goes on (those edges' targets run, shouldRun); otherwise the
//     run fails approval_rejected with failedNodeId.
//
// Runs that decided an approval gate before the gate kept the earlier way: a rejection
// failed the run at once, a timeout failed it with interrupt_timeout. A tool call's
// approval (approvals_tool.go) is not a gate of the run: its rejection is the model's
// to read, as before.

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// OnRejectOutput is the value of a gate node's config "onReject" that turns a rejection
// into the node's output.
const OnRejectOutput = "output"

// gateRejected is the failure of a rejected approval gate (RFC 0223): not retryable,
// and a failed source its outgoing edges may route.
type gateRejected struct{ nodeError }

// approvalDecision is interrupt.resolved's decision fields for an approval decided by
// a rejection: its action, its decision and, for a timeout, the reason.
type approvalDecision struct{ action, decision, reason string }

// decisionFields are interrupt.resolved's decision fields for an approval decided by
// action.
func decisionFields(action string, rejected bool) *approvalDecision {
	decision := "approved"
	if rejected {
		decision = "rejected"
	}
	return &approvalDecision{action: action, decision: decision}
}

// rejectedGate ends a rejected gate node n: its output out when the node maps the
// rejection to one, else the gateRejected failure.
func rejectedGate(n *Node, out map[string]json.RawMessage, format string, args ...any) (map[string]json.RawMessage, error) {
	var cfg struct {
		OnReject string `json:"onReject"`
	}
	if len(n.Config) > 0 {
		_ = json.Unmarshal(n.Config, &cfg) // the gate's executor has decoded the config
	}
	if cfg.OnReject == OnRejectOutput {
		return out, nil
	}
	return nil, &gateRejected{nodeError{protocol.RunError{Code: protocol.CodeApprovalRejected, Message: fmt.Sprintf(format, args...)}}}
}

// timedOutRejected resolves the approval it of node n rejected by its timeout.
func (r *runner) timedOutRejected(n *Node, it *interrupt, votes []approvalVote) (map[string]json.RawMessage, error) {
	r.settle(it)
	value := mustJSON(map[string]string{"action": "timeout", "decision": "rejected", "reason": "timeout"})
	decided := decisionFields("timeout", true)
	decided.reason = "timeout"
	resolved := r.emitResolvedWith(it, ResolveRequest{ResolvedBy: "system"}, value, decided)
	recv := r.emit(protocol.EvApprovalReceived, n.ID, &protocol.ApprovalReceived{NodeID: n.ID, Action: "timeout", DecidedAt: formatTime(workflow.Now(r.ctx))}, resolved)
	r.emitResumed(it, value, recv)
	out := map[string]json.RawMessage{"action": mustJSON("timeout"), "decision": value, "votes": mustJSON(votes)}
	return rejectedGate(n, out, "approval at node %q was rejected: it timed out after %d ms", n.ID, it.TimeoutMs)
}

// failureRouted reports whether an outgoing edge of the failed node nodeID continues
// the run (trigger rule all_complete or any_failed).
func (r *runner) failureRouted(nodeID string) bool {
	if r.legacyTriggerRules {
		return false
	}
	for _, e := range r.in.Definition.Edges {
		if e.SourceNodeID == nodeID && (e.TriggerRule == "all_complete" || e.TriggerRule == "any_failed") {
			return true
		}
	}
	return false
}

// nodeFailedError is node.failed's error of a rejected gate: not retryable.
func (g *gateRejected) nodeFailedError() protocol.NodeError {
	no := false
	return protocol.NodeError{Code: g.Code, Message: g.Message, Retryable: &no}
}
