package activities

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/fakemodel"
	"github.com/wop-dev/wop/packs"
)

// pieces records what a provider streamed to a request.
type pieces struct {
	mu  sync.Mutex
	got []string
}

func (p *pieces) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, s)
}

func (p *pieces) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

func streamingRequest(p *pieces) *Request {
	return &Request{Input: convo.ModelRoundInput{Round: 2}, Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}, Stream: p.add}
}

// TestProvidersStreamTheReplyTheyReturn: each provider passes the reply to Stream
// piece by piece as its server streams it, and the pieces add up to the result's text;
// the result is the one the whole answer gives (tool calls, usage, finish reason).
func TestProvidersStreamTheReplyTheyReturn(t *testing.T) {
	reply := fakemodel.Reply{Text: "The balance of ACC-1 is 120 EUR.", Model: "m-1", InputTokens: 30, OutputTokens: 9,
		ToolCalls: []fakemodel.ToolCall{{ID: "call_9", Name: "get_balance", Arguments: `{"account_id":"ACC-1"}`}}}
	fake := &fakemodel.Server{Answer: func(fakemodel.Call) fakemodel.Reply { return reply }}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, p := range []Provider{
		NewOpenAIProvider(testOpenAIKey, "gpt-test", srv.URL+"/v1"),
		NewOpenAICompatibleProvider("", "llama", srv.URL+"/v1"),
		NewAnthropicProvider(testAnthropicKey, "claude-test", srv.URL),
	} {
		t.Run(p.Name(), func(t *testing.T) {
			var got pieces
			res, err := p.Complete(context.Background(), streamingRequest(&got))
			require.NoError(t, err)
			assert.Equal(t, convo.Pieces(reply.Text), got.all(), "one piece per streamed delta, in order")
			assert.Equal(t, reply.Text, strings.Join(got.all(), ""))
			assert.Equal(t, reply.Text, res.Text)
			assert.Equal(t, "m-1", res.Model)
			assert.Equal(t, convo.Usage{InputTokens: 30, OutputTokens: 9}, res.Usage)
			require.Len(t, res.ToolCalls, 1)
			assert.Equal(t, "call_9", res.ToolCalls[0].ID)
			assert.Equal(t, "get_balance", res.ToolCalls[0].Name)
			assert.JSONEq(t, `{"account_id":"ACC-1"}`, string(res.ToolCalls[0].Args))
			assert.Contains(t, []string{"tool_calls", "tool_use"}, res.FinishReason)
		})
	}
	for _, c := range fake.Calls() {
		assert.True(t, c.Stream, "every call asked for a stream")
	}
}

// TestAnthropicStreamsBlocksAsJoined: text blocks after the first stream after the blank
// line the result joins them with.
func TestAnthropicStreamsBlocksAsJoined(t *testing.T) {
	ws := newWireServer(t, wireResponse{status: 200, body: anthropicBody(
		`[{"type":"text","text":"Hello"},{"type":"text","text":""},{"type":"text","text":"there, you."}]`, "end_turn")})
	var got pieces
	res, err := NewAnthropicProvider(testAnthropicKey, "claude-test", ws.URL).Complete(context.Background(), streamingRequest(&got))
	require.NoError(t, err)
	assert.Equal(t, []string{"Hello", "\n\n", "there,", " you."}, got.all())
	assert.Equal(t, res.Text, strings.Join(got.all(), ""))
}

// TestOpenAIStreamsARefusal: a refusal without content is the reply's text, and streams
// as such.
func TestOpenAIStreamsARefusal(t *testing.T) {
	ws := newWireServer(t, wireResponse{status: 200, body: `{"id":"c","object":"chat.completion","created":1,"model":"m",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,"refusal":"I cannot help with that."}}]}`})
	var got pieces
	res, err := NewOpenAIProvider(testOpenAIKey, "gpt-test", ws.URL+"/v1").Complete(context.Background(), streamingRequest(&got))
	require.NoError(t, err)
	assert.Equal(t, "I cannot help with that.", res.Text)
	assert.Equal(t, res.Text, strings.Join(got.all(), ""))
}

// TestOpenAICompatibleServerThatDoesNotStream: a server that ignores stream: true and
// answers with the whole completion as JSON still gives the round its reply, passed on in
// one piece; a body that is not a completion fails the round as a malformed response.
func TestOpenAICompatibleServerThatDoesNotStream(t *testing.T) {
	plain := openAIText("hi from a server that does not stream")
	plain.header = map[string]string{"Content-Type": "application/json; charset=utf-8"}
	ws := newWireServer(t, plain, wireResponse{status: 200, header: map[string]string{"Content-Type": "application/json"}, body: `not json`})
	p := NewOpenAICompatibleProvider("", "llama3.2", ws.URL+"/v1")

	var got pieces
	res, err := p.Complete(context.Background(), streamingRequest(&got))
	require.NoError(t, err)
	assert.Equal(t, "hi from a server that does not stream", res.Text)
	assert.Equal(t, []string{res.Text}, got.all(), "the reply is passed on whole")
	assert.Equal(t, 17, res.Usage.InputTokens+res.Usage.OutputTokens)
	reqs := ws.got()
	require.Len(t, reqs, 1, "the answer is read, not asked for again")
	assert.Equal(t, true, reqs[0].Body["stream"])

	_, err = p.Complete(context.Background(), streamingRequest(&pieces{}))
	requireAppError(t, err, ErrTypeBadResponse, true)
}

