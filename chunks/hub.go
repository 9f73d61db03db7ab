package chunks

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Defaults of a Hub.
const (
	// DefaultRetain is how long a hub keeps a stream after it ended, for a reader that
	// arrives a moment late (the API finds the worker through Temporal, which takes a
	// few milliseconds; a scripted reply can be over by then).
	DefaultRetain = 3 * time.Second
	// DefaultMaxStreamBytes bounds the text one stream keeps; past it, text chunks are
	// left out (the last chunk says so) and the round's result still holds the reply.
	DefaultMaxStreamBytes = 4 << 20
	// maxRunStreams bounds the streams a run keeps at once (ended ones are dropped
	// first), should a run overlap rounds without end.
	maxRunStreams = 64
)

// ErrNoRound is returned by Follow when no round of the run was in flight, or started,
// within the wait.
var ErrNoRound = errors.New("no model round of the run is in flight on this worker")

// Hub holds the chunk streams of the model rounds running on a worker, by run. It is
// safe for concurrent use. A nil *Hub publishes nothing.
type Hub struct {
	// Retain is how long an ended stream stays readable (DefaultRetain when 0).
	Retain time.Duration
	// MaxStreamBytes bounds one stream's chunks (DefaultMaxStreamBytes when 0).
	MaxStreamBytes int
	// now is the clock (tests).
	now func() time.Time

	mu   sync.Mutex
	runs map[string]*runStreams
}

// runStreams are the streams of one run on this worker.
type runStreams struct {
	streams []*stream // in the order they began
	active  int       // streams not ended
	readers int
	changed chan struct{} // closed and replaced on every change
	nextID  int64
	timer   *time.Timer // removes the entry once its ended streams expire
}

// stream is one round attempt's chunks.
type stream struct {
	id      int64
	chunks  []Chunk
	bytes   int
	ended   bool
	endedAt time.Time
	dropped bool // text chunks were left out (MaxStreamBytes)
}

// NewHub returns an empty hub with the default bounds.
func NewHub() *Hub { return &Hub{} }

func (h *Hub) retain() time.Duration {
	if h.Retain > 0 {
		return h.Retain
	}
	return DefaultRetain
}

func (h *Hub) maxBytes() int {
	if h.MaxStreamBytes > 0 {
		return h.MaxStreamBytes
	}
	return DefaultMaxStreamBytes
}

func (h *Hub) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// entryLocked returns the run's entry, creating it (h.mu held).
func (h *Hub) entryLocked(runID string) *runStreams {
	if h.runs == nil {
		h.runs = map[string]*runStreams{}
	}
	rs := h.runs[runID]
	if rs == nil {
		rs = &runStreams{changed: make(chan struct{})}
		h.runs[runID] = rs
	}
	return rs
}

func (rs *runStreams) broadcast() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// Publisher publishes one round attempt's chunks. Its methods do nothing on a nil
// *Publisher, and nothing after End or Abort.
type Publisher struct {
	h     *Hub
	round Round
	s     *stream
}

// Begin opens the stream of one round attempt.
func (h *Hub) Begin(r Round) *Publisher {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rs := h.entryLocked(r.RunID)
	rs.nextID++
	s := &stream{id: rs.nextID}
	rs.streams = append(rs.streams, s)
	rs.active++
	if len(rs.streams) > maxRunStreams {
		for i, old := range rs.streams {
			if old.ended {
				rs.streams = append(rs.streams[:i], rs.streams[i+1:]...)
				break
			}
		}
	}
	if rs.timer != nil {
		rs.timer.Stop()
		rs.timer = nil
	}
	rs.broadcast()
	return &Publisher{h: h, round: r, s: s}
}

// Text publishes a piece of the reply. Empty text is not published.
func (p *Publisher) Text(text string) {
	if p == nil || text == "" {
		return
	}
	p.append(Chunk{Text: text})
}

// End closes the stream of a round that succeeded: its last chunk carries f.
func (p *Publisher) End(f Final) {
	if p == nil {
		return
	}
	c := Chunk{Last: true, FinishReason: f.FinishReason, ToolCalls: f.ToolCalls}
	if f.Usage != (Usage{}) {
		u := f.Usage
		c.Usage = &u
	}
	if f.Model != "" {
		c.Model = f.Model
	}
	p.append(c)
}

