package workflows

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

func startOpts(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue}
}

func TestNoop(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-noop", ""))
	s := tr.execute()
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvNodeCompleted, protocol.EvRunCompleted}, types(tr.events()))
	require.Equal(t, "conformance-noop", s.WorkflowID)
	require.NotEmpty(t, s.CompletedAt)
}

func TestIdentityEchoesPayload(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-identity", `{"payload":{"a":1,"b":[true,"x"]}}`))
	s := tr.execute()
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.JSONEq(t, `{"a":1,"b":[true,"x"]}`, string(s.Variables["payload"]))
	var done struct {
		Outputs map[string]json.RawMessage `json:"outputs"`
	}
	require.NoError(t, json.Unmarshal(ofType(tr.events(), protocol.EvRunCompleted)[0].Payload, &done))
	require.JSONEq(t, `{"a":1,"b":[true,"x"]}`, string(done.Outputs["payload"]))
}

func TestFailure(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-failure", ""))
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, &protocol.RunError{Code: "conformance_test_failure", Message: "Intentional conformance failure"}, s.Error)
	evs := tr.events()
	require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvNodeFailed, protocol.EvRunFailed}, types(evs))
	require.Equal(t, "fail", payload(t, evs[3])["failedNodeId"])
}

func TestMultiNodeOrder(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-multi-node", ""))
	tr.execute()
	var order []string
	for _, e := range ofType(tr.events(), protocol.EvNodeCompleted) {
		order = append(order, e.NodeID)
	}
	require.Equal(t, []string{"a", "b", "c"}, order)
}

func TestDelayIsRunningThenCompletes(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-delay", `{"delayMs":5000}`))
	var mid Snapshot
	tr.at(2*time.Second, func() { mid = tr.snapshot() })
	s := tr.execute()
	require.Equal(t, protocol.StatusRunning, mid.Status)
	require.Equal(t, "delay", mid.CurrentNodeID)
	require.Equal(t, protocol.StatusCompleted, s.Status)
}

func TestCancelDuringDelay(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-cancellable", `{"delayMs":60000}`))
	tr.at(time.Second, func() {
		tr.env.SignalWorkflow(CancelSignal, CancelRequest{Reason: "user asked", CancelledBy: "key_test"})
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusCancelled, s.Status)
	evs := tr.events()
	require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvNodeCancelled, protocol.EvRunCancelled}, types(evs))
	p := payload(t, evs[3])
	require.Equal(t, "user asked", p["reason"])
	require.Equal(t, "key_test", p["cancelledBy"])
}

func TestTemporalCancellation(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-cancellable", `{"delayMs":60000}`))
	tr.at(time.Second, func() { tr.env.CancelWorkflow() })
	s := tr.execute()
	require.Equal(t, protocol.StatusCancelled, s.Status)
	last := tr.events()[len(tr.events())-1]
	require.Equal(t, protocol.EvRunCancelled, last.Type)
	require.Equal(t, "cancelled", payload(t, last)["reason"])
}

func TestUnknownNodeType(t *testing.T) {
	in := fixtureInput(t, "conformance-noop", "")
	def := *in.Definition
	def.Nodes = []Node{{ID: "x", TypeID: "vendor.acme.magic", Name: "x"}}
	in.Definition = &def
	tr := newTestRun(t, in)
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "capability_not_provided", s.Error.Code)
	require.Contains(t, s.Error.Message, "vendor.acme.magic")
}

func TestRequiresMissingCapability(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-requires-missing", ""))
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "capability_not_provided", s.Error.Code)
	require.Contains(t, s.Error.Message, "conformance.never-provided")
}

