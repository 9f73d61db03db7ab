package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/fakemodel"
	"github.com/wop-dev/wop/protocol"
)

// StreamPackID is the pack of the stream workload: its model is the logical provider
// StreamProvider, a fake OpenAI server that streams with a fixed delay per piece.
const StreamPackID = "bench-stream"

// StreamProvider is the logical provider key of the stream workload's fake model.
const StreamProvider = "bench-stream"

// streamReply is what the fake provider streams, a word (one piece) at a time.
const streamReply = "Your order left the warehouse this morning and should reach you on Thursday before noon."

// streamModel is the fake OpenAI server of the stream workload and the first-piece
// delays it measured of each call: from the request's arrival to its first text piece
// written, the provider's own time to first chunk.
type streamModel struct {
	srv    *httptest.Server
	mu     sync.Mutex
	firsts map[int]time.Duration // by call number
}

// startStreamModel serves a fake OpenAI model that streams streamReply with delay
// before each piece.
func startStreamModel(delay time.Duration) *streamModel {
	m := &streamModel{firsts: map[int]time.Duration{}}
	fake := &fakemodel.Server{
		Delay:  delay,
		Answer: func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Text: streamReply, Model: "bench-fake"} },
		FirstPiece: func(call int, received, sent time.Time) {
			m.mu.Lock()
			m.firsts[call] = sent.Sub(received)
			m.mu.Unlock()
		},
	}
	m.srv = httptest.NewServer(fake)
	return m
}

// provider is the activities provider that calls the fake model.
func (m *streamModel) provider() activities.Provider {
	return activities.NewOpenAIProvider("sk-bench-0123456789abcdef", "bench-fake", m.srv.URL+"/v1")
}

// firstPieces returns the first-piece delays of the calls from call number from on.
func (m *streamModel) firstPieces(from int) []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []time.Duration
	for n, d := range m.firsts {
		if n >= from {
			out = append(out, d)
		}
	}
	return out
}

func (m *streamModel) close() { m.srv.Close() }

// stream measures the time to first chunk: a client keeps one SSE stream of the run
// open in streamMode=messages (with debug, for the durable events) and sends a turn;
// the figure is the time from the start of the POST to the first ai.message.chunk
// frame read, against the fake provider's own time to its first piece.
func (b *bench) stream(ctx context.Context, res *Result) error {
	c, err := b.openConvOf(ctx, StreamPackID)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := openSSE(sctx, b.api, "/v1/runs/"+c.runID+"/events?streamMode=messages,debug", c.lastSeq)
	if err != nil {
		return err
	}
	calls := 0 // model calls before the timed turns
	var firsts, replies []time.Duration
	for i := 0; i < b.opts.Warmup+b.opts.StreamSamples; i++ {
		if i == b.opts.Warmup {
			calls = len(b.streamModel.firstPieces(0))
		}
		first, whole, err := streamTurn(ctx, c, s)
		if err != nil {
			return err
		}
		if i >= b.opts.Warmup {
			firsts, replies = append(firsts, first), append(replies, whole)
		}
	}
	res.FirstChunkP50Ms, res.FirstChunkP99Ms = percentile(firsts, 50), percentile(firsts, 99)
	res.StreamedReplyP50Ms = percentile(replies, 50)
	res.ProviderFirstChunkP50Ms = percentile(b.streamModel.firstPieces(calls), 50)
	return nil
}

// streamTurn sends one turn and reads the stream until the agent's reply: it returns
// the time to the first chunk and to the durable reply event.
func streamTurn(ctx context.Context, c *conv, s *sseReader) (first, whole time.Duration, err error) {
	tctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	start, err := c.send(tctx)
	if err != nil {
		return 0, 0, err
	}
	for {
		f, err := s.next(tctx)
		if err != nil {
			return 0, 0, fmt.Errorf("run %s turn %d: read the event stream: %w", c.runID, c.turns, err)
		}
		if f.event == protocol.EvMessageChunk {
			if first == 0 {
				first = time.Since(start)
			}
			continue
		}
		if f.id == "" {
			continue
		}
		var e event
		if err := json.Unmarshal([]byte(f.data), &e); err != nil {
			return 0, 0, fmt.Errorf("run %s: event %s: %w", c.runID, f.id, err)
		}
		c.lastSeq = max(c.lastSeq, e.Sequence)
		if isAgentReply(e) {
			if first == 0 {
				return 0, 0, fmt.Errorf("run %s turn %d: the reply came without a chunk before it", c.runID, c.turns)
			}
			return first, time.Since(start), nil
		}
	}
}

// sseFrame is one frame of an SSE stream (id is empty for a frame without an id line).
type sseFrame struct {
	id, event, data string
}

// sseReader reads an SSE response on a goroutine of its own.
type sseReader struct {
	frames chan sseFrame // closed when the stream ends
	err    error         // why it ended, once frames is closed
}

// openSSE opens GET path as an event stream after the cursor (none when < 0), and
// returns once the API has answered: from then on the stream misses nothing.
func openSSE(ctx context.Context, a *apiClient, path string, after int64) (*sseReader, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build GET %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Accept", "text/event-stream")
	if after >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	// A stream outlives the client's request timeout.
	resp, err := (&http.Client{Transport: a.http.Transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	r := &sseReader{frames: make(chan sseFrame, 1024)}
	go func() {
		defer close(r.frames)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		var cur sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur != (sseFrame{}) {
					select {
					case r.frames <- cur:
					case <-ctx.Done():
						return
					}
				}
				cur = sseFrame{}
			case strings.HasPrefix(line, "id: "):
				cur.id = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				cur.event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				cur.data = line[len("data: "):]
			}
		}
		r.err = sc.Err()
	}()
	return r, nil
}

// next returns the stream's next frame.
func (r *sseReader) next(ctx context.Context) (sseFrame, error) {
	select {
	case f, ok := <-r.frames:
		if !ok {
			if r.err != nil {
				return sseFrame{}, r.err
			}
			return sseFrame{}, fmt.Errorf("the stream ended")
		}
		return f, nil
	case <-ctx.Done():
		return sseFrame{}, ctx.Err()
	}
}
