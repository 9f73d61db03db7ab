package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/workflows"
)

// One reader per run, not per stream: every SSE stream, long poll and resolve that
// waits on a run in this API process shares one runFeed. The feed follows the run's
// Temporal history with the server's long poll (one call at a time), reads the events
// the run appended after each wake (one query), and keeps the newest ones in a bounded
// buffer that every waiting reader takes its events from. A reader whose cursor lies
// before the buffer (a stream that resumes from an old Last-Event-ID, a new stream
// reading the log from the start) catches up with paged queries of its own, then
// joins the buffer. The feed stops feedLinger after its last reader leaves: a feed
// nobody reads would keep querying the run on every workflow task, and those queries
// compete with the ones resolves wait for; but a long poll's reader leaves with every
// answer and is back a moment later, and a new feed would start its history long poll
// from the first event again (the whole history read, and a query on its stale wake).
// A long poll that finds a live feed holding its cursor waits there without a read of
// its own (followLive).
//
// The feed queries the run only when its history shows a completed workflow task:
// OpenWOP events are appended by workflow code, which runs in workflow tasks, and a
// query sees the state the last completed one left. A signal, a scheduled or started
// task, an activity's progress wake nobody.

// Bounds of a feed's buffer.
const (
	feedBufferEvents = 1000
	feedBufferBytes  = 2 << 20
)

// feedLinger is how long a feed follows its run after its last reader left, for the
// next long poll of the same reader to find it where it was.
var feedLinger = 2 * time.Second

// runFeed follows one run for every reader of it in this process.
type runFeed struct {
	s     *Server
	runID string

	mu   sync.Mutex
	refs int
	// linger, while set, holds the reference the last reader left: it ends the feed
	// at feedLinger unless a reader takes the reference over first.
	linger   *time.Timer
	buf      []workflows.Event // the newest events read, contiguous, ending at next-1
	bufBytes int
	next     int64  // sequence after the newest event read (the first reader's cursor + 1 at first)
	tenant   string // the run's tenant, once a read has answered
	terminal bool   // the run's terminal event is read, or its workflow has closed
	err      error  // the feed stopped on this error
	changed  chan struct{}
	cancel   context.CancelFunc
}

// feed returns the run's feed, starting it when no reader has it (reading from the
// caller's cursor after on), and counts the caller as a reader; release the feed when
// done.
func (s *Server) feed(runID string, after int64) *runFeed {
	s.feedsMu.Lock()
	defer s.feedsMu.Unlock()
	f := s.feeds[runID]
	if f == nil {
		// The caller's reference is counted before the goroutine starts: a feed whose
		// first read found no reader yet would end and leave every later reader of
		// the run waiting on a feed nobody follows.
		ctx, cancel := context.WithCancel(s.ctx)
		f = &runFeed{s: s, runID: runID, refs: 1, next: max(after+1, 0), changed: make(chan struct{}), cancel: cancel}
		s.feeds[runID] = f
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			f.run(ctx)
		}()
		return f
	}
	f.mu.Lock()
	f.acquireLocked()
	f.mu.Unlock()
	return f
}

// acquireLocked counts one more reader of a running feed (f.mu held): it takes over
// the reference a lingering feed holds, or adds one.
func (f *runFeed) acquireLocked() {
	if f.linger != nil && f.linger.Stop() {
		f.linger = nil // the reader takes over the reference the last one left
	} else {
		f.refs++
	}
}

// followLive follows the run's feed in this process from the cursor after when the
// feed can answer a poll from there without a read of the poll's own: it has read the
// run (its tenant, which never changes, is known), has not failed, and its buffer
// reaches back to the cursor. ok is false otherwise (no feed, or one that cannot), and
// the poll reads the run itself first. A feed reads the run after every workflow task
// that completed, so what it holds lags the run's log by at most that read.
func (s *Server) followLive(runID string, after int64) (fl *follower, tenant string, ok bool) {
	s.feedsMu.Lock()
	defer s.feedsMu.Unlock()
	f := s.feeds[runID]
	if f == nil {
		return nil, "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tenant == "" || f.err != nil || after+1 < f.next-int64(len(f.buf)) {
		return nil, "", false
	}
	f.acquireLocked()
	return &follower{feed: f, after: after}, f.tenant, true
}

// release ends a reader's use of the feed. The last reader's reference stays with
// the feed for feedLinger (a reader that comes back in that time takes it over).
func (f *runFeed) release() {
	f.s.feedsMu.Lock()
	defer f.s.feedsMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs > 1 || f.terminal || f.err != nil {
		f.refs--
		if f.refs == 0 {
			f.stopLocked()
		}
		return
	}
	var t *time.Timer
	t = time.AfterFunc(feedLinger, func() {
		f.s.feedsMu.Lock()
		defer f.s.feedsMu.Unlock()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.linger != t {
			return // a reader took the reference over
		}
		f.linger = nil
		f.refs--
		if f.refs == 0 {
			f.stopLocked()
		}
	})
	f.linger = t
}

// stopLocked removes the feed from the server and ends its goroutine (both locks held).
func (f *runFeed) stopLocked() {
	if f.s.feeds[f.runID] == f {
		delete(f.s.feeds, f.runID)
	}
	f.cancel()
}

