package api

// The events a resolve update carried, kept for the poll that follows the resolve.
//
// A client that posts a turn then long-polls the run's events from where it had read.
// The resolve update returns the run's events after the request's position with its
// outcome (workflows/resolve_events.go): for a turn the run completes within the
// workflow task that takes it (the scripted mock's local rounds), the agent's reply
// among them. This process keeps them, with the run's tenant (which never changes),
// and the poll answers from them without a query when they hold events after its
// cursor and start at or before it; a resolve answered 202 queued keeps its update's
// call going and hands its events over the same way, to the poll that waits for it
// (updatecall.go). Every other poll — a cursor outside them, a run whose update carried
// no events (capped, a worker without the handler, a refused or signalled resolve),
// another API process, an entry older than turnEventsTTL — reads the run as before.
//
// The events are the run's durable log (the update's result arrives after the workflow
// task that appended them is persisted), so an answer from them is a page the query
// would have answered at the update's completion: the same page bound, hasMore and
// isComplete (TestPollAfterResolveFromUpdateEvents compares the two byte for byte).

import (
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/workflows"
)

// Bounds of the kept events: runs kept, and how long an entry answers.
const (
	turnEventsMaxRuns = 1024
	turnEventsTTL     = 10 * time.Second
)

// turnEvents are the events resolve updates carried, by run id. The zero value is
// ready to use.
type turnEvents struct {
	mu   sync.Mutex
	runs map[string]*turnEntry
}

// turnEntry is one run's kept events.
type turnEntry struct {
	tenant string
	ev     workflows.ResolveEvents
	at     time.Time
}

// put keeps the events ev of the run runID (whose tenant is tenant), unless an entry
// reaching further is kept already (an earlier update's result arriving late).
func (t *turnEvents) put(runID, tenant string, ev *workflows.ResolveEvents, now time.Time) {
	if ev == nil || len(ev.Events) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.runs == nil {
		t.runs = map[string]*turnEntry{}
	}
	if old := t.runs[runID]; old != nil && old.ev.LastSequence > ev.LastSequence && now.Sub(old.at) < turnEventsTTL {
		return
	}
	if _, ok := t.runs[runID]; !ok && len(t.runs) >= turnEventsMaxRuns {
		t.evictLocked(now)
	}
	t.runs[runID] = &turnEntry{tenant: tenant, ev: *ev, at: now}
}

// evictLocked drops the expired entries, or the oldest one when none has expired.
func (t *turnEvents) evictLocked(now time.Time) {
	var oldest string
	for id, e := range t.runs {
		if now.Sub(e.at) >= turnEventsTTL {
			delete(t.runs, id)
			continue
		}
		if oldest == "" || e.at.Before(t.runs[oldest].at) {
			oldest = id
		}
	}
	if len(t.runs) >= turnEventsMaxRuns && oldest != "" {
		delete(t.runs, oldest)
	}
}

// page answers a read of the run's events after the cursor after from the kept
// events, bounded by maxBytes as readEvents bounds a page; ok is false when they
// cannot answer it (nothing kept, expired, or the cursor outside them).
func (t *turnEvents) page(runID string, after int64, maxBytes int, now time.Time) (*eventsRead, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.runs[runID]
	if e == nil {
		return nil, false
	}
	if now.Sub(e.at) >= turnEventsTTL {
		delete(t.runs, runID)
		return nil, false
	}
	ev := &e.ev
	if after < ev.After || after >= ev.LastSequence {
		return nil, false
	}
	// ev.Events are the contiguous sequences ev.After+1 .. ev.LastSequence.
	i := after - ev.After
	if i < 0 || i >= int64(len(ev.Events)) || ev.Events[i].Sequence != after+1 {
		return nil, false
	}
	evs, more := workflows.PageEvents(ev.Events[i:], maxBytes)
	evs = append([]workflows.Event(nil), evs...)
	last := evs[len(evs)-1].Sequence
	return &eventsRead{
		Events: evs, Last: ev.LastSequence, More: more, Tenant: e.tenant,
		Terminal: ev.Terminal && !more && last == ev.LastSequence,
	}, true
}

// turnEventsBytes is the bound of the events a resolve update is asked to carry
// (workflows.MaxResolveEventsBytes); a poll answered from them is cut into pages of
// Config.EventsPageBytes as a query's would be.
func (s *Server) turnEventsBytes() int { return workflows.MaxResolveEventsBytes }

// keepTurnEvents keeps the events the resolve update's result res carried for run runID.
func (s *Server) keepTurnEvents(runID string, res *workflows.ResolveUpdateResult) {
	s.turnEvents.put(runID, res.Tenant, res.Events, time.Now())
}

// answerPoll answers a poll with the page res after the tenant check, in the
// reader's major (events_render.go).
func (s *Server) answerPoll(c echo.Context, runID string, res *eventsRead) error {
	if p := principalOf(c); p != nil && res.Tenant != p.Tenant {
		return notFound("run %q not found", runID)
	}
	if isV2(c) {
		return s.answerPollV2(c, runID, res.Events, res.Terminal, res.Last)
	}
	evs, err := eventsV1(res.Events)
	if err != nil {
		return err
	}
	page := *res
	page.Events = evs
	return c.JSON(http.StatusOK, eventsResponse(&page))
}
