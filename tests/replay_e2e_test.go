package tests

// Replay forks that keep the whole record: the decisions on tool calls the fork takes
// from the record, a divergence the fork's request causes, a tool call the source left
// without outcome that the fork never repeats, and forks of v1-era runs.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/tools"
	"github.com/wop-dev/wop/workflows"
)

// replayPacksDir holds the packs of the replay tests.
const replayPacksDir = "testdata/replaypacks"

// decisionEvents are the events of the tool approvals in a run's log: those naming an
// interrupt an approval.requested names (by id, or by the key its node.suspended
// gave), and every approval.received, in log order, as type and payload.
func decisionEvents(t *testing.T, evs []event) []string {
	t.Helper()
	type ref struct {
		InterruptID string `json:"interruptId"`
		Key         string `json:"key"`
	}
	refOf := func(e event) ref {
		var r ref
		_ = json.Unmarshal(e.Payload, &r)
		return r
	}
	ids, keys := map[string]bool{}, map[string]bool{}
	for _, e := range ofType(evs, protocol.EvApprovalRequested) {
		ids[refOf(e).InterruptID] = true
	}
	for _, e := range ofType(evs, protocol.EvNodeSuspended) {
		if r := refOf(e); ids[r.InterruptID] {
			keys[r.Key] = true
		}
	}
	var out []string
	for _, e := range evs {
		r := refOf(e)
		if ids[r.InterruptID] || e.Type == protocol.EvInterruptRequested && keys[r.Key] || e.Type == protocol.EvApprovalReceived {
			out = append(out, e.Type+" "+string(e.Payload))
		}
	}
	return out
}

