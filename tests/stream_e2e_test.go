package tests

// Token streaming end to end: model rounds stream their replies from fake providers
// speaking the OpenAI and Anthropic streaming wire formats (internal/fakemodel over
// httptest), the worker publishes the chunks on its chunk endpoint, and the API delivers
// them to streamMode=messages subscribers as ai.message.chunk events before the durable
// conversation.exchanged event; nothing of them reaches the workflow's history or the
// event log.

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/chat"
	"github.com/wop-dev/wop/internal/fakemodel"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

const streamPacksDir = "testdata/streampacks"

// streamReply is what the fake providers of the stream stack answer.
const streamReply = "Your balance is 120 EUR, and the last payment went to the grocer on Monday."

// streamStack is a stack serving the stream packs: the scripted mock streams with a
// pause before each word, and the logical providers fake-openai and fake-anthropic are
// fake servers that stream streamReply a word every few milliseconds.
var streamStack struct {
	once sync.Once
	st   *stack.Stack
	key  string
	err  error
	fake *fakemodel.Server
}

func startStreamStack(t *testing.T) *apiClient {
	t.Helper()
	streamStack.once.Do(func() {
		streamStack.key = randomHex(16)
		streamStack.fake = &fakemodel.Server{Delay: 5 * time.Millisecond, Answer: func(fakemodel.Call) fakemodel.Reply {
			return fakemodel.Reply{Text: streamReply, Model: "fake-1"}
		}}
		srv := httptest.NewServer(streamStack.fake)
		opts := harnessOptions("", streamStack.key)
		opts.Worker.PacksDir = streamPacksDir
		opts.Worker.MockChunkDelay = 5 * time.Millisecond
		opts.Worker.Providers = map[string]activities.Provider{
			activities.DefaultProviderKey: &activities.MockProvider{},
			"fake-openai":                 activities.NewOpenAIProvider("sk-fake-key-0123456789", "gpt-fake", srv.URL+"/v1"),
			"fake-anthropic":              activities.NewAnthropicProvider("sk-ant-fake-0123456789", "claude-fake", srv.URL),
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		streamStack.st, streamStack.err = stack.Start(ctx, opts)
	})
	require.NoError(t, streamStack.err, "start the stream stack")
	return newAPIClient(t, streamStack.st, streamStack.key)
}

// stopStreamStack stops the stream stack if a test started it (TestMain).
func stopStreamStack() {
	if streamStack.st != nil {
		streamStack.st.Stop()
	}
}

// chunkPayload is the payload of an ai.message.chunk event.
type chunkPayload struct {
	NodeID    string `json:"nodeId"`
	RunID     string `json:"runId"`
	Chunk     string `json:"chunk"`
	IsLast    bool   `json:"isLast"`
	Round     int    `json:"round"`
	State     string `json:"state"`
	MessageID string `json:"messageId"`
	Attempt   int    `json:"attempt"`
	Seq       int    `json:"seq"`
	Aborted   bool   `json:"aborted"`
	Meta      struct {
		Model        string `json:"model"`
		FinishReason string `json:"finishReason"`
		Usage        *struct {
			PromptTokens     int `json:"promptTokens"`
			CompletionTokens int `json:"completionTokens"`
		} `json:"usage"`
	} `json:"meta"`
}

// chunkOf decodes an ai.message.chunk event, checking its envelope and, when the spec's
// schemas are at hand, its payload against outputChunk.
func chunkOf(t *testing.T, ev sseEvent) chunkPayload {
	t.Helper()
	require.Equal(t, protocol.EvMessageChunk, ev.Event)
	require.Empty(t, ev.ID, "a chunk is not in the log: it has no SSE id")
	var doc struct {
		EventID  string          `json:"eventId"`
		RunID    string          `json:"runId"`
		Type     string          `json:"type"`
		Sequence *int64          `json:"sequence"`
		Payload  json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &doc), ev.Data)
	assert.NotEmpty(t, doc.EventID)
	assert.LessOrEqual(t, len(doc.EventID), 128)
	assert.NotNil(t, doc.Sequence)
	assert.Equal(t, protocol.EvMessageChunk, doc.Type)
	if _, err := os.Stat(cfSchemaDir); err == nil {
		cfValidate(t, "run-event-payloads.schema.json#/$defs/outputChunk", doc.Payload)
	}
	var p chunkPayload
	require.NoError(t, json.Unmarshal(doc.Payload, &p))
	assert.Equal(t, doc.RunID, p.RunID)
	return p
}

