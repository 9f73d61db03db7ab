package api

// One chunk reader per run, not per stream: every streamMode=messages stream of a run in
// this API process shares one chunkFeed. The feed follows the run's Temporal history
// (the server's long poll) to learn when a model round may have begun, asks Temporal
// where the run's rounds run (chunks.Locate: the pending ModelRound activity's worker,
// or the worker of the workflow task in flight for a round run as a local activity),
// and reads each round's chunks from that worker's chunk endpoint (chunks.Client),
// passing them to its subscribers. Chunks are never stored: a subscriber gets those
// that reach the feed after it subscribed. The feed stops when its last subscriber
// leaves.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/wop-dev/wop/chunks"
)

// Pacing of a chunk feed.
const (
	// chunkLocateMin and chunkLocateMax bound the pause between two looks at a run
	// whose round is scheduled but not started (or whose worker could not be reached);
	// a round backing off before a retry is looked at again when its next attempt is due.
	chunkLocateMin = 20 * time.Millisecond
	chunkLocateMax = 250 * time.Millisecond
	// chunkWorkerWait is how long a worker holds a request for a round that has not
	// begun on it yet (the activity has started but not yet published).
	chunkWorkerWait = 2 * time.Second
	// chunkSubBacklog bounds the chunks waiting for one slow subscriber; past it, text
	// chunks are dropped for that subscriber (last chunks never are).
	chunkSubBacklog = 4096
)

// chunkFeed follows one run's model rounds for every messages-mode reader of it here.
type chunkFeed struct {
	s      *Server
	runID  string
	cancel context.CancelFunc

	mu   sync.Mutex
	refs int
	subs map[*chunkSub]struct{}
	// last is the highest sequence forwarded per stream, so a chunk read twice (a
	// worker's retained stream read again after a reconnect) is forwarded once.
	last map[chunks.StreamID]int
}

// chunkSub is one subscriber's queue of chunks.
type chunkSub struct {
	mu   sync.Mutex
	q    []chunks.Chunk
	wake chan struct{} // one pending wake at most
}

// C is signalled when chunks are waiting; take them with take.
func (sub *chunkSub) C() <-chan struct{} { return sub.wake }

// take returns the chunks waiting, in order.
func (sub *chunkSub) take() []chunks.Chunk {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	q := sub.q
	sub.q = nil
	return q
}

func (sub *chunkSub) push(c chunks.Chunk) {
	sub.mu.Lock()
	if len(sub.q) < chunkSubBacklog || c.Last {
		sub.q = append(sub.q, c)
	}
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// streamsChunks reports whether this API process can read chunks (it shares the
// workers' stream secret).
func (s *Server) streamsChunks() bool { return s.chunkClient != nil }

// subscribeChunks subscribes to the run's chunks, starting the run's feed when it has
// no subscriber; unsubscribe with the returned function. It returns nil (and a no-op)
// when this API process reads no chunks.
func (s *Server) subscribeChunks(runID string) (*chunkSub, func()) {
	if !s.streamsChunks() {
		return nil, func() {}
	}
	sub := &chunkSub{wake: make(chan struct{}, 1)}
	s.chunkFeedsMu.Lock()
	f := s.chunkFeeds[runID]
	if f == nil {
		ctx, cancel := context.WithCancel(s.ctx)
		f = &chunkFeed{s: s, runID: runID, cancel: cancel, subs: map[*chunkSub]struct{}{}, last: map[chunks.StreamID]int{}}
		s.chunkFeeds[runID] = f
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			f.run(ctx)
		}()
	}
	f.mu.Lock()
	f.refs++
	f.subs[sub] = struct{}{}
	f.mu.Unlock()
	s.chunkFeedsMu.Unlock()
	return sub, func() {
		s.chunkFeedsMu.Lock()
		defer s.chunkFeedsMu.Unlock()
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs, sub)
		f.refs--
		if f.refs == 0 {
			if s.chunkFeeds[runID] == f {
				delete(s.chunkFeeds, runID)
			}
			f.cancel()
		}
	}
}

// forward passes a chunk to every subscriber, once.
func (f *chunkFeed) forward(c chunks.Chunk) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := c.Stream()
	if last, ok := f.last[id]; ok && c.Seq <= last {
		return
	}
	f.last[id] = c.Seq
	if len(f.last) > 256 {
		// Forget the oldest streams; a chunk of one of them read again would be
		// forwarded again, which a reader drops by its sequence.
		for k := range f.last {
			if k != id {
				delete(f.last, k)
			}
			if len(f.last) <= 128 {
				break
			}
		}
	}
	for sub := range f.subs {
		sub.push(c)
	}
}

// taskEnd is how reading one target ended: ended is set when the round running there
// was read to its end (a last chunk of the target's attempt, or of any round for a
// workflow task's local rounds).
type taskEnd struct {
	task  string
	ended bool
	err   error
}

