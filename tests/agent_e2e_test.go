package tests

// Agents that stop when told, over HTTP against the embedded stack, with probe packs
// (testdata/agentpacks): a control: agent loop nothing in the pack bounds, the same
// loop on a slow model and on one that never answers, injected events into internal
// and hybrid states, a fork after the pack file changed, and a run terminated through
// the Temporal client.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// agentPacksDir holds the probe packs of this file.
const agentPacksDir = "testdata/agentpacks"

// looper is a model for the agent-slow and agent-block packs: in state plan it hands
// over to build and back, each round after delay; with block it never answers. It
// records, per run, when each round started and how each call ended.
type looper struct {
	delay time.Duration
	block bool

	mu     sync.Mutex
	starts map[string][]time.Time // runId → round starts
	ends   map[string][]error     // runId → ctx.Err() of calls that ended on their context
}

func newLooper(delay time.Duration, block bool) *looper {
	return &looper{delay: delay, block: block, starts: map[string][]time.Time{}, ends: map[string][]error{}}
}

func (*looper) Name() string { return activities.ProviderMock }

func (l *looper) Complete(ctx context.Context, req *activities.Request) (*convo.ModelRoundResult, error) {
	run := req.Input.RunID
	l.mu.Lock()
	l.starts[run] = append(l.starts[run], time.Now())
	l.mu.Unlock()
	wait := l.delay
	if l.block {
		wait = time.Hour
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		l.mu.Lock()
		l.ends[run] = append(l.ends[run], ctx.Err())
		l.mu.Unlock()
		return nil, ctx.Err()
	}
	event := "Build"
	if req.Input.State == "build" {
		event = "Plan"
	}
	return &convo.ModelRoundResult{
		Text: "working", ToolCalls: []convo.ToolCall{{Name: engine.ToolTransition, Args: json.RawMessage(`{"event":"` + event + `","context":"go on"}`)}},
		Usage: convo.Usage{InputTokens: 10, OutputTokens: 2}, Provider: activities.ProviderMock, Model: "looper",
	}, nil
}

func (l *looper) started(run string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts[run])
}

func (l *looper) ended(run string) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.ends[run]...)
}

// agentStack is a stack serving the probe packs with the host's default limits, the
// scripted mock as its default model and the loopers as the "slow" and "block" ones.
var agentStack struct {
	once        sync.Once
	st          *stack.Stack
	key         string
	err         error
	slow, block *looper
}

func startAgentStack(t *testing.T) *apiClient {
	t.Helper()
	agentStack.once.Do(func() {
		agentStack.key = randomHex(16)
		agentStack.slow, agentStack.block = newLooper(300*time.Millisecond, false), newLooper(0, true)
		opts := harnessOptions("", agentStack.key)
		opts.Worker.PacksDir = agentPacksDir
		opts.Worker.Providers = map[string]activities.Provider{
			activities.DefaultProviderKey: &activities.MockProvider{},
			"slow":                        agentStack.slow,
			"block":                       agentStack.block,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		agentStack.st, agentStack.err = stack.Start(ctx, opts)
	})
	require.NoError(t, agentStack.err, "start the agent stack")
	return newAPIClient(t, agentStack.st, agentStack.key)
}

// stopAgentStack stops the agent stack if a test started it (TestMain).
func stopAgentStack() {
	if agentStack.st != nil {
		agentStack.st.Stop()
	}
}

// agCancel cancels a run over the API.
func agCancel(t *testing.T, c *apiClient, id string) map[string]any {
	t.Helper()
	status, _, body := c.do(http.MethodPost, "/v1/runs/"+id+":cancel", map[string]any{"reason": "stop the agent"})
	require.Equal(t, http.StatusOK, status, "cancel: %v", body)
	return body
}

// TestAgentLoopStopsAtTheHostLimit: one message into a loop the pack does not bound
// runs 25 model rounds (the default WOP_MAX_ROUNDS_PER_TURN), then ends as an
// exhausted budget does.
func TestAgentLoopStopsAtTheHostLimit(t *testing.T) {
	t.Parallel()
	c := startAgentStack(t)
	id := createRun(t, c, "agent-spin", map[string]any{"message": "go"})
	evs := waitEnded(t, c, id, 30*time.Second)
	require.Equal(t, protocol.EvRunFailed, evs[len(evs)-1].Type)
	require.Len(t, ofType(evs, "provider.usage"), engine.DefaultHostMaxRoundsPerTurn)
	caps := ofType(evs, "cap.breached")
	require.Len(t, caps, 1)
	var capP map[string]any
	require.NoError(t, json.Unmarshal(caps[0].Payload, &capP))
	require.Equal(t, "loop-iterations", capP["kind"])
	require.Equal(t, "max_rounds_per_turn", capP["hostLimit"])
	require.EqualValues(t, engine.DefaultHostMaxRoundsPerTurn, capP["limit"])
	closed := ofType(evs, protocol.EvConversationClosed)
	require.Len(t, closed, 1)
	require.Contains(t, string(closed[0].Payload), `"role":"system"`)
	require.Contains(t, string(closed[0].Payload), "loop_limit_exceeded")
	s := snapshot(t, c, id)
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "loop_limit_exceeded", s.Error.Code)
	require.Equal(t, engine.DefaultHostMaxRoundsPerTurn, s.Pack.ModelRounds)
	replayHistory(t, c, id, "pack-turn-limit")
}

