package tests

// The fault suite: conversations driven over HTTP against the embedded stack while
// parts of it fail (the worker, the API, the whole process), while clients repeat and
// race their exchanges, and while the model fails for good. Every case ends by reading
// the run's whole event log and checking it (checkLog): every accepted user turn
// exactly once and in order, sequences 0..n without gaps, one terminal event, last.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// faultPacksDir holds the suite's packs: fault-echo answers every message with one
// mock round; fault-fail's second round fails permanently.
const faultPacksDir = "testdata/faultpacks"

// faultNode is the node id of a pack served as a workflow of its own.
const faultNode = "agent"

// startFaultStack starts a private stack serving the fault packs; dataDir "" is in
// memory.
func startFaultStack(t *testing.T, dataDir string) *apiClient {
	t.Helper()
	return startPrivateStack(t, stackOptions{DataDir: dataDir, PacksDir: faultPacksDir})
}

// ---- the event log and its check ----

// logCheck says what a log must show besides the invariants every log has.
type logCheck struct {
	// Accepted are the texts of the user turns the API accepted. Ordered: they must
	// appear in exactly this order; otherwise in any order (each exactly once).
	Accepted []string
	Ordered  bool
	// Replies: every user turn is answered by one agent turn before the next user turn
	// (except the last when LastUnanswered is set).
	Replies        bool
	LastUnanswered bool
	// Terminal is the run's terminal event type.
	Terminal string
}

// checkLog checks the invariants of a conversation run's event log and returns the
// user texts in log order.
func checkLog(t *testing.T, evs []event, want logCheck) []string {
	t.Helper()
	require.NotEmpty(t, evs, "event log")
	ids := map[string]bool{}
	terminals := 0
	for i, e := range evs {
		assert.Equal(t, int64(i), e.Sequence, "event %d (%s) has sequence %d: gap or duplicate", i, e.Type, e.Sequence)
		assert.False(t, ids[e.EventID], "eventId %s appears twice", e.EventID)
		ids[e.EventID] = true
		if isTerminalType(e.Type) {
			terminals++
		}
	}
	assert.Equal(t, 1, terminals, "exactly one terminal event")
	assert.Equal(t, want.Terminal, evs[len(evs)-1].Type, "the terminal event is last")

	// The conversation's turns: opened (turn 0), exchanged..., closed (final turn).
	var turns []*protocol.Turn
	opened, closed := 0, 0
	for _, e := range evs {
		switch e.Type {
		case "conversation.opened":
			opened++
			turns = append(turns, partsOf(t, e).InitialTurn)
		case "conversation.exchanged":
			assert.Zero(t, closed, "conversation.exchanged after conversation.closed (seq %d)", e.Sequence)
			turns = append(turns, partsOf(t, e).Turn)
		case "conversation.closed":
			closed++
			turns = append(turns, partsOf(t, e).FinalTurn)
		}
	}
	assert.Equal(t, 1, opened, "one conversation.opened")
	assert.Equal(t, 1, closed, "one conversation.closed")
	msgIDs := map[string]bool{}
	var users []string
	for i, tr := range turns {
		if !assert.NotNil(t, tr, "turn %d has a body", i) {
			continue
		}
		assert.Equal(t, i, tr.TurnIndex, "turn indexes count 0..n in log order")
		assert.False(t, msgIDs[tr.MessageID], "messageId %s appears twice", tr.MessageID)
		msgIDs[tr.MessageID] = true
		if tr.Role == "user" {
			users = append(users, textOf(t, *tr))
		}
	}
	if want.Ordered {
		assert.Equal(t, want.Accepted, users, "accepted user turns, once each, in order")
	} else {
		assert.ElementsMatch(t, want.Accepted, users, "accepted user turns, once each")
	}
	if want.Replies && len(turns) > 2 {
		body := turns[1 : len(turns)-1] // between turn 0 and the final turn
		for i := 0; i < len(body); i += 2 {
			if !assert.Equal(t, "user", body[i].Role, "turn %d is a user turn", body[i].TurnIndex) {
				break
			}
			if i+1 == len(body) {
				assert.True(t, want.LastUnanswered, "user turn %d has no reply", body[i].TurnIndex)
				break
			}
			assert.Equal(t, "agent", body[i+1].Role, "user turn %d is answered by the agent", body[i].TurnIndex)
		}
	}
	return users
}