// TestBrokenStreamIsRetryable: a stream that breaks off mid-reply fails the attempt
// with a retryable error; what was streamed before the break had been passed on.
func TestBrokenStreamIsRetryable(t *testing.T) {
	fake := &fakemodel.Server{
		Answer: func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Text: "one two three four"} },
		Before: func(_, piece int) bool { return piece < 2 },
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, p := range []Provider{
		NewOpenAIProvider(testOpenAIKey, "gpt-test", srv.URL+"/v1"),
		NewAnthropicProvider(testAnthropicKey, "claude-test", srv.URL),
	} {
		t.Run(p.Name(), func(t *testing.T) {
			var got pieces
			_, err := p.Complete(context.Background(), streamingRequest(&got))
			requireAppError(t, err, ErrTypeUnavailable, false)
			assert.Equal(t, []string{"one", " two"}, got.all())
		})
	}
}

// TestMockStreamsWordByWord: the scripted mock streams its reply a word at a time,
// ChunkDelay before each, and stops when its context ends.
func TestMockStreamsWordByWord(t *testing.T) {
	scripts := map[string]*packs.MockScript{"p": {Rounds: []packs.MockRound{{Text: "Your balance is 120 EUR."}}}}
	m := &MockProvider{Scripts: scripts, ChunkDelay: 5 * time.Millisecond}
	var got pieces
	req := &Request{Input: convo.ModelRoundInput{PackID: "p", State: "s"}, Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}, Stream: got.add}
	start := time.Now()
	res, err := m.Complete(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{"Your", " balance", " is", " 120", " EUR."}, got.all())
	assert.Equal(t, res.Text, strings.Join(got.all(), ""))
	assert.GreaterOrEqual(t, time.Since(start), 25*time.Millisecond, "five words, 5 ms before each")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = (&MockProvider{Scripts: scripts, ChunkDelay: time.Hour}).Complete(ctx, &Request{
		Input: convo.ModelRoundInput{PackID: "p", State: "s"}, Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}, Stream: func(string) {}})
	require.ErrorIs(t, err, context.Canceled)
}

// readHub reads a run's chunks from a hub until its rounds end.
func readHub(t *testing.T, h *chunks.Hub, run string) []chunks.Chunk {
	t.Helper()
	var out []chunks.Chunk
	require.NoError(t, h.Follow(context.Background(), run, time.Second, func(c chunks.Chunk) error {
		out = append(out, c)
		return nil
	}, nil))
	return out
}

// TestModelRoundPublishesChunks: the activity streams the round to the hub with the
// round, state, message and attempt; the last chunk carries the outcome, and a failed
// attempt ends its stream aborted.
func TestModelRoundPublishesChunks(t *testing.T) {
	hub := chunks.NewHub()
	src := &fakeTranscripts{msgs: map[string][]convo.Message{"agent": {{Role: convo.RoleUser, Text: "hi"}}}}
	scripts := map[string]*packs.MockScript{"p": {Rounds: []packs.MockRound{{Text: "Hello you."}}}}
	a, env := newTestActivities(t, Config{Transcripts: src, MockScripts: scripts, Chunks: hub})
	in := convo.ModelRoundInput{RunID: "run-7", PackID: "p", NodeID: "agent", State: "chat", Round: 0, MessageID: "conv:2:agent",
		Transcript: convo.TranscriptRef{RunID: "run-7", Key: "agent", From: 0, To: 1}}
	_, err := env.ExecuteActivity(a.ModelRound, in)
	require.NoError(t, err)
	got := readHub(t, hub, "run-7")
	require.Len(t, got, 3)
	assert.Equal(t, "Hello", got[0].Text)
	assert.Equal(t, " you.", got[1].Text)
	for i, c := range got {
		assert.Equal(t, chunks.Round{RunID: "run-7", NodeID: "agent", State: "chat", Round: 0, MessageID: "conv:2:agent",
			Speaker: "p", Attempt: 1, Provider: ProviderMock, Model: MockModel}, c.Round)
		assert.Equal(t, i, c.Seq)
	}
	assert.True(t, got[2].Last)
	assert.Equal(t, "stop", got[2].FinishReason)

	// A failed attempt: its stream ends aborted, with the error's type.
	scripts["p"].Rounds[0] = packs.MockRound{Error: "scripted"}
	in.RunID = "run-8"
	_, err = env.ExecuteActivity(a.ModelRound, in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	got = readHub(t, hub, "run-8")
	require.Len(t, got, 1)
	assert.True(t, got[0].Last && got[0].Aborted)
	assert.Equal(t, ErrTypeMockFailure, got[0].Error)
}
