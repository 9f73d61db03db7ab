package api

// Reading a long run's older events: the events a run's current execution does not
// hold are in the executions before it (continue-as-new segments), which are closed.
// A query on a closed execution makes a worker replay its whole history first, so a
// read that reached back through executions cost a replay each. Executions that
// record their events in their history (workflows.EventsRecord markers; their link
// says Recorded) are read from it instead, with no worker involved; links to older
// ones come from each execution's start event (its carried state names the newest
// executions before it and a sparse index of older ones), so finding the execution
// that holds an event costs a few reads of one history event, whatever the run's
// length. Executions of older code, which did not record their events, are queried
// as before.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/payloadcodec"
	"github.com/wop-dev/wop/workflows"
)

// maxSegmentHops bounds the walk back through a run's executions.
const maxSegmentHops = 1000

// sideEffectMarker is the marker name of workflow.SideEffect (the SDK's), and
// sideEffectData the key of its value in the marker's details.
const (
	sideEffectMarker = "SideEffect"
	sideEffectData   = "data"
)

// earlierEvents reads one page of the events after the cursor from the executions
// before the current one (cur, which holds events from cur.FirstSequence on).
func (s *Server) earlierEvents(ctx context.Context, runID string, cur *workflows.EventsPage, after int64, req workflows.EventsRequest) ([]workflows.Event, error) {
	want := after + 1
	links := append(append([]activities.Segment(nil), cur.Earlier...), cur.Index...)
	oldest := cur.FirstSequence
	visited := map[string]bool{}
	for hops := 0; ; hops++ {
		if hops > maxSegmentHops {
			return nil, fmt.Errorf("run %s: event %d is more than %d executions back", runID, want, maxSegmentHops)
		}
		seg, holds, ok := pickSegment(links, want, visited)
		if !ok {
			return nil, fmt.Errorf("run %s: no execution names the one holding event %d (the oldest known starts at %d)", runID, want, oldest)
		}
		visited[seg.RunID] = true
		oldest = min(oldest, seg.FirstSequence)
		if holds && seg.Recorded {
			evs, err := s.recordedEvents(ctx, runID, seg, after, req.MaxBytes)
			if err == nil {
				return evs, nil
			}
			if !errors.Is(err, errNotRecorded) {
				return nil, err
			}
			s.log.Warn("An execution's event records are incomplete; querying it", "runId", runID, "execution", seg.RunID, "error", err)
		}
		if !holds && seg.Recorded {
			// An execution after the event, of the code that records: its start
			// event names the executions before it.
			next, err := s.startLinks(ctx, runID, seg.RunID)
			if err != nil {
				return nil, err
			}
			if len(next) == 0 {
				return nil, fmt.Errorf("run %s: execution %s names no execution before it, but event %d is older", runID, seg.RunID, want)
			}
			links = next
			continue
		}
		// Executions of code that did not record: query them as before. One that
		// does not hold the event names those before it.
		s.countEarlier(earlierQuery)
		page, err := s.queryEvents(ctx, runID, seg.RunID, req)
		if err != nil {
			return nil, err
		}
		if len(page.Events) > 0 || want >= page.FirstSequence {
			return page.Events, nil
		}
		links = append(append([]activities.Segment(nil), page.Earlier...), page.Index...)
		oldest = min(oldest, page.FirstSequence)
	}
}

// pickSegment chooses, among the links, the execution holding sequence want (holds),
// or else the one nearest after it not visited yet, whose own links reach further
// back; ok is false when there is neither.
func pickSegment(links []activities.Segment, want int64, visited map[string]bool) (seg activities.Segment, holds, ok bool) {
	for _, l := range links {
		if l.FirstSequence <= want && want <= l.LastSequence && !visited[l.RunID] {
			return l, true, true
		}
	}
	for _, l := range links {
		if l.FirstSequence > want && !visited[l.RunID] && (!ok || l.FirstSequence < seg.FirstSequence) {
			seg, ok = l, true
		}
	}
	return seg, false, ok
}

// errNotRecorded: an execution's history does not hold the events its link says it
// recorded (the reader then queries it).
var errNotRecorded = errors.New("events missing from the execution's records")

// recordedEvents reads the page of events after the cursor from the event records in
// the history of execution seg, which holds the cursor's next event. What it reads of
// the history is kept (closedCache): the next page of the same execution continues
// from there.
func (s *Server) recordedEvents(ctx context.Context, runID string, seg activities.Segment, after int64, maxBytes int) ([]workflows.Event, error) {
	if maxBytes <= 0 {
		maxBytes = workflows.DefaultEventsPageBytes
	}
	maxBytes = min(maxBytes, workflows.MaxEventsPageBytes)
	sr := s.closed.records(runID, seg)
	select {
	case sr.turn <- struct{}{}: // one reader reads an execution's history on at a time
	case <-ctx.Done():
		return nil, s.temporalErr(ctx.Err(), runID)
	}
	defer func() { <-sr.turn }()
	for {
		if page, ok := sr.page(after, maxBytes); ok {
			return page, nil
		}
		if sr.done {
			return nil, fmt.Errorf("%w: execution %s of run %s ends before event %d", errNotRecorded, seg.RunID, runID, sr.next())
		}
		s.countEarlier(earlierRecords)
		resp, err := s.tc.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: s.cfg.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: runID, RunId: seg.RunID},
			NextPageToken: sr.token,
		})
		if err != nil {
			return nil, s.segmentErr(err, runID, seg)
		}
		before := sr.bytes
		for _, ev := range resp.GetHistory().GetEvents() {
			if err := sr.take(ev, s.cfg.PayloadCodec); err != nil {
				s.closed.drop(sr)
				return nil, err
			}
		}
		sr.token = resp.GetNextPageToken()
		sr.done = len(sr.token) == 0 || sr.next() > seg.LastSequence
		s.closed.grew(sr, sr.bytes-before)
	}
}