// ---- driving a conversation ----

// faultConv is one conversation with a fault pack.
type faultConv struct {
	t     *testing.T
	c     *apiClient
	runID string
}

func openFaultConv(t *testing.T, c *apiClient, pack string) *faultConv {
	t.Helper()
	status, _, body := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": pack})
	require.Equal(t, http.StatusCreated, status, "start a run of %s: %v", pack, body)
	id, _ := body["runId"].(string)
	require.NotEmpty(t, id)
	fc := &faultConv{t: t, c: c, runID: id}
	waitEvents(t, c, id, 20*time.Second, "conversation.opened", func(evs []event) bool {
		return len(ofType(evs, "conversation.opened")) == 1
	})
	return fc
}

func exchangeBody(text, messageID string) map[string]any {
	turn := map[string]any{"role": "user", "from": "user", "content": map[string]any{"text": text}}
	if messageID != "" {
		turn["messageId"] = messageID
	}
	return map[string]any{"resumeValue": map[string]any{"operation": "exchange", "turn": turn}}
}

// send posts one exchange and returns the status.
func (fc *faultConv) send(text, messageID string) (int, map[string]any) {
	status, _, body := fc.c.do(http.MethodPost, "/v1/runs/"+fc.runID+"/interrupts/"+faultNode, exchangeBody(text, messageID))
	return status, body
}

// sendAccepted posts one exchange and requires it accepted. A run whose worker has
// just been swapped may take its workflow task later than the API's resolve wait (a
// sticky queue of the stopped worker times out first, longer on a loaded machine);
// the API then answers 202 queued with an Idempotency-Key, and the request is
// repeated with that key, as a client does, until it answers the outcome.
func (fc *faultConv) sendAccepted(text string) {
	fc.t.Helper()
	status, body := fc.send(text, "")
	deadline := time.Now().Add(60 * time.Second)
	for status == http.StatusAccepted && time.Now().Before(deadline) {
		require.Equal(fc.t, "queued", body["status"], "exchange %q: %v", text, body)
		key, _ := body["idempotencyKey"].(string)
		require.NotEmpty(fc.t, key, "a queued exchange names its key: %v", body)
		status, body = post(fc.c, fc.c.Key, "/v1/runs/"+fc.runID+"/interrupts/"+faultNode, exchangeBody(text, ""), "Idempotency-Key", key)
	}
	require.Equal(fc.t, http.StatusOK, status, "exchange %q: %v", text, body)
}

// say posts one exchange, requires it accepted and waits for the agent's reply.
func (fc *faultConv) say(text string) {
	fc.t.Helper()
	before := fc.agentTurns()
	status, body := fc.send(text, "")
	require.Equal(fc.t, http.StatusOK, status, "exchange %q: %v", text, body)
	fc.waitAgentTurns(before+1, 30*time.Second)
}

// sendFromGoroutine is send for goroutines other than the test's: it never calls
// t.Fatal, and reports a transport failure as status 0.
func (fc *faultConv) sendFromGoroutine(text, messageID string) int {
	b, err := json.Marshal(exchangeBody(text, messageID))
	if err != nil {
		return 0
	}
	req, err := http.NewRequest(http.MethodPost, fc.c.BaseURL+"/v1/runs/"+fc.runID+"/interrupts/"+faultNode, strings.NewReader(string(b)))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+fc.c.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := fc.c.http.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sendAtOnce posts one exchange per text, all at the same time (each from its own
// goroutine, with messageID when non-empty), and returns their statuses in text order.
func (fc *faultConv) sendAtOnce(texts []string, messageID string) []int {
	statuses := make([]int, len(texts))
	var wg sync.WaitGroup
	for i, text := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = fc.sendFromGoroutine(text, messageID)
		}()
	}
	wg.Wait()
	return statuses
}

