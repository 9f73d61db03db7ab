package tests

// Tool calls that wait for a person, on the embedded stack: the payables packs
// (testdata/approvalpacks) act with approval, so their payment tool, bound to an HTTP
// endpoint the test serves, waits on an OpenWOP approval interrupt. The endpoint
// counts what it receives per run; the scripted mock's expect_tool_result checks what
// the model read after each decision.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/tools"
	"github.com/wop-dev/wop/workflows"
)

// approvalPacksDir holds the approval tests' packs.
const approvalPacksDir = "testdata/approvalpacks"

// payCall is one request the payables endpoint received.
type payCall struct {
	Path, RunID, Key string
	Body             map[string]any
}

// payService is the HTTP endpoint of the payables packs' tools.
type payService struct {
	*httptest.Server
	mu    sync.Mutex
	calls []payCall
}

func newPayService(t *testing.T) *payService {
	p := &payService{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		p.mu.Lock()
		p.calls = append(p.calls, payCall{Path: r.URL.Path, RunID: r.Header.Get(tools.HeaderRunID), Key: r.Header.Get(tools.HeaderIdempotencyKey), Body: body})
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/lookup":
			_ = json.NewEncoder(w).Encode(map[string]any{"invoice": body["invoice"], "amount": "120.00", "supplier": "Acme"})
		case "/pay":
			_ = json.NewEncoder(w).Encode(map[string]any{"paid": true, "invoice": body["invoice"], "amount": body["amount"]})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// received returns the calls of one run to path.
func (p *payService) received(runID, path string) []payCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []payCall
	for _, c := range p.calls {
		if c.RunID == runID && c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// payBindings binds the payables tools to svc; pay_invoice_soon's decision has short
// deadlines, reminders and an escalation.
func payBindings(svc string) string {
	return `tools:
  lookup_invoice:
    http: { url: "` + svc + `/lookup" }
  pay_invoice:
    http: { url: "` + svc + `/pay" }
  pay_invoice_soon:
    http: { url: "` + svc + `/pay" }
    approval_timeout: 6s
    approval_reminder: 2s
    approvers: [test]
    escalate_after: 3s
    escalate_to: [payables-leads]
`
}

// startApprovalStack starts a private stack serving the payables packs with their
// tools bound to a new pay service.
func startApprovalStack(t *testing.T) (*apiClient, *payService) {
	t.Helper()
	svc := newPayService(t)
	c := startPrivateStack(t, stackOptions{PacksDir: approvalPacksDir, ToolsFile: writeBindings(t, payBindings(svc.URL))})
	return c, svc
}

// resolveAt posts a resume value to the pack's node.
func resolveAt(c *apiClient, id string, value any) (int, map[string]any) {
	return postToPack(c, id, map[string]any{"resumeValue": value})
}

// decidePayment starts a run of payables pack pack with "Please pay INV-7.", waits until
// its payment waits for approval, and decides it (the decision's resume value).
func decidePayment(t *testing.T, c *apiClient, pack string, decision map[string]any) string {
	t.Helper()
	id := createRun(t, c, pack, map[string]any{"message": "Please pay INV-7."})
	waitToolApproval(t, c, id)
	status, body := resolveAt(c, id, decision)
	require.Equal(t, http.StatusOK, status, "%v", body)
	return id
}

// waitToolApproval waits until the run waits on a tool call's approval and returns the
// snapshot and the interrupt's ApprovalData.
func waitToolApproval(t *testing.T, c *apiClient, id string) (workflows.Snapshot, map[string]any) {
	t.Helper()
	s := waitSnapshot(t, c, id, 30*time.Second, "waiting for a tool approval", func(s workflows.Snapshot) bool {
		return s.Interrupt != nil && s.Interrupt.Kind == "approval"
	})
	var d map[string]any
	require.NoError(t, json.Unmarshal(s.Interrupt.Data, &d))
	return s, d
}

// TestToolApprovalAcceptE2E: the payment waits on an approval interrupt that says what
// it is, the conversation refuses messages meanwhile with 409, and accepting runs it
// once; the model reads its real result.
func TestToolApprovalAcceptE2E(t *testing.T) {
	t.Parallel()
	c, svc := startApprovalStack(t)
	id := createRun(t, c, "pay-accept", map[string]any{"message": "Please pay INV-7."})
	s, d := waitToolApproval(t, c, id)
	require.Equal(t, protocol.StatusWaitingApproval, s.Status)
	require.Empty(t, svc.received(id, "/pay"), "nothing is paid before the decision")
	require.Empty(t, svc.received(id, "/lookup"), "the batch runs after its decisions")
	require.Equal(t, "Approve pay_invoice", d["title"])
	require.Contains(t, d["description"], "acts_with_approval")
	require.Equal(t, []any{"accept", "reject", "edit-accept"}, d["actions"])
	art := d["artifactData"].(map[string]any)
	require.Equal(t, "pay_invoice", art["tool"])
	require.Equal(t, map[string]any{"invoice": "INV-7", "amount": "120.00"}, art["arguments"])
	require.Equal(t, map[string]any{"effect": "external", "reversibility": "irreversible"}, art["actionScope"])
	require.Equal(t, "I will look INV-7 up and pay it.", art["agent"].(map[string]any)["text"])
	require.NotEmpty(t, s.Interrupt.InterruptToken, "a signed token can decide it too")

	// The Temporal UI says which tool waits.
	desc, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), id, "")
	require.NoError(t, err)
	sa := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	require.Equal(t, "pay_invoice", runTag(t, c.Stack.Client(), id, workflows.TagWaitingTool))
	require.Equal(t, "approval:"+packNode, runTag(t, c.Stack.Client(), id, workflows.TagWaitingOn))
	require.NotContains(t, sa, workflows.SAWaitingTool.GetName(), "a run of the tags sets no legacy attribute")
	v, err := c.Stack.Client().QueryWorkflow(t.Context(), id, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	require.Contains(t, meta.GetCurrentDetails(), "Tool call **pay_invoice**", "the UI's current details name the waiting call")
	require.NotContains(t, meta.GetCurrentDetails(), "send a message", "messages are refused while the call waits: %s", meta.GetCurrentDetails())
	require.Contains(t, meta.GetCurrentDetails(), "**Working on a turn**", meta.GetCurrentDetails())

	status, body := resolveAt(c, id, map[string]any{"text": "Is it paid yet?"})
	require.Equal(t, http.StatusConflict, status, "%v", body)
	require.Equal(t, workflows.CodeApprovalPending, body["error"])

	status, body = resolveAt(c, id, map[string]any{"action": "accept", "comment": "Checked against the PO."})
	require.Equal(t, http.StatusOK, status, "%v", body)
	s = waitCompleted(t, c, id)
	require.Equal(t, "closed", s.Pack.State)
	require.Len(t, svc.received(id, "/pay"), 1, "accepted: paid exactly once")
	require.Len(t, svc.received(id, "/lookup"), 1)

	status, body = resolveAt(c, id, map[string]any{"action": "accept"})
	require.Contains(t, []int{http.StatusBadRequest, http.StatusConflict, http.StatusGone}, status, "a decision to a finished run is refused: %v", body)
	require.Len(t, svc.received(id, "/pay"), 1)

	evs := events(t, c, id)
	rec := ofType(evs, protocol.EvApprovalReceived)
	require.Len(t, rec, 1)
	var p map[string]any
	require.NoError(t, json.Unmarshal(rec[0].Payload, &p))
	require.Equal(t, "accept", p["action"])
	require.Equal(t, "test", p["decidedBy"], "the decider is the authenticated key")
	replayHistory(t, c, id, "pack-tool-approval-accept")
}

// TestToolApprovalRejectE2E: a rejected payment never reaches the endpoint; the model
// reads who rejected it and why (expect_tool_result) and the conversation goes on.
func TestToolApprovalRejectE2E(t *testing.T) {
	t.Parallel()
	c, svc := startApprovalStack(t)
	id := decidePayment(t, c, "pay-reject", map[string]any{"action": "reject", "feedback": "INV-7 was paid last week"})
	waitRounds(t, c, id, 2, protocol.StatusWaitingApproval)
	status, body := resolveAt(c, id, map[string]any{"action": "accept"})
	require.Equal(t, http.StatusConflict, status, "a late decision never becomes a chat message: %v", body)
	sayTo(t, c, id, "OK, thanks.")
	s := waitCompleted(t, c, id)
	require.Equal(t, "closed", s.Pack.State)
	require.Empty(t, svc.received(id, "/pay"), "rejected: never called")

	turns := turnsIn(t, events(t, c, id))
	require.Equal(t, "I will pay INV-7.\n\nThe payment of INV-7 was rejected, it was paid last week.", textOf(t, turns[1]))
	replayHistory(t, c, id, "pack-tool-approval-reject")
}

// TestToolApprovalEditAcceptE2E: edited arguments that break the tool's parameter
// schema are refused with 400 and the call still waits; valid ones are what the
// endpoint receives.
func TestToolApprovalEditAcceptE2E(t *testing.T) {
	t.Parallel()
	c, svc := startApprovalStack(t)
	id := createRun(t, c, "pay-accept", map[string]any{"message": "Please pay INV-7."})
	waitToolApproval(t, c, id)

	status, body := resolveAt(c, id, map[string]any{"action": "edit-accept", "editedArtifactData": map[string]any{"arguments": map[string]any{"invoice": "INV-7", "amount": "one hundred"}}})
	require.Equal(t, http.StatusBadRequest, status, "%v", body)
	require.Equal(t, "validation_error", body["error"])
	require.Contains(t, body["message"], "do not match the parameters of pay_invoice")
	status, body = resolveAt(c, id, map[string]any{"action": "edit-accept", "editedArtifactData": map[string]any{"arguments": map[string]any{"invoice": "INV-7", "amount": "100.00", "iban": "XX"}}})
	require.Equal(t, http.StatusBadRequest, status, "an argument the tool does not take: %v", body)
	s, _ := waitToolApproval(t, c, id)
	require.Equal(t, protocol.StatusWaitingApproval, s.Status, "still waiting")
	require.Empty(t, svc.received(id, "/pay"))

	status, body = resolveAt(c, id, map[string]any{"action": "edit-accept", "editedArtifactData": map[string]any{"arguments": map[string]any{"invoice": "INV-7", "amount": "100.00"}}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	waitCompleted(t, c, id)
	paid := svc.received(id, "/pay")
	require.Len(t, paid, 1)
	require.Equal(t, map[string]any{"invoice": "INV-7", "amount": "100.00"}, paid[0].Body, "the endpoint got the edited arguments")
}

// TestToolApprovalExpiryE2E: with short durations, reminders and an escalation are run
// events, and the deadline rejects the call as expired; the model reads why.
func TestToolApprovalExpiryE2E(t *testing.T) {
	t.Parallel()
	c, svc := startApprovalStack(t)
	id := createRun(t, c, "pay-expire", map[string]any{"message": "Please pay INV-7."})
	_, d := waitToolApproval(t, c, id)
	require.Equal(t, []any{"test"}, d["approversList"])
	s := waitCompleted(t, c, id)
	require.Equal(t, "closed", s.Pack.State)
	require.Empty(t, svc.received(id, "/pay"), "expired: never called")

	evs := events(t, c, id)
	reminders := ofType(evs, protocol.EvWorkflowStalled)
	require.Len(t, reminders, 2, "at 2s and 4s; none at the 6s deadline")
	requested := ofType(evs, protocol.EvApprovalRequested)
	require.Len(t, requested, 2, "the request, then its escalation")
	var esc map[string]any
	require.NoError(t, json.Unmarshal(requested[1].Payload, &esc))
	assert.Equal(t, true, esc["escalated"])
	assert.Equal(t, []any{"test", "payables-leads"}, esc["approversList"])
	rec := ofType(evs, protocol.EvApprovalReceived)
	require.Len(t, rec, 1)
	var p map[string]any
	require.NoError(t, json.Unmarshal(rec[0].Payload, &p))
	require.Equal(t, "timeout", p["action"])
	require.Equal(t, "expired", p["reason"])
	first, err := time.Parse(time.RFC3339Nano, requested[0].Timestamp)
	require.NoError(t, err)
	at, err := time.Parse(time.RFC3339Nano, rec[0].Timestamp)
	require.NoError(t, err)
	require.GreaterOrEqual(t, at.Sub(first), 6*time.Second, "not before the deadline")
	replayHistory(t, c, id, "pack-tool-approval-expiry")
}

// TestToolApprovalSurvivesKill9E2E builds the wop binary and runs `wop dev` serving the
// payables packs: while the payment waits for its decision, the whole process is killed
// with SIGKILL and started again on the same data folder; the decision made afterwards
// pays exactly once.
func TestToolApprovalSurvivesKill9E2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wop binary")
	}
	t.Parallel()
	svc := newPayService(t)
	tmp := t.TempDir()
	bin := buildWop(t)
	dataDir := filepath.Join(tmp, "data")
	require.NoError(t, os.MkdirAll(dataDir, 0o755))
	bindings := writeBindings(t, payBindings(svc.URL))
	key := "wop_test_" + randomHex(12)
	httpPort, temporalPort, uiPort := freePort(t), freePort(t), freePort(t)
	flags := []string{"--packs", approvalPacksDir, "--tools", bindings}

	p := startDev(t, bin, dataDir, httpPort, temporalPort, uiPort, key, flags...)
	c := &apiClient{t: t, BaseURL: fmt.Sprintf("http://127.0.0.1:%d", httpPort), Key: key, http: &http.Client{Timeout: 30 * time.Second}}
	id := createRun(t, c, "pay-accept", map[string]any{"message": "Please pay INV-7."})
	before, _ := waitToolApproval(t, c, id)
	p.kill()
	require.Empty(t, svc.received(id, "/pay"))

	startDev(t, bin, dataDir, httpPort, temporalPort, uiPort, key, flags...)
	// Right after the restart a read may time out (the dead worker's sticky queue); it
	// is asked again.
	var after workflows.Snapshot
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		status, _, raw := c.doRaw(http.MethodGet, "/v1/runs/"+id, nil, map[string]string{"Authorization": "Bearer " + c.Key})
		if !assert.Equal(ct, http.StatusOK, status, "%s", raw) {
			return
		}
		after = workflows.Snapshot{}
		assert.NoError(ct, json.Unmarshal(raw, &after))
		assert.True(ct, after.Interrupt != nil && after.Interrupt.Kind == "approval", "still waiting for the approval")
	}, 60*time.Second, 200*time.Millisecond)
	var d map[string]any
	require.NoError(t, json.Unmarshal(after.Interrupt.Data, &d))
	require.Equal(t, before.Interrupt.InterruptID, after.Interrupt.InterruptID, "the same interrupt, not a new one")
	require.Equal(t, before.Interrupt.ExpiresAt, after.Interrupt.ExpiresAt, "the deadline did not move")
	require.Equal(t, "pay_invoice", d["artifactData"].(map[string]any)["tool"])
	status, body := resolveAt(c, id, map[string]any{"action": "accept"})
	require.Equal(t, http.StatusOK, status, "%v", body)
	waitSnapshot(t, c, id, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	require.Len(t, svc.received(id, "/pay"), 1, "paid exactly once across the kill")
	evs := events(t, c, id)
	require.Len(t, ofType(evs, protocol.EvInterruptRequested), 2, "the conversation's and the payment's: none raised again")
}

// buildWop builds the wop binary into the test's temporary folder (the build cache
// makes every build after the first a link).
func buildWop(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "wop")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/wop").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/wop: %v\n%s", err, out)
	}
	return bin
}

