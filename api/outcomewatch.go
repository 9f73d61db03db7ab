package api

// An API process waiting on resolves of one run follows that run once: one history long
// poll and, each time the history grows, one OutcomesQuery for every request still
// waiting (not one query per waiting request — a hundred exchanges sent at once would
// otherwise ask a hundred queries per history event of the busy run). This is sharing,
// not coordination: each answer is what the run recorded, so API processes need not
// know of each other.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/wop-dev/wop/workflows"
)

// outcomeQueryTimeout bounds one OutcomesQuery.
const outcomeQueryTimeout = 10 * time.Second

// outcomeResult is what a waiter learns: the run's outcome for its request, or that the
// run ended without one (ended; status is the run's, empty when Temporal closed the
// workflow without the run's terminal event).
type outcomeResult struct {
	outcome *workflows.ResolveOutcome
	ended   bool
	status  string
}

// outcomeWatches holds the process's watches, one per run with waiters.
type outcomeWatches struct {
	mu sync.Mutex
	m  map[string]*outcomeWatch
}

// outcomeWatch follows one run for its waiters.
type outcomeWatch struct {
	s     *Server
	runID string
	kick  chan struct{} // a waiter joined: ask at once
	// waiters by request id; guarded by outcomeWatches.mu.
	waiters map[string][]chan outcomeResult
}

// awaitRequest waits until the run records the outcome of requestID or ends, or ctx
// ends (ok false).
func (s *Server) awaitRequest(ctx context.Context, runID, requestID string) (res outcomeResult, ok bool) {
	ch := make(chan outcomeResult, 1)
	ws := &s.watches
	ws.mu.Lock()
	if ws.m == nil {
		ws.m = map[string]*outcomeWatch{}
	}
	w := ws.m[runID]
	if w == nil {
		w = &outcomeWatch{s: s, runID: runID, kick: make(chan struct{}, 1), waiters: map[string][]chan outcomeResult{}}
		ws.m[runID] = w
		s.wg.Add(1)
		go w.run()
	}
	w.waiters[requestID] = append(w.waiters[requestID], ch)
	ws.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	select {
	case res := <-ch:
		return res, true
	case <-ctx.Done():
		ws.mu.Lock()
		list := w.waiters[requestID]
		for i, c := range list {
			if c == ch {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(w.waiters, requestID)
		} else {
			w.waiters[requestID] = list
		}
		ws.mu.Unlock()
		return outcomeResult{}, false
	}
}

// ids returns the request ids waited on, or retires the watch when there are none.
func (w *outcomeWatch) ids() []string {
	ws := &w.s.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(w.waiters) == 0 {
		delete(ws.m, w.runID)
		return nil
	}
	out := make([]string, 0, len(w.waiters))
	for id := range w.waiters {
		out = append(out, id)
	}
	return out
}

// deliver answers every waiter of id.
func (w *outcomeWatch) deliver(id string, res outcomeResult) {
	ws := &w.s.watches
	ws.mu.Lock()
	list := w.waiters[id]
	delete(w.waiters, id)
	ws.mu.Unlock()
	for _, ch := range list {
		ch <- res
	}
}

func (w *outcomeWatch) run() {
	defer w.s.wg.Done()
	ctx := w.s.ctx
	var waker *historyWaker
	defer func() {
		if waker != nil {
			waker.Stop()
		}
	}()
	closed := false
	for {
		ids := w.ids()
		if ids == nil {
			return
		}
		page, err := w.ask(ctx, ids)
		if err == nil {
			for _, o := range page.Outcomes {
				w.deliver(o.RequestID, outcomeResult{outcome: &o})
			}
			if page.Terminal || closed {
				// The run has ended: a request without an outcome was never applied.
				res := outcomeResult{ended: true, status: page.Status}
				if !page.Terminal {
					// Temporal closed the workflow without its terminal event.
					res.status = ""
				}
				for _, id := range ids {
					w.deliver(id, res)
				}
				continue
			}
		} else if ctx.Err() != nil {
			return
		}
		if waker == nil {
			waker = w.s.newHistoryWaker(ctx, w.runID)
		}
		select {
		case <-waker.C:
		case <-w.kick:
		case <-waker.Done:
			// The history ended: the run closed (ask once more, then answer), or it
			// continued as new (follow the new history after a breath).
			waker = nil
			closed = !w.s.workflowRunning(ctx, w.runID) && ctx.Err() == nil
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		case <-ctx.Done():
			return
		}
		if err != nil {
			// Temporal did not answer: ask again after a breath, not in a loop.
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
}

// ask queries the run for the outcomes of ids. A worker that predates OutcomesQuery is
// asked request by request with ValidateResolveQuery.
func (w *outcomeWatch) ask(ctx context.Context, ids []string) (*workflows.OutcomesPage, error) {
	qctx, cancel := context.WithTimeout(ctx, outcomeQueryTimeout)
	defer cancel()
	v, err := w.s.tc.QueryWorkflow(qctx, w.runID, "", workflows.OutcomesQuery, workflows.OutcomesRequest{RequestIDs: ids})
	if err == nil {
		var page workflows.OutcomesPage
		if err := v.Get(&page); err != nil {
			return nil, err
		}
		return &page, nil
	}
	var qf *serviceerror.QueryFailed
	if !errors.As(err, &qf) || !strings.Contains(err.Error(), "unknown queryType") {
		return nil, err
	}
	page := &workflows.OutcomesPage{}
	for _, id := range ids {
		v, err := w.s.tc.QueryWorkflow(qctx, w.runID, "", workflows.ValidateResolveQuery, workflows.ResolveRequest{RequestID: id})
		if err != nil {
			return nil, err
		}
		var check workflows.ResolveCheck
		if err := v.Get(&check); err != nil {
			return nil, err
		}
		page.Terminal, page.Status = check.Terminal, check.CurrentStatus
		switch {
		case check.Outcome != nil:
			page.Outcomes = append(page.Outcomes, *check.Outcome)
		case check.Replayed && !check.Pending:
			// Received and applied by a worker that keeps no outcomes.
			page.Outcomes = append(page.Outcomes, workflows.ResolveOutcome{RequestID: id, Applied: true, RunStatus: check.RunStatus})
		}
	}
	return page, nil
}
