package tests

// Pause and resume over HTTP (runs.md §Pause and resume; workflows/pause.go): both
// drain policies on a delay at major 2, the 409 table, a resolve refused while paused
// with the interrupt left pending, and a pack turn cut by an immediate pause at v1
// while its worker is replaced, answered anew after the resume.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// v2Control posts :pause or :resume at major 2 and returns the status and body.
func v2Control(t *testing.T, c *apiClient, id, verb string, body map[string]any) (int, map[string]any, []byte) {
	t.Helper()
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, v2Path(id, ":"+verb), body)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "%s: %s", verb, raw)
	return status, m, raw
}

// v2Log is the types of a run's events at major 2, in log order, and the events.
func v2Log(t *testing.T, c *apiClient, id string) ([]string, []map[string]any) {
	t.Helper()
	evs := v2Events(t, c, id)
	return v2Types(evs), evs
}

// v2Payload is the payload of the first event of typ.
func v2Payload(evs []map[string]any, typ string) map[string]any {
	for _, e := range evs {
		if e["type"] == typ {
			p, _ := e["payload"].(map[string]any)
			return p
		}
	}
	return nil
}

// requireRefused requires a 409 with code and details.runStatus.
func requireRefused(t *testing.T, status int, body map[string]any, raw []byte, code, runStatus string) {
	t.Helper()
	require.Equal(t, http.StatusConflict, status, "%s", raw)
	assert.Equal(t, code, body["error"], "%s", raw)
	details, _ := body["details"].(map[string]any)
	assert.Equal(t, runStatus, details["runStatus"], "%s", raw)
}

// TestV2PauseDrainCurrentNode pauses a delay with drain-current-node: the delay runs
// to its end, then the run holds (paused, not completed) until it is resumed; a second
// pause and a resume of a run that is not paused are 409 run_state_conflict, both on a
// run that has ended 409 run_terminal.
func TestV2PauseDrainCurrentNode(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-delay", "inputs": map[string]any{"delayMs": 2500}})
	v2Wait(t, c, id, "running")

	status, body, raw := v2Control(t, c, id, "resume", map[string]any{})
	requireRefused(t, status, body, raw, "run_state_conflict", "running")

	status, body, raw = v2Control(t, c, id, "pause", map[string]any{"reason": "ops"})
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	assert.Equal(t, id, body["runId"])
	assert.Equal(t, "paused", body["status"])
	pausedAt, _ := body["pausedAt"].(string)
	_, err := time.Parse(time.RFC3339Nano, pausedAt)
	require.NoError(t, err, "pausedAt is a time: %s", raw)

	status, body, raw = v2Control(t, c, id, "pause", map[string]any{"drainPolicy": "immediate"})
	requireRefused(t, status, body, raw, "run_state_conflict", "paused")

	// The delay drains: node.completed comes, and the run stays paused past it.
	waitFor(t, 20*time.Second, "the delay completes while paused", func() []string {
		ty, _ := v2Log(t, c, id)
		return ty
	}, func(ty []string) bool { return contains(ty, "node.completed") })
	time.Sleep(1500 * time.Millisecond)
	s, _ := v2Snapshot(t, c, id)
	assert.Equal(t, "paused", s["status"], "a drained run holds until it is resumed")
	ty, evs := v2Log(t, c, id)
	assert.NotContains(t, ty, "run.completed")
	paused := v2Payload(evs, "run.paused")
	assert.Equal(t, "drain-current-node", paused["drainPolicy"], "run.paused echoes the policy")
	assert.Equal(t, "ops", paused["reason"])

	status, body, raw = v2Control(t, c, id, "resume", map[string]any{"reason": "ops done"})
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	assert.Equal(t, "running", body["status"])
	assert.NotEmpty(t, body["resumedAt"])
	v2Wait(t, c, id, "completed")
	ty, evs = v2Log(t, c, id)
	assert.Equal(t, []string{"run.started", "node.started", "run.paused", "node.completed", "run.resumed", "run.completed"}, ty)
	assert.Equal(t, "drain-current-node", v2Payload(evs, "run.resumed")["drainPolicy"], "run.resumed echoes the policy")

	for _, verb := range []string{"pause", "resume"} {
		status, body, raw = v2Control(t, c, id, verb, map[string]any{})
		requireRefused(t, status, body, raw, "run_terminal", "completed")
	}
	status, body, raw = v2Control(t, c, id, "pause", map[string]any{"drainPolicy": "later"})
	assert.Equal(t, http.StatusBadRequest, status, "%s", raw)
	assert.Equal(t, "validation_error", body["error"])
	replayHistory(t, c, v2Workflow(id), "pause-delay-drain")
}