// TestToolApprovalQuorumOnTheSameArgumentsE2E: pay_invoice needs two approvers' votes.
// Whichever of them edits the amount, the quorum restarts on the edited arguments: both
// approvers read them in their inbox, an accept that names no revision (or an old one)
// is refused, and the endpoint is paid what both approved, once.
func TestToolApprovalQuorumOnTheSameArgumentsE2E(t *testing.T) {
	t.Parallel()
	svc := newPayService(t)
	bindings := `tools:
  lookup_invoice:
    http: { url: "` + svc.URL + `/lookup" }
  pay_invoice:
    http: { url: "` + svc.URL + `/pay" }
    approvers: [appr1, appr2]
    required_approvals: 2
`
	k1, k2 := "appr1-"+randomHex(12), "appr2-"+randomHex(12)
	c := startPrivateStack(t, stackOptions{PacksDir: approvalPacksDir, ToolsFile: writeBindings(t, bindings), Tweak: func(o *stack.Options) {
		scopes := []string{api.ScopeRunsRead, api.ScopeApprovalsRespond}
		o.API.Keys = append(o.API.Keys, api.Key{ID: "appr1", Secret: k1, Tenant: "default", Scopes: scopes}, api.Key{ID: "appr2", Secret: k2, Tenant: "default", Scopes: scopes})
	}})
	key := map[string]string{"appr1": k1, "appr2": k2}
	edit := map[string]any{"action": "edit-accept", "editedArtifactData": map[string]any{"arguments": map[string]any{"invoice": "INV-7", "amount": "99999.00"}}}
	vote := func(id, who string, value map[string]any) (int, map[string]any) {
		return post(c, key[who], "/v1/runs/"+id+"/interrupts/"+packNode, map[string]any{"resumeValue": value})
	}
	// shown is the tool call artifact an approver's inbox lists for the run.
	shown := func(id, who string) map[string]any {
		a := clientAt(t, c, c.BaseURL, key[who], 30*time.Second)
		var list api.PendingList
		require.NoError(t, json.Unmarshal(getJSON(t, a, "/v1/interrupts"), &list))
		for _, it := range list.Interrupts {
			if it.RunID == id && it.Kind == "approval" {
				var d map[string]any
				require.NoError(t, json.Unmarshal(it.Data, &d))
				return d["artifactData"].(map[string]any)
			}
		}
		t.Fatalf("%s's inbox lists no approval of run %s: %+v", who, id, list)
		return nil
	}

	for _, order := range []struct {
		name          string
		editor, other string
		editFirst     bool
	}{
		{"appr1 accepts, appr2 edits", "appr2", "appr1", false},
		{"appr1 edits, appr2 accepts", "appr1", "appr2", true},
	} {
		id := createRun(t, c, "pay-accept", map[string]any{"message": "Please pay INV-7."})
		waitToolApproval(t, c, id)
		editor, other := order.editor, order.other
		if !order.editFirst {
			status, body := vote(id, other, map[string]any{"action": "accept", "revision": 0})
			require.Equal(t, http.StatusOK, status, "%s: %v", order.name, body)
			require.Equal(t, protocol.StatusWaitingApproval, body["status"])
		}
		status, body := vote(id, editor, edit)
		require.Equal(t, http.StatusOK, status, "%s: %v", order.name, body)
		require.Equal(t, protocol.StatusWaitingApproval, body["status"], "%s: the edit is the first approval of the new arguments", order.name)
		require.Empty(t, svc.received(id, "/pay"), "%s: nothing is paid on one approval", order.name)
		for _, who := range []string{"appr1", "appr2"} {
			art := shown(id, who)
			assert.Equal(t, map[string]any{"invoice": "INV-7", "amount": "99999.00"}, art["arguments"], "%s: %s sees the arguments that would run", order.name, who)
			assert.Equal(t, float64(1), art["revision"], order.name)
			assert.Equal(t, editor, art["editedBy"], order.name)
		}
		status, body = vote(id, other, map[string]any{"action": "accept"})
		require.Equal(t, http.StatusConflict, status, "%s: an accept that names no revision after an edit: %v", order.name, body)
		require.Equal(t, "run_state_conflict", body["error"])
		status, body = vote(id, other, map[string]any{"action": "accept", "revision": 0})
		require.Equal(t, http.StatusConflict, status, "%s: an accept of the old arguments: %v", order.name, body)
		status, body = vote(id, other, map[string]any{"action": "accept", "revision": 1})
		require.Equal(t, http.StatusOK, status, "%s: %v", order.name, body)
		require.Equal(t, protocol.StatusRunning, body["status"])
		waitCompleted(t, c, id)
		paid := svc.received(id, "/pay")
		require.Len(t, paid, 1, order.name)
		require.Equal(t, map[string]any{"invoice": "INV-7", "amount": "99999.00"}, paid[0].Body, "%s: the endpoint is paid what both approved", order.name)

		var counted []string
		for _, e := range ofType(events(t, c, id), protocol.EvApprovalReceived) {
			var p map[string]any
			require.NoError(t, json.Unmarshal(e.Payload, &p))
			counted = append(counted, fmt.Sprintf("%s %s %v %v", p["decidedBy"], p["action"], p["revision"], p["arguments"].(map[string]any)["amount"]))
		}
		if !order.editFirst {
			assert.Equal(t, []string{"appr1 accept 0 120.00", "appr2 edit-accept 1 99999.00", "appr1 accept 1 99999.00"}, counted)
			replayHistory(t, c, id, "pack-tool-approval-quorum-edit")
		} else {
			assert.Equal(t, []string{"appr1 edit-accept 1 99999.00", "appr2 accept 1 99999.00"}, counted)
		}
	}
}
