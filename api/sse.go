package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// MaxBufferMs is the largest ?bufferMs= an event stream accepts.
const MaxBufferMs = 5000

// chunkHold bounds how long a messages stream holds the run's durable events back while
// a reply it has begun streaming has not ended, so the chunks come before the turn.
const chunkHold = time.Second

// parseBufferMs validates ?bufferMs= (0..MaxBufferMs; absent or 0: no batching).
func parseBufferMs(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > MaxBufferMs {
		return 0, badRequest("bufferMs %q must be an integer number of milliseconds in 0..%d", v, MaxBufferMs).with("field", "bufferMs")
	}
	return time.Duration(n) * time.Millisecond, nil
}

// forcesFlush reports whether an event ends a batch at once: the run's end, and the
// moments it starts waiting for someone.
func forcesFlush(typ string) bool {
	switch typ {
	case protocol.EvNodeSuspended, protocol.EvInterruptRequested, protocol.EvApprovalRequested, protocol.EvClarificationRequested:
		return true
	}
	return isTerminalEvent(typ)
}

// sseWriter writes one SSE response: each frame as it comes, or, with a buffer, frames
// gathered into `event: batch` frames whose data is the JSON array of their documents
// and whose id is the highest event sequence among them. A batch is written when its
// first frame has waited buffer, or at once after a frame that forces a flush.
type sseWriter struct {
	w      io.Writer
	flush  func()
	buffer time.Duration
	after  func(time.Duration) <-chan time.Time

	pending   []json.RawMessage
	pendingID int64 // highest durable sequence of the batch, -1 when none
	due       <-chan time.Time
}

func newSSEWriter(w io.Writer, flush func(), buffer time.Duration) *sseWriter {
	return &sseWriter{w: w, flush: flush, buffer: buffer, after: time.After, pendingID: -1}
}

// frame writes (or gathers) one frame: id is the event sequence for the SSE id (< 0:
// none, for an ephemeral chunk), typ its event name, doc its document.
func (sw *sseWriter) frame(id int64, typ string, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if sw.buffer <= 0 {
		if id >= 0 {
			_, err = fmt.Fprintf(sw.w, "id: %d\nevent: %s\ndata: %s\n\n", id, typ, b)
		} else {
			_, err = fmt.Fprintf(sw.w, "event: %s\ndata: %s\n\n", typ, b)
		}
		if err != nil {
			return err
		}
		sw.flush()
		return nil
	}
	sw.pending = append(sw.pending, b)
	sw.pendingID = max(sw.pendingID, id)
	if forcesFlush(typ) {
		return sw.writeBatch()
	}
	if sw.due == nil {
		sw.due = sw.after(sw.buffer)
	}
	return nil
}

// writeBatch writes the gathered frames as one batch, if any.
func (sw *sseWriter) writeBatch() error {
	sw.due = nil
	if len(sw.pending) == 0 {
		return nil
	}
	data, _ := json.Marshal(sw.pending)
	var err error
	if sw.pendingID >= 0 {
		_, err = fmt.Fprintf(sw.w, "id: %d\nevent: batch\ndata: %s\n\n", sw.pendingID, data)
	} else {
		_, err = fmt.Fprintf(sw.w, "event: batch\ndata: %s\n\n", data)
	}
	sw.pending, sw.pendingID = nil, -1
	if err != nil {
		return err
	}
	sw.flush()
	return nil
}

// comment writes an SSE comment line (a keepalive), after any batch that is due.
func (sw *sseWriter) comment(text string) error {
	if _, err := fmt.Fprintf(sw.w, ":%s\n\n", text); err != nil {
		return err
	}
	sw.flush()
	return nil
}

// durableRead is one read of the run's log for a stream.
type durableRead struct {
	evs      []workflows.Event
	terminal bool
	err      error
}

// openSSE answers 200 with the headers of an event stream (no caching, no proxy
// buffering) and a first comment, flushed, so the client knows the stream is open.
func openSSE(c echo.Context) *echo.Response {
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": stream open\n\n")
	w.Flush()
	return w
}

