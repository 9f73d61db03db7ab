package tests

// Agents your workflows can call (package agentclient): a caller workflow on a worker
// and task queue of its own (examples/temporal-caller/caller) holds a conversation
// with a pack as its child run, on the embedded stack.

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/agentclient"
	"github.com/wop-dev/wop/examples/temporal-caller/caller"
	"github.com/wop-dev/wop/internal/payloadcodec"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// callerPacksDir holds the caller tests' pack.
const callerPacksDir = "testdata/callerpacks"

// startCallerStack starts a private stack serving the caller pack, its payment bound
// to a new pay service, and a worker of the caller's own on its own task queue.
func startCallerStack(t *testing.T) (*apiClient, *payService, string) {
	t.Helper()
	svc := newPayService(t)
	c := startPrivateStack(t, stackOptions{PacksDir: callerPacksDir, ToolsFile: writeBindings(t, payBindings(svc.URL)),
		Tweak: func(o *stack.Options) { o.NexusEndpoint = agentclient.DefaultNexusEndpoint }})
	return c, svc, startCallerWorker(t, c.Stack.Client())
}

// startCallerWorker starts a worker of the caller's workflows on a task queue of their
// own, on tc, and returns the queue.
func startCallerWorker(t *testing.T, tc client.Client) string {
	t.Helper()
	queue := "caller-" + randomHex(4)
	w := sdkworker.New(tc, queue, sdkworker.Options{WorkerStopTimeout: time.Second})
	w.RegisterWorkflowWithOptions(caller.Converse, workflow.RegisterOptions{Name: caller.WorkflowName})
	w.RegisterWorkflowWithOptions(caller.ConverseNexus, workflow.RegisterOptions{Name: caller.NexusWorkflowName})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return queue
}

// startCaller starts the caller workflow with in (a caller.Input, or a
// caller.NexusInput for the caller through Nexus).
func startCaller(t *testing.T, c *apiClient, queue string, in any) client.WorkflowRun {
	t.Helper()
	name := caller.WorkflowName
	if _, ok := in.(caller.NexusInput); ok {
		name = caller.NexusWorkflowName
	}
	run, err := c.Stack.Client().ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{
		ID: "caller-" + randomHex(6), TaskQueue: queue, WorkflowExecutionTimeout: 2 * time.Minute,
	}, name, in)
	require.NoError(t, err)
	return run
}

// callerState queries the caller's result so far until ok accepts it.
func callerState(t *testing.T, c *apiClient, run client.WorkflowRun, ok func(caller.Result) bool) caller.Result {
	t.Helper()
	var res caller.Result
	require.Eventually(t, func() bool {
		v, err := c.Stack.Client().QueryWorkflow(t.Context(), run.GetID(), run.GetRunID(), caller.StateQuery)
		if err != nil {
			return false
		}
		res = caller.Result{}
		return v.Get(&res) == nil && ok(res)
	}, 30*time.Second, 50*time.Millisecond, "the caller's state: %+v", res)
	return res
}

// requireListed requires GET /v1/runs of the caller pack to list run id for the
// harness key's tenant, like any run.
func requireListed(t *testing.T, c *apiClient, id string) {
	t.Helper()
	status, _, body := c.do(http.MethodGet, "/v1/runs?workflowId=caller-desk", nil)
	require.Equal(t, http.StatusOK, status, "%v", body)
	listed := false
	for _, r := range body["runs"].([]any) {
		listed = listed || r.(map[string]any)["runId"] == id
	}
	require.True(t, listed, "GET /v1/runs lists %s: %v", id, body)
}

// callerResult waits for the caller's end.
func callerResult(t *testing.T, run client.WorkflowRun) caller.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var res caller.Result
	require.NoError(t, run.Get(ctx, &res))
	return res
}