// segmentRecords is what this API process has read of one closed execution's event
// records: its events from the execution's first on, as far as its history has been
// read, and where that read goes on. A closed execution never changes.
type segmentRecords struct {
	key    string
	turn   chan struct{} // holds one token while a reader reads the history on
	seg    activities.Segment
	events []workflows.Event
	bytes  int    // EventBytes of events
	token  []byte // the next history page
	done   bool   // the history is read to its end, or to the execution's last event
}

// next is the sequence of the next event the records expect.
func (sr *segmentRecords) next() int64 { return sr.seg.FirstSequence + int64(len(sr.events)) }

// take reads one history event: an event-record marker appends its events, which must
// follow those read before. A marker sealed by codec (nil: none) is opened first.
func (sr *segmentRecords) take(ev *historypb.HistoryEvent, codec *payloadcodec.Codec) error {
	m := ev.GetMarkerRecordedEventAttributes()
	if ev.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED || m.GetMarkerName() != sideEffectMarker {
		return nil
	}
	data := m.GetDetails()[sideEffectData]
	if codec != nil && data != nil {
		opened, err := codec.Decode(data.GetPayloads())
		if err != nil {
			return fmt.Errorf("%w: %v", errNotRecorded, err)
		}
		data = &commonpb.Payloads{Payloads: opened}
	}
	rec, ok, err := workflows.EventsRecordFrom(data)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotRecorded, err)
	}
	if !ok {
		return nil // another side effect's value
	}
	for i := range rec.Events {
		e := &rec.Events[i]
		switch {
		case e.Sequence < sr.next():
			continue
		case e.Sequence != sr.next():
			return fmt.Errorf("%w: event %d follows %d", errNotRecorded, e.Sequence, sr.next()-1)
		case e.Sequence > sr.seg.LastSequence:
			return nil
		}
		sr.events = append(sr.events, *e)
		sr.bytes += workflows.EventBytes(e)
	}
	return nil
}

// page cuts the page after the cursor from the events read, as an EventsQuery page is
// cut: the first event always, then as many as fit in maxBytes. ok is false when the
// events read end before the page does.
func (sr *segmentRecords) page(after int64, maxBytes int) ([]workflows.Event, bool) {
	i := max(after+1, sr.seg.FirstSequence) - sr.seg.FirstSequence
	page, size := []workflows.Event{}, 0
	for ; i < int64(len(sr.events)); i++ {
		b := workflows.EventBytes(&sr.events[i])
		if len(page) > 0 && size+b > maxBytes {
			return page, true
		}
		page, size = append(page, sr.events[i]), size+b
		if sr.events[i].Sequence >= sr.seg.LastSequence {
			return page, true
		}
	}
	return nil, false
}

// startLinks reads the links an execution started with from its first history event.
func (s *Server) startLinks(ctx context.Context, runID, execution string) ([]activities.Segment, error) {
	if links, ok := s.closed.links(runID, execution); ok {
		return links, nil
	}
	s.countEarlier(earlierLinks)
	seg := activities.Segment{RunID: execution, FirstSequence: -1}
	resp, err := s.tc.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace: s.cfg.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: runID, RunId: execution},
		MaximumPageSize: 1,
	})
	if err != nil {
		return nil, s.segmentErr(err, runID, seg)
	}
	evs := resp.GetHistory().GetEvents()
	if len(evs) == 0 || evs[0].GetWorkflowExecutionStartedEventAttributes() == nil {
		return nil, fmt.Errorf("run %s: execution %s has no start event", runID, execution)
	}
	var in struct {
		Carried json.RawMessage `json:"carried"`
	}
	if err := s.dc.FromPayloads(evs[0].GetWorkflowExecutionStartedEventAttributes().GetInput(), &in); err != nil {
		return nil, fmt.Errorf("run %s: decoding the input of execution %s: %w", runID, execution, err)
	}
	earlier, index, err := workflows.CarriedLinks(in.Carried)
	if err != nil {
		return nil, fmt.Errorf("run %s: execution %s: %w", runID, execution, err)
	}
	links := append(earlier, index...)
	s.closed.keepLinks(runID, execution, links)
	return links, nil
}

// segmentErr maps an error of reading an earlier execution's history: Temporal no
// longer keeps a closed execution past the namespace's retention.
func (s *Server) segmentErr(err error, runID string, seg activities.Segment) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		held := ""
		if seg.FirstSequence >= 0 {
			held = fmt.Sprintf(", which held events %d to %d,", seg.FirstSequence, seg.LastSequence)
		}
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Cause: err,
			Message: fmt.Sprintf("run %s: its execution %s%s is no longer kept by Temporal (a namespace's retention also ends the executions a run continued from)", runID, seg.RunID, held)}
	}
	return s.temporalErr(err, runID)
}
