package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
)

// rejectionRun is conformance-approval's gate followed by a node "after" that the
// gate's edge reaches with trigger rule rule, the gate configured with config.
func rejectionRun(t *testing.T, config, rule string) *testRun {
	t.Helper()
	in := fixtureInput(t, "conformance-approval", "")
	def := *in.Definition
	def.Nodes = []Node{def.Nodes[0], {ID: "after", TypeID: "core.noop"}}
	def.Nodes[0].Config = json.RawMessage(config)
	def.Edges = []Edge{{ID: "e1", SourceNodeID: "gate", TargetNodeID: "after", TriggerRule: rule}}
	in.Definition = &def
	return newTestRun(t, in)
}

// TestRejectionIsAFailedSource: a rejected gate takes no all_success or none_failed
// edge (the run fails approval_rejected at the gate), and an any_failed or
// all_complete edge routes it (the run goes on and completes).
func TestRejectionIsAFailedSource(t *testing.T) {
	for rule, routed := range map[string]bool{"": false, "none_failed": false, "any_failed": true, "all_complete": true} {
		t.Run("rule="+rule, func(t *testing.T) {
			tr := rejectionRun(t, `{"actions":["accept","reject"]}`, rule)
			tr.at(time.Second, func() { tr.resolve("gate", `{"action":"reject","comment":"no"}`) })
			s := tr.execute()
			evs := tr.events()
			resolved := payload(t, ofType(evs, protocol.EvInterruptResolved)[0])
			require.Equal(t, "reject", resolved["action"])
			require.Equal(t, "rejected", resolved["decision"])
			failed := ofType(evs, protocol.EvNodeFailed)
			require.Len(t, failed, 1)
			require.Equal(t, false, payload(t, failed[0])["error"].(map[string]any)["retryable"])
			if routed {
				require.Equal(t, protocol.StatusCompleted, s.Status)
				require.Len(t, ofType(evs, protocol.EvNodeCompleted), 1, "the routed edge's target ran")
				return
			}
			require.Equal(t, protocol.StatusFailed, s.Status)
			require.Equal(t, protocol.CodeApprovalRejected, s.Error.Code)
			require.Equal(t, "gate", payload(t, ofType(evs, protocol.EvRunFailed)[0])["failedNodeId"])
			require.Empty(t, ofType(evs, protocol.EvNodeCompleted), "no edge takes a failed source")
		})
	}
}

// TestRejectionMappedToAnOutput: a gate with onReject "output" completes with the
// rejection as its output, and its all_success edge runs.
func TestRejectionMappedToAnOutput(t *testing.T) {
	tr := rejectionRun(t, `{"actions":["accept","reject"],"onReject":"output","timeoutMs":60000}`, "")
	s := tr.execute() // nobody answers: the timeout rejects
	require.Equal(t, protocol.StatusCompleted, s.Status)
	evs := tr.events()
	require.Empty(t, ofType(evs, protocol.EvNodeFailed))
	done := ofType(evs, protocol.EvNodeCompleted)
	require.Len(t, done, 2)
	outs := payload(t, done[0])["outputs"].(map[string]any)
	require.Equal(t, "timeout", outs["action"])
	require.Equal(t, "rejected", outs["decision"].(map[string]any)["decision"])
}