// TestCallerWorkflowConversationE2E: a caller workflow holds a two-turn conversation
// as its child run; the second turn's payment waits for a person, the host worker is
// restarted while the caller waits, the payment is approved through the REST API, and
// the caller reads the reply and the run's outcome. The run is an ordinary OpenWOP run
// of the caller's tenant: listed, owned by a workload subject, its child in Temporal.
func TestCallerWorkflowConversationE2E(t *testing.T) {
	c, svc, queue := startCallerStack(t)
	run := startCaller(t, c, queue, caller.Input{
		Pack: "caller-desk", Tenant: "default", HostTaskQueue: "wop",
		Messages: []string{"Hello, I have an invoice for you.", "Please pay INV-9."},
	})
	st := callerState(t, c, run, func(r caller.Result) bool { return len(r.Replies) == 1 })
	id := st.RunID
	require.Regexp(t, `^r_[0-9A-Z]{26}$`, id, "the child's workflow id is a run id of the API's shape")
	require.Equal(t, "Which invoice should I pay?", st.Replies[0].Text)
	require.Equal(t, "desk", st.Replies[0].State)

	// The second message's reply waits on the payment's approval.
	s, d := waitToolApproval(t, c, id)
	require.Equal(t, protocol.StatusWaitingApproval, s.Status)
	require.Equal(t, "pay_invoice", d["artifactData"].(map[string]any)["tool"])
	require.Empty(t, svc.received(id, "/pay"))
	require.Equal(t, "default", s.Owner.Tenant)
	v, err := c.Stack.Client().QueryWorkflow(t.Context(), id, "", workflows.SnapshotQuery)
	require.NoError(t, err)
	var own workflows.Snapshot
	require.NoError(t, v.Get(&own))
	require.Equal(t, &protocol.Subject{Issuer: protocol.IssuerTemporal, SubjectID: caller.WorkflowName, Tenant: "default", Lane: protocol.LaneWorkload, Kind: protocol.KindWorkload}, own.Owner.Subject,
		"the run's owner is the caller, a workload")

	requireListed(t, c, id)

	// The host's worker restarts while the caller waits for the reply.
	c.Stack.StopWorker()
	require.NoError(t, c.Stack.StartWorker())

	status, resp := resolveAt(c, id, map[string]any{"action": "accept", "comment": "Checked."})
	require.Equal(t, http.StatusOK, status, "%v", resp)
	res := callerResult(t, run)
	require.Equal(t, id, res.RunID)
	require.Len(t, res.Replies, 2, "%+v", res)
	require.Contains(t, res.Replies[1].Text, "INV-9 is paid.")
	require.Equal(t, protocol.StatusCompleted, res.Status, "%+v", res)
	require.Empty(t, res.Code)
	require.Len(t, svc.received(id, "/pay"), 1, "paid exactly once")
	snap := waitCompleted(t, c, id)
	require.Equal(t, "closed", snap.Pack.State)

	// In Temporal the run is the caller's child, and the caller's history replays.
	desc, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), id, "")
	require.NoError(t, err)
	require.Equal(t, run.GetID(), desc.GetWorkflowExecutionInfo().GetParentExecution().GetWorkflowId())
	memo := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()
	require.Equal(t, strconv.Itoa(protocol.EraV2), string(memo[workflows.MemoEra].GetData()), "the memo a v2 listing reads, as the API sets it")
	require.Contains(t, string(memo[workflows.MemoSubject].GetData()), protocol.IssuerTemporal)
	replayCaller(t, c, run.GetID(), "caller-conversation")
	replayHistory(t, c, id, "")
}

// TestCallerWorkflowCancelE2E: a caller cancels its conversation; the run ends
// cancelled and the caller reads the cancellation as its outcome.
func TestCallerWorkflowCancelE2E(t *testing.T) {
	c, _, queue := startCallerStack(t)
	run := startCaller(t, c, queue, caller.Input{
		Pack: "caller-desk", Tenant: "default", HostTaskQueue: "wop",
		Messages: []string{"Hello, I have an invoice for you."}, Cancel: true,
	})
	res := callerResult(t, run)
	require.Len(t, res.Replies, 1)
	require.Equal(t, "Which invoice should I pay?", res.Replies[0].Text)
	require.Equal(t, "cancelled", res.Code, "%+v", res)
	require.Equal(t, protocol.StatusCancelled, res.Status)
	s := waitSnapshot(t, c, res.RunID, 30*time.Second, "cancelled", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCancelled })
	require.Equal(t, "default", s.Owner.Tenant)
	desc, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), res.RunID, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus(), "Temporal shows the run cancelled")
}