// forkReplay forks run id in replay mode (with body's other fields) and waits until
// the fork completed.
func forkReplay(t *testing.T, c *apiClient, id string, body map[string]any) string {
	t.Helper()
	req := map[string]any{"mode": "replay"}
	for k, v := range body {
		req[k] = v
	}
	status, _, got := c.do(http.MethodPost, "/v1/runs/"+id+":fork", req)
	require.Equal(t, http.StatusCreated, status, "%v", got)
	fork := got["runId"].(string)
	waitSnapshot(t, c, fork, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	return fork
}

// TestForkKeepsToolDecisionsE2E: a replay fork of a run whose payment was approved,
// and of one whose payment was rejected, takes the tool results from the record (the
// payment endpoint is called once, by the source, or never) and its log carries the
// decision event for event: the suspension, the request, who decided what, the
// resumption.
func TestForkKeepsToolDecisionsE2E(t *testing.T) {
	t.Parallel()
	c, svc := startApprovalStack(t)
	accepted := decidePayment(t, c, "pay-accept", map[string]any{"action": "accept", "comment": "Checked against the PO."})
	waitCompleted(t, c, accepted)

	rejected := decidePayment(t, c, "pay-reject", map[string]any{"action": "reject", "feedback": "INV-7 was paid last week"})
	waitRounds(t, c, rejected, 2, protocol.StatusWaitingApproval)
	sayTo(t, c, rejected, "OK, thanks.")
	waitCompleted(t, c, rejected)

	for _, src := range []string{accepted, rejected} {
		fork := forkReplay(t, c, src, nil)
		want, got := decisionEvents(t, events(t, c, src)), decisionEvents(t, events(t, c, fork))
		require.Len(t, want, 6, "the source's decision: node.suspended, interrupt.requested, approval.requested, interrupt.resolved, approval.received, node.resumed")
		assert.Equal(t, want, got, "the fork's log carries the decision event for event")
		var received map[string]any
		require.NoError(t, json.Unmarshal(ofType(events(t, c, fork), protocol.EvApprovalReceived)[0].Payload, &received))
		assert.Equal(t, "test", received["decidedBy"], "the decider is the source's")
		assert.Empty(t, svc.received(fork, "/pay"), "the fork pays nothing")
		assert.Empty(t, svc.received(fork, "/lookup"), "the fork calls no tool")
		assert.Empty(t, ofType(events(t, c, fork), protocol.EvReplayDiverged))
		// The fork's log reads in order: each decision sits between the call and its result.
		types := []string{}
		for _, e := range events(t, c, fork) {
			types = append(types, e.Type)
		}
		called := slices.Index(types, protocol.EvAgentToolCalled)
		require.GreaterOrEqual(t, called, 0)
		assert.Less(t, called, slices.Index(types, protocol.EvApprovalRequested))
		assert.Less(t, slices.Index(types, protocol.EvNodeResumed), slices.Index(types, protocol.EvAgentToolReturned))
		if src == accepted {
			assert.Contains(t, got[4], `"action":"accept"`)
			replayHistory(t, c, fork, "fork-tool-approval-accept")
		} else {
			assert.Contains(t, got[4], `"action":"reject"`)
			replayHistory(t, c, fork, "fork-tool-approval-reject")
		}
	}
	assert.Len(t, svc.received(accepted, "/pay"), 1, "the source paid once")
	assert.Empty(t, svc.received(rejected, "/pay"))
}

// TestForkOnOtherInputsDivergesE2E: a replay fork asked to run on other inputs than
// its source's replays the recorded decision all the same, and its log says where it
// left its source (replay.diverged right after run.started, read over the API); a
// fork on the source's inputs writes none.
func TestForkOnOtherInputsDivergesE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	src := cfCreate(t, c, "conformance-approval", map[string]any{"payload": map[string]any{"doc": "x"}})
	waitSnapshot(t, c, src, 30*time.Second, "waiting", func(s workflows.Snapshot) bool { return s.Interrupt != nil })
	status, _, body := c.do(http.MethodPost, "/v1/runs/"+src+"/interrupts/gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	waitSnapshot(t, c, src, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })

	same := forkReplay(t, c, src, nil)
	assert.Empty(t, ofType(events(t, c, same), protocol.EvReplayDiverged), "the same inputs: no divergence")

	status, _, body = c.do(http.MethodPost, "/v1/runs/"+src+":fork", map[string]any{"mode": "replay", "inputs": "x"})
	require.Equal(t, http.StatusBadRequest, status, "%v", body)

	other := forkReplay(t, c, src, map[string]any{"inputs": map[string]any{"payload": map[string]any{"doc": "y"}}})
	evs := events(t, c, other)
	div := ofType(evs, protocol.EvReplayDiverged)
	require.Len(t, div, 1, "%v", evs)
	require.Equal(t, protocol.EvRunStarted, evs[0].Type)
	assert.Equal(t, evs[0].Sequence+1, div[0].Sequence, "right after run.started")
	var p map[string]any
	require.NoError(t, json.Unmarshal(div[0].Payload, &p))
	assert.Equal(t, src, p["sourceRunId"])
	assert.Equal(t, "input", p["divergenceKind"])
	assert.Equal(t, protocol.EvRunStarted, p["divergencePoint"])
	assert.Equal(t, events(t, c, src)[0].EventID, p["originalEventId"])
	assert.Equal(t, evs[0].EventID, p["replayEventId"])
	assert.Len(t, ofType(evs, protocol.EvApprovalReceived), 1, "the recorded decision replayed all the same")
	replayHistory(t, c, other, "fork-input-diverged")
}

// hangingService is an HTTP tool endpoint that takes every call and never answers it:
// the call ends when its caller gives up (the run is cancelled).
type hangingService struct {
	*httptest.Server
	mu    sync.Mutex
	calls []payCall
	stop  chan struct{}
}

func newHangingService(t *testing.T) *hangingService {
	h := &hangingService{stop: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls = append(h.calls, payCall{Path: r.URL.Path, RunID: r.Header.Get(tools.HeaderRunID), Key: r.Header.Get(tools.HeaderIdempotencyKey)})
		h.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-h.stop:
		}
	}))
	t.Cleanup(func() { close(h.stop); h.Close() })
	return h
}