// broadcastLocked wakes every reader (f.mu held).
func (f *runFeed) broadcastLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// run is the feed's goroutine: read, then wait for the history to grow, until the
// run has ended or the feed is stopped.
func (f *runFeed) run(ctx context.Context) {
	var waker *historyWaker
	defer func() {
		if waker != nil {
			waker.Stop()
		}
	}()
	for ctx.Err() == nil {
		if err := f.read(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			var ae *Error
			if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
				// Temporal did not answer in time: try again shortly.
				select {
				case <-time.After(200 * time.Millisecond):
					continue
				case <-ctx.Done():
					return
				}
			}
			f.fail(err)
			return
		}
		f.mu.Lock()
		done := f.terminal || f.refs == 0
		f.mu.Unlock()
		if done {
			return
		}
		if waker == nil {
			waker = f.s.newHistoryWaker(ctx, f.runID)
		}
		select {
		case <-waker.C:
		case <-waker.Done:
			// The history iterator ended: the execution closed or continued as new.
			// Read once more; if the workflow is no longer running, the run is over.
			waker = nil
			if err := f.read(ctx); err != nil {
				continue
			}
			f.mu.Lock()
			done := f.terminal
			f.mu.Unlock()
			if !done && !f.s.workflowRunning(ctx, f.runID) {
				f.mu.Lock()
				f.terminal = true
				f.broadcastLocked()
				f.mu.Unlock()
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// read appends the events after the feed's newest to its buffer.
func (f *runFeed) read(ctx context.Context) error {
	f.mu.Lock()
	after := f.next - 1
	f.mu.Unlock()
	for {
		res, err := f.s.readEvents(ctx, f.runID, after)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.tenant = res.Tenant
		for _, ev := range res.Events {
			if ev.Sequence != f.next {
				continue // already read (a concurrent catch-up cannot reach here; defensive)
			}
			f.buf = append(f.buf, ev)
			f.bufBytes += workflows.EventBytes(&ev)
			f.next++
		}
		for len(f.buf) > 1 && (len(f.buf) > feedBufferEvents || f.bufBytes > feedBufferBytes) {
			f.bufBytes -= workflows.EventBytes(&f.buf[0])
			f.buf = f.buf[1:]
		}
		if res.Terminal && !res.More {
			f.terminal = true
		}
		if len(res.Events) > 0 || f.terminal {
			f.broadcastLocked()
		}
		after = f.next - 1
		f.mu.Unlock()
		if !res.More {
			return nil
		}
	}
}

func (f *runFeed) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.broadcastLocked()
	f.mu.Unlock()
}

// follower is one reader's cursor on its run's feed.
type follower struct {
	feed  *runFeed
	after int64
}

// follow starts reading the run's events after the cursor; close the follower when
// done.
func (s *Server) follow(_ context.Context, runID string, after int64) *follower {
	return &follower{feed: s.feed(runID, after), after: after}
}

func (f *follower) close() { f.feed.release() }

// next returns the events after the cursor (one bounded page), waiting until the
// context ends (or until tick fires, if non-nil) for some to appear. terminal is true
// once the reader has every event of a run that has ended.
func (f *follower) next(ctx context.Context, tick <-chan time.Time) (evs []workflows.Event, terminal bool, ticked bool, err error) {
	fd := f.feed
	for {
		fd.mu.Lock()
		bufStart := fd.next - int64(len(fd.buf))
		switch {
		case f.after+1 >= bufStart && f.after+1 < fd.next:
			// From the buffer, at most one page.
			i := int(f.after + 1 - bufStart)
			size, limit := 0, fd.s.pageBytes()
			for ; i < len(fd.buf); i++ {
				b := workflows.EventBytes(&fd.buf[i])
				if len(evs) > 0 && size+b > limit {
					break
				}
				size += b
				evs = append(evs, fd.buf[i])
			}
			f.after = evs[len(evs)-1].Sequence
			terminal = fd.terminal && f.after+1 >= fd.next
			fd.mu.Unlock()
			return evs, terminal, false, nil
		case f.after+1 < bufStart:
			// Before the buffer: catch up with a query of our own.
			fd.mu.Unlock()
			res, err := fd.s.readEvents(ctx, fd.runID, f.after)
			if err != nil {
				return nil, false, false, err
			}
			if len(res.Events) > 0 {
				f.after = res.Events[len(res.Events)-1].Sequence
				return res.Events, res.Terminal && !res.More, false, nil
			}
			// Nothing after the cursor: wait on the feed like everyone else.
			fd.mu.Lock()
		case fd.terminal:
			fd.mu.Unlock()
			return nil, true, false, nil
		case fd.err != nil:
			err := fd.err
			fd.mu.Unlock()
			return nil, false, false, err
		}
		ch := fd.changed
		fd.mu.Unlock()
		select {
		case <-ch:
		case <-tick:
			return nil, false, true, nil
		case <-ctx.Done():
			return nil, false, false, ctx.Err()
		}
	}
}

// historyWaker signals whenever the run's Temporal history shows a completed workflow
// task (or the execution's close). It follows the history with the server's long poll
// (no polling loop of our own); only workflow code appends OpenWOP events, and a
// query sees them once the workflow task that appended them has completed.
type historyWaker struct {
	C      <-chan struct{} // one pending wake at most
	Done   <-chan struct{} // closed when the history iterator ends (workflow closed or error)
	cancel context.CancelFunc
}

func (s *Server) newHistoryWaker(ctx context.Context, runID string) *historyWaker {
	ctx, cancel := context.WithCancel(ctx)
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		it := s.tc.GetWorkflowHistory(ctx, runID, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return
			}
			if !wakesReaders(ev.GetEventType()) {
				continue
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return &historyWaker{C: wake, Done: done, cancel: cancel}
}

func (w *historyWaker) Stop() { w.cancel() }

// wakesReaders reports whether a history event may come with new OpenWOP events: a
// completed workflow task, or the close of the execution.
func wakesReaders(t enumspb.EventType) bool {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return true
	}
	return false
}

func (s *Server) workflowRunning(ctx context.Context, runID string) bool {
	d, err := s.tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return false
	}
	return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}