// replayCaller replays the caller workflow's history against the caller's code; with
// WOP_RECORD_HISTORIES=1 it writes it to examples/temporal-caller/caller/testdata,
// which that package's replay test replays on every run.
func replayCaller(t *testing.T, c *apiClient, id, name string) {
	t.Helper()
	hist := workflowHistory(t, c, id)
	r := sdkworker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(caller.Converse, workflow.RegisterOptions{Name: caller.WorkflowName})
	r.RegisterWorkflowWithOptions(caller.ConverseNexus, workflow.RegisterOptions{Name: caller.NexusWorkflowName})
	require.NoError(t, r.ReplayWorkflowHistory(nil, hist), "replay of caller %s", id)
	recordHistory(t, hist, filepath.Join("..", "examples", "temporal-caller", "caller", "testdata", name+".history.json"))
}

// TestNexusConversationE2E: a caller workflow reaches the pack through the host's Nexus
// endpoint (created by the embedded server, as wop dev does): it starts the
// conversation, sends two messages (the second waits on the payment's approval, the
// host's worker restarts meanwhile, the payment is accepted through the REST API) and
// awaits the outcome. The run is owned by the endpoint's configured owner.
func TestNexusConversationE2E(t *testing.T) {
	c, svc, queue := startCallerStack(t)
	run := startCaller(t, c, queue, caller.NexusInput{
		Endpoint: agentclient.DefaultNexusEndpoint, Pack: "caller-desk",
		Messages: []string{"Hello, I have an invoice for you.", "Please pay INV-9."},
	})
	st := callerState(t, c, run, func(r caller.Result) bool { return len(r.Replies) == 1 })
	require.Equal(t, "Which invoice should I pay?", st.Replies[0].Text)
	id := st.RunID
	s, _ := waitToolApproval(t, c, id)
	require.Equal(t, "default", s.Owner.Tenant)
	requireListed(t, c, id)
	// The host's worker (the Nexus handler and the helper workflows' worker) restarts
	// while the operation waits.
	c.Stack.StopWorker()
	require.NoError(t, c.Stack.StartWorker())
	status, resp := resolveAt(c, id, map[string]any{"action": "accept"})
	require.Equal(t, http.StatusOK, status, "%v", resp)
	res := callerResult(t, run)
	require.Len(t, res.Replies, 2, "%+v", res)
	require.Contains(t, res.Replies[1].Text, "INV-9 is paid.")
	require.Equal(t, protocol.StatusCompleted, res.Status, "%+v", res)
	require.Len(t, svc.received(id, "/pay"), 1)
	v, err := c.Stack.Client().QueryWorkflow(t.Context(), id, "", workflows.SnapshotQuery)
	require.NoError(t, err)
	var own workflows.Snapshot
	require.NoError(t, v.Get(&own))
	require.Equal(t, protocol.WorkloadSubject("default", "nexus"), own.Owner.Subject)
	replayCaller(t, c, run.GetID(), "nexus-conversation")
}

// TestNexusCancelE2E: cancelling the await-outcome operation cancels the conversation.
func TestNexusCancelE2E(t *testing.T) {
	c, _, queue := startCallerStack(t)
	run := startCaller(t, c, queue, caller.NexusInput{
		Endpoint: agentclient.DefaultNexusEndpoint, Pack: "caller-desk",
		Messages: []string{"Hello, I have an invoice for you."}, Cancel: true,
	})
	res := callerResult(t, run)
	require.Len(t, res.Replies, 1, "%+v", res)
	require.Equal(t, agentclient.CodeCancelled, res.Code, "%+v", res)
	waitSnapshot(t, c, res.RunID, 30*time.Second, "cancelled", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCancelled })
}

// TestTemporalCallerExampleE2E runs examples/temporal-caller against the stack (its
// embedded server with the Nexus endpoint, as wop dev starts it): the program prints
// the agent's reply to its child conversation and to its Nexus one, and exits 0.
func TestTemporalCallerExampleE2E(t *testing.T) {
	c, _, _ := startCallerStack(t)
	bin := filepath.Join(t.TempDir(), "temporal-caller")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../examples/temporal-caller").CombinedOutput()
	require.NoError(t, err, "build the example: %s", out)
	cmd := exec.CommandContext(ctx, bin, "--address", c.Stack.TemporalAddress(), "--namespace", c.Stack.Namespace(),
		"--pack", "caller-desk", "--message", "Hello, I have an invoice for you.")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	require.Equal(t, "child: Which invoice should I pay?\nnexus: Which invoice should I pay?\n", stdout.String())
}

