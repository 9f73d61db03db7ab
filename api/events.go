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
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/protocol"
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
	protocol.EvRunStarted: true, protocol.EvRunCompleted: true, protocol.EvRunFailed: true, protocol.EvRunCancelled: true,
	protocol.EvRunPaused: true, protocol.EvRunResumed: true,
	protocol.EvNodeCompleted: true, protocol.EvNodeFailed: true, protocol.EvNodeSkipped: true, protocol.EvNodeSuspended: true,
	protocol.EvNodeDispatched: true, protocol.EvApprovalRequested: true, protocol.EvApprovalReceived: true,
	protocol.EvArtifactCreated: true, protocol.EvWorkspaceUpdated: true,
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
	return t == protocol.EvRunCompleted || t == protocol.EvRunFailed || t == protocol.EvRunCancelled
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
				return f, codeErr(CodeUnsupportedStreamMode, "streamMode \"values\" cannot be combined with other modes").with("supported", supportedModes)
			}
			f.values = true
		case ModeUpdates:
			f.updates = true
		case ModeMessages:
			f.messages = true
		case ModeDebug:
			f.debug = true
		default:
			return f, codeErr(CodeUnsupportedStreamMode, "unsupported streamMode %q", strings.TrimSpace(m)).with("supported", supportedModes)
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
	case f.messages && t == protocol.EvMessageChunk:
		return true
	}
	return false
}

// eventsRead is one page of a run's log as readEvents found it.
type eventsRead struct {
	Events []workflows.Event
	// Last is the sequence of the log's newest event (-1 when empty).
	Last int64
	// Terminal: the run has ended and Events reach its terminal event.
	Terminal bool
	// More: events after the returned ones exist now (the page stopped at its bound).
	More   bool
	Tenant string
}

// readEvents reads one page of the run's events with Sequence > after: from the run's
// current execution, or, for a cursor before the events it holds, from the earlier
// execution that holds them (segments.go): decoded from its history where it recorded
// them, queried where it did not. SSE, JSON reads, polls and the feed all read here.
func (s *Server) readEvents(ctx context.Context, runID string, after int64) (*eventsRead, error) {
	req := workflows.EventsRequest{After: after, MaxBytes: s.pageBytes()}
	cur, err := s.queryEvents(ctx, runID, "", req)
	if err != nil {
		return nil, err
	}
	res := &eventsRead{Events: cur.Events, Last: cur.LastSequence, More: cur.More, Tenant: cur.Tenant}
	if len(cur.Events) == 0 && after+1 < cur.FirstSequence && after < cur.LastSequence {
		if res.Events, err = s.earlierEvents(ctx, runID, cur, after, req); err != nil {
			return nil, err
		}
		if n := len(res.Events); n > 0 {
			res.More = res.Events[n-1].Sequence < cur.LastSequence
		}
	}
	n := len(res.Events)
	res.Terminal = cur.Terminal && !res.More && (n == 0 && after >= cur.LastSequence || n > 0 && res.Events[n-1].Sequence == cur.LastSequence)
	return res, nil
}

// queryEvents asks one execution of the run (exec "" is the current one) for a page.
// The current execution is asked on the condition that it did not close uncleanly: a
// run Temporal closed without its own terminal event (terminated, timed out; closed.go)
// is asked again without it, and its log is complete: nothing will ever be appended.
func (s *Server) queryEvents(ctx context.Context, runID, exec string, req workflows.EventsRequest) (*workflows.EventsPage, error) {
	var (
		v        converter.EncodedValue
		err      error
		unclean  bool
		closedAs enumspb.WorkflowExecutionStatus
	)
	if exec == "" {
		var resp *client.QueryWorkflowWithOptionsResponse
		resp, err = s.tc.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
			WorkflowID: runID, QueryType: workflows.EventsQuery, Args: []any{req},
			QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY,
		})
		if err == nil && resp.QueryRejected != nil {
			unclean, closedAs = true, resp.QueryRejected.GetStatus()
			v, err = s.tc.QueryWorkflow(ctx, runID, "", workflows.EventsQuery, req)
		} else if err == nil {
			v = resp.QueryResult
		}
	} else {
		v, err = s.tc.QueryWorkflow(ctx, runID, exec, workflows.EventsQuery, req)
	}
	if err != nil {
		return nil, s.temporalErr(err, runID)
	}
	if v == nil {
		return nil, fmt.Errorf("run %s returned no events page", runID)
	}
	var page workflows.EventsPage
	if err := v.Get(&page); err != nil {
		return nil, fmt.Errorf("decoding the events of run %s: %w", runID, err)
	}
	if page.Events == nil {
		page.Events = []workflows.Event{}
	}
	if unclean && closedAs != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		page.Terminal = true
	}
	return &page, nil
}

