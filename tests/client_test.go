package tests

// The tests' one client dialect over the harness (harness_test.go): a run's snapshot
// and event log read over HTTP, the one wait (waitFor, on a condition), and the one SSE
// reader (openStream). The conformance suite (conformance_e2e_test.go) layers schema
// validation over the same readers.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// event is a run event as read over HTTP (the event log's JSON form, an SSE frame's
// data).
type event = workflows.Event

// ---- reads ----

// getJSON sends GET path with the client's key and Accept: application/json, requires
// 200 and returns the body.
func getJSON(t *testing.T, c *apiClient, path string) []byte {
	t.Helper()
	raw, ok := tryGetJSON(t, c, path)
	require.True(t, ok, "GET %s: %s", path, raw)
	return raw
}

// tryGetJSON is getJSON that answers ok false for a 503 (Temporal answered late on a
// busy machine, and a client reads again) instead of failing the test; the waits read
// with it.
func tryGetJSON(t *testing.T, c *apiClient, path string) (raw []byte, ok bool) {
	t.Helper()
	status, _, raw := c.doRaw(http.MethodGet, path, nil, map[string]string{"Authorization": "Bearer " + c.Key, "Accept": "application/json"})
	if status == http.StatusServiceUnavailable {
		return raw, false
	}
	require.Equal(t, http.StatusOK, status, "GET %s: %s", path, raw)
	return raw, true
}

// snapshotJSON reads GET /v1/runs/{id}: the run's snapshot as sent.
func snapshotJSON(t *testing.T, c *apiClient, id string) []byte {
	t.Helper()
	return getJSON(t, c, "/v1/runs/"+id)
}

// snapshot reads and decodes the run's snapshot.
func snapshot(t *testing.T, c *apiClient, id string) workflows.Snapshot {
	t.Helper()
	return decodeSnapshot(t, snapshotJSON(t, c, id))
}

func decodeSnapshot(t *testing.T, raw []byte) workflows.Snapshot {
	t.Helper()
	var s workflows.Snapshot
	require.NoError(t, json.Unmarshal(raw, &s), "snapshot: %s", raw)
	return s
}

// eventsJSON reads GET /v1/runs/{id}/events in its JSON form: the run's whole event log
// as sent.
func eventsJSON(t *testing.T, c *apiClient, id string) []byte {
	t.Helper()
	return getJSON(t, c, "/v1/runs/"+id+"/events")
}

// events reads and decodes the run's whole event log.
func events(t *testing.T, c *apiClient, id string) []event {
	t.Helper()
	return decodeEvents(t, eventsJSON(t, c, id))
}

func decodeEvents(t *testing.T, raw []byte) []event {
	t.Helper()
	var page struct {
		Events []event `json:"events"`
	}
	require.NoError(t, json.Unmarshal(raw, &page), "events: %s", raw)
	return page.Events
}

// ---- what the tests read of events ----

// ofType returns the events of one type, in log order.
func ofType(evs []event, typ string) []event {
	var out []event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// types returns the events' types, in log order.
func types(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// eventParts is what the tests read of an event's payload: the conversation turn it
// carries (exchanged, opened, closed) and its error.
type eventParts struct {
	Turn        *protocol.Turn `json:"turn"`
	InitialTurn *protocol.Turn `json:"initialTurn"`
	FinalTurn   *protocol.Turn `json:"finalTurn"`
	Error       *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// partsOf decodes an event's payload into eventParts.
func partsOf(t *testing.T, e event) eventParts {
	t.Helper()
	var p eventParts
	if len(e.Payload) > 0 {
		require.NoError(t, json.Unmarshal(e.Payload, &p), "payload of %s: %s", e.Type, e.Payload)
	}
	return p
}

// turnsIn returns the conversation turns recorded as conversation.exchanged.
func turnsIn(t *testing.T, evs []event) []protocol.Turn {
	t.Helper()
	var out []protocol.Turn
	for _, e := range ofType(evs, protocol.EvConversationExchanged) {
		if p := partsOf(t, e); p.Turn != nil {
			out = append(out, *p.Turn)
		} else {
			out = append(out, protocol.Turn{})
		}
	}
	return out
}

// textOf returns the text of a turn's content ({"text": ...}).
func textOf(t *testing.T, turn protocol.Turn) string {
	t.Helper()
	var body struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(turn.Content, &body), "turn content: %s", turn.Content)
	return body.Text
}

// ---- the one wait ----

// pollEvery is how often waitFor reads again.
const pollEvery = 100 * time.Millisecond

// waitFor reads until ok holds for what it read, for at most within, and returns that
// read; otherwise it fails the test with what it waited for and the last read. read
// runs on the test's goroutine, so it may fail the test itself.
func waitFor[T any](t *testing.T, within time.Duration, what string, read func() T, ok func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := read()
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %s; last read: %s", what, within, describe(v))
		}
		time.Sleep(pollEvery)
	}
}

// describe renders a read for waitFor's failure message.
func describe(v any) string {
	switch v := v.(type) {
	case workflows.Snapshot:
		return fmt.Sprintf("status %s, pack %+v, conversations %+v, error %+v", v.Status, v.Pack, v.Conversations, v.Error)
	case *workflows.Snapshot:
		if v == nil {
			return "no snapshot"
		}
		return describe(*v)
	case *[]event:
		if v == nil {
			return "no event log"
		}
		return fmt.Sprint(types(*v))
	}
	return fmt.Sprintf("%+v", v)
}