// TestV2PauseImmediate pauses a delay with immediate: the wait is cut with no node
// event for it, and after the resume a fresh node.started (attempt 1) waits the whole
// delay anew.
func TestV2PauseImmediate(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	const delay = 3000
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-delay", "inputs": map[string]any{"delayMs": delay}})
	v2Wait(t, c, id, "running")
	status, body, raw := v2Control(t, c, id, "pause", map[string]any{"drainPolicy": "immediate"})
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	assert.Equal(t, "paused", body["status"])

	// Past the delay's end nothing has ended the node: the attempt was cut.
	time.Sleep(delay*time.Millisecond + time.Second)
	s, _ := v2Snapshot(t, c, id)
	assert.Equal(t, "paused", s["status"])
	ty, evs := v2Log(t, c, id)
	assert.Equal(t, []string{"run.started", "node.started", "run.paused"}, ty, "no terminal node event for the cut attempt")
	paused := v2Payload(evs, "run.paused")
	assert.Equal(t, "immediate", paused["drainPolicy"])
	assert.Equal(t, "delay", paused["interruptedNodeId"])

	resumed := time.Now()
	status, _, raw = v2Control(t, c, id, "resume", nil)
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	v2Wait(t, c, id, "completed")
	assert.GreaterOrEqual(t, time.Since(resumed), delay*time.Millisecond, "the fresh attempt waits the whole delay")
	ty, evs = v2Log(t, c, id)
	assert.Equal(t, []string{"run.started", "node.started", "run.paused", "run.resumed", "node.started", "node.completed", "run.completed"}, ty)
	var attempts []any
	for _, e := range evs {
		if e["type"] == "node.started" {
			attempts = append(attempts, e["payload"].(map[string]any)["attempt"])
		}
	}
	assert.Equal(t, []any{float64(0), float64(1)}, attempts, "the node opens again as its next attempt")
	replayHistory(t, c, v2Workflow(id), "pause-delay-immediate")
}

// TestV2PauseRefusesResolves pauses a run waiting at an approval gate: a resolve is
// refused 409 run_state_conflict (runStatus paused) and the interrupt stays pending;
// after the resume the same resolve is applied and the run completes. A cancel of a
// paused run cancels it.
func TestV2PauseRefusesResolves(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-approval"})
	v2Wait(t, c, id, "waiting-approval")
	status, _, raw := v2Control(t, c, id, "pause", map[string]any{"drainPolicy": "immediate"})
	require.Equal(t, http.StatusAccepted, status, "%s", raw)

	approve := map[string]any{"resumeValue": map[string]any{"action": "accept"}}
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/interrupts/gate"), approve)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body))
	requireRefused(t, status, body, raw, "run_state_conflict", "paused")
	s, _ := v2Snapshot(t, c, id)
	assert.Equal(t, "paused", s["status"])
	assert.Equal(t, "gate", s["currentNodeId"], "the interrupt is still pending")

	// The Temporal UI shows it: WopStatus paused, and the current details say so
	// above what the run waits on.
	desc, err := c.Stack.Client().DescribeWorkflowExecution(context.Background(), v2Workflow(id), "")
	require.NoError(t, err)
	assert.Contains(t, string(desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()["WopStatus"].GetData()), "paused")
	details := currentDetails(t, c, v2Workflow(id))
	assert.Contains(t, details, "**Paused** (immediate)")
	assert.Contains(t, details, "Waiting on approval")

	status, _, raw = v2Control(t, c, id, "resume", nil)
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	assert.Contains(t, string(raw), `"status":"waiting-approval"`, "the resume answers what the run waits on")
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/interrupts/gate"), approve)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	v2Wait(t, c, id, "completed")

	// A cancel leaves paused.
	other := v2Create(t, c, map[string]any{"workflowId": "conformance-approval"})
	v2Wait(t, c, other, "waiting-approval")
	status, _, raw = v2Control(t, c, other, "pause", nil)
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, v2Path(other, "/cancel"), map[string]any{"reason": "e2e"})
	require.Equal(t, http.StatusOK, status, "%s", raw)
	v2Wait(t, c, other, "cancelled")
	replayHistory(t, c, v2Workflow(id), "pause-approval-refused")
}