// TestAgentCancelBetweenSlowRounds: a loop on a model that takes 300 ms a round, cancelled
// mid-loop, runs at most the round in flight and ends with run.cancelled.
func TestAgentCancelBetweenSlowRounds(t *testing.T) {
	t.Parallel()
	c := startAgentStack(t)
	slow := agentStack.slow
	id := createRun(t, c, "agent-slow", map[string]any{"message": "go"})
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.GreaterOrEqual(ct, slow.started(id), 3)
	}, 30*time.Second, 20*time.Millisecond)
	cancelledAt := time.Now()
	body := agCancel(t, c, id)
	atCancel := slow.started(id)
	require.Contains(t, []any{protocol.StatusCancelling, protocol.StatusCancelled}, body["status"])
	evs := waitEnded(t, c, id, 30*time.Second)
	t.Logf("run.cancelled read %s after the cancel was sent; %d rounds started before it, %d after", time.Since(cancelledAt).Round(time.Millisecond), atCancel, slow.started(id)-atCancel)
	require.Equal(t, protocol.EvRunCancelled, evs[len(evs)-1].Type)
	require.LessOrEqual(t, slow.started(id), atCancel+1, "at most one round started after the cancel was accepted")
	require.Less(t, slow.started(id), engine.DefaultHostMaxRoundsPerTurn, "the cancel, not the limit, ended the loop")
	require.Empty(t, ofType(evs, "cap.breached"))
	require.Equal(t, protocol.StatusCancelled, snapshot(t, c, id).Status)
}

// TestAgentCancelStopsAModelCallInFlight: the model never answers; the cancel ends the
// run at once, and the call in flight is cancelled through its next heartbeat (its
// context ends Canceled within seconds, not at its 15-minute start-to-close timeout,
// nor after the SDK's default 24 s heartbeat throttle).
func TestAgentCancelStopsAModelCallInFlight(t *testing.T) {
	t.Parallel()
	c := startAgentStack(t)
	block := agentStack.block
	id := createRun(t, c, "agent-block", map[string]any{"message": "go"})
	// Cancel once the call has heartbeated: the SDK then holds later heartbeats for its
	// throttle interval, which the worker must keep short for the cancel to get through.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		d, err := c.Stack.Client().DescribeWorkflowExecution(context.Background(), id, "")
		if assert.NoError(ct, err) && assert.Len(ct, d.GetPendingActivities(), 1) {
			assert.NotNil(ct, d.GetPendingActivities()[0].GetLastHeartbeatTime(), "the model call has not heartbeated yet")
		}
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, block.started(id))
	cancelledAt := time.Now()
	agCancel(t, c, id)
	evs := waitEnded(t, c, id, 30*time.Second)
	t.Logf("run.cancelled read %s after the cancel was sent", time.Since(cancelledAt).Round(time.Millisecond))
	require.Equal(t, []string{protocol.EvNodeCancelled, protocol.EvRunCancelled}, []string{evs[len(evs)-2].Type, evs[len(evs)-1].Type})
	require.Empty(t, ofType(evs, "provider.usage"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ends := block.ended(id)
		if assert.Len(ct, ends, 1, "the provider call has not seen the cancel yet") {
			assert.True(ct, errors.Is(ends[0], context.Canceled), "the call ended on %v, not on a cancel", ends[0])
		}
	}, 20*time.Second, 50*time.Millisecond)
	t.Logf("the provider call saw the cancel %s after it was sent", time.Since(cancelledAt).Round(time.Millisecond))
	require.Equal(t, 1, block.started(id), "no round after the cancelled one")
	replayHistory(t, c, id, "pack-cancel-in-flight")
}