// readEventsRetrying reads like readEvents, but retries a query Temporal could not
// answer in time (a busy worker) while ctx lasts: a waiting reader gets its events
// late rather than an error.
func (s *Server) readEventsRetrying(ctx context.Context, runID string, after int64) (*eventsRead, error) {
	for {
		res, err := s.readEvents(ctx, runID, after)
		var apiErr *Error
		if err == nil || !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || ctx.Err() != nil {
			return res, err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// pageBytes bounds one page of events (Config.EventsPageBytes).
func (s *Server) pageBytes() int { return s.cfg.EventsPageBytes }

// EventsResponse is the JSON answer of the events and poll endpoints.
type EventsResponse struct {
	Events     []workflows.Event `json:"events"`
	IsComplete bool              `json:"isComplete"`
	// HasMore is set when the page stopped at its size bound with more events after
	// it: read on with lastSequence (or afterSequence) = the last event's sequence.
	HasMore bool `json:"hasMore,omitempty"`
}

func eventsResponse(res *eventsRead) EventsResponse {
	evs := res.Events
	if evs == nil {
		evs = []workflows.Event{}
	}
	return EventsResponse{Events: evs, IsComplete: res.Terminal, HasMore: res.More}
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
	if wantsJSON(c.Request().Header.Get(echo.HeaderAccept)) {
		// One page, at once; the page's query also answers the tenant check.
		after, err := parseCursorOf(c)
		if err != nil {
			return err
		}
		res, err := s.readEvents(ctx, id, after)
		if err != nil {
			return err
		}
		if p != nil && res.Tenant != p.Tenant {
			return notFound("run %q not found", id)
		}
		return s.answerEvents(c, id, res)
	}
	snap, err := s.snapshot(ctx, p, id)
	if err != nil {
		return err
	}
	// Read only now, after the run was found and its tenant checked (RFC 0213 §A): the
	// cursor never changes the answer for a run the caller cannot read.
	after, err := parseLastEventID(c)
	if err != nil {
		return err
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
	// pollReadTimeout is the least time a poll tries to read the events that exist.
	pollReadTimeout = 10 * time.Second
)

// parseCursorOf reads the cursor of the JSON and poll reads of the request's major:
// v1's lastSequence and afterSequence (parseCursor), or v2's afterSequence alone
// (events.md §Poll: exclusive, absent from the first event; v1's lastSequence is
// refused so a v1 cursor is never read with v2's meaning).
func parseCursorOf(c echo.Context) (int64, error) {
	if !isV2(c) {
		return parseCursor(c.QueryParam("lastSequence"), c.QueryParam("afterSequence"))
	}
	if c.QueryParam("lastSequence") != "" {
		return 0, badRequest("lastSequence is the /v1 cursor; at major 2 read on with afterSequence (exclusive)").with("field", "lastSequence")
	}
	return parseCursor("", c.QueryParam("afterSequence"))
}

// parseLastEventID reads an SSE resume's Last-Event-ID: the sequence to resume after
// (-1 without one). v1 refuses what is not a non-negative integer; v2 (RFC 0213 §A)
// takes any well-formed integer as an exclusive cursor, one below -1 as -1, and refuses
// what is not an integer.
func parseLastEventID(c echo.Context) (int64, error) {
	lei := strings.TrimSpace(c.Request().Header.Get("Last-Event-ID"))
	if lei == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(lei, 10, 64)
	if isV2(c) {
		if err != nil {
			return 0, badRequest("Last-Event-ID %q must be an event sequence (an integer)", lei).with("field", "Last-Event-ID")
		}
		return max(n, -1), nil
	}
	if err != nil || n < 0 {
		return 0, badRequest("Last-Event-ID %q must be a non-negative event sequence", lei)
	}
	return n, nil
}

// parseCursor reads the cursor of the JSON and poll reads. Without lastSequence, and
// with lastSequence=0, every event from sequence 0 is returned; otherwise events
// strictly after it. afterSequence (v2's name) is always strictly after, so
// afterSequence=0 starts at event 1; it wins when both are given.
func parseCursor(lastSeq, afterSeq string) (after int64, err error) {
	after = -1
	if lastSeq != "" {
		n, perr := strconv.ParseInt(lastSeq, 10, 64)
		if perr != nil || n < 0 {
			return 0, badRequest("lastSequence %q must be a non-negative integer", lastSeq).with("field", "lastSequence")
		}
		if n > 0 {
			after = n
		}
	}
	if afterSeq != "" {
		n, perr := strconv.ParseInt(afterSeq, 10, 64)
		if perr != nil || n < -1 {
			return 0, badRequest("afterSequence %q must be an integer >= -1", afterSeq).with("field", "afterSequence")
		}
		after = n
	}
	return after, nil
}

// parsePoll reads the cursor (parseCursor) and timeout.
func parsePoll(lastSeq, afterSeq, timeout string) (after int64, wait time.Duration, err error) {
	wait = defaultPollTimeout
	if after, err = parseCursor(lastSeq, afterSeq); err != nil {
		return 0, 0, err
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
	after, wait, err := parsePoll(c.QueryParam("lastSequence"), c.QueryParam("afterSequence"), c.QueryParam("timeout"))
	if err != nil {
		return err
	}
	if isV2(c) {
		if after, err = parseCursorOf(c); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	until := time.Now().Add(wait)
	s.awaitPollCall(c, id, wait) // a resolve update of the run in flight (updatecall.go)
	if res, ok := s.turnEvents.page(id, after, s.pageBytes(), time.Now()); ok {
		return s.answerPoll(c, id, res) // the events a resolve update carried (turnevents.go)
	}
	// The first read answers the tenant check and, when events are there already, the
	// poll itself; only an empty page waits on the run's history. The timeout bounds
	// that wait, not the read of events that exist: a read that did not happen never
	// answers an empty page. A read Temporal does not answer is tried again for at
	// least pollReadTimeout, then answered with its error.
	wait = time.Until(until) // what a wait on a resolve update left
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	// A feed of the run in this process that holds the cursor answers (or waits)
	// without a read of the poll's own: the poll a client sends while its turn's
	// model round runs costs no query.
	if f, tenant, ok := s.followLive(id, after); ok {
		defer f.close()
		if p := principalOf(c); p != nil && tenant != p.Tenant {
			return notFound("run %q not found", id)
		}
		return s.pollFeed(c, ctx, wctx, id, f)
	}
	rctx, rcancel := context.WithTimeout(ctx, max(wait, pollReadTimeout))
	defer rcancel()
	rstop := context.AfterFunc(s.ctx, rcancel)
	defer rstop()
	res, err := s.readEventsRetrying(rctx, id, after)
	if err != nil {
		return err
	}
	if len(res.Events) > 0 || res.Terminal {
		return s.answerPoll(c, id, res)
	}
	if p := principalOf(c); p != nil && res.Tenant != p.Tenant {
		return notFound("run %q not found", id)
	}
	// Nothing yet: wait on the run's shared feed.
	f := s.follow(wctx, id, after)
	defer f.close()
	return s.pollFeed(c, ctx, wctx, id, f)
}

// pollFeed answers a poll with the events f has after its cursor, waiting for them
// until wctx ends (an empty page then, unless the request itself ended).
func (s *Server) pollFeed(c echo.Context, ctx, wctx context.Context, id string, f *follower) error {
	evs, terminal, _, err := f.next(wctx, nil)
	if err != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			// Timed out with nothing new: an empty page.
			return s.answerPollPage(c, id, nil, false)
		}
		return err
	}
	return s.answerPollPage(c, id, evs, terminal)
}