// TestPauseImmediateCutsATurnAcrossAWorkerRestart pauses (v1 path) a pack's turn
// whose model round is in flight on a worker that is then stopped: the round's activity
// is cancelled, the turn leaves no agent turn and no node event, the paused run is
// taken up by the host's worker started again, and after the resume the turn is
// answered anew once, on a fresh node.started.
func TestPauseImmediateCutsATurnAcrossAWorkerRestart(t *testing.T) {
	t.Parallel()
	c, fc, stopBlocker := catchSecondRound(t)
	status, body := post(c, c.Key, "/v1/runs/"+fc.runID+":pause", map[string]any{"drainPolicy": "immediate", "reason": "maintenance"})
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	assert.Equal(t, "paused", body["status"])
	stopBlocker()
	require.NoError(t, c.Stack.StartWorker(), "start the host's worker again")

	snap := waitSnapshot(t, c, fc.runID, 30*time.Second, "paused on the host's worker", func(s workflows.Snapshot) bool { return s.Status == "paused" })
	assert.Equal(t, faultNode, snap.CurrentNodeID)
	status, body = post(c, c.Key, "/v1/runs/"+fc.runID+"/interrupts/"+faultNode, exchangeBody("third", ""))
	assert.Equal(t, http.StatusConflict, status, "a message while paused is refused: %v", body)
	assert.Equal(t, 1, fc.agentTurns(), "the cut turn wrote no agent turn")

	status, body = post(c, c.Key, "/v1/runs/"+fc.runID+":resume", map[string]any{})
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	fc.waitAgentTurns(2, 60*time.Second)
	fc.say("third")
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: []string{"first", "second", "third"}, Ordered: true, Replies: true, Terminal: "run.completed"})
	ty := types(evs)
	pi, ri := indexOf(ty, "run.paused"), indexOf(ty, "run.resumed")
	require.True(t, pi >= 0 && ri > pi, "run.paused then run.resumed: %v", ty)
	assert.Equal(t, "node.started", ty[ri+1], "a fresh node.started opens the cut attempt again: %v", ty)
	assert.Len(t, ofType(evs, "node.started"), 2)
	assert.Empty(t, ofType(evs, "node.failed"))
	replayHistory(t, c, fc.runID, "pack-pause-immediate")
}