// TestAgentEventRouting: an event sent while the pack is in an internal state is
// refused with 409 run_state_conflict naming the states that accept events, and
// appends nothing; the hybrid state raises its event interrupt, answers chat, refuses
// an event it does not declare and takes one it does.
func TestAgentEventRouting(t *testing.T) {
	t.Parallel()
	c := startAgentStack(t)
	id := createRun(t, c, "agent-hybrid", map[string]any{"message": "hi"})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	before := events(t, c, id)

	for _, body := range []any{
		map[string]any{"event": "Approve", "context": "looks fine"},
		map[string]any{"resumeValue": map[string]any{"event": "Approve"}},
	} {
		status, resp := postToPack(c, id, body)
		require.Equal(t, http.StatusConflict, status, "%v", resp)
		require.Equal(t, "run_state_conflict", resp["error"])
		require.Contains(t, resp["message"], `state "intake" is internal and accepts no injected events`)
		require.Contains(t, resp["message"], "review (hybrid): Approve, Reopen")
		details, _ := resp["details"].(map[string]any)
		require.Equal(t, map[string]any{"review": []any{"Approve", "Reopen"}}, details["acceptingStates"])
	}
	require.Len(t, events(t, c, id), len(before), "a refused event appends nothing")

	sayTo(t, c, id, "order 7, please submit")
	s := waitSnapshot(t, c, id, 30*time.Second, "in review", func(s workflows.Snapshot) bool { return s.Pack != nil && s.Pack.State == "review" })
	require.Equal(t, protocol.StatusWaitingExternal, s.Status)
	require.NotNil(t, s.Interrupt)
	require.Equal(t, "external-event", s.Interrupt.Kind, "the hybrid state raised its event interrupt")
	sayTo(t, c, id, "any news?")
	waitRounds(t, c, id, 3, protocol.StatusWaitingExternal)

	status, resp := postToPack(c, id, map[string]any{"event": "Ship"})
	require.Equal(t, http.StatusUnprocessableEntity, status, "no state takes Ship: %v", resp)
	require.Equal(t, "validation_error", resp["error"])
	require.Contains(t, resp["message"], `has no event "Ship"`)
	status, resp = postToPack(c, id, map[string]any{"event": "Approve", "context": "approved by finance"})
	require.Equal(t, http.StatusOK, status, "%v", resp)
	final := waitCompleted(t, c, id)
	require.Equal(t, "done", final.Pack.State)

	var texts []string
	for _, tn := range turnsIn(t, events(t, c, id)) {
		texts = append(texts, textOf(t, tn))
	}
	require.Equal(t, []string{"hi", "What would you like to order?", "order 7, please submit", "Submitting your order.",
		"any news?", "Your order is under review.", "Approved, all done."}, texts, "no refused event became a chat turn")
	replayHistory(t, c, id, "pack-hybrid-events")
}

