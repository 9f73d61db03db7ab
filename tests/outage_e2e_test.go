package tests

// Conversations that outlive their provider, over HTTP against the embedded stack: a
// model provider (a local fake, OpenAI-compatible) that refuses connections and then
// answers 503 is waited out and the conversation goes on once it is back; an outage
// past the operator's limit fails the turn, not the conversation; a stalled run
// cancels at once; and a loop of 3,000 scripted-mock rounds, run as local activities,
// stays readable and cancellable while it runs.
//
// WOP_TEST_OUTAGE=6m runs the first scenario with a six-minute outage and the default
// retry policy of an OpenAI-compatible provider (by hand; CI runs a 40-second outage
// with a short backoff, beyond the ~30 s that ended a run under the old fixed policy).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/fakemodel"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// flakyModel is an OpenAI-compatible endpoint on a fixed address that can be down
// (nothing listens: connections are refused), unavailable (every request answers 503)
// or up (a fakemodel.Server answers).
type flakyModel struct {
	addr  string
	fake  *fakemodel.Server
	mu    sync.Mutex
	state string
	srv   *http.Server
	// failed counts the requests answered 503.
	failed atomic.Int64
}

const (
	modelDown        = "down"
	modelUnavailable = "unavailable"
	modelUp          = "up"
)

// newFlakyModel reserves a loopback address and starts down. The port is taken below
// Linux's ephemeral range (32768 and up): a port the kernel handed out would, while the
// endpoint is down, be free for any outgoing connection of the parallel tests to take
// as its source port, and the endpoint could not come back up on it.
func newFlakyModel() (*flakyModel, error) {
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	f := &flakyModel{addr: addr, state: modelDown, fake: &fakemodel.Server{Answer: func(c fakemodel.Call) fakemodel.Reply {
		return fakemodel.Reply{Text: fmt.Sprintf("Answer %d.", c.N), Model: "flaky-1"}
	}}}
	return f, nil
}

// baseURL is the endpoint's base URL for an OpenAI-compatible provider.
func (f *flakyModel) baseURL() string { return "http://" + f.addr + "/v1" }

// set moves the endpoint to state.
func (f *flakyModel) set(state string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = state
	switch {
	case state == modelDown && f.srv != nil:
		err := f.srv.Close()
		f.srv = nil
		return err
	case state != modelDown && f.srv == nil:
		var ln net.Listener
		var err error
		for range 50 { // the address was ours a moment ago; a closed socket may linger
			if ln, err = net.Listen("tcp", f.addr); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = f.srv.Serve(ln) }()
	}
	return nil
}

func (f *flakyModel) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	state := f.state
	f.mu.Unlock()
	if state != modelUp {
		f.failed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"the model is overloaded","type":"server_error"}}`))
		return
	}
	f.fake.ServeHTTP(w, r)
}

func (f *flakyModel) close() { _ = f.set(modelDown) }

// outagePack is a conversation whose model is the logical provider key: one state,
// closed by the client.
func outagePack(id, provider string) string {
	return fmt.Sprintf(`id: %[1]s
name: %[1]s
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
requires: { providers: [default, %[2]s] }
prompts:
  chat: { id: chat, name: Chat, version: 1.0.0, system_template: "Answer the user.", provider: %[2]s }
workflow:
  version: 2
  entry: chat
  states:
    chat: { prompt_task: chat, on_event: { Done: done } }
    done: { prompt_task: chat, terminal: true }
`, id, provider)
}

// loopRounds is how many rounds the local loop's script has, and the host allows.
const loopRounds = 3000

// loopPack is plan and build handing over to each other, answered by the scripted mock
// (local rounds after the first) for loopRounds rounds.
const loopPack = `id: loop
name: Loop
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  plan: { id: plan, name: Plan, version: 1.0.0, system_template: "Plan the next step." }
  build: { id: build, name: Build, version: 1.0.0, system_template: "Build it." }
workflow:
  version: 2
  entry: plan
  states:
    plan: { prompt_task: plan, control: agent, on_event: { Build: build } }
    build: { prompt_task: build, control: agent, on_event: { Plan: plan } }