// run is the feed's goroutine: look where the run's rounds are, read each from its
// worker, and look again when the history grows, until the run ends or the feed stops.
func (f *chunkFeed) run(ctx context.Context) {
	hist := f.s.followHistory(ctx, f.runID)
	defer func() { hist.stop() }()
	reading := map[string]context.CancelFunc{} // targets being read, by task
	done := map[string]bool{}                  // targets read to their end
	ends := make(chan taskEnd)
	defer func() {
		for _, cancel := range reading {
			cancel()
		}
		// Let the readers return before the feed does (they send on ends).
		for len(reading) > 0 {
			e := <-ends
			delete(reading, e.task)
		}
	}()
	pause := chunkLocateMin
	for ctx.Err() == nil {
		loc, err := chunks.Locate(ctx, f.s.tc, f.runID, hist.workflowTask())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var apiErr *Error
			if e := f.s.temporalErr(err, f.runID); errors.As(e, &apiErr) && apiErr.Status == http.StatusNotFound {
				return
			}
			f.s.log.Debug("Locating the run's model rounds failed", "runId", f.runID, "error", err)
			loc.Soon = true
		}
		if loc.Closed {
			return
		}
		if wft := hist.workflowTask(); len(loc.Targets) == 0 && !loc.Soon {
			// Nothing runs now. A resolve sent as a Workflow Update runs its turn in a
			// speculative workflow task, which history shows only once it completes, so
			// no history growth wakes this loop while that task's local rounds stream:
			// wait at the worker of the run's last workflow task (its sticky worker)
			// for a round of the run to begin there.
			if ep := chunks.EndpointOf(wft.Identity); ep != "" {
				loc.Targets = append(loc.Targets, chunks.Target{Endpoint: ep, Task: "next#" + strconv.FormatInt(wft.EventID, 10)})
			}
		}
		soon := loc.Soon
		for _, t := range loc.Targets {
			if done[t.Task] {
				// Read to its end, but Temporal has not recorded the attempt's end yet.
				// A failed attempt's retry starts without the history growing, so look
				// again soon rather than wait for the history.
				soon = true
				continue
			}
			if _, ok := reading[t.Task]; ok {
				continue
			}
			rctx, cancel := context.WithCancel(ctx)
			reading[t.Task] = cancel
			go func(t chunks.Target) {
				ended := false
				_, err := f.s.chunkClient.Follow(rctx, t.Endpoint, f.runID, chunkWorkerWait, func(c chunks.Chunk) {
					if c.Last && (t.Attempt == 0 || c.Attempt == t.Attempt) {
						ended = true
					}
					f.forward(c)
				})
				ends <- taskEnd{task: t.Task, ended: ended, err: err}
			}(t)
		}
		var wait <-chan time.Time
		if soon {
			d := pause
			if until := time.Until(loc.NextAttempt); until > d {
				d = until // a retry's backoff: nothing starts before then
				pause = chunkLocateMin
			} else {
				pause = min(2*pause, chunkLocateMax)
			}
			wait = time.After(d)
		} else {
			pause = chunkLocateMin
		}
		select {
		case <-hist.grew:
		case <-wait:
		case e := <-ends:
			reading[e.task]()
			delete(reading, e.task)
			switch {
			case e.ended:
				done[e.task] = true
			case e.err != nil && ctx.Err() == nil:
				// The worker is not reachable (yet, or any more): look again shortly;
				// a round whose worker died is retried elsewhere as a new attempt.
				f.s.log.Debug("Reading a worker's chunks failed", "runId", f.runID, "task", e.task, "error", e.err)
				select {
				case <-time.After(pause):
				case <-ctx.Done():
				}
				pause = min(2*pause, chunkLocateMax)
			}
		case <-hist.closed:
			if !f.s.workflowRunning(ctx, f.runID) {
				return
			}
			hist = f.s.followHistory(ctx, f.runID) // continued as new
		case <-ctx.Done():
			return
		}
		if len(done) > 1024 {
			clear(done)
		}
	}
}

// historyFollower follows a run's history with the server's long poll: grew is
// signalled on every batch of new events, and the latest workflow task started is
// kept with its worker (a round run as a local activity runs on that task's worker).
type historyFollower struct {
	grew   chan struct{}
	closed chan struct{}
	cancel context.CancelFunc
	mu     sync.Mutex
	wft    chunks.WorkflowTask
}

// saw notes a history event: a workflow task started is the latest one. Its worker is
// the identity the event names or, when it names none, the worker of the run's last
// task: a long poll of the history ends with the task in flight as a transient
// WorkflowTaskStarted without an identity (the server has not recorded it yet), and
// that task runs on the sticky worker of the task before it, the one whose chunk
// endpoint a round starting in it streams from.
func (h *historyFollower) saw(ev *historypb.HistoryEvent) {
	var identity string
	switch {
	case ev.GetWorkflowTaskStartedEventAttributes() != nil:
		identity = ev.GetWorkflowTaskStartedEventAttributes().GetIdentity()
	case ev.GetWorkflowTaskCompletedEventAttributes() != nil:
		identity = ev.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
	default:
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.GetWorkflowTaskStartedEventAttributes() != nil {
		h.wft.EventID = ev.GetEventId()
	}
	if identity != "" {
		h.wft.Identity = identity
	}
}

func (h *historyFollower) workflowTask() chunks.WorkflowTask {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wft
}

func (h *historyFollower) stop() { h.cancel() }

func (s *Server) followHistory(ctx context.Context, runID string) *historyFollower {
	ctx, cancel := context.WithCancel(ctx)
	h := &historyFollower{grew: make(chan struct{}, 1), closed: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(h.closed)
		it := s.tc.GetWorkflowHistory(ctx, runID, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return
			}
			h.saw(ev)
			select {
			case h.grew <- struct{}{}:
			default:
			}
		}
	}()
	return h
}