func (fc *faultConv) agentTurns() int {
	return countAgentTurns(fc.t, events(fc.t, fc.c, fc.runID))
}

func (fc *faultConv) waitAgentTurns(n int, within time.Duration) {
	fc.t.Helper()
	waitEvents(fc.t, fc.c, fc.runID, within, fmt.Sprintf("%d agent turns", n), func(evs []event) bool { return countAgentTurns(fc.t, evs) >= n })
}

// close closes the conversation and waits for the run's terminal event.
func (fc *faultConv) close() []event {
	fc.t.Helper()
	status, _, body := fc.c.do(http.MethodPost, "/v1/runs/"+fc.runID+"/interrupts/"+faultNode,
		map[string]any{"resumeValue": map[string]any{"operation": "close"}})
	require.Equal(fc.t, http.StatusOK, status, "close: %v", body)
	return fc.waitTerminal(30 * time.Second)
}

func (fc *faultConv) waitTerminal(within time.Duration) []event {
	fc.t.Helper()
	return waitEnded(fc.t, fc.c, fc.runID, within)
}

// countAgentTurns counts the agent turns among the conversation.exchanged events.
func countAgentTurns(t *testing.T, evs []event) int {
	t.Helper()
	n := 0
	for _, e := range ofType(evs, "conversation.exchanged") {
		if tr := partsOf(t, e).Turn; tr != nil && tr.Role == "agent" {
			n++
		}
	}
	return n
}

// ---- the cases ----

// blockingProvider is a model that never answers: it signals entered and waits for its
// context to end, as a slow provider does while its worker goes away.
type blockingProvider struct{ entered chan struct{} }

func (*blockingProvider) Name() string { return activities.ProviderMock }

func (p *blockingProvider) Complete(ctx context.Context, _ *activities.Request) (*convo.ModelRoundResult, error) {
	select {
	case p.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// swapInBlockingWorker stops the stack's worker and starts one whose model never
// answers (blockingProvider), so the next model round is caught in the middle. It
// returns that model and a stop for that worker (once; also when the test ends).
func swapInBlockingWorker(t *testing.T, c *apiClient) (*blockingProvider, func()) {
	t.Helper()
	blocker := &blockingProvider{entered: make(chan struct{}, 1)}
	return blocker, swapInWorkerWith(t, c, blocker)
}

// swapInWorkerWith stops the stack's worker and starts one whose model is model. It
// returns a stop for that worker (once; also when the test ends).
func swapInWorkerWith(t *testing.T, c *apiClient, model activities.Provider) func() {
	t.Helper()
	tc := c.Stack.Client()
	c.Stack.StopWorker()
	acts, err := activities.New(activities.Config{
		Providers:   map[string]activities.Provider{activities.DefaultProviderKey: model},
		Transcripts: activities.ClientTranscripts{Client: tc, Query: workflows.TranscriptPageQuery},
	})
	require.NoError(t, err)
	wcfg := c.Stack.Options().Worker
	wcfg.ShutdownTimeout = 200 * time.Millisecond
	bw := worker.New(tc, wcfg, acts)
	require.NoError(t, bw.Start())
	var once sync.Once
	stop := func() { once.Do(bw.Stop) }
	t.Cleanup(stop)
	return stop
}

// waitEntered waits until a model round has entered the blocking model.
func (p *blockingProvider) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-p.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the model round never started on the blocking worker")
	}
}

// catchSecondRound opens a fault-echo conversation on a private stack, answers "first",
// then swaps the host's worker for one whose model blocks and sends "second", so its
// model round is caught in the middle; it returns the stop of the blocking worker.
func catchSecondRound(t *testing.T) (*apiClient, *faultConv, func()) {
	t.Helper()
	c := startFaultStack(t, "")
	fc := openFaultConv(t, c, "fault-echo")
	fc.say("first")
	blocker, stopBlocker := swapInBlockingWorker(t, c)
	fc.sendAccepted("second")
	blocker.waitEntered(t)
	return c, fc, stopBlocker
}