// TestAgentTerminatedRun: a run terminated through the Temporal client reads as
// cancelled (from Temporal's close event), polls complete, and takes no more writes:
// a cancel answers its status, an exchange 409 interrupt_already_resolved.
func TestAgentTerminatedRun(t *testing.T) {
	t.Parallel()
	c := startAgentStack(t)
	id := createRun(t, c, "agent-hybrid", map[string]any{"message": "hi"})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Stack.Client().TerminateWorkflow(ctx, id, "", "an operator stopped it"))
	evs := events(t, c, id)

	s := snapshot(t, c, id)
	require.Equal(t, protocol.StatusCancelled, s.Status)
	require.NotNil(t, s.TemporalClose)
	require.Equal(t, "Terminated", s.TemporalClose.Status)
	require.Equal(t, "an operator stopped it", s.TemporalClose.Reason)
	require.Nil(t, s.Interrupt)
	require.NotEmpty(t, s.CompletedAt)

	status, _, raw := c.doRaw(http.MethodGet, "/v1/runs/"+id+"/events/poll?lastSequence="+strconv.Itoa(len(evs)-1)+"&timeout=20", nil,
		map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusOK, status, "%s", raw)
	require.Contains(t, string(raw), `"isComplete":true`)
	status, _, raw = c.doRaw(http.MethodGet, "/v1/runs/"+id+"/events", nil, map[string]string{"Authorization": "Bearer " + c.Key, "Accept": "application/json"})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(raw), `"isComplete":true`)

	body := agCancel(t, c, id)
	require.Equal(t, protocol.StatusCancelled, body["status"])
	status, resp := postToPack(c, id, map[string]any{"resumeValue": map[string]any{"text": "hello?"}})
	require.Equal(t, http.StatusConflict, status, "%v", resp)
	require.Equal(t, "interrupt_already_resolved", resp["error"])
	require.Contains(t, resp["message"], "closed by Temporal")
	require.Len(t, events(t, c, id), len(evs), "nothing was written to the terminated run")
}

// TestAgentForkAfterThePackChanged: a fork replays on the pack its source ran, even
// after the pack file changed and the host restarted: it ends where the source ended,
// writes no provider.usage and no replay.diverged, and calls no model; a new run
// takes the changed pack.
func TestAgentForkAfterThePackChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	packs := filepath.Join(dir, "packs")
	require.NoError(t, os.MkdirAll(packs, 0o755))
	for _, f := range []string{"agent-route.yaml", "agent-route.mock.yaml"} {
		b, err := os.ReadFile(filepath.Join(agentPacksDir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(packs, f), b, 0o644))
	}
	c := startPrivateStack(t, stackOptions{DataDir: filepath.Join(dir, "data"), PacksDir: packs})

	src := createRun(t, c, "agent-route", map[string]any{"message": "my invoice is wrong"})
	srcSnap := waitCompleted(t, c, src)
	require.Equal(t, "billing", srcSnap.Pack.State)
	srcEvents := events(t, c, src)

	// Route now leads to tech; the host restarts on the changed file.
	file := filepath.Join(packs, "agent-route.yaml")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	changed := strings.Replace(string(b), "on_event: { Route: billing }", "on_event: { Route: tech }", 1)
	require.NotEqual(t, string(b), changed)
	require.NoError(t, os.WriteFile(file, []byte(changed), 0o644))
	c = restartStack(t, c)

	status, _, body := c.do(http.MethodPost, "/v1/runs/"+src+":fork", map[string]any{"mode": "replay"})
	require.Equal(t, http.StatusCreated, status, "fork: %v", body)
	fork, _ := body["runId"].(string)
	forkSnap := waitCompleted(t, c, fork)
	require.Equal(t, "billing", forkSnap.Pack.State, "the fork runs on the source's pack")
	require.Equal(t, srcSnap.Pack.PackHash, forkSnap.Pack.PackHash)
	require.Equal(t, srcSnap.Channels, forkSnap.Channels)
	require.Zero(t, forkSnap.Pack.InputTokens)
	forkEvents := events(t, c, fork)
	require.Empty(t, ofType(forkEvents, "provider.usage"), "the fork spent nothing")
	require.Empty(t, ofType(forkEvents, protocol.EvReplayDiverged))
	var srcTypes, forkTypes []string
	for _, e := range srcEvents {
		if e.Type != "provider.usage" {
			srcTypes = append(srcTypes, e.Type)
		}
	}
	for _, e := range forkEvents {
		forkTypes = append(forkTypes, e.Type)
	}
	require.Equal(t, srcTypes, forkTypes, "the fork folds the source's events in their order")
	replayHistory(t, c, fork, "pack-fork-recorded-pack")

	// A new run takes the pack as it is now.
	now := createRun(t, c, "agent-route", map[string]any{"message": "my invoice is wrong"})
	nowSnap := waitCompleted(t, c, now)
	require.Equal(t, "tech", nowSnap.Pack.State)
	require.NotEqual(t, srcSnap.Pack.PackHash, nowSnap.Pack.PackHash)
}