// v2Workflow is the Temporal workflow id of a tenant-bound run id.
func v2Workflow(id string) string {
	_, opaque, _ := protocol.SplitBoundID(id)
	return opaque
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// wfControl sends a pause or resume update to run id through Temporal.
func wfControl(t *testing.T, s *stack.Stack, id, name string, arg any) (workflows.PauseResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res workflows.PauseResult
	h, err := s.Client().UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	return res, err
}

// TestPauseCarriedAcrossContinueAsNew drains a pack turn caught on a worker that is
// then replaced: the turn is answered, the run continues as new while paused (it does
// after every turn here) and its next execution is still paused (a resolve refused,
// the status paused) until the resume, after which the conversation goes on.
func TestPauseCarriedAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	c := startFaultStack(t, "")
	s := c.Stack
	const id = "e2e-pause-continued"
	run := wfStart(t, s, id, "fault-echo", "", func(in *workflows.RunInput) { in.ContinueAsNewAfterEvents = 4 })
	wfWaitStatus(t, s, id, protocol.StatusWaitingApproval)
	blocker, stopBlocker := swapInBlockingWorker(t, c)
	turn := func(n int, text string) workflows.ResolveRequest {
		return workflows.ResolveRequest{RequestID: fmt.Sprintf("m%d", n), NodeID: faultNode, ResumeValue: json.RawMessage(`{"text":"` + text + `"}`), ReceivedAtMs: int64(1000 + n)}
	}
	// Signalled without the validation query: a query would wait for the swapped
	// worker to take the run's sticky queue over.
	require.NoError(t, s.Client().SignalWorkflow(context.Background(), id, "", workflows.ResolveSignal, turn(0, "first")))
	blocker.waitEntered(t)
	execution := func() string {
		desc, err := s.Client().DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil {
			return ""
		}
		return desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	}
	inTurn := execution() // the execution whose turn the pause drains
	require.NotEmpty(t, inTurn)
	res, err := wfControl(t, s, id, workflows.PauseUpdate, workflows.PauseRequest{Reason: "drain"})
	require.NoError(t, err)
	assert.Equal(t, protocol.StatusPaused, res.Status)
	assert.Equal(t, workflows.DrainCurrentNode, res.DrainPolicy)
	stopBlocker()
	require.NoError(t, s.StartWorker(), "start the host's worker again")

	// The drained turn is answered, then the run continues as new, paused.
	waitFor(t, 60*time.Second, "an execution after the drained turn", execution, func(rid string) bool { return rid != "" && rid != inTurn })
	snap := wfWaitStatus(t, s, id, protocol.StatusPaused)
	var turns []protocol.Turn
	require.NoError(t, json.Unmarshal(snap.Channels["conversation"], &turns))
	require.Len(t, turns, 3, "the drained turn was answered before the run continued as new")
	assert.Equal(t, faultNode, snap.CurrentNodeID)
	refused := wfResolve(t, s, id, turn(1, "second"))
	assert.False(t, refused.OK)
	assert.Equal(t, protocol.CodeRunStateConflict, refused.Code)
	_, err = wfControl(t, s, id, workflows.PauseUpdate, workflows.PauseRequest{})
	require.Error(t, err, "the carried pause refuses a second one")

	res, err = wfControl(t, s, id, workflows.ResumeUpdate, workflows.ResumeRequest{Reason: "go on"})
	require.NoError(t, err)
	assert.Equal(t, protocol.StatusWaitingApproval, res.Status)
	require.True(t, wfResolve(t, s, id, turn(2, "second")).OK)
	wfWaitSnapshot(t, s, id, "the second turn answered", func(snap workflows.Snapshot) bool {
		var turns []protocol.Turn
		return json.Unmarshal(snap.Channels["conversation"], &turns) == nil && len(turns) >= 5
	})
	require.True(t, wfResolve(t, s, id, workflows.ResolveRequest{RequestID: "close", NodeID: faultNode, ResumeValue: json.RawMessage(`{"operation":"close"}`)}).OK)
	require.Equal(t, protocol.StatusCompleted, wfResult(t, run).Status)
	evs := wfEvents(t, s, id)
	ty := types(evs)
	assert.Len(t, ofType(evs, "run.paused"), 1, "%v", ty)
	assert.Len(t, ofType(evs, "run.resumed"), 1, "%v", ty)
	assert.Len(t, ofType(evs, "node.started"), 1, "a drained turn is not cut: %v", ty)
	wfRecord(t, s, run, "pack-pause-continued")
}