// TestFaultWorkerStopsMidModelRound stops the worker while a model round runs and
// starts one again: the round is retried, the turn is answered once, and the
// conversation goes on.
func TestFaultWorkerStopsMidModelRound(t *testing.T) {
	c, fc, stopBlocker := catchSecondRound(t)
	stopBlocker()
	require.NoError(t, c.Stack.StartWorker(), "start the host's worker again")

	// The retried round runs on the host's worker (the mock answers).
	fc.waitAgentTurns(2, 60*time.Second)
	fc.say("third")
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: []string{"first", "second", "third"}, Ordered: true, Replies: true, Terminal: "run.completed"})
}

// TestFaultAPIRestartsUnderAnSSEReader restarts the API while a client reads the event
// stream; the client reconnects with Last-Event-ID and, over both connections, sees
// every event once, without a gap. The agent's reply to an exchange sent just before
// the restart is written while no API runs.
func TestFaultAPIRestartsUnderAnSSEReader(t *testing.T) {
	c := startFaultStack(t, "")
	fc := openFaultConv(t, c, "fault-echo")

	path := "/v1/runs/" + fc.runID + "/events?streamMode=debug" // every event
	stream := openStream(t, c, path, nil)
	require.Equal(t, http.StatusOK, stream.Status, "open the event stream: %s", stream.Body)

	// got holds the logged events' frames (the ones with an id) over both connections.
	var got []sseEvent
	keep := func(f sseEvent) {
		if f.ID != "" {
			got = append(got, f)
		}
	}
	collect := func(until func() bool, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for !until() {
			f, ok, timedOut := stream.next(deadline)
			switch {
			case timedOut:
				t.Fatalf("stream: timed out; frames so far: %d", len(got))
			case !ok:
				t.Fatalf("stream: ended early; frames so far: %d", len(got))
			}
			keep(f)
		}
	}
	agentFrames := func() int {
		n := 0
		for _, f := range got {
			if f.Event == "conversation.exchanged" && strings.Contains(f.Data, `"role":"agent"`) {
				n++
			}
		}
		return n
	}
	fc.say("before the restart")
	collect(func() bool { return agentFrames() >= 1 }, 20*time.Second)

	// The next exchange is accepted, then the API goes away before the reply.
	status, body := fc.send("across the restart", "")
	require.Equal(t, http.StatusOK, status, "exchange: %v", body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	require.NoError(t, c.Stack.StopAPI(ctx), "stop the API")
	cancel()
	// The first connection ends with the API; keep what it delivered.
	ended := time.After(10 * time.Second)
	for {
		f, ok, timedOut := stream.next(ended)
		if timedOut {
			t.Fatal("the event stream did not end when the API stopped")
		}
		if !ok {
			break
		}
		keep(f)
	}
	require.NotEmpty(t, got, "frames before the restart")
	// Let the reply land while no API runs.
	require.Eventually(t, func() bool {
		v, err := c.Stack.Client().QueryWorkflow(context.Background(), fc.runID, "", workflows.EventsQuery, workflows.EventsRequest{After: -1})
		if err != nil {
			return false
		}
		var page struct {
			Events []event `json:"events"`
		}
		return v.Get(&page) == nil && countAgentTurns(t, page.Events) >= 2
	}, 30*time.Second, 50*time.Millisecond, "the reply is written while the API is down")
	require.NoError(t, c.Stack.StartAPI(), "start the API again")

	stream = openStream(t, c, path, lastEventID(got[len(got)-1].ID))
	require.Equal(t, http.StatusOK, stream.Status, "reopen the event stream: %s", stream.Body)
	collect(func() bool { return agentFrames() >= 2 }, 20*time.Second)
	fc.say("after the restart")
	evs := fc.close()
	collect(func() bool { return len(got) > 0 && isTerminalType(got[len(got)-1].Event) }, 20*time.Second)

	for i, f := range got {
		if !assert.Equal(t, strconv.Itoa(i), f.ID, "frame %d (%s): SSE ids over both connections count 0..n", i, f.Event) {
			break
		}
	}
	assert.Len(t, got, len(evs), "the stream delivered the whole log")
	checkLog(t, evs, logCheck{Accepted: []string{"before the restart", "across the restart", "after the restart"}, Ordered: true, Replies: true, Terminal: "run.completed"})
}

// TestFaultSameExchangeTwiceIsAppliedOnce sends one exchange twice with the same
// messageId, one after the other and then concurrently.
func TestFaultSameExchangeTwiceIsAppliedOnce(t *testing.T) {
	c := startFaultStack(t, "")
	fc := openFaultConv(t, c, "fault-echo")

	status, body := fc.send("once", "msg-once")
	require.Equal(t, http.StatusOK, status, "first send: %v", body)
	status, body = fc.send("once", "msg-once")
	assert.Contains(t, []int{http.StatusOK, http.StatusConflict}, status, "a repeated messageId is acknowledged or refused as already recorded: %v", body)
	fc.waitAgentTurns(1, 30*time.Second)

	statuses := fc.sendAtOnce([]string{"twice at once", "twice at once"}, "msg-race")
	assert.Contains(t, statuses, http.StatusOK, "one of the two is accepted: %v", statuses)
	fc.waitAgentTurns(2, 30*time.Second)
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: []string{"once", "twice at once"}, Ordered: true, Replies: true, Terminal: "run.completed"})
}