`

// loopSlowPack is the loop on the slow-mock provider, ended by a visit budget of 40.
func loopSlowPack() string {
	p := strings.Replace(loopPack, "id: loop\n", "id: loop-slow\n", 1)
	p = strings.Replace(p, "  entry: plan\n", "  entry: plan\n  engine: { budget: { max_total_visits: 40 } }\n", 1)
	p = strings.Replace(p, "prompts:\n", "requires: { providers: [default, slow-mock] }\nprompts:\n", 1)
	p = strings.Replace(p, `"Plan the next step." }`, `"Plan the next step.", provider: slow-mock }`, 1)
	return strings.Replace(p, `"Build it." }`, `"Build it.", provider: slow-mock }`, 1)
}

func loopMock() string {
	var b strings.Builder
	b.WriteString("rounds:\n")
	b.WriteString("  - &plan { expect_state: plan, text: Planning., tool_calls: [{ name: workflow__transition, args: { event: Build, context: step } }] }\n")
	b.WriteString("  - &build { expect_state: build, tool_calls: [{ name: workflow__transition, args: { event: Plan, context: again } }] }\n")
	for i := 2; i < loopRounds; i += 2 {
		b.WriteString("  - *plan\n  - *build\n")
	}
	return b.String()
}

// outageStack serves the outage packs on flaky models and the loop on the scripted mock.
var outageStack struct {
	once               sync.Once
	st                 *stack.Stack
	key, dir           string
	err                error
	long, short, abort *flakyModel
	longOutage         time.Duration
	longPolicy         activities.OutagePolicy
}

// outageFor is the long scenario's outage and policy: 40 s with a short backoff, or
// WOP_TEST_OUTAGE with the provider's default policy.
func outageFor() (time.Duration, activities.OutagePolicy, error) {
	if v := os.Getenv("WOP_TEST_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		return d, activities.DefaultModelOutage(activities.ProviderOpenAICompatible), err
	}
	return 40 * time.Second, activities.OutagePolicy{RetryFor: 10 * time.Minute, InitialInterval: 500 * time.Millisecond, MaxInterval: 2 * time.Second, RemindEvery: 5 * time.Second}, nil
}

func startOutageStack(t *testing.T) *apiClient {
	t.Helper()
	return newAPIClient(t, outageStackStarted(t), outageStack.key)
}

// outageStackStarted starts the outage stack on first use.
func outageStackStarted(tb testing.TB) *stack.Stack {
	tb.Helper()
	outageStack.once.Do(func() {
		o := &outageStack
		o.key = randomHex(16)
		if o.longOutage, o.longPolicy, o.err = outageFor(); o.err != nil {
			return
		}
		for _, f := range []**flakyModel{&o.long, &o.short, &o.abort} {
			if *f, o.err = newFlakyModel(); o.err != nil {
				return
			}
		}
		if o.dir, o.err = os.MkdirTemp("", "wop-outage-packs-"); o.err != nil {
			return
		}
		files := map[string]string{
			"outage-long.yaml":    outagePack("outage-long", "flaky-long"),
			"outage-short.yaml":   outagePack("outage-short", "flaky-short"),
			"outage-abort.yaml":   outagePack("outage-abort", "flaky-abort"),
			"loop.yaml":           loopPack,
			"loop.mock.yaml":      loopMock(),
			"loop-slow.yaml":      loopSlowPack(),
			"loop-slow.mock.yaml": loopMock(),
		}
		for name, src := range files {
			if o.err = os.WriteFile(filepath.Join(o.dir, name), []byte(src), 0o644); o.err != nil {
				return
			}
		}
		opts := harnessOptions("", o.key)
		opts.Worker.PacksDir = o.dir
		opts.Worker.TurnLimits = workflows.TurnLimits{MaxRounds: loopRounds}
		opts.Worker.Providers = map[string]activities.Provider{
			activities.DefaultProviderKey: &activities.MockProvider{},
			// The scripted mock pausing before each word it says: "Planning." takes
			// 25 ms, so the loop-slow pack's 40 rounds run for about half a second.
			"slow-mock":   &activities.MockProvider{ChunkDelay: 25 * time.Millisecond},
			"flaky-long":  activities.NewOpenAICompatibleProvider("", "flaky-1", o.long.baseURL()),
			"flaky-short": activities.NewOpenAICompatibleProvider("", "flaky-1", o.short.baseURL()),
			"flaky-abort": activities.NewOpenAICompatibleProvider("", "flaky-1", o.abort.baseURL()),
		}
		opts.Worker.ModelOutage = map[string]activities.OutagePolicy{
			"flaky-long":  o.longPolicy,
			"flaky-short": {RetryFor: 8 * time.Second, InitialInterval: 500 * time.Millisecond, MaxInterval: time.Second, RemindEvery: time.Hour},
			"flaky-abort": {RetryFor: time.Hour, InitialInterval: 500 * time.Millisecond, MaxInterval: 2 * time.Second, RemindEvery: time.Hour},
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		o.st, o.err = stack.Start(ctx, opts)
	})
	require.NoError(tb, outageStack.err, "start the outage stack")
	return outageStack.st
}

// stopOutageStack stops the outage stack if a test started it (TestMain).
func stopOutageStack() {
	o := &outageStack
	if o.st != nil {
		o.st.Stop()
	}
	for _, f := range []*flakyModel{o.long, o.short, o.abort} {
		if f != nil {
			f.close()
		}
	}
	if o.dir != "" {
		_ = os.RemoveAll(o.dir)
	}
}

// keyword reads a Keyword search attribute of the run, "" when it is unset.
func keyword(t *testing.T, c *apiClient, id, name string) string {
	t.Helper()
	var v string
	if p := searchAttributes(t, c.Stack.Client(), id)[name]; p != nil {
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v))
	}
	return v
}

// runTag reads the value of prefix in the run's WopTags, "" when it has none.
func runTag(t *testing.T, cl client.Client, id, prefix string) string {
	t.Helper()
	var tags []string
	if p := searchAttributes(t, cl, id)[workflows.SATags.GetName()]; p != nil {
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &tags))
	}
	return workflows.TagValue(tags, prefix)
}

// searchAttributes are the run's search attributes, as Temporal describes them.
func searchAttributes(t *testing.T, cl client.Client, id string) map[string]*commonpb.Payload {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := cl.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	return d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
}

// currentDetails reads the Temporal UI's current details of the run.
func currentDetails(t *testing.T, c *apiClient, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Stack.Client().QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	return meta.GetCurrentDetails()
}

// agentTurns are the run's agent turns so far.
func agentTurns(t *testing.T, evs []event) []protocol.Turn {
	var out []protocol.Turn
	for _, turn := range turnsIn(t, evs) {
		if turn.Role == protocol.RoleAgent {
			out = append(out, turn)
		}
	}
	return out
}

// closeConversation closes the pack's conversation with the client's close operation.
func closeConversation(t *testing.T, c *apiClient, id string) {
	t.Helper()
	status, body := postToPack(c, id, map[string]any{"resumeValue": map[string]any{"operation": "close"}})
	require.Equal(t, http.StatusOK, status, "close: %v", body)
}

// TestOutageConversationSurvivesE2E: the provider refuses connections, then answers
// 503, for 40 s (beyond the ~30 s after which the old fixed policy ended the run);
// meanwhile the run says it is stalled (snapshot, workflow.stalled events and
// reminders, WopStalledOn, the Temporal UI's details) and stays running; once the
// provider is back the message is answered and the conversation goes on.
func TestOutageConversationSurvivesE2E(t *testing.T) {
	t.Parallel()
	c := startOutageStack(t)
	f := outageStack.long
	outage := outageStack.longOutage
	began := time.Now()
	id := createRun(t, c, "outage-long", map[string]any{"message": "Are you there?"})

	s := waitSnapshot(t, c, id, 60*time.Second, "stalled", func(s workflows.Snapshot) bool { return s.Stalled != nil })
	stalledAfter := time.Since(began)
	require.Equal(t, protocol.StatusRunning, s.Status, "a run waiting out an outage is running")
	require.Equal(t, "model", s.Stalled.Kind)
	require.Equal(t, activities.ProviderOpenAICompatible, s.Stalled.Provider)
	require.Equal(t, "model_unavailable", s.Stalled.LastError.Code)
	require.Contains(t, s.Stalled.LastError.Message, "refused")
	require.NotEmpty(t, s.Stalled.RetryUntil)
	require.Equal(t, "model:"+activities.ProviderOpenAICompatible, runTag(t, c.Stack.Client(), id, workflows.TagStalledOn))
	require.Equal(t, protocol.StatusRunning, keyword(t, c, id, workflows.SAStatus.GetName()))
	require.Empty(t, runTag(t, c.Stack.Client(), id, workflows.TagWaitingOn), "the run does not wait on its user while its turn waits out the outage")
	require.Contains(t, currentDetails(t, c, id), "Stalled")

	// Half-way, the provider answers again, but with 503s.
	time.Sleep(max(outage/2-time.Since(began), 0))
	require.NoError(t, f.set(modelUnavailable))
	reminders := len(ofType(events(t, c, id), protocol.EvWorkflowStalled))
	waitFor(t, outage, "the provider answering 503 while the run waits", func() int64 { return f.failed.Load() }, func(n int64) bool { return n > 0 })
	time.Sleep(max(outage-time.Since(began), 0))
	remind := outageStack.longPolicy.RemindEvery
	if remind < outage/4 {
		require.Greater(t, len(ofType(events(t, c, id), protocol.EvWorkflowStalled)), reminders, "reminders go on while the provider answers 503")
	}
	require.Equal(t, protocol.StatusRunning, snapshot(t, c, id).Status, "the outage did not end the run")
	require.NoError(t, f.set(modelUp))
	up := time.Now()

	evs := waitEvents(t, c, id, 60*time.Second, "answered", func(evs []event) bool { return len(agentTurns(t, evs)) == 1 })
	answered := time.Since(up)
	s = waitSnapshot(t, c, id, 10*time.Second, "waiting for its user", func(s workflows.Snapshot) bool {
		return s.Status == protocol.StatusWaitingApproval
	})
	require.Nil(t, s.Stalled)
	require.Empty(t, runTag(t, c.Stack.Client(), id, workflows.TagStalledOn), "the stall is over")
	stalled := ofType(evs, protocol.EvWorkflowStalled)
	require.GreaterOrEqual(t, len(stalled), 1+int((outage-stalledAfter)/remind)-1, "the stall and a reminder every %s", remind)
	var first map[string]any
	require.NoError(t, json.Unmarshal(stalled[0].Payload, &first))
	require.Equal(t, "model-unavailable", first["reason"])
	for _, turn := range turnsIn(t, evs) {
		require.NotEqual(t, protocol.RoleSystem, turn.Role, "no turn failed: %s", turn.Content)
	}
	t.Logf("outage of %s: stalled reported %s after the start, %d workflow.stalled events, %d requests answered 503, answered %s after the provider came back",
		outage.Round(time.Second), stalledAfter.Round(time.Millisecond), len(stalled), f.failed.Load(), answered.Round(time.Millisecond))

	// The conversation goes on.
	sayTo(t, c, id, "Good, you are back.")
	evs = waitEvents(t, c, id, 30*time.Second, "the next answer", func(evs []event) bool { return len(agentTurns(t, evs)) == 2 })
	require.Len(t, agentTurns(t, evs), 2)
	closeConversation(t, c, id)
	waitCompleted(t, c, id)
	replayHistory(t, c, id, "pack-model-outage")
}

// TestOutagePastTheLimitFailsTheTurnE2E: the provider stays down past the operator's
// 8 s: the turn ends with a system turn that says the model is unavailable, the
// conversation stays open, and the next message, once the provider is back, is
// answered.
func TestOutagePastTheLimitFailsTheTurnE2E(t *testing.T) {
	t.Parallel()
	c := startOutageStack(t)
	f := outageStack.short
	id := createRun(t, c, "outage-short", map[string]any{"message": "Are you there?"})
	evs := waitEvents(t, c, id, 60*time.Second, "the turn given up", func(evs []event) bool {
		for _, turn := range turnsIn(t, evs) {
			if turn.Role == protocol.RoleSystem && turn.TurnIndex > 0 {
				return true
			}
		}
		return false
	})
	var notice protocol.Turn
	for _, turn := range turnsIn(t, evs) {
		if turn.Role == protocol.RoleSystem && turn.TurnIndex > 0 {
			notice = turn
		}
	}
	require.Contains(t, textOf(t, notice), "the model is unavailable")
	require.Contains(t, textOf(t, notice), "send another message to try again")
	require.Contains(t, string(notice.Content), `"code":"model_unavailable"`)
	s := waitSnapshot(t, c, id, 10*time.Second, "waiting for its user", func(s workflows.Snapshot) bool {
		return s.Status == protocol.StatusWaitingApproval
	})
	require.Nil(t, s.Error, "the run did not fail")
	require.Nil(t, s.Stalled)
	require.NotNil(t, s.Interrupt, "the conversation is open")
	require.Empty(t, runTag(t, c.Stack.Client(), id, workflows.TagStalledOn))

	require.NoError(t, f.set(modelUp))
	status, body := postToPack(c, id, map[string]any{"resumeValue": map[string]any{"text": "And now?"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	evs = waitEvents(t, c, id, 30*time.Second, "answered", func(evs []event) bool { return len(agentTurns(t, evs)) == 1 })
	turns := turnsIn(t, evs)
	last := turns[len(turns)-1]
	require.Equal(t, protocol.RoleAgent, last.Role)
	require.Equal(t, notice.TurnIndex+2, last.TurnIndex, "the message after the notice is answered")
	// The retried round read both messages.
	calls := f.fake.Calls()
	require.NotEmpty(t, calls)
	sent, _ := json.Marshal(calls[len(calls)-1].Body["messages"])
	require.Contains(t, string(sent), "Are you there?")
	require.Contains(t, string(sent), "And now?")
	closeConversation(t, c, id)
	waitCompleted(t, c, id)
	replayHistory(t, c, id, "pack-model-outage-limit")
}

// TestOutageStalledRunCancelsE2E: a cancel ends a run that waits out an outage at once.
func TestOutageStalledRunCancelsE2E(t *testing.T) {
	t.Parallel()
	c := startOutageStack(t)
	id := createRun(t, c, "outage-abort", map[string]any{"message": "Are you there?"})
	waitSnapshot(t, c, id, 60*time.Second, "stalled", func(s workflows.Snapshot) bool { return s.Stalled != nil })
	sent := time.Now()
	agCancel(t, c, id)
	evs := waitEnded(t, c, id, 30*time.Second)
	took := time.Since(sent)
	require.Equal(t, protocol.EvRunCancelled, evs[len(evs)-1].Type)
	require.Less(t, took, 15*time.Second, "the cancel does not wait for the next attempt or the limit")
	require.Empty(t, runTag(t, c.Stack.Client(), id, workflows.TagStalledOn))
	t.Logf("a stalled run cancelled in %s", took.Round(time.Millisecond))
}

// loopFigures are what one run of the local loop measured: the reads made while it
// looped (snapshots and event pages: how many, median, slowest), the time the cancel
// took to answer and to land (from sending it until Temporal reports the execution
// closed Canceled), the first read of the closed run (the API queries it, so a worker
// replays its history first), and the rounds run by the cancel and in all.
type loopFigures struct {
	runID                       string
	reads                       int
	snapMedian, snapSlowest     time.Duration
	eventsMedian, eventsSlowest time.Duration
	cancelAnswered              time.Duration
	cancelLanded                time.Duration
	closedRead                  time.Duration
	roundsAtCancel, roundsAtEnd int
}

// runLocalLoop starts the 3,000-round local loop, reads the run (its snapshot and its
// events) for readFor while it loops, each read required to answer 200 (and the
// snapshot to say running), then cancels it and waits until it reads cancelled.
func runLocalLoop(tb testing.TB, st *stack.Stack, key string, readFor time.Duration) loopFigures {
	tb.Helper()
	base := st.APIURL()
	hc := &http.Client{Timeout: 30 * time.Second}
	call := func(method, path string, body any) (int, []byte, time.Duration) {
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			require.NoError(tb, err)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, base+path, rd)
		require.NoError(tb, err)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		start := time.Now()
		resp, err := hc.Do(req)
		require.NoError(tb, err, "%s %s", method, path)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(tb, err)
		return resp.StatusCode, raw, time.Since(start)
	}
	snap := func(path string) (workflows.Snapshot, time.Duration) {
		status, raw, took := call(http.MethodGet, path, nil)
		require.Equal(tb, http.StatusOK, status, "GET %s while the loop runs: %s", path, raw)
		var s workflows.Snapshot
		require.NoError(tb, json.Unmarshal(raw, &s))
		return s, took
	}

	status, raw, _ := call(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "loop", "inputs": map[string]any{"message": "go"}})
	require.Equal(tb, http.StatusCreated, status, "%s", raw)
	var created struct {
		RunID string `json:"runId"`
	}
	require.NoError(tb, json.Unmarshal(raw, &created))
	id := created.RunID

	fig := loopFigures{runID: id}
	var snapTook, eventsTook []time.Duration
	// Reads go on for readFor, or until the loop is half done on a machine that runs it
	// fast, so the cancel still lands while the loop runs.
	deadline := time.Now().Add(readFor)
	for time.Now().Before(deadline) {
		s, d := snap("/v1/runs/" + id)
		snapTook = append(snapTook, d)
		if s.Pack != nil && s.Pack.ModelRounds > 1 {
			require.Equal(tb, protocol.StatusRunning, s.Status, "the loop is running")
		}
		status, raw, d := call(http.MethodGet, "/v1/runs/"+id+"/events", nil)
		require.Equal(tb, http.StatusOK, status, "GET the events while the loop runs: %s", raw)
		eventsTook = append(eventsTook, d)
		if s.Pack != nil && s.Pack.ModelRounds >= loopRounds/2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, _ := snap("/v1/runs/" + id)
	require.Equal(tb, protocol.StatusRunning, s.Status)
	require.NotNil(tb, s.Pack)
	fig.roundsAtCancel = s.Pack.ModelRounds
	require.Less(tb, fig.roundsAtCancel, loopRounds, "the loop is still going when it is cancelled")
	sent := time.Now()
	status, raw, fig.cancelAnswered = call(http.MethodPost, "/v1/runs/"+id+":cancel", map[string]any{"reason": "enough"})
	require.Equal(tb, http.StatusOK, status, "cancel: %s", raw)
	for {
		d, err := st.Client().DescribeWorkflowExecution(context.Background(), id, "")
		require.NoError(tb, err)
		if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
			break
		}
		require.Less(tb, time.Since(sent), 30*time.Second, "the cancel never landed")
		time.Sleep(5 * time.Millisecond)
	}
	fig.cancelLanded = time.Since(sent)
	s, fig.closedRead = snap("/v1/runs/" + id)
	require.Equal(tb, protocol.StatusCancelled, s.Status)
	fig.roundsAtEnd = s.Pack.ModelRounds
	fig.reads = len(snapTook) + len(eventsTook)
	slices.Sort(snapTook)
	slices.Sort(eventsTook)
	fig.snapMedian, fig.snapSlowest = snapTook[len(snapTook)/2], snapTook[len(snapTook)-1]
	fig.eventsMedian, fig.eventsSlowest = eventsTook[len(eventsTook)/2], eventsTook[len(eventsTook)-1]
	return fig
}

// TestLocalLoopStaysReadableE2E: while a turn runs a loop of scripted-mock rounds (local
// activities, which used to hold one workflow task for the whole loop), every read of
// the run answers 200 with status running, and a cancel lands; the bounds are
// generous, the figures are logged (and measured by BenchmarkLocalLoopCancel).
func TestLocalLoopStaysReadableE2E(t *testing.T) {
	t.Parallel()
	c := startOutageStack(t)
	fig := runLocalLoop(t, c.Stack, c.Key, 4*time.Second)
	require.Less(t, fig.cancelLanded, 10*time.Second)
	require.Less(t, fig.roundsAtEnd, loopRounds, "the cancel, not the round limit, ended the loop")
	t.Logf("%d reads while the loop ran, all 200: snapshot median %s, slowest %s; events page median %s, slowest %s; cancel answered in %s, landed %s after it was sent; rounds %d at the cancel, %d at the end",
		fig.reads, fig.snapMedian.Round(time.Millisecond), fig.snapSlowest.Round(time.Millisecond), fig.eventsMedian.Round(time.Millisecond),
		fig.eventsSlowest.Round(time.Millisecond), fig.cancelAnswered.Round(time.Millisecond), fig.cancelLanded.Round(time.Millisecond), fig.roundsAtCancel, fig.roundsAtEnd)
	replayHistory(t, c, fig.runID, "") // its yields and the cancel between them replay (too long to keep)
}

// TestLocalLoopYieldsE2E: a loop of 40 local rounds of about 25 ms each (its pack's
// visit budget ends it) yields its workflow task to Temporal as it goes (the Yield
// activity, every 100 ms of rounds); its history replays, and is recorded for the
// replay tests.
func TestLocalLoopYieldsE2E(t *testing.T) {
	t.Parallel()
	c := startOutageStack(t)
	id := createRun(t, c, "loop-slow", map[string]any{"message": "go"})
	evs := waitEnded(t, c, id, 60*time.Second)
	require.Equal(t, protocol.EvRunFailed, evs[len(evs)-1].Type)
	require.Equal(t, "budget_exhausted", snapshot(t, c, id).Error.Code)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	yields, markers := 0, 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "Yield" {
			yields++
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_MARKER_RECORDED {
			markers++
		}
	}
	require.Positive(t, yields, "the loop's %d local rounds yielded their workflow task", markers)
	t.Logf("%d local activity markers, %d yields", markers, yields)
	replayHistory(t, c, id, "pack-local-yield")
}

// BenchmarkLocalLoopCancel measures reads and the cancel of the 3,000-round local loop
// (3 s of reads, then the cancel), one loop per iteration:
//
//	go test ./tests -run '^$' -bench LocalLoopCancel -benchtime 3x
func BenchmarkLocalLoopCancel(b *testing.B) {
	st := outageStackStarted(b)
	var worst time.Duration
	for b.Loop() {
		fig := runLocalLoop(b, st, outageStack.key, 3*time.Second)
		worst = max(worst, fig.cancelLanded)
		b.ReportMetric(float64(fig.snapMedian.Microseconds())/1000, "snapshot_p50_ms")
		b.ReportMetric(float64(fig.snapSlowest.Microseconds())/1000, "snapshot_max_ms")
		b.ReportMetric(float64(fig.eventsMedian.Microseconds())/1000, "events_p50_ms")
		b.ReportMetric(float64(fig.cancelLanded.Microseconds())/1000, "cancel_ms")
		b.ReportMetric(float64(fig.cancelAnswered.Microseconds())/1000, "cancel_answer_ms")
		b.ReportMetric(float64(fig.closedRead.Microseconds())/1000, "closed_read_ms")
		b.Logf("cancel answered %s, landed %s after it was sent; snapshot reads p50 %s max %s; the closed run's first read %s",
			fig.cancelAnswered, fig.cancelLanded, fig.snapMedian, fig.snapSlowest, fig.closedRead)
		b.ReportMetric(float64(fig.roundsAtEnd-fig.roundsAtCancel), "rounds_after_cancel")
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "cancel_max_ms")
}
