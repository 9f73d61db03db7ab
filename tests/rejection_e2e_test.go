package tests

// RFC 0223 over the embedded stack: a rejected approval gate fails its node
// approval_rejected (not retryable) and the run with failedNodeId, at both majors; a
// gate's timeout resolves it rejected whatever its onTimeout says.

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestV2ApprovalRejectedIsAFailedSource rejects conformance-approval's gate at v2 and
// at v1: interrupt.resolved records action reject, decision rejected; node.failed's
// error is approval_rejected with retryable false; the run fails approval_rejected
// with failedNodeId.
func TestV2ApprovalRejectedIsAFailedSource(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	reject := map[string]any{"resumeValue": map[string]any{"action": "reject", "comment": "not now"}}

	id := v2Create(t, c, map[string]any{"workflowId": "conformance-approval"})
	v2Wait(t, c, id, "waiting-approval")
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/interrupts/gate"), reject)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	s := v2Wait(t, c, id, "failed")
	assert.Equal(t, "approval_rejected", s["error"].(map[string]any)["code"])
	_, evs := v2Log(t, c, id)
	resolved := v2Payload(evs, "interrupt.resolved")
	assert.Equal(t, "reject", resolved["action"])
	assert.Equal(t, "rejected", resolved["decision"])
	nodeErr, _ := v2Payload(evs, "node.failed")["error"].(map[string]any)
	assert.Equal(t, "approval_rejected", nodeErr["code"])
	assert.Equal(t, false, nodeErr["retryable"])
	assert.Equal(t, "gate", v2Payload(evs, "run.failed")["failedNodeId"])
	replayHistory(t, c, v2Workflow(id), "approval-rejected")

	v1 := createRun(t, c, "conformance-approval", nil)
	waitSnapshot(t, c, v1, 15*time.Second, "waiting", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusWaitingApproval })
	st, body := post(c, c.Key, "/v1/runs/"+v1+"/interrupts/gate", reject)
	require.Equal(t, http.StatusOK, st, "%v", body)
	ended := waitEnded(t, c, v1, 15*time.Second)
	assert.Equal(t, "run.failed", ended[len(ended)-1].Type)
	var failed struct {
		Error struct {
			Code      string `json:"code"`
			Retryable *bool  `json:"retryable"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(ofType(ended, "node.failed")[0].Payload, &failed))
	assert.Equal(t, "approval_rejected", failed.Error.Code)
	require.NotNil(t, failed.Error.Retryable)
	assert.False(t, *failed.Error.Retryable)
}

// TestApprovalTimeoutResolvesRejected runs an approval gate whose data says onTimeout
// approve, with a 1.5 s timeout, on the embedded server: nobody answers, the gate is
// resolved rejected (action timeout, reason timeout) and the run fails
// approval_rejected; the gate never grants.
func TestApprovalTimeoutResolvesRejected(t *testing.T) {
	s := wfStack(t)
	const id = "e2e-approval-timeout"
	run := wfStart(t, s, id, "conformance-approval", "", func(in *workflows.RunInput) {
		def := *in.Definition
		def.Nodes = append([]workflows.Node(nil), def.Nodes...)
		def.Nodes[0].Config = json.RawMessage(`{"actions":["accept","reject"],"timeoutMs":1500,"onTimeout":"approve","title":"Ship it"}`)
		in.Definition = &def
	})
	snap := wfResult(t, run)
	require.Equal(t, protocol.StatusFailed, snap.Status)
	require.Equal(t, protocol.CodeApprovalRejected, snap.Error.Code)
	evs := wfEvents(t, s, id)
	var resolved map[string]any
	require.NoError(t, json.Unmarshal(ofType(evs, "interrupt.resolved")[0].Payload, &resolved))
	assert.Equal(t, "timeout", resolved["action"])
	assert.Equal(t, "rejected", resolved["decision"])
	assert.Equal(t, "timeout", resolved["reason"])
	assert.Empty(t, ofType(evs, "node.completed"), "a timeout never grants")
	wfRecord(t, s, run, "approval-timeout-rejected")
}

// TestApproversListEnforcedOnEveryPath runs an approval gate whose approversList names
// only the key "alice": the key "bob" is refused 403 on every resolve surface (by run
// at v2 and v1, by his own token) and the gate stays pending; alice's accept decides it.
func TestApproversListEnforcedOnEveryPath(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	scopes := []string{api.ScopeRunsRead, api.ScopeApprovalsRespond}
	k := newKeyedAPI(t, c, keySpec{Name: "alice", Scopes: scopes}, keySpec{Name: "bob", Scopes: scopes})
	alice, bob := k.as("alice"), k.as("bob")

	id := "r_approvers" + randomHex(6)
	in, err := c.Stack.Catalog().NewRunInput(workflows.RunRequest{RunID: id, WorkflowID: "conformance-approval", Owner: workflows.Owner{Tenant: k.Tenant, Principal: "alice"}})
	require.NoError(t, err)
	def := *in.Definition
	def.Nodes = append([]workflows.Node(nil), def.Nodes...)
	def.Nodes[0].Config = json.RawMessage(`{"actions":["accept","reject"],"approversList":["alice"]}`)
	in.Definition = &def
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Stack.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue, StaticSummary: workflows.RunSummary(in)}, workflows.RunWorkflowName, in)
	require.NoError(t, err)
	waitSnapshot(t, alice, id, 15*time.Second, "waiting", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusWaitingApproval })

	accept := map[string]any{"resumeValue": map[string]any{"action": "accept"}}
	pending := func(why string) {
		t.Helper()
		s := snapshot(t, alice, id)
		require.Equal(t, protocol.StatusWaitingApproval, s.Status, why)
		require.NotNil(t, s.Interrupt, why)
	}
	status, _, raw := v2Call(t, bob, bob.Key, http.MethodPost, v2Path(id, "/interrupts/gate"), accept)
	assert.Equal(t, http.StatusForbidden, status, "v2 by run: %s", raw)
	assert.Equal(t, "forbidden", errorCode(raw))
	pending("after bob at v2")
	st, body := post(bob, bob.Key, "/v1/runs/"+id+"/interrupts/gate", accept)
	assert.Equal(t, http.StatusForbidden, st, "v1 by run: %v", body)
	pending("after bob at v1")
	tok := snapshotToken(t, bob, id)
	status, _, raw = cfCall(t, bob, "", http.MethodPost, "/v1/interrupts/"+tok, accept)
	assert.Equal(t, http.StatusForbidden, status, "by bob's token: %s", raw)
	pending("after bob's token")

	st, body = post(alice, alice.Key, "/v1/runs/"+id+"/interrupts/gate", accept)
	require.Equal(t, http.StatusOK, st, "alice is on the list: %v", body)
	waitSnapshot(t, alice, id, 15*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	assert.Empty(t, ofType(events(t, alice, id), "approval.received")[1:], "one decision recorded: bob's refusals left nothing")
}
