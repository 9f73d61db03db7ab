package chunks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func round(run string, r, attempt int) Round {
	return Round{RunID: run, NodeID: "agent", State: "chat", Round: r, Attempt: attempt, MessageID: "c:2:agent"}
}

// collect follows a run on the hub in the background and returns what it got.
type collected struct {
	mu     sync.Mutex
	chunks []Chunk
	err    error
	done   chan struct{}
}

func follow(h *Hub, run string, wait time.Duration) *collected {
	c := &collected{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = h.Follow(context.Background(), run, wait, func(ch Chunk) error {
			c.mu.Lock()
			c.chunks = append(c.chunks, ch)
			c.mu.Unlock()
			return nil
		}, nil)
	}()
	for h.Readers(run) == 0 {
		time.Sleep(time.Millisecond) // attached before the test publishes
	}
	return c
}

func (c *collected) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ch := range c.chunks {
		out = append(out, ch.Text)
	}
	return out
}

func TestHubStreamsInOrderFromTheStart(t *testing.T) {
	h := NewHub()
	p := h.Begin(round("r1", 3, 1))
	p.Text("Hel")
	// A reader that arrives mid-round gets the stream from its first chunk.
	c := follow(h, "r1", time.Second)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Equal(ct, []string{"Hel"}, c.texts()) }, 5*time.Second, 5*time.Millisecond)
	p.Text("lo")
	p.Text("") // nothing
	p.End(Final{FinishReason: "stop", Model: "m1", Usage: Usage{InputTokens: 3, OutputTokens: 2}})
	p.Text("late") // after the end: dropped
	<-c.done
	require.NoError(t, c.err)
	require.Len(t, c.chunks, 3)
	for i, ch := range c.chunks {
		assert.Equal(t, i, ch.Seq)
		assert.Equal(t, "r1", ch.RunID)
		assert.Equal(t, 3, ch.Round.Round)
		assert.Equal(t, 1, ch.Attempt)
		assert.Equal(t, "c:2:agent", ch.MessageID)
	}
	last := c.chunks[2]
	assert.True(t, last.Last)
	assert.Equal(t, "stop", last.FinishReason)
	assert.Equal(t, "m1", last.Model)
	assert.Equal(t, &Usage{InputTokens: 3, OutputTokens: 2}, last.Usage)
	assert.False(t, c.chunks[0].Last)
}

func TestHubAbortAndRetryAreTwoStreams(t *testing.T) {
	h := NewHub()
	c := follow(h, "r1", 5*time.Second)
	p1 := h.Begin(round("r1", 0, 1))
	p1.Text("partial")
	p2 := h.Begin(round("r1", 0, 2)) // the retry began before the reader saw the abort
	p1.Abort("ModelUnavailable")
	p2.Text("whole")
	p2.End(Final{FinishReason: "stop"})
	<-c.done
	require.NoError(t, c.err)
	var a1, a2 []Chunk
	for _, ch := range c.chunks {
		switch ch.Attempt {
		case 1:
			a1 = append(a1, ch)
		case 2:
			a2 = append(a2, ch)
		}
	}
	require.Len(t, a1, 2)
	assert.True(t, a1[1].Last && a1[1].Aborted)
	assert.Equal(t, "ModelUnavailable", a1[1].Error)
	require.Len(t, a2, 2)
	assert.Equal(t, 0, a2[0].Seq, "a retry starts a new sequence")
	assert.Equal(t, "whole", a2[0].Text)
}

func TestHubWaitsForARoundAndGivesUp(t *testing.T) {
	h := NewHub()
	err := h.Follow(context.Background(), "nobody", 30*time.Millisecond, func(Chunk) error { return nil }, nil)
	require.ErrorIs(t, err, ErrNoRound)

	// A reader waiting for a round gets it when it begins.
	c := follow(h, "r2", 5*time.Second)
	time.Sleep(10 * time.Millisecond)
	p := h.Begin(round("r2", 1, 1))
	p.Text("x")
	p.End(Final{})
	<-c.done
	require.NoError(t, c.err)
	assert.Equal(t, []string{"x", ""}, c.texts())
}

func TestHubRetainsEndedStreamsBriefly(t *testing.T) {
	h := &Hub{Retain: 50 * time.Millisecond}
	p := h.Begin(round("r3", 0, 1))
	p.Text("quick")
	p.End(Final{})
	// A reader a moment late still gets the whole round (and, with no round in flight,
	// waits for one up to its wait).
	var got []string
	require.NoError(t, h.Follow(context.Background(), "r3", 10*time.Millisecond, func(c Chunk) error {
		got = append(got, c.Text)
		return nil
	}, nil))
	assert.Equal(t, []string{"quick", ""}, got)
	// After Retain it is gone, and so is the run's entry.
	require.Eventually(t, func() bool { return h.Runs() == 0 }, 5*time.Second, 5*time.Millisecond)
	err := h.Follow(context.Background(), "r3", 20*time.Millisecond, func(Chunk) error { return nil }, nil)
	require.ErrorIs(t, err, ErrNoRound)
}

// TestHubRetainedThenRetried: a reader that finds only the ended stream of a failed
// attempt gets it, then waits for the retry and follows it to its end.
func TestHubRetainedThenRetried(t *testing.T) {
	h := NewHub()
	p1 := h.Begin(round("r5", 0, 1))
	p1.Text("draft")
	p1.Abort("ModelUnavailable")
	c := follow(h, "r5", 5*time.Second)
	p2 := h.Begin(round("r5", 0, 2))
	p2.Text("final")
	p2.End(Final{})
	<-c.done
	require.NoError(t, c.err)
	assert.Equal(t, []string{"draft", "", "final", ""}, c.texts())
}