func TestEdgeConditionsSkipBranches(t *testing.T) {
	def := &Definition{ID: "branches", Name: "b", Version: "1",
		Nodes: []Node{
			{ID: "src", TypeID: "core.identity", Inputs: map[string]json.RawMessage{"payload": json.RawMessage(`{"type":"static","value":{"kind":"gold","n":0}}`)}},
			{ID: "gold", TypeID: "core.noop"}, {ID: "silver", TypeID: "core.noop"}, {ID: "zero", TypeID: "core.noop"}, {ID: "re", TypeID: "core.noop"},
		},
		Edges: []Edge{
			{ID: "e1", SourceNodeID: "src", TargetNodeID: "gold", Condition: json.RawMessage(`{"type":"equals","left":"payload.kind","right":"gold"}`)},
			{ID: "e2", SourceNodeID: "src", TargetNodeID: "silver", Condition: json.RawMessage(`{"type":"notEquals","left":"output.payload.kind","right":"gold"}`)},
			{ID: "e3", SourceNodeID: "src", TargetNodeID: "zero", Condition: json.RawMessage(`{"type":"falsy","left":"payload.n"}`)},
			{ID: "e4", SourceNodeID: "src", TargetNodeID: "re", Condition: json.RawMessage(`{"type":"regex","left":"payload.kind","right":"^g.l"}`)},
		}}
	def.Normalize()
	tr := newTestRun(t, RunInput{RunID: "run-branches", Definition: def})
	s := tr.execute()
	require.Equal(t, protocol.StatusCompleted, s.Status)
	var completed, skipped []string
	for _, e := range tr.events() {
		switch e.Type {
		case protocol.EvNodeCompleted:
			completed = append(completed, e.NodeID)
		case protocol.EvNodeSkipped:
			skipped = append(skipped, e.NodeID)
		}
	}
	require.Equal(t, []string{"src", "gold", "zero", "re"}, completed)
	require.Equal(t, []string{"silver"}, skipped)
}

// TestTriggerRules joins a branch that is taken (gold) and one that is skipped (silver)
// under every trigger rule, and a join whose edges name no rule (all_success).
func TestTriggerRules(t *testing.T) {
	type tc struct {
		rule   string
		legacy bool // a run started before the trigger-rules change (replaying without its marker)
	}
	for c, wantJoin := range map[tc]bool{
		{"", false}: false, {"all_success", false}: false, {"any_success", false}: true,
		{"all_complete", false}: true, {"none_failed", false}: true, {"any_failed", false}: false,
		{"", true}: true, {"all_success", true}: false, {"all_complete", true}: true, {"any_failed", true}: true,
	} {
		rule := c.rule
		t.Run(fmt.Sprintf("rule=%s,legacy=%v", rule, c.legacy), func(t *testing.T) {
			def := &Definition{ID: "join", Name: "j", Version: "1",
				Nodes: []Node{
					{ID: "src", TypeID: "core.identity", Inputs: map[string]json.RawMessage{"payload": json.RawMessage(`{"type":"static","value":{"kind":"gold"}}`)}},
					{ID: "gold", TypeID: "core.noop"}, {ID: "silver", TypeID: "core.noop"}, {ID: "join", TypeID: "core.noop"},
				},
				Edges: []Edge{
					{ID: "e1", SourceNodeID: "src", TargetNodeID: "gold", Condition: json.RawMessage(`{"type":"equals","left":"payload.kind","right":"gold"}`)},
					{ID: "e2", SourceNodeID: "src", TargetNodeID: "silver", Condition: json.RawMessage(`{"type":"equals","left":"payload.kind","right":"silver"}`)},
					{ID: "e3", SourceNodeID: "gold", TargetNodeID: "join", TriggerRule: rule},
					{ID: "e4", SourceNodeID: "silver", TargetNodeID: "join", TriggerRule: rule},
				}}
			def.Normalize()
			tr := newTestRun(t, RunInput{RunID: "run-join", Definition: def})
			if c.legacy {
				tr.env.OnGetVersion(GateTriggerRules, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			s := tr.execute()
			require.Equal(t, protocol.StatusCompleted, s.Status)
			ran := false
			for _, e := range tr.events() {
				if e.Type == protocol.EvNodeCompleted && e.NodeID == "join" {
					ran = true
				}
			}
			require.Equal(t, wantJoin, ran, "join under %q", rule)
		})
	}
}