// TestFaultExchangeRepeatedWithIdempotencyKey sends one exchange three times with the
// same Idempotency-Key, as a client retrying after a lost response does: every attempt
// gets 200, the turn is applied once, and nothing more reaches the run's history.
func TestFaultExchangeRepeatedWithIdempotencyKey(t *testing.T) {
	c := startFaultStack(t, "")
	fc := openFaultConv(t, c, "fault-echo")
	headers := map[string]string{"Authorization": "Bearer " + c.Key, "Content-Type": "application/json", "Idempotency-Key": "retry-1"}
	path := "/v1/runs/" + fc.runID + "/interrupts/" + faultNode
	status, _, raw := c.doRaw(http.MethodPost, path, exchangeBody("only once", ""), headers)
	require.Equal(t, http.StatusOK, status, "first attempt: %s", raw)
	fc.waitAgentTurns(1, 30*time.Second)
	signals := func() int {
		n := 0
		it := c.Stack.Client().GetWorkflowHistory(context.Background(), fc.runID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if ev.GetWorkflowExecutionSignaledEventAttributes() != nil {
				n++
			}
		}
		return n
	}
	before := signals()
	for i := 0; i < 2; i++ {
		status, _, raw = c.doRaw(http.MethodPost, path, exchangeBody("only once", ""), headers)
		require.Equal(t, http.StatusOK, status, "repeated attempt %d: %s", i+1, raw)
		var body map[string]string
		require.NoError(t, json.Unmarshal(raw, &body))
		require.Equal(t, fc.runID, body["runId"])
	}
	require.Equal(t, before, signals(), "a repeated request sends no signal")
	fc.say("next")
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: []string{"only once", "next"}, Ordered: true, Replies: true, Terminal: "run.completed"})
}

// TestFaultDifferentExchangesRace sends two different exchanges at the same time: both
// are applied, each once, one after the other.
func TestFaultDifferentExchangesRace(t *testing.T) {
	c := startFaultStack(t, "")
	fc := openFaultConv(t, c, "fault-echo")
	texts := []string{"left", "right"}
	statuses := fc.sendAtOnce(texts, "")
	var accepted []string
	for i, s := range statuses {
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, s, "exchange %q", texts[i])
		if s == http.StatusOK {
			accepted = append(accepted, texts[i])
		}
	}
	require.NotEmpty(t, accepted)
	fc.waitAgentTurns(len(accepted), 30*time.Second)
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: accepted, Replies: true, Terminal: "run.completed"})
}