// streamSSE serves the run's events as SSE after the cursor, filtered by the stream
// mode, batched by bufferMs, with the chunks of its model rounds in messages mode.
func (s *Server) streamSSE(c echo.Context, snap *workflows.Snapshot, runID string, after int64, filter streamFilter, buffer time.Duration) error {
	rd := s.sseRenderOf(c, snap.Owner.Tenant)
	s.wg.Add(1)
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	s.streamDeadlines(c)

	// Subscribed first: a reply that starts while the log is read is not missed.
	var sub *chunkSub
	if filter.messages {
		var unsubscribe func()
		sub, unsubscribe = s.subscribeChunks(runID)
		defer unsubscribe()
	}

	w := openSSE(c)
	out := newSSEWriter(w, w.Flush, buffer)
	defer func() { _ = out.writeBatch() }() // what is gathered goes out before the stream closes

	// A values frame's id is the last sequence its snapshot reflects; ids only grow, so
	// a frame that would not advance is not sent.
	lastValues := int64(-1)
	valuesFrame := func(seq int64) error {
		cur, err := s.snapshot(ctx, nil, runID)
		if err != nil {
			return err
		}
		if seq = max(seq, cur.LastSequence); seq <= lastValues {
			return nil
		}
		lastValues = seq
		s.decorate(c, cur)
		typ, doc, err := rd.frame(workflows.Event{
			EventID: fmt.Sprintf("evt-%s-%d-snapshot", runID, seq), RunID: runID, Type: protocol.EvStateSnapshot,
			Payload: mustJSON(s.publicSnapshot(c, cur)), Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Sequence: seq,
		})
		if err != nil {
			return err
		}
		return out.frame(seq, typ, doc)
	}
	if filter.values {
		// values: a snapshot first (on connect and on resume); then follow the log from
		// what that snapshot reflects.
		if err := valuesFrame(max(after, snap.LastSequence)); err != nil {
			return nil
		}
		after = max(after, lastValues)
	}

	// The log is read on a goroutine of its own, so chunks, keepalives and batches are
	// written while it waits.
	reads := make(chan durableRead)
	go func() {
		f := s.follow(ctx, runID, after)
		defer f.close()
		for {
			evs, terminal, _, err := f.next(ctx, nil)
			select {
			case reads <- durableRead{evs: evs, terminal: terminal, err: err}:
			case <-ctx.Done():
				return
			}
			if terminal || err != nil {
				return
			}
		}
	}()

	ms := newMessagesState(runID, after)
	keepalive := time.NewTicker(s.cfg.KeepAlive)
	defer keepalive.Stop()
	var held *durableRead // durable events held back while a reply streams
	var holdUntil <-chan time.Time
	var chunkWake <-chan struct{}
	if sub != nil {
		chunkWake = sub.C()
	}
	writeDurable := func(r durableRead) (done bool) {
		if r.err != nil {
			if ctx.Err() == nil {
				s.log.Warn("Event stream ended on error", "runId", runID, "error", r.err)
			}
			return true
		}
		lastUpdate := int64(-1)
		for _, ev := range r.evs {
			ms.sawDurable(&ev)
			if filter.values {
				if isUpdate(ev.Type) {
					lastUpdate = ev.Sequence
				}
				continue
			}
			if !filter.match(ev.Type) {
				continue
			}
			typ, doc, err := rd.frame(ev)
			if err != nil {
				s.log.Error("Event stream ended: an event cannot be served", "runId", runID, "sequence", ev.Sequence, "error", err)
				return true
			}
			if err := out.frame(ev.Sequence, typ, doc); err != nil {
				return true
			}
		}
		if filter.values && lastUpdate >= 0 {
			if err := valuesFrame(lastUpdate); err != nil {
				return true
			}
		}
		return r.terminal
	}
	for {
		readsC := reads
		if held != nil {
			readsC = nil
		}
		select {
		case r := <-readsC:
			if r.err == nil && ms.streaming() {
				held, holdUntil = &r, time.After(chunkHold)
				continue
			}
			if writeDurable(r) {
				return nil
			}
		case <-chunkWake:
			for _, ch := range sub.take() {
				ev, ok := ms.chunkEvent(ch)
				if !ok {
					continue
				}
				typ, doc, err := rd.frame(ev)
				if err != nil {
					return nil
				}
				if err := out.frame(-1, typ, doc); err != nil {
					return nil
				}
			}
			if held != nil && !ms.streaming() {
				r := *held
				held, holdUntil = nil, nil
				if writeDurable(r) {
					return nil
				}
			}
		case <-holdUntil:
			r := *held
			held, holdUntil = nil, nil
			ms.giveUp()
			if writeDurable(r) {
				return nil
			}
		case <-out.due:
			if err := out.writeBatch(); err != nil {
				return nil
			}
		case <-keepalive.C:
			if err := out.comment("keepalive"); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// sseRender renders a stream's frames for the reader's major: each event (a durable
// one, a state.snapshot, an ai.message.chunk) as its frame name and data document.
type sseRender struct {
	frame func(ev workflows.Event) (typ string, doc any, err error)
}

func (s *Server) sseRenderOf(c echo.Context, tenant string) sseRender {
	if !isV2(c) {
		return sseRender{frame: func(ev workflows.Event) (string, any, error) {
			ev, err := eventV1(ev)
			return ev.Type, ev, err
		}}
	}
	w := s.wireOf(c, tenant)
	return sseRender{frame: func(ev workflows.Event) (string, any, error) {
		if ev.Type == protocol.EvMessageChunk || ev.Type == protocol.EvStateSnapshot {
			// Frame names, not event types: the envelope and ids are v2's, the name
			// stays (events.md §SSE frames); a state.snapshot carries the v2 snapshot.
			payload := ev.Payload
			if ev.Type == protocol.EvMessageChunk {
				var err error
				if payload, err = w.payloadV2(ev.Type, ev.Payload); err != nil {
					return "", nil, err
				}
			}
			return ev.Type, &eventDocV2{EventID: ev.EventID, RunID: w.id(ev.RunID), NodeID: ev.NodeID, Type: ev.Type, Payload: payload,
				Timestamp: ev.Timestamp, Sequence: ev.Sequence, SchemaVersion: 1}, nil
		}
		doc, err := w.eventV2(&ev)
		if err != nil {
			return "", nil, err
		}
		return doc.Type, doc, nil
	}}
}

// messagesState is what a messages stream knows of the replies it carries: the streams
// it has begun and not seen end, and the rounds the run's log has already recorded
// (their chunks come too late to be shown before the turn, and are dropped).
type messagesState struct {
	runID   string
	lastSeq int64 // the last durable sequence read
	open    map[chunks.StreamID]bool
	decided map[nodeRound]bool
}

type nodeRound struct {
	node  string
	round int
}

func newMessagesState(runID string, after int64) *messagesState {
	return &messagesState{runID: runID, lastSeq: max(after, 0), open: map[chunks.StreamID]bool{}, decided: map[nodeRound]bool{}}
}

// streaming reports whether a reply this stream has begun is still streaming.
func (m *messagesState) streaming() bool { return len(m.open) > 0 }

// giveUp forgets the replies still streaming (their end did not come in time).
func (m *messagesState) giveUp() { clear(m.open) }

// sawDurable notes a durable event read from the log.
func (m *messagesState) sawDurable(ev *workflows.Event) {
	m.lastSeq = max(m.lastSeq, ev.Sequence)
	if ev.Type != protocol.EvAgentDecided {
		return
	}
	var p struct {
		Decision struct {
			Round *int `json:"round"`
		} `json:"decision"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.Decision.Round == nil {
		return
	}
	if len(m.decided) > 256 {
		clear(m.decided)
	}
	nr := nodeRound{node: ev.NodeID, round: *p.Decision.Round}
	m.decided[nr] = true
	for id := range m.open {
		if id.NodeID == nr.node && id.Round == nr.round {
			delete(m.open, id)
		}
	}
}

// chunkEvent turns a chunk into its ai.message.chunk event, or reports that the chunk
// is not shown (its round is already in the log).
func (m *messagesState) chunkEvent(c chunks.Chunk) (workflows.Event, bool) {
	if m.decided[nodeRound{node: c.NodeID, round: c.Round.Round}] {
		return workflows.Event{}, false
	}
	id := c.Stream()
	for o := range m.open {
		if o.NodeID == id.NodeID && o.Round == id.Round && o.Attempt < id.Attempt {
			delete(m.open, o) // superseded by a retry
		}
	}
	if c.Last {
		delete(m.open, id)
	} else {
		m.open[id] = true
	}
	return workflows.Event{
		EventID:   chunkEventID(m.runID, c),
		RunID:     m.runID,
		NodeID:    c.NodeID,
		Type:      protocol.EvMessageChunk,
		Payload:   mustJSON(chunkPayload(c)),
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano),
		// Chunks are not in the log: a chunk carries the sequence of the last event of
		// the log before it, and no SSE id, so a reconnect resumes from the log.
		Sequence: m.lastSeq,
	}, true
}

// chunkEventID is a unique, bounded id of a chunk event.
func chunkEventID(runID string, c chunks.Chunk) string {
	sum := sha256.Sum256([]byte(runID + "\x00" + c.NodeID))
	return fmt.Sprintf("chunk-%s-r%d-a%d-%d", hex.EncodeToString(sum[:6]), c.Round.Round, c.Attempt, c.Seq)
}

// chunkPayload is the payload of an ai.message.chunk event: OpenWOP's outputChunk
// (nodeId, runId, chunk, isLast, meta with the typed Tier 1 slots) and the round it
// belongs to: round, state, messageId, speakerId (the agent the turn will name), and
// attempt and seq, which start a new sequence when a round is retried.
func chunkPayload(c chunks.Chunk) map[string]any {
	p := map[string]any{
		"nodeId": c.NodeID, "runId": c.RunID, "chunk": c.Text, "isLast": c.Last,
		"round": c.Round.Round, "state": c.State, "attempt": c.Attempt, "seq": c.Seq,
	}
	if c.MessageID != "" {
		p["messageId"] = c.MessageID
	}
	if c.Speaker != "" {
		p["speakerId"] = c.Speaker
	}
	if c.Aborted {
		p["aborted"], p["error"] = true, c.Error
	}
	if c.Truncated {
		p["truncated"] = true
	}
	meta := map[string]any{}
	if c.Model != "" {
		meta["model"] = c.Model
	}
	if c.Last && !c.Aborted {
		if fr := finishReason(c.FinishReason); fr != "" {
			meta["finishReason"] = fr
		}
		if c.Usage != nil {
			meta["usage"] = map[string]int{
				"promptTokens": c.Usage.InputTokens, "completionTokens": c.Usage.OutputTokens,
				"totalTokens": c.Usage.InputTokens + c.Usage.OutputTokens,
			}
		}
		if len(c.ToolCalls) > 0 {
			meta["toolCalls"] = c.ToolCalls
		}
	}
	if len(meta) > 0 {
		p["meta"] = meta
	}
	return p
}

// finishReason normalizes a provider's finish reason to OpenWOP's stop, length,
// tool_calls, content_filter (others pass as they are).
func finishReason(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return r
}