// Abort closes the stream of an attempt that failed; errType names the failure. The
// text published so far is void: a retry opens a new stream.
func (p *Publisher) Abort(errType string) {
	if p == nil {
		return
	}
	p.append(Chunk{Last: true, Aborted: true, Error: errType})
}

func (p *Publisher) append(c Chunk) {
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	s := p.s
	if s.ended {
		return
	}
	round := p.round
	if c.Model != "" {
		round.Model = c.Model
	}
	c.Round = round
	c.Seq = len(s.chunks)
	if !c.Last && s.bytes+c.size() > h.maxBytes() {
		s.dropped = true
		return
	}
	if c.Last {
		c.Truncated = s.dropped
		s.ended, s.endedAt = true, h.clock()
	}
	s.chunks = append(s.chunks, c)
	s.bytes += c.size()
	rs := h.runs[round.RunID]
	if rs == nil {
		return // cannot happen: an entry with an active stream is never removed
	}
	if c.Last {
		rs.active--
		h.scheduleCleanupLocked(round.RunID, rs)
	}
	rs.broadcast()
}

// scheduleCleanupLocked removes the run's entry once it has no stream in flight, no
// reader, and its ended streams are past Retain (h.mu held).
func (h *Hub) scheduleCleanupLocked(runID string, rs *runStreams) {
	if rs.active > 0 || rs.readers > 0 || rs.timer != nil {
		return
	}
	rs.timer = time.AfterFunc(h.retain(), func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		rs.timer = nil
		if h.runs[runID] == rs && rs.active == 0 && rs.readers == 0 {
			delete(h.runs, runID)
		}
	})
}

// Follow calls fn with the run's chunks on this hub: those of the streams in flight
// and of those that ended within Retain, from their first chunk, then each new one as
// it is published, until a stream it saw in flight has ended and no other is in flight.
// When none is in flight, it waits up to wait for one to begin; if none does, it
// returns nil after passing on the ended streams it had, or ErrNoRound when it had
// none. started, when not nil, is called once, before the first chunk passed on. It
// returns early with ctx's error, or with fn's.
func (h *Hub) Follow(ctx context.Context, runID string, wait time.Duration, fn func(Chunk) error, started func()) error {
	if h == nil {
		return ErrNoRound
	}
	h.mu.Lock()
	rs := h.entryLocked(runID)
	rs.readers++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		rs.readers--
		if h.runs[runID] == rs {
			h.scheduleCleanupLocked(runID, rs)
		}
		h.mu.Unlock()
	}()

	type cursor struct {
		s    *stream
		next int
	}
	var reading []*cursor
	var seen int64 // the highest stream id taken into reading
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	live := false // a stream was in flight while this reader followed the run
	sent := false
	first := true
	for {
		h.mu.Lock()
		cutoff := h.clock().Add(-h.retain())
		for _, s := range rs.streams {
			if s.id <= seen {
				continue
			}
			seen = s.id
			if s.ended && s.endedAt.Before(cutoff) {
				continue
			}
			// A stream in flight when first seen, or begun since this reader came, is
			// live; one that had ended before is only passed on.
			live = live || !s.ended || !first
			reading = append(reading, &cursor{s: s})
		}
		first = false
		var out []Chunk
		pending := false
		for _, c := range reading {
			if c.next < len(c.s.chunks) {
				out = append(out, c.s.chunks[c.next:]...)
				c.next = len(c.s.chunks)
			}
			if !c.s.ended {
				pending = true
			}
		}
		ch := rs.changed
		h.mu.Unlock()

		if len(out) > 0 && !sent {
			sent = true
			if started != nil {
				started()
			}
		}
		for _, c := range out {
			if err := fn(c); err != nil {
				return err
			}
		}
		if live && !pending {
			return nil
		}
		select {
		case <-ch:
		case <-deadline:
			if !live {
				if !sent {
					return ErrNoRound
				}
				return nil
			}
			deadline = nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Readers reports how many readers follow the run on this hub now.
func (h *Hub) Readers(runID string) int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if rs := h.runs[runID]; rs != nil {
		return rs.readers
	}
	return 0
}

// Runs reports how many runs the hub holds streams or readers for (tests, metrics).
func (h *Hub) Runs() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs)
}