// TestFaultHundredConcurrentExchanges sends 100 exchanges to one conversation at once:
// every accepted one appears exactly once, in a total order, each answered.
func TestFaultHundredConcurrentExchanges(t *testing.T) {
	c := startFaultStack(t, "")
	fc := openFaultConv(t, c, "fault-echo")
	const n = 100
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("message %03d", i)
	}
	statuses := fc.sendAtOnce(texts, "")
	var accepted []string
	other := map[int]int{}
	for i, s := range statuses {
		// 202: queued behind the turns before it for longer than the API waits; the run
		// holds it and records it in turn.
		if s == http.StatusOK || s == http.StatusAccepted {
			accepted = append(accepted, texts[i])
		}
		if s != http.StatusOK {
			other[s]++
		}
	}
	t.Logf("%d of %d accepted; other statuses: %v", len(accepted), n, other)
	for s := range other {
		assert.Contains(t, []int{http.StatusAccepted, http.StatusConflict, http.StatusTooManyRequests, http.StatusServiceUnavailable}, s,
			"a refused exchange is refused with a status a client can act on")
	}
	require.NotEmpty(t, accepted)
	fc.waitAgentTurns(len(accepted), 120*time.Second)
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: accepted, Replies: true, Terminal: "run.completed"})
}

// TestFaultModelFailsPermanently scripts the second model round to fail for good: the
// run fails with a clear error, the conversation is closed with a system turn, and
// nothing is left waiting.
func TestFaultModelFailsPermanently(t *testing.T) {
	c := startFaultStack(t, "")
	fc := openFaultConv(t, c, "fault-fail")
	fc.say("hello")
	status, body := fc.send("this one fails", "")
	require.Equal(t, http.StatusOK, status, "exchange: %v", body)
	evs := fc.waitTerminal(60 * time.Second)
	checkLog(t, evs, logCheck{Accepted: []string{"hello", "this one fails"}, Ordered: true, Replies: true, LastUnanswered: true, Terminal: "run.failed"})

	var closedTurn *protocol.Turn
	for _, e := range ofType(evs, "conversation.closed") {
		closedTurn = partsOf(t, e).FinalTurn
	}
	require.NotNil(t, closedTurn)
	assert.Equal(t, "system", closedTurn.Role, "the conversation is closed with a system turn")
	closedText := textOf(t, *closedTurn)
	assert.NotEmpty(t, closedText, "the system turn says why")
	failed := partsOf(t, evs[len(evs)-1])
	require.NotNil(t, failed.Error, "run.failed carries an error: %+v", evs[len(evs)-1])
	assert.Contains(t, failed.Error.Message, "rejected the request for good", "the error names the cause")
	assert.Equal(t, "mock_scripted_failure", failed.Error.Code, "an OpenWOP code, not a Go type name")
	for _, internal := range []string{"activity error", "scheduledEventID", "MockScriptedFailure"} {
		assert.NotContains(t, failed.Error.Message, internal, "Temporal's wrapping stays in the logs")
		assert.NotContains(t, closedText, internal, "Temporal's wrapping stays in the logs")
	}

	_, _, snap := c.do(http.MethodGet, "/v1/runs/"+fc.runID, nil)
	assert.Equal(t, "failed", snap["status"])
	if e, ok := snap["error"].(map[string]any); assert.True(t, ok, "the snapshot carries the error") {
		assert.Equal(t, "mock_scripted_failure", e["code"])
	}
	assert.Empty(t, snap["interrupts"], "no interrupt left pending")
	assert.Nil(t, snap["interrupt"], "no interrupt left pending")
	// The workflow closes once Temporal took the run's last webhook notice, a workflow
	// task after its terminal event.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := c.Stack.Client().DescribeWorkflowExecution(ctx, fc.runID, "")
		if !assert.NoError(ct, err) {
			return
		}
		assert.NotEqual(ct, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "the workflow is closed")
		assert.Empty(ct, d.GetPendingActivities(), "no activity left pending")
	}, 30*time.Second, 100*time.Millisecond)

	status, body = fc.send("too late", "")
	assert.GreaterOrEqual(t, status, 400, "an exchange after the failure is refused: %v", body)
	assert.Less(t, status, 500, "and not as a server error: %v", body)
}