func (h *hangingService) received() []payCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// TestForkOfAnUnreturnedToolCallFailsClosedE2E: the source cancels an order through a
// write tool whose endpoint never answers, and is cancelled while the call hangs: its
// log records the call (agent.toolCalled) and no outcome. A replay fork never performs
// that call again: the pack's turn fails closed with replay_source_missing, the
// conversation closes with that error and the fork fails with it; the endpoint saw one
// call, the source's.
func TestForkOfAnUnreturnedToolCallFailsClosedE2E(t *testing.T) {
	t.Parallel()
	svc := newHangingService(t)
	c := startPrivateStack(t, stackOptions{PacksDir: replayPacksDir, ToolsFile: writeBindings(t, `tools:
  cancel_order:
    http: { url: "`+svc.URL+`/cancel" }
`)})
	src := createRun(t, c, "order-cancel", map[string]any{"message": "Please cancel ORD-7."})
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, svc.received(), 1) }, 30*time.Second, 20*time.Millisecond)
	agCancel(t, c, src)
	srcEvs := waitEnded(t, c, src, 30*time.Second)
	require.Equal(t, protocol.EvRunCancelled, srcEvs[len(srcEvs)-1].Type)
	require.Len(t, ofType(srcEvs, protocol.EvAgentToolCalled), 1)
	require.Empty(t, ofType(srcEvs, protocol.EvAgentToolReturned), "the source recorded no outcome of the call")

	status, _, got := c.do(http.MethodPost, "/v1/runs/"+src+":fork", map[string]any{"mode": "replay"})
	require.Equal(t, http.StatusCreated, status, "%v", got)
	fork := got["runId"].(string)
	evs := waitEnded(t, c, fork, 30*time.Second)
	s := snapshot(t, c, fork)
	require.Equal(t, protocol.StatusFailed, s.Status, "%+v", s.Error)
	require.Equal(t, protocol.CodeReplaySourceMissing, s.Error.Code)
	assert.Len(t, svc.received(), 1, "the endpoint saw the source's call only")
	assert.Empty(t, effectsOf(t, c, fork).Effects, "the fork performed nothing")

	// The fork's log: the recorded round and call, then the turn fails closed.
	assert.Len(t, ofType(evs, protocol.EvAgentToolCalled), 1)
	assert.Empty(t, ofType(evs, protocol.EvAgentToolReturned))
	assert.Empty(t, ofType(evs, protocol.EvReplayDiverged), "the fork followed its recording")
	var closed struct {
		FinalTurn struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"finalTurn"`
	}
	cl := ofType(evs, protocol.EvConversationClosed)
	require.Len(t, cl, 1)
	require.NoError(t, json.Unmarshal(cl[0].Payload, &closed))
	assert.Contains(t, closed.FinalTurn.Content.Text, "call_0_0_cancel_order")
	assert.Contains(t, closed.FinalTurn.Content.Text, "("+protocol.CodeReplaySourceMissing+")")
	for _, typ := range []string{protocol.EvNodeFailed, protocol.EvRunFailed} {
		var p struct {
			Error protocol.RunError `json:"error"`
		}
		e := ofType(evs, typ)
		require.Len(t, e, 1, typ)
		require.NoError(t, json.Unmarshal(e[0].Payload, &p))
		assert.Equal(t, protocol.CodeReplaySourceMissing, p.Error.Code, typ)
	}
	assert.Equal(t, protocol.EvRunFailed, evs[len(evs)-1].Type)
	replayHistory(t, c, src, "pack-tool-call-cancelled")
	replayHistory(t, c, fork, "fork-tool-source-missing")
}

// TestForkOfAV1EraRunE2E: runs started the way the host started them before the era
// key (era 2 in v1 vocabulary, no subject in their input; the API cannot create one
// any more) are forked through the v2 API at their terminal event. The fork answers
// 201 and completes; its log, read at v2, has the parent's prefix as the parent reads
// translated through the codemap (type, sequence and payload; only the run.started
// owner and the clock differ from the stored bytes), and its run.started carries the
// legacy Subject the parent reads with. A pack run's fork takes every model round and
// tool result from the record: its effect ledger is empty.
func TestForkOfAV1EraRunE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	fork := func(id string) (string, []map[string]any, []map[string]any) {
		parent := v2Events(t, c, "default/"+id)
		last := parent[len(parent)-1]["sequence"].(float64)
		status, _, raw := v2Call(t, c, c.Key, http.MethodPost, v2Path("default/"+id, ":fork"), map[string]any{"mode": "replay", "fromSeq": last})
		require.Equal(t, http.StatusCreated, status, "%s", raw)
		var got struct{ RunID, SourceRunID string }
		require.NoError(t, json.Unmarshal(raw, &got))
		assert.Equal(t, "default/"+id, got.SourceRunID)
		_, opaque, _ := protocol.SplitBoundID(got.RunID)
		waitCompleted(t, c, opaque)
		return opaque, parent, v2Events(t, c, got.RunID)
	}
	legacy := func(evs []map[string]any) any {
		require.Equal(t, "run.started", evs[0]["type"])
		return evs[0]["payload"].(map[string]any)["owner"].(map[string]any)["subject"].(map[string]any)["issuer"]
	}

	noop := "r_era2" + randomHex(11)
	in, err := c.Stack.Catalog().NewRunInput(workflowsRunRequest(noop, "conformance-noop", `{}`))
	require.NoError(t, err)
	require.Zero(t, in.Era)
	ctxStart(t, c, noop, in)
	waitCompleted(t, c, noop)
	f, parent, forked := fork(noop)
	assert.Equal(t, "urn:openwop:legacy", legacy(parent), "the parent reads with the legacy stamp")
	assert.Equal(t, "urn:openwop:legacy", legacy(forked), "the fork copies it")
	from := int(parent[len(parent)-1]["sequence"].(float64))
	require.GreaterOrEqual(t, len(forked), from)
	for i := range from {
		p, q := parent[i], forked[i]
		assert.Equal(t, p["type"], q["type"], "sequence %d", i)
		assert.Equal(t, p["sequence"], q["sequence"], "sequence %d", i)
		assert.Equal(t, p["payload"], q["payload"], "sequence %d: the fork's prefix is the translated parent's", i)
	}
	assert.Equal(t, types(wfEvents(t, c.Stack, noop)), types(events(t, c, noop)), "the parent's log is not rewritten")
	assert.Empty(t, ofType(events(t, c, f), protocol.EvReplayDiverged), "the fork of the v1-era noop run replays it without divergence")

	pack := "r_era2" + randomHex(11)
	in, err = c.Stack.Catalog().NewRunInput(workflowsRunRequest(pack, "support", `{"message":"Hi, I have a question about my account."}`))
	require.NoError(t, err)
	ctxStart(t, c, pack, in)
	waitRounds(t, c, pack, 1, "waiting-approval")
	sayTo(t, c, pack, "It's ACC-12345. What's my balance?")
	waitCompleted(t, c, pack)
	f, parent, forked = fork(pack)
	assert.Equal(t, "urn:openwop:legacy", legacy(forked))
	assert.Equal(t, 4, count(v2Types(forked), "agent.tool-returned"), "the fork's log has the recorded tool results")
	assert.Equal(t, count(v2Types(parent), "agent.decided"), count(v2Types(forked), "agent.decided"))
	assert.Zero(t, count(v2Types(forked), "provider.usage"), "no model round is spent again")
	assert.Empty(t, ofType(events(t, c, f), protocol.EvReplayDiverged))
	assert.Empty(t, effectsOf(t, c, f).Effects, "the fork performed nothing")
	assert.NotEmpty(t, effectsOf(t, c, pack).Effects)
	replayHistory(t, c, f, "fork-era2-pack")
}
