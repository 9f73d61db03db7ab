package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

func TestParseBufferMs(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "250": 250 * time.Millisecond, "5000": 5 * time.Second} {
		got, err := parseBufferMs(v)
		require.NoError(t, err, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"-1", "5001", "1.5", "soon"} {
		_, err := parseBufferMs(v)
		var e *Error
		require.True(t, errors.As(err, &e), v)
		assert.Equal(t, http.StatusBadRequest, e.Status, v)
		assert.Equal(t, "bufferMs", e.Details["field"], v)
	}
}

// sseFrames splits an SSE body into its frames.
func sseFrames(body string) []string {
	var out []string
	for _, f := range strings.Split(body, "\n\n") {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// TestSSEWriterBatches: with a buffer, frames are gathered until the first has waited
// the buffer, or until an event that forces a flush; a batch's id is its highest durable
// sequence, and a batch of chunks alone has none.
func TestSSEWriterBatches(t *testing.T) {
	var buf bytes.Buffer
	flushes := 0
	sw := newSSEWriter(&buf, func() { flushes++ }, 100*time.Millisecond)
	due := make(chan time.Time, 1)
	sw.after = func(d time.Duration) <-chan time.Time {
		assert.Equal(t, 100*time.Millisecond, d)
		return due
	}
	ev := func(seq int64, typ string) workflows.Event {
		return workflows.Event{EventID: "e", RunID: "r", Type: typ, Sequence: seq}
	}
	require.NoError(t, sw.frame(3, "node.completed", ev(3, "node.completed")))
	require.NoError(t, sw.frame(-1, protocol.EvMessageChunk, ev(3, protocol.EvMessageChunk)))
	require.NoError(t, sw.frame(4, "conversation.exchanged", ev(4, "conversation.exchanged")))
	assert.Empty(t, buf.String(), "nothing is written before the buffer's time")
	require.NotNil(t, sw.due)

	// The first frame has waited the buffer: the stream loop writes the batch.
	due <- time.Now()
	<-sw.due
	require.NoError(t, sw.writeBatch())
	frames := sseFrames(buf.String())
	require.Len(t, frames, 1)
	assert.True(t, strings.HasPrefix(frames[0], "id: 4\nevent: batch\ndata: "), frames[0])
	var batch []workflows.Event
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(frames[0], "id: 4\nevent: batch\ndata: ")), &batch))
	require.Len(t, batch, 3)
	assert.Equal(t, []string{"node.completed", protocol.EvMessageChunk, "conversation.exchanged"}, []string{batch[0].Type, batch[1].Type, batch[2].Type})
	assert.Equal(t, 1, flushes)

	// Chunks alone: a batch without an id. A suspension flushes at once.
	buf.Reset()
	require.NoError(t, sw.frame(-1, protocol.EvMessageChunk, ev(4, protocol.EvMessageChunk)))
	assert.Empty(t, buf.String())
	require.NoError(t, sw.writeBatch())
	assert.True(t, strings.HasPrefix(buf.String(), "event: batch\ndata: ["), buf.String())
	buf.Reset()
	require.NoError(t, sw.frame(5, "agent.decided", ev(5, "agent.decided")))
	require.NoError(t, sw.frame(6, "node.suspended", ev(6, "node.suspended")))
	frames = sseFrames(buf.String())
	require.Len(t, frames, 1, "the suspension flushed the batch without waiting")
	assert.True(t, strings.HasPrefix(frames[0], "id: 6\nevent: batch\n"), frames[0])
	assert.Nil(t, sw.due)

	// A terminal event flushes too; an empty batch writes nothing.
	buf.Reset()
	require.NoError(t, sw.frame(7, "run.completed", ev(7, "run.completed")))
	assert.True(t, strings.HasPrefix(buf.String(), "id: 7\nevent: batch\n"), buf.String())
	buf.Reset()
	require.NoError(t, sw.writeBatch())
	assert.Empty(t, buf.String())
}

// TestSSEWriterWithoutBuffer: each frame goes out at once, a chunk without an id.
func TestSSEWriterWithoutBuffer(t *testing.T) {
	var buf bytes.Buffer
	sw := newSSEWriter(&buf, func() {}, 0)
	require.NoError(t, sw.frame(2, "node.completed", map[string]int{"sequence": 2}))
	require.NoError(t, sw.frame(-1, protocol.EvMessageChunk, map[string]int{"sequence": 2}))
	assert.Equal(t, "id: 2\nevent: node.completed\ndata: {\"sequence\":2}\n\nevent: ai.message.chunk\ndata: {\"sequence\":2}\n\n", buf.String())
}

// TestMessagesStateOrdersChunksAndTurns: a stream is "streaming" from a round's first
// chunk to its last; a retry supersedes the failed attempt; chunks of a round the log
// has decided are dropped.
func TestMessagesStateOrdersChunksAndTurns(t *testing.T) {
	m := newMessagesState("r1", 4)
	c := func(round, attempt, seq int, text string, last bool) chunks.Chunk {
		return chunks.Chunk{Round: chunks.Round{RunID: "r1", NodeID: "agent", Round: round, Attempt: attempt, MessageID: "m", Speaker: "support"},
			Seq: seq, Text: text, Last: last}
	}
	e, ok := m.chunkEvent(c(0, 1, 0, "Hel", false))
	require.True(t, ok)
	assert.True(t, m.streaming())
	assert.Equal(t, int64(4), e.Sequence, "a chunk carries the last durable sequence read")
	var p map[string]any
	require.NoError(t, json.Unmarshal(e.Payload, &p))
	assert.Equal(t, "Hel", p["chunk"])
	assert.Equal(t, "support", p["speakerId"])
	assert.Equal(t, "m", p["messageId"])

	_, ok = m.chunkEvent(c(0, 2, 0, "Hello", false)) // the retry
	require.True(t, ok)
	_, ok = m.chunkEvent(c(0, 2, 1, "", true))
	require.True(t, ok)
	assert.False(t, m.streaming(), "the retry's end ends the round; the failed attempt no longer holds events back")

	decided := workflows.Event{Type: "agent.decided", NodeID: "agent", Sequence: 9, Payload: json.RawMessage(`{"decision":{"round":0}}`)}
	m.sawDurable(&decided)
	_, ok = m.chunkEvent(c(0, 3, 0, "late", false))
	assert.False(t, ok, "a chunk of a round already in the log is dropped")
	e, ok = m.chunkEvent(c(1, 1, 0, "next", false))
	require.True(t, ok)
	assert.Equal(t, int64(9), e.Sequence)
}