// TestCallerRunFailureE2E: a conversation whose run fails (the strict mock refuses an
// off-script message) fails the caller's outcome with the run's OpenWOP code, through
// the child workflow and through Nexus alike; a message to the ended run is refused.
func TestCallerRunFailureE2E(t *testing.T) {
	c, _, queue := startCallerStack(t)
	msgs := []string{"Hello, I have an invoice for you.", "What is the weather like?"}
	for _, in := range []any{
		caller.Input{Pack: "caller-desk", Tenant: "default", HostTaskQueue: "wop", Messages: msgs},
		caller.NexusInput{Endpoint: agentclient.DefaultNexusEndpoint, Pack: "caller-desk", Messages: msgs},
	} {
		res := callerResult(t, startCaller(t, c, queue, in))
		require.NotEmpty(t, res.RunID, "%+v", res)
		s := waitSnapshot(t, c, res.RunID, 30*time.Second, "failed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusFailed })
		require.NotNil(t, s.Error)
		require.Equal(t, s.Error.Code, res.Code, "the caller reads the run's code: %+v", res)
		require.Equal(t, protocol.StatusFailed, res.Status, "%+v", res)
		require.Len(t, res.Replies, 2, "the first reply, then the run's end: %+v", res)
		require.True(t, res.Replies[1].Ended || res.Replies[1].Closed, "%+v", res.Replies[1])
	}
}

// TestCallerWorkflowSealedE2E: on a host that seals its payloads, a caller whose client
// carries the host's keys (agentclient.DataConverter) holds a conversation as a child
// and through Nexus; its worker is its own, on a client of its own.
func TestCallerWorkflowSealedE2E(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "payload-keys.yaml")
	require.NoError(t, os.WriteFile(keys, []byte("keys:\n  - id: k1\n    key: "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n"), 0o600))
	codec, err := payloadcodec.Load(keys)
	require.NoError(t, err)
	c := startPrivateStack(t, stackOptions{PacksDir: callerPacksDir, Tweak: func(o *stack.Options) {
		o.NexusEndpoint = agentclient.DefaultNexusEndpoint
		o.API.PayloadCodec = codec
	}})
	dc, err := agentclient.DataConverter(keys)
	require.NoError(t, err)
	cc, err := client.Dial(client.Options{HostPort: c.Stack.TemporalAddress(), Namespace: c.Stack.Namespace(), DataConverter: dc, Logger: worker.SDKLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(cc.Close)
	queue := startCallerWorker(t, cc)
	msgs := []string{"Hello, I have an invoice for you."}
	for _, in := range []any{
		caller.Input{Pack: "caller-desk", Tenant: "default", Messages: msgs, Cancel: true},
		caller.NexusInput{Endpoint: agentclient.DefaultNexusEndpoint, Pack: "caller-desk", Messages: msgs, Cancel: true},
	} {
		res := callerResult(t, startCaller(t, c, queue, in))
		require.Len(t, res.Replies, 1, "%+v", res)
		require.Equal(t, "Which invoice should I pay?", res.Replies[0].Text)
		require.Equal(t, agentclient.CodeCancelled, res.Code, "%+v", res)
	}
}

// TestCallerTimeoutCancelsTheConversationE2E: a caller that times out while its reply
// waits on an approval closes, and the parent close policy cancels the conversation.
func TestCallerTimeoutCancelsTheConversationE2E(t *testing.T) {
	c, svc, queue := startCallerStack(t)
	run, err := c.Stack.Client().ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{
		ID: "caller-" + randomHex(6), TaskQueue: queue, WorkflowExecutionTimeout: 8 * time.Second,
	}, caller.WorkflowName, caller.Input{Pack: "caller-desk", Tenant: "default", Messages: []string{"Hello, I have an invoice for you.", "Please pay INV-9."}})
	require.NoError(t, err)
	id := callerState(t, c, run, func(r caller.Result) bool { return len(r.Replies) == 1 }).RunID
	waitToolApproval(t, c, id)
	var res caller.Result
	require.Error(t, run.Get(t.Context(), &res), "the caller timed out")
	waitSnapshot(t, c, id, 30*time.Second, "cancelled", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCancelled })
	require.Empty(t, svc.received(id, "/pay"), "the payment was never made")
}
