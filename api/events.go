package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/workflows"
)

// Stream modes of GET /v1/runs/{runId}/events.
const (
	ModeValues   = "values"
	ModeUpdates  = "updates"
	ModeMessages = "messages"
	ModeDebug    = "debug"
)

var supportedModes = []string{ModeValues, ModeUpdates, ModeMessages, ModeDebug}

// updatesTypes are the event types of the "updates" mode (openwop-host.md §6.1).
var updatesTypes = map[string]bool{
	"run.started": true, "run.completed": true, "run.failed": true, "run.cancelled": true,
	"run.paused": true, "run.resumed": true,
	"node.completed": true, "node.failed": true, "node.skipped": true, "node.suspended": true, "node.dispatched": true,
	"approval.requested": true, "approval.received": true, "artifact.created": true, "workspace.updated": true,
}

var updatesPrefixes = []string{"clarification.", "interrupt.", "eval.", "deployment."}

func isUpdate(t string) bool {
	if updatesTypes[t] {
		return true
	}
	for _, p := range updatesPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func isTerminalEvent(t string) bool {
	return t == "run.completed" || t == "run.failed" || t == "run.cancelled"
}

// streamFilter is a parsed streamMode.
type streamFilter struct {
	values, updates, messages, debug bool
}

// parseStreamMode validates ?streamMode= (default updates).
func parseStreamMode(q string) (streamFilter, error) {
	var f streamFilter
	if q == "" {
		f.updates = true
		return f, nil
	}
	parts := strings.Split(q, ",")
	for _, m := range parts {
		switch strings.TrimSpace(m) {
		case ModeValues:
			if len(parts) > 1 {
				return f, apiErr(http.StatusBadRequest, CodeUnsupportedStreamMode, "streamMode \"values\" cannot be combined with other modes").with("supported", supportedModes)
			}
			f.values = true
		case ModeUpdates:
			f.updates = true
		case ModeMessages:
			f.messages = true
		case ModeDebug:
			f.debug = true
		default:
			return f, apiErr(http.StatusBadRequest, CodeUnsupportedStreamMode, "unsupported streamMode %q", strings.TrimSpace(m)).with("supported", supportedModes)
		}
	}
	return f, nil
}

func (f streamFilter) match(t string) bool {
	switch {
	case f.debug:
		return true
	case f.updates && isUpdate(t):
		return true
	case f.messages && t == EventTypeMessageChunk:
		return true
	}
	return false
}

// events reads the run's events with Sequence > after.
func (s *Server) events(ctx context.Context, runID string, after int64) (*workflows.EventsPage, error) {
	v, err := s.tc.QueryWorkflow(ctx, runID, "", workflows.EventsQuery, workflows.EventsRequest{After: after})
	if err != nil {
		return nil, s.temporalErr(err, runID)
	}
	var page workflows.EventsPage
	if err := v.Get(&page); err != nil {
		return nil, fmt.Errorf("decoding the events of run %s: %w", runID, err)
	}
	if page.Events == nil {
		page.Events = []workflows.Event{}
	}
	return &page, nil
}

// eventsRetrying reads the events after a cursor like events, but retries a query
// Temporal could not answer in time (a busy worker) while ctx lasts: a waiting reader
// gets its events late rather than an error.
func (s *Server) eventsRetrying(ctx context.Context, runID string, after int64) (*workflows.EventsPage, error) {
	for {
		page, err := s.events(ctx, runID, after)
		var apiErr *Error
		if err == nil || !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || ctx.Err() != nil {
			return page, err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// historyWaker signals whenever the run's Temporal history grows. It follows the
// history with the server's long poll (no polling loop of our own): every batch of new
// history events means the workflow may have appended OpenWOP events.
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
			if _, err := it.Next(); err != nil {
				return
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

// follower reads a run's log forward, waking on history growth.
type follower struct {
	s      *Server
	runID  string
	after  int64
	waker  *historyWaker
	parent context.Context
	// readEmpty skips the first read: the caller already found nothing after the cursor.
	readEmpty bool
}

func (s *Server) follow(ctx context.Context, runID string, after int64) *follower {
	return &follower{s: s, runID: runID, after: after, parent: ctx}
}

// next returns the events after the cursor, waiting up to the context's deadline (or
// until tick fires, if non-nil) for some to appear. terminal is true once the log holds
// the terminal event or the workflow has closed.
func (f *follower) next(ctx context.Context, tick <-chan time.Time) (evs []workflows.Event, terminal bool, ticked bool, err error) {
	for {
		if f.readEmpty {
			// The caller has just read the log at the cursor and found nothing new.
			f.readEmpty = false
		} else {
			page, err := f.s.eventsRetrying(ctx, f.runID, f.after)
			if err != nil {
				return nil, false, false, err
			}
			if len(page.Events) > 0 {
				f.after = page.Events[len(page.Events)-1].Sequence
			}
			if len(page.Events) > 0 || page.Terminal {
				return page.Events, page.Terminal, false, nil
			}
		}
		if f.waker == nil {
			f.waker = f.s.newHistoryWaker(f.parent, f.runID)
		}
		select {
		case <-f.waker.C:
		case <-f.waker.Done:
			// The iterator ended: the workflow closed (or continued as new). Read once
			// more; if it is still open, follow the new run's history.
			f.waker = nil
			page, err := f.s.events(ctx, f.runID, f.after)
			if err != nil {
				return nil, false, false, err
			}
			if len(page.Events) > 0 {
				f.after = page.Events[len(page.Events)-1].Sequence
				return page.Events, page.Terminal, false, nil
			}
			if page.Terminal || !f.s.workflowRunning(ctx, f.runID) {
				return nil, true, false, nil
			}
		case <-tick:
			return nil, false, true, nil
		case <-ctx.Done():
			return nil, false, false, ctx.Err()
		}
	}
}

func (f *follower) close() {
	if f.waker != nil {
		f.waker.Stop()
	}
}

func (s *Server) workflowRunning(ctx context.Context, runID string) bool {
	d, err := s.tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return false
	}
	return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// EventsResponse is the JSON answer of the events and poll endpoints.
type EventsResponse struct {
	Events     []workflows.Event `json:"events"`
	IsComplete bool              `json:"isComplete"`
}

func wantsJSON(accept string) bool {
	if accept == "" {
		return false
	}
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/event-stream")
}

func (s *Server) handleEvents(c echo.Context) error {
	id, err := s.runParam(c)
	if err != nil {
		return err
	}
	// The stream mode is validated before any content negotiation.
	filter, err := parseStreamMode(c.QueryParam("streamMode"))
	if err != nil {
		return err
	}
	buffer, err := parseBufferMs(c.QueryParam("bufferMs"))
	if err != nil {
		return err
	}
	p := principalOf(c)
	ctx := c.Request().Context()
	snap, err := s.snapshot(ctx, p, id)
	if err != nil {
		return err
	}
	if wantsJSON(c.Request().Header.Get(echo.HeaderAccept)) {
		page, err := s.events(ctx, id, -1)
		if err != nil {
			return err
		}
		// A run Temporal closed without its terminal event is complete too (closed.go).
		return c.JSON(http.StatusOK, EventsResponse{Events: page.Events, IsComplete: page.Terminal || isTerminal(snap.Status)})
	}
	after := int64(-1)
	if lei := strings.TrimSpace(c.Request().Header.Get("Last-Event-ID")); lei != "" {
		n, err := strconv.ParseInt(lei, 10, 64)
		if err != nil || n < 0 {
			return badRequest("Last-Event-ID %q must be a non-negative event sequence", lei)
		}
		after = n
	}
	return s.streamSSE(c, snap, id, after, filter, buffer)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

const (
	defaultPollTimeout = 30 * time.Second
	maxPollTimeout     = 60 * time.Second
)

// parsePoll reads lastSequence and timeout. Without lastSequence, and with
// lastSequence=0, every event from sequence 0 is returned; otherwise events strictly
// after it.
func parsePoll(lastSeq, timeout string) (after int64, wait time.Duration, err error) {
	after, wait = -1, defaultPollTimeout
	if lastSeq != "" {
		n, perr := strconv.ParseInt(lastSeq, 10, 64)
		if perr != nil || n < 0 {
			return 0, 0, badRequest("lastSequence %q must be a non-negative integer", lastSeq).with("field", "lastSequence")
		}
		if n > 0 {
			after = n
		}
	}
	if timeout != "" {
		n, perr := strconv.Atoi(timeout)
		if perr != nil || n < 1 || n > 60 {
			return 0, 0, badRequest("timeout %q must be an integer number of seconds in 1..60", timeout).with("field", "timeout")
		}
		wait = time.Duration(n) * time.Second
	}
	return after, wait, nil
}

func (s *Server) handlePoll(c echo.Context) error {
	id, err := s.runParam(c)
	if err != nil {
		return err
	}
	after, wait, err := parsePoll(c.QueryParam("lastSequence"), c.QueryParam("timeout"))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// The first read answers the tenant check and, when events are there already, the
	// poll itself; only an empty page waits on the run's history.
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	page, err := s.eventsRetrying(wctx, id, after)
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			return c.JSON(http.StatusOK, EventsResponse{Events: []workflows.Event{}, IsComplete: false})
		}
		return err
	}
	if p := principalOf(c); p != nil && page.Tenant != p.Tenant {
		return notFound("run %q not found", id)
	}
	if len(page.Events) > 0 || page.Terminal {
		return c.JSON(http.StatusOK, EventsResponse{Events: page.Events, IsComplete: page.Terminal})
	}
	f := s.follow(wctx, id, after)
	f.readEmpty = true
	defer f.close()
	evs, terminal, _, err := f.next(wctx, nil)
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			// Timed out with nothing new: an empty page.
			return c.JSON(http.StatusOK, EventsResponse{Events: []workflows.Event{}, IsComplete: false})
		}
		return err
	}
	if evs == nil {
		evs = []workflows.Event{}
	}
	return c.JSON(http.StatusOK, EventsResponse{Events: evs, IsComplete: terminal})
}