func TestHubBoundsAStream(t *testing.T) {
	h := &Hub{MaxStreamBytes: 1000}
	p := h.Begin(round("r4", 0, 1))
	for range 50 {
		p.Text(strings.Repeat("x", 100))
	}
	p.End(Final{})
	var got []Chunk
	require.NoError(t, h.Follow(context.Background(), "r4", 20*time.Millisecond, func(c Chunk) error { got = append(got, c); return nil }, nil))
	require.Less(t, len(got), 10)
	last := got[len(got)-1]
	assert.True(t, last.Last && last.Truncated)
	for i, c := range got {
		assert.Equal(t, i, c.Seq, "sequences stay without gaps")
	}
}

func TestNilHubAndPublisher(t *testing.T) {
	var h *Hub
	p := h.Begin(round("r", 0, 1))
	p.Text("x")
	p.End(Final{})
	p.Abort("x")
	assert.ErrorIs(t, h.Follow(context.Background(), "r", 0, nil, nil), ErrNoRound)
}

func TestTokens(t *testing.T) {
	_, err := NewKey([]byte("short"))
	require.Error(t, err)
	k, err := NewKey([]byte("0123456789abcdef-secret"))
	require.NoError(t, err)
	other, err := NewKey([]byte("another secret of enough bytes"))
	require.NoError(t, err)
	now := time.Now()
	tok := k.Token("run-1", "http://w1:7", now.Add(TokenTTL))
	require.NoError(t, k.Verify(tok, "run-1", "http://w1:7", now))
	assert.ErrorIs(t, k.Verify(tok, "run-2", "http://w1:7", now), ErrBadToken, "another run")
	assert.ErrorIs(t, k.Verify(tok, "run-1", "http://w2:7", now), ErrBadToken, "another worker")
	assert.ErrorIs(t, other.Verify(tok, "run-1", "http://w1:7", now), ErrBadToken, "another secret")
	assert.ErrorIs(t, k.Verify(tok, "run-1", "http://w1:7", now.Add(2*TokenTTL)), ErrExpiredToken)
	assert.ErrorIs(t, k.Verify(k.Token("run-1", "http://w1:7", now.Add(time.Hour)), "run-1", "http://w1:7", now), ErrBadToken, "too far ahead")
	assert.ErrorIs(t, k.Verify(tok[:len(tok)-2]+"AA", "run-1", "http://w1:7", now), ErrBadToken)
	assert.ErrorIs(t, k.Verify("v1.x.y", "run-1", "http://w1:7", now), ErrBadToken)
	assert.ErrorIs(t, Key{}.Verify(tok, "run-1", "http://w1:7", now), ErrBadToken)
}

func TestIdentity(t *testing.T) {
	id := Identity("http://10.0.0.5:7244")
	assert.Equal(t, "http://10.0.0.5:7244", EndpointOf(id))
	assert.Contains(t, id, "@")
	assert.Equal(t, "", EndpointOf("123@host@"))
	assert.Equal(t, "", EndpointOf("123@host@ chunks=file:///etc/passwd"))
}

// serveHub starts the chunk endpoint of a hub; its URL is the endpoint tokens name.
func serveHub(t *testing.T, h *Hub, key Key) string {
	t.Helper()
	var url string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Handler(h, key, url, nil).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url = srv.URL
	return url
}

func TestEndpointServesOneRunToItsTokenOnly(t *testing.T) {
	key, err := NewKey([]byte("the shared stream secret"))
	require.NoError(t, err)
	h := NewHub()
	ep := serveHub(t, h, key)
	ctx := context.Background()

	mine := h.Begin(round("mine", 1, 1))
	theirs := h.Begin(round("theirs", 1, 1))
	mine.Text("for me")
	theirs.Text("secret of another tenant")

	var got []Chunk
	done := make(chan error, 1)
	go func() {
		found, err := (&Client{Key: key}).Follow(ctx, ep, "mine", time.Second, func(c Chunk) { got = append(got, c) })
		if err == nil && !found {
			err = ErrNoRound
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	mine.Text(" too")
	mine.End(Final{FinishReason: "stop"})
	require.NoError(t, <-done)
	require.Len(t, got, 3)
	for _, c := range got {
		assert.Equal(t, "mine", c.RunID)
		assert.NotContains(t, c.Text, "secret")
	}
	assert.Equal(t, "for me", got[0].Text)
	assert.Equal(t, " too", got[1].Text)
	assert.True(t, got[2].Last)

	// No round of the run: 204, found = false.
	found, err := (&Client{Key: key}).Follow(ctx, ep, "idle", 20*time.Millisecond, func(Chunk) { t.Error("a chunk of an idle run") })
	require.NoError(t, err)
	assert.False(t, found)

	// A token of another secret, of another run, or none: 401.
	wrong, _ := NewKey([]byte("not the shared stream secret"))
	_, err = (&Client{Key: wrong}).Follow(ctx, ep, "theirs", 20*time.Millisecond, func(Chunk) { t.Error("a chunk with a wrong key") })
	require.ErrorContains(t, err, "401")
	req, _ := http.NewRequest(http.MethodGet, ep+"/v1/runs/theirs/chunks", nil)
	req.Header.Set("Authorization", "Bearer "+key.Token("mine", ep, time.Now().Add(TokenTTL)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a token for one run does not open another")
	resp, err = http.Get(ep + "/v1/runs/theirs/chunks")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	theirs.End(Final{})
}