// ---- kill -9 of the whole dev process ----

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// devProcess is a `wop dev` child process.
type devProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startDev starts `wop dev` on dataDir with fixed ports and waits until its API
// answers /healthz. extra flags follow the defaults (a repeated flag's last value wins).
func startDev(t *testing.T, bin, dataDir string, httpPort, temporalPort, uiPort int, key string, extra ...string) *devProcess {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dataDir, "..", "dev.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(bin, "dev",
		"--data", dataDir,
		"--http", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--temporal-port", strconv.Itoa(temporalPort),
		"--ui-port", strconv.Itoa(uiPort),
		"--packs", faultPacksDir)
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), "WOP_API_KEY="+key, "WOP_LOG_LEVEL=error", "WOP_TEMPORAL_LOG_LEVEL=error", "WOP_MOCK_STRICT=true")
	cmd.Env = append(cmd.Env, "TEMPORAL_ADDRESS=") // always the embedded server
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start(), "start wop dev")
	p := &devProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.done) }()
	t.Cleanup(p.kill)

	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			log, _ := os.ReadFile(filepath.Join(dataDir, "..", "dev.log"))
			t.Fatalf("wop dev exited before it was ready:\n%s", log)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("wop dev was not ready within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *devProcess) kill() {
	if p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// TestFaultDevProcessKilledMidConversation builds the wop binary, holds a conversation
// with `wop dev`, kills it with SIGKILL, starts it again on the same data folder and
// finishes the conversation.
func TestFaultDevProcessKilledMidConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the wop binary")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "wop")
	bctx, bcancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer bcancel()
	build := exec.CommandContext(bctx, "go", "build", "-o", bin, "../cmd/wop")
	if out, err := build.CombinedOutput(); err != nil {
		if errors.Is(bctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("go build ./cmd/wop took longer than 8 minutes")
		}
		t.Fatalf("go build ./cmd/wop: %v\n%s", err, out)
	}
	dataDir := filepath.Join(tmp, "data")
	require.NoError(t, os.MkdirAll(dataDir, 0o755))
	key := "wop_test_" + randomHex(12)
	httpPort, temporalPort, uiPort := freePort(t), freePort(t), freePort(t)

	p := startDev(t, bin, dataDir, httpPort, temporalPort, uiPort, key)
	c := &apiClient{t: t, BaseURL: fmt.Sprintf("http://127.0.0.1:%d", httpPort), Key: key, http: &http.Client{Timeout: 30 * time.Second}}
	fc := openFaultConv(t, c, "fault-echo")
	fc.say("before the kill")
	// The next exchange is accepted; the process dies before or during its round.
	status, body := fc.send("at the kill", "")
	require.Equal(t, http.StatusOK, status, "exchange: %v", body)
	p.kill()

	startDev(t, bin, dataDir, httpPort, temporalPort, uiPort, key)
	fc.waitAgentTurns(2, 60*time.Second)
	fc.say("after the restart")
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: []string{"before the kill", "at the kill", "after the restart"}, Ordered: true, Replies: true, Terminal: "run.completed"})

	// wop dev shows its key masked, never whole, and keeps its data to its owner.
	out, err := os.ReadFile(filepath.Join(tmp, "dev.log"))
	require.NoError(t, err)
	assert.Contains(t, string(out), key[:8]+"…"+key[len(key)-4:], "the key is shown masked")
	assert.NotContains(t, string(out), key, "the whole key is never printed")
	st, err := os.Stat(filepath.Join(dataDir, "temporal.db"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "temporal.db is its owner's only")
}