// chunksIn decodes the chunk events among evs.
func chunksIn(t *testing.T, evs []sseEvent) []chunkPayload {
	t.Helper()
	var out []chunkPayload
	for _, ev := range evs {
		if ev.Event == protocol.EvMessageChunk {
			out = append(out, chunkOf(t, ev))
		}
	}
	return out
}

// agentTurnEvent matches the conversation.exchanged event of an agent turn.
func agentTurnEvent(ev sseEvent) bool {
	return ev.Event == protocol.EvConversationExchanged && strings.Contains(ev.Data, `"role":"agent"`)
}

// turnOf decodes the turn of a conversation.exchanged event.
func turnOf(t *testing.T, ev sseEvent) protocol.Turn {
	t.Helper()
	var doc struct {
		Payload struct {
			Turn protocol.Turn `json:"turn"`
		} `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &doc))
	return doc.Payload.Turn
}

// requireOneStream checks chunks of one round attempt: sequence 0.. without gaps, the
// last one last, and returns their text.
func requireOneStream(t *testing.T, cs []chunkPayload) string {
	t.Helper()
	require.NotEmpty(t, cs)
	var text strings.Builder
	for i, c := range cs {
		assert.Equal(t, i, c.Seq, "chunk %d in order", i)
		assert.Equal(t, cs[0].Attempt, c.Attempt)
		assert.Equal(t, cs[0].Round, c.Round)
		assert.Equal(t, i == len(cs)-1, c.IsLast, "only the last chunk is last")
		text.WriteString(c.Chunk)
	}
	return text.String()
}

// waitOpen waits until the run's conversation waits for a message and returns the last
// sequence of its log.
func waitOpen(t *testing.T, c *apiClient, id string) string {
	t.Helper()
	s := waitSnapshot(t, c, id, 30*time.Second, "waiting for a message", func(s workflows.Snapshot) bool {
		return s.Status == protocol.StatusWaitingApproval
	})
	return jsonNumber(s.LastSequence)
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestStreamChunksBeforeTheTurnE2E: for each provider wire format, a messages stream
// gets the reply as ai.message.chunk events (round, state, message, attempt, seq in
// order) before the agent's conversation.exchanged event, whose text they add up to;
// a messages-only stream gets only chunks; the history and the log hold none of them.
func TestStreamChunksBeforeTheTurnE2E(t *testing.T) {
	c := startStreamStack(t)
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			id := createRun(t, c, "stream-"+provider, nil)
			last := waitOpen(t, c, id)
			both := openStream(t, c, "/v1/runs/"+id+"/events?streamMode=messages,debug", lastEventID(last))
			only := openStream(t, c, "/v1/runs/"+id+"/events?streamMode=messages", lastEventID(last))
			require.Equal(t, http.StatusOK, both.Status)
			require.Equal(t, http.StatusOK, only.Status)
			sayTo(t, c, id, "what is my balance?")

			evs := both.until(t, 30*time.Second, "the agent's turn", agentTurnEvent)
			turn := turnOf(t, evs[len(evs)-1])
			cs := chunksIn(t, evs)
			require.NotEmpty(t, cs, "chunks before the turn; got %s", frameNames(evs))
			assert.True(t, cs[len(cs)-1].IsLast, "the whole stream came before the turn")
			assert.Equal(t, streamReply, requireOneStream(t, cs), "the chunks add up to the reply")
			assert.Equal(t, streamReply, textOf(t, turn))
			assert.Greater(t, len(cs), 5, "the reply came in pieces")
			for _, ch := range cs {
				assert.Equal(t, id, ch.RunID)
				assert.Equal(t, packNode, ch.NodeID)
				assert.Equal(t, "chat", ch.State)
				assert.Equal(t, 1, ch.Attempt)
				assert.Equal(t, turn.MessageID, ch.MessageID, "chunks name the message they are for")
				assert.NotEmpty(t, ch.Meta.Model, "the model called")
			}
			lastChunk := cs[len(cs)-1]
			assert.Equal(t, "fake-1", lastChunk.Meta.Model, "the model that answered")
			assert.Equal(t, "stop", lastChunk.Meta.FinishReason)
			require.NotNil(t, lastChunk.Meta.Usage)
			assert.Positive(t, lastChunk.Meta.Usage.CompletionTokens)

			// The messages-only stream: the same chunks, nothing else.
			got := only.until(t, 30*time.Second, "the last chunk", func(ev sseEvent) bool {
				return ev.Event == protocol.EvMessageChunk && chunkOf(t, ev).IsLast
			})
			for _, ev := range got {
				assert.Equal(t, protocol.EvMessageChunk, ev.Event)
			}
			assert.Equal(t, streamReply, requireOneStream(t, chunksIn(t, got)))

			// Nothing of the stream is durable.
			for _, e := range events(t, c, id) {
				assert.NotEqual(t, protocol.EvMessageChunk, e.Type, "chunks are not in the event log")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			history := historyText(ctx, t, c.Stack, id)
			require.Contains(t, history, streamReply, "the round's result is in the history (sanity check of the search)")
			for _, needle := range []string{protocol.EvMessageChunk, `"isLast"`, `"seq"`, "chunk-"} {
				assert.NotContains(t, history, needle, "the history holds nothing of the stream")
			}
		})
	}
}

// TestStreamSurvivesWorkerRestartE2E stops the worker while a reply streams and starts
// a new one (a new process: its own chunk endpoint). The retried round streams again as
// attempt 2 from sequence 0, the conversation gets exactly one agent turn, with the
// retry's text, and the draft the first attempt streamed is nowhere in the history.
func TestStreamSurvivesWorkerRestartE2E(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	var st *stack.Stack
	var runID atomic.Value
	fake := &fakemodel.Server{
		Delay: 2 * time.Millisecond,
		Answer: func(call fakemodel.Call) fakemodel.Reply {
			if call.N == 0 {
				return fakemodel.Reply{Text: "XYZZY draft that the first attempt never finishes writing."}
			}
			return fakemodel.Reply{Text: "The answer, written whole by the second attempt."}
		},
		// The first attempt stops after three pieces, until the test lets it hang up. The
		// retry writes once the API reads the new worker's chunks: a real model takes
		// seconds to answer, this one would be done before the API has found the worker.
		Before: func(call, piece int) bool {
			switch {
			case call == 0 && piece == 3:
				<-release
				return false
			case call == 1 && piece == 0:
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					if id, _ := runID.Load().(string); id != "" && st.Chunks().Readers(id) > 0 {
						break
					}
				}
			}
			return true
		},
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	key := randomHex(16)
	opts := harnessOptions("", key)
	opts.Worker.PacksDir = streamPacksDir
	opts.Worker.ShutdownTimeout = 200 * time.Millisecond
	opts.Worker.Providers = map[string]activities.Provider{
		activities.DefaultProviderKey: &activities.MockProvider{},
		"fake-openai":                 activities.NewOpenAIProvider("sk-fake-key-0123456789", "gpt-fake", srv.URL+"/v1"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var err error
	st, err = stack.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(st.Stop)
	c := newAPIClient(t, st, key)

	id := createRun(t, c, "stream-openai", nil)
	runID.Store(id)
	last := waitOpen(t, c, id)
	s := openStream(t, c, "/v1/runs/"+id+"/events?streamMode=messages,debug", lastEventID(last))
	firstURL := st.StreamURL()
	sayTo(t, c, id, "hello")

	// Three chunks of attempt 1, then the worker goes away mid-stream.
	evs := s.until(t, 30*time.Second, "three chunks", func(ev sseEvent) bool {
		return ev.Event == protocol.EvMessageChunk && chunkOf(t, ev).Seq == 2
	})
	st.StopWorker()
	free()
	require.NoError(t, st.StartWorker())
	require.NotEqual(t, firstURL, st.StreamURL(), "the new worker serves chunks on an endpoint of its own")

	evs = append(evs, s.until(t, 60*time.Second, "the agent's turn", agentTurnEvent)...)
	turn := turnOf(t, evs[len(evs)-1])
	byAttempt := map[int][]chunkPayload{}
	for _, ch := range chunksIn(t, evs) {
		byAttempt[ch.Attempt] = append(byAttempt[ch.Attempt], ch)
	}
	first := byAttempt[1]
	require.GreaterOrEqual(t, len(first), 3)
	for i, ch := range first[:3] {
		assert.Equal(t, i, ch.Seq)
		assert.False(t, ch.IsLast)
	}
	if n := len(first); n > 3 {
		assert.True(t, first[n-1].IsLast && first[n-1].Aborted, "the interrupted attempt ends aborted, if its end was heard at all")
	}
	second := byAttempt[2]
	require.NotEmpty(t, second, "the retried round streamed again; got %s", frameNames(evs))
	assert.Equal(t, 0, second[0].Seq, "a new sequence")
	assert.Equal(t, "The answer, written whole by the second attempt.", requireOneStream(t, second))
	assert.Equal(t, "The answer, written whole by the second attempt.", textOf(t, turn))
	assert.Equal(t, first[0].Round, second[0].Round)
	assert.Equal(t, first[0].MessageID, second[0].MessageID)

	// One durable agent turn; the draft reached no durable record.
	var agentTurns int
	for _, tn := range turnsIn(t, events(t, c, id)) {
		if tn.Role == protocol.RoleAgent {
			agentTurns++
		}
	}
	assert.Equal(t, 1, agentTurns)
	history := historyText(ctx, t, st, id)
	assert.Contains(t, history, "written whole by the second attempt")
	assert.NotContains(t, history, "XYZZY", "what the first attempt streamed is not in the history")
}

// TestStreamToTwoAPIsE2E: two API processes on the same Temporal serve messages streams
// of one run; each finds the worker through Temporal and gets the whole reply.
func TestStreamToTwoAPIsE2E(t *testing.T) {
	c := startStreamStack(t)
	secret := c.Stack.Options().API.StreamSecret
	require.NotEmpty(t, secret)
	srv, err := api.New(api.Config{
		Keys:         []api.Key{{ID: "second", Secret: c.Key, Tenant: "default", Scopes: api.AllScopes}},
		TokenSecret:  []byte(randomHex(16)),
		StreamSecret: secret,
	}, c.Stack.Client(), c.Stack.Catalog(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	c2 := &apiClient{t: t, BaseURL: ts.URL, Key: c.Key, Stack: c.Stack, http: &http.Client{Timeout: 30 * time.Second}}

	id := createRun(t, c, "stream-anthropic", nil)
	last := waitOpen(t, c, id)
	one := openStream(t, c, "/v1/runs/"+id+"/events?streamMode=messages,debug", lastEventID(last))
	two := openStream(t, c2, "/v1/runs/"+id+"/events?streamMode=messages,debug", lastEventID(last))
	sayTo(t, c2, id, "what is my balance?")
	for name, s := range map[string]*sseStream{"first API": one, "second API": two} {
		evs := s.until(t, 30*time.Second, "the agent's turn on the "+name, agentTurnEvent)
		assert.Equal(t, streamReply, requireOneStream(t, chunksIn(t, evs)), "the %s streamed the whole reply", name)
	}
}

// TestStreamScriptedMockE2E: the scripted mock streams its replies a word at a time,
// every round of the conversation.
func TestStreamScriptedMockE2E(t *testing.T) {
	c := startStreamStack(t)
	id := createRun(t, c, "stream-mock", nil)
	last := waitOpen(t, c, id)
	s := openStream(t, c, "/v1/runs/"+id+"/events?streamMode=messages,debug", lastEventID(last))
	for _, turn := range []struct{ say, reply string }{
		{"hello", "Hello! I stream my replies one word at a time, as a model writes them."},
		{"again please", "Once more, word by word, and then the turn is recorded."},
	} {
		sayTo(t, c, id, turn.say)
		evs := s.until(t, 30*time.Second, "the agent's turn", agentTurnEvent)
		cs := chunksIn(t, evs)
		assert.Equal(t, turn.reply, requireOneStream(t, cs), "reply to %q", turn.say)
		assert.Equal(t, turn.reply, textOf(t, turnOf(t, evs[len(evs)-1])))
		assert.Equal(t, activities.MockModel, cs[len(cs)-1].Meta.Model)
	}
}

// TestStreamBufferMsE2E: ?bufferMs= out of 0..5000 is a 400 naming the field; within
// it, a stream's frames come as `event: batch` frames, arrays of the events gathered
// whose id is their highest durable sequence, with the chunks before the agent's turn.
func TestStreamBufferMsE2E(t *testing.T) {
	t.Parallel()
	c := startStreamStack(t)
	id := createRun(t, c, "stream-openai", nil)
	last := waitOpen(t, c, id)
	for _, bad := range []string{"5001", "-1", "x"} {
		status, _, body := c.do(http.MethodGet, "/v1/runs/"+id+"/events?streamMode=messages&bufferMs="+bad, nil)
		assert.Equal(t, http.StatusBadRequest, status, bad)
		details, _ := body["details"].(map[string]any)
		assert.Equal(t, "bufferMs", details["field"], "bufferMs=%s: %v", bad, body)
	}

	s := openStream(t, c, "/v1/runs/"+id+"/events?streamMode=messages,debug&bufferMs=300", lastEventID(last))
	require.Equal(t, http.StatusOK, s.Status)
	sayTo(t, c, id, "what is my balance?")
	var evs []sseEvent // the events inside the batches, in order
	s.until(t, 30*time.Second, "the batch with the agent's turn", func(b sseEvent) bool {
		require.Equal(t, "batch", b.Event, "with bufferMs every frame is a batch")
		var docs []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(b.Data), &docs))
		require.NotEmpty(t, docs)
		maxSeq := int64(-1)
		for _, d := range docs {
			var head struct {
				Type     string `json:"type"`
				Sequence int64  `json:"sequence"`
			}
			require.NoError(t, json.Unmarshal(d, &head))
			ev := sseEvent{Event: head.Type, Data: string(d)}
			if head.Type != protocol.EvMessageChunk {
				ev.ID = jsonNumber(head.Sequence)
				maxSeq = max(maxSeq, head.Sequence)
			}
			evs = append(evs, ev)
		}
		if maxSeq >= 0 {
			assert.Equal(t, jsonNumber(maxSeq), b.ID, "a batch's id is its highest durable sequence")
		} else {
			assert.Empty(t, b.ID, "a batch of chunks alone has no id")
		}
		seenTurn := false
		for _, ev := range evs {
			seenTurn = seenTurn || agentTurnEvent(ev)
		}
		return seenTurn
	})
	var cs []chunkPayload
	turnAt := -1
	for i, ev := range evs {
		if ev.Event == protocol.EvMessageChunk {
			cs = append(cs, chunkOf(t, ev))
		}
		if agentTurnEvent(ev) {
			turnAt = i
			break
		}
	}
	require.Positive(t, turnAt)
	assert.Equal(t, streamReply, requireOneStream(t, cs), "the chunks, batched, still come whole and before the turn")
	assert.Equal(t, streamReply, textOf(t, turnOf(t, evs[turnAt])))
}

// writeLog is an io.Writer that keeps each write apart.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *writeLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.writes, "")
}

// TestChatPrintsTheReplyAsItStreamsE2E: wop chat, on the real API, writes a streamed
// reply piece by piece as its chunks come, and prints it once: the turn that repeats it
// is not printed again.
func TestChatPrintsTheReplyAsItStreamsE2E(t *testing.T) {
	t.Parallel()
	c := startStreamStack(t)
	id := createRun(t, c, "stream-openai", nil)
	waitOpen(t, c, id)
	env := map[string]string{chat.EnvAPIURL: c.BaseURL, chat.EnvAPIKey: c.Key}
	var out, errOut writeLog
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := chat.RunEnv(ctx, []string{id}, func(k string) string { return env[k] },
		strings.NewReader("what is my balance?\n"), &out, &errOut)
	require.Equal(t, chat.ExitOK, code, "stderr: %s", errOut.String())
	text := out.String()
	line := "stream-openai: " + streamReply + "\n"
	assert.Equal(t, 1, strings.Count(text, streamReply), "the reply is printed once: %q", text)
	assert.Contains(t, text, line)
	// The line was written in pieces, as the chunks came.
	out.mu.Lock()
	pieces := 0
	for _, w := range out.writes {
		if w != "" && strings.Contains(streamReply, w) && len(w) < len(streamReply)/2 {
			pieces++
		}
	}
	out.mu.Unlock()
	assert.Greater(t, pieces, 5, "the reply was written word by word: %q", out.writes)
}
