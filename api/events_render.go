package api

// The answers of the event reads, rendered for the reader's major (render.go): the
// JSON read and the poll. The pages themselves are read the same way for both.

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/workflows"
)

// answerEvents answers GET .../events with Accept: application/json: v1's
// {events, isComplete, hasMore?}, or at v2 {runId, events, lastSequence, isTerminal,
// hasMore?}, the shape of v2's poll without the status.
func (s *Server) answerEvents(c echo.Context, runID string, res *eventsRead) error {
	if !isV2(c) {
		evs, err := eventsV1(res.Events)
		if err != nil {
			return err
		}
		page := *res
		page.Events = evs
		return c.JSON(http.StatusOK, eventsResponse(&page))
	}
	w := s.wireOf(c, res.Tenant)
	docs, err := w.eventsV2(res.Events)
	if err != nil {
		return err
	}
	body := map[string]any{"runId": w.id(runID), "events": docs, "lastSequence": res.Last, "isTerminal": res.Terminal}
	if res.More {
		body["hasMore"] = true
	}
	return c.JSON(http.StatusOK, body)
}

// answerPollPage answers a poll with the events a wait on the run returned (none when
// it timed out).
func (s *Server) answerPollPage(c echo.Context, runID string, evs []workflows.Event, terminal bool) error {
	if isV2(c) {
		return s.answerPollV2(c, runID, evs, terminal, -1)
	}
	evs, err := eventsV1(evs)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []workflows.Event{}
	}
	return c.JSON(http.StatusOK, EventsResponse{Events: evs, IsComplete: terminal})
}

// answerPollV2 is v2's poll answer, exactly {runId, events, lastSequence, status,
// isTerminal} (events.md §Poll). The status is the snapshot's, read after the page, so
// it is never older than the events; isTerminal says the page reaches the run's
// terminal event (a client stops reading then). lastSequence is the highest sequence
// in the log (-1 when empty), at least the page's last.
func (s *Server) answerPollV2(c echo.Context, runID string, evs []workflows.Event, terminal bool, last int64) error {
	snap, err := s.snapshot(c.Request().Context(), principalOf(c), runID)
	if err != nil {
		return err
	}
	w := s.wireOf(c, snap.Owner.Tenant)
	docs, err := w.eventsV2(evs)
	if err != nil {
		return err
	}
	last = max(last, snap.LastSequence)
	if n := len(evs); n > 0 {
		last = max(last, evs[n-1].Sequence)
	}
	return c.JSON(http.StatusOK, map[string]any{
		"runId": w.id(runID), "events": docs, "lastSequence": last, "status": snap.Status, "isTerminal": terminal,
	})
}