// waitSnapshot reads the run's snapshot until ok holds and returns it (a 503 is read
// again).
func waitSnapshot(t *testing.T, c *apiClient, id string, within time.Duration, what string, ok func(workflows.Snapshot) bool) workflows.Snapshot {
	t.Helper()
	s := waitFor(t, within, "run "+id+" "+what, func() *workflows.Snapshot {
		raw, answered := tryGetJSON(t, c, "/v1/runs/"+id)
		if !answered {
			return nil
		}
		s := decodeSnapshot(t, raw)
		return &s
	}, func(s *workflows.Snapshot) bool { return s != nil && ok(*s) })
	return *s
}

// waitEvents reads the run's event log until ok holds and returns it (a 503 is read
// again).
func waitEvents(t *testing.T, c *apiClient, id string, within time.Duration, what string, ok func([]event) bool) []event {
	t.Helper()
	evs := waitFor(t, within, "run "+id+" "+what, func() *[]event {
		raw, answered := tryGetJSON(t, c, "/v1/runs/"+id+"/events")
		if !answered {
			return nil
		}
		evs := decodeEvents(t, raw)
		return &evs
	}, func(evs *[]event) bool { return evs != nil && ok(*evs) })
	return *evs
}

// isTerminalType reports whether an event type ends a run.
func isTerminalType(typ string) bool {
	return typ == "run.completed" || typ == "run.failed" || typ == "run.cancelled"
}

// waitEnded waits until the run's log ends with its terminal event and returns the log.
func waitEnded(t *testing.T, c *apiClient, id string, within time.Duration) []event {
	t.Helper()
	return waitEvents(t, c, id, within, "ended", func(evs []event) bool {
		return len(evs) > 0 && isTerminalType(evs[len(evs)-1].Type)
	})
}

// ---- the one SSE reader ----

// sseEvent is one frame of an SSE stream; ID is empty for a frame without an id line.
type sseEvent struct {
	ID, Event, Data string
}

// sseStream reads an SSE stream on a goroutine of its own.
type sseStream struct {
	C      chan sseEvent // its frames; closed when the stream ends
	Status int
	Header http.Header
	Body   []byte // the body of an answer other than 200 (then C is closed at once)
	cancel context.CancelFunc
}

// lastEventID is the header that resumes a stream after id (none when id is empty).
func lastEventID(id string) map[string]string {
	if id == "" {
		return nil
	}
	return map[string]string{"Last-Event-ID": id}
}

// openStream opens GET path as an SSE stream with the client's key and the headers
// given. The stream is closed when the test ends, or earlier by Close.
func openStream(t *testing.T, c *apiClient, path string, hdr map[string]string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.Key)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "open the stream %s", path)
	s := &sseStream{C: make(chan sseEvent, 4096), Status: resp.StatusCode, Header: resp.Header, cancel: cancel}
	if resp.StatusCode != http.StatusOK {
		s.Body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		close(s.C)
		return s
	}
	go func() {
		defer close(s.C)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		var cur sseEvent
		for sc.Scan() {
			field, value, _ := strings.Cut(sc.Text(), ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "": // the blank line that ends a frame, or a comment
				if sc.Text() == "" && cur != (sseEvent{}) {
					s.C <- cur
					cur = sseEvent{}
				}
			case "id":
				cur.ID = value
			case "event":
				cur.Event = value
			case "data":
				if cur.Data != "" {
					cur.Data += "\n"
				}
				cur.Data += value
			}
		}
	}()
	return s
}

// Close ends the stream from the client's side.
func (s *sseStream) Close() { s.cancel() }

// until reads frames until one matches (returned last) and returns them all; it fails
// the test when the stream ends or within passes first.
func (s *sseStream) until(t *testing.T, within time.Duration, what string, match func(sseEvent) bool) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.After(within)
	for {
		ev, ok, timedOut := s.next(deadline)
		switch {
		case timedOut:
			t.Fatalf("no %s within %s; got %s", what, within, frameNames(got))
		case !ok:
			t.Fatalf("the stream ended before %s; got %s", what, frameNames(got))
		}
		got = append(got, ev)
		if match(ev) {
			return got
		}
	}
}

// next waits for the stream's next frame until deadline fires: ok is false when the
// stream has ended, timedOut true when deadline fired first.
func (s *sseStream) next(deadline <-chan time.Time) (ev sseEvent, ok, timedOut bool) {
	select {
	case ev, ok = <-s.C:
		return ev, ok, false
	case <-deadline:
		return sseEvent{}, false, true
	}
}

// rest reads frames until the server ends the stream or within passes (then the client
// closes it), handing each to onFrame when it is not nil as it arrives. It returns the
// frames and whether the server ended the stream.
func (s *sseStream) rest(within time.Duration, onFrame func(sseEvent)) ([]sseEvent, bool) {
	var got []sseEvent
	deadline := time.After(within)
	for {
		ev, ok, timedOut := s.next(deadline)
		switch {
		case timedOut:
			s.Close()
			for ev := range s.C {
				got = append(got, ev)
			}
			return got, false
		case !ok:
			return got, true
		}
		got = append(got, ev)
		if onFrame != nil {
			onFrame(ev)
		}
	}
}

// frameNames returns the frames' event names.
func frameNames(fs []sseEvent) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Event
	}
	return out
}
