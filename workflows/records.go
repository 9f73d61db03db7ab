package workflows

// Event records: the events of a closed execution, readable without replaying it.
//
// Each execution keeps the events it emitted in memory and answers EventsQuery for
// them, closed executions included; but a query on a closed execution makes a worker
// replay that execution's whole history first, so a reader of a long run's older
// events paid one replay per execution it reached back through. An execution that
// takes the path of GateEventRecords therefore also writes its events into its own
// Temporal history: a SideEffect marker holding an EventsRecord whenever the events
// not yet recorded reach recordChunkBytes, and one for the rest just before it
// continues as new. History stays flat (each event is recorded once, a marker per
// 256 KiB of events, none per turn), nothing is carried, and a reader decodes a
// closed execution's events from GetWorkflowExecutionHistory: the link to the
// execution says so (activities.Segment.Recorded). The run's current execution is
// still read by query; its worker holds it.
//
// To find the execution holding an old event without walking the chain, the carried
// state holds, besides the newest MaxSegmentLinks executions, a sparse index
// (anchors): the newest MaxSegmentLinks executions whose number in the chain is a
// multiple of 32, and those whose number is a multiple of 1,024. Every execution's
// start event carries its own links, so a reader reaches any of the first 32,768
// executions in at most two reads of a start event (activities.Segment, CarriedLinks).

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
)

// EventsRecordKind marks the SideEffect markers that hold an EventsRecord.
const EventsRecordKind = "openwop.events"

// recordChunkBytes is the size (EventBytes) of unrecorded events at which an execution
// records them: a marker stays far below Temporal's payload limit, and a workflow task
// that emits many events completes with several markers of this size.
const recordChunkBytes = 256 << 10

// anchorLevels is how many sparse levels the index keeps; level k links executions
// whose number is a multiple of MaxSegmentLinks^(k+1).
const anchorLevels = 2

// EventsRecord is the value of an event-record marker: consecutive events of the run.
// The marker holds it compressed (eventsRecordMagic, then the gzip of its JSON, as
// binary data): the events' JSON is mostly names and ids that repeat, and recorded
// as it is it grew a conversation's history by half (3 KB messages); a record that
// cannot be compressed is held as JSON. EventsRecordFrom reads both.
type EventsRecord struct {
	Kind   string  `json:"kind"`
	Events []Event `json:"events"`
}

// eventsRecordMagic starts a compressed EventsRecord.
const eventsRecordMagic = "openwop.events/gzip\n"

// Compressed is the record as a marker holds it.
func (rec EventsRecord) Compressed() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(eventsRecordMagic)
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(rec); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EventsRecordFrom reads the value of a SideEffect marker (its "data" details): ok is
// false for a side effect that is not an event record.
func EventsRecordFrom(p *commonpb.Payloads) (rec EventsRecord, ok bool, err error) {
	if len(p.GetPayloads()) != 1 {
		return rec, false, nil
	}
	pl := p.GetPayloads()[0]
	data := pl.GetData()
	switch string(pl.GetMetadata()[converter.MetadataEncoding]) {
	case converter.MetadataEncodingBinary:
		if !bytes.HasPrefix(data, []byte(eventsRecordMagic)) {
			return rec, false, nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(data[len(eventsRecordMagic):]))
		if err != nil {
			return rec, false, fmt.Errorf("an event record: %w", err)
		}
		defer zr.Close()
		if err := json.NewDecoder(zr).Decode(&rec); err != nil {
			return rec, false, fmt.Errorf("an event record: %w", err)
		}
	case converter.MetadataEncodingJSON:
		if json.Unmarshal(data, &rec) != nil {
			return rec, false, nil
		}
	default:
		return rec, false, nil
	}
	return rec, rec.Kind == EventsRecordKind, nil
}

// EventsRecordSummary is the summary of the marker of an EventsRecord holding events
// first to last, which the Temporal UI shows.
func EventsRecordSummary(first, last int64) string {
	return fmt.Sprintf("OpenWOP events %d-%d", first, last)
}

// eventRecorder is this execution's recording state (not carried).
type eventRecorder struct {
	asked bool  // the version was asked (at this execution's first event)
	on    bool  // and this execution records
	from  int64 // the first event this execution recorded
	next  int64 // the first event not yet recorded
	bytes int   // EventBytes of the events not yet recorded
}

// recordEmitted notes the event emit appended, and records the unrecorded events once
// they reach recordChunkBytes.
func (r *runner) recordEmitted(ev *Event) {
	rec := &r.records
	if !rec.asked {
		rec.asked = true
		rec.on = r.changed(GateEventRecords)
		rec.from, rec.next = ev.Sequence, ev.Sequence
	}
	if !rec.on {
		return
	}
	rec.bytes += EventBytes(ev)
	if rec.bytes >= recordChunkBytes {
		r.flushRecords()
	}
}

// flushRecords writes the events not yet recorded into one marker.
func (r *runner) flushRecords() {
	rec := &r.records
	end := r.nextSeq()
	if !rec.on || rec.next >= end {
		return
	}
	evs := r.events[rec.next-r.base : end-r.base]
	summary := EventsRecordSummary(rec.next, end-1)
	workflow.SideEffectWithOptions(r.ctx, workflow.SideEffectOptions{Summary: summary}, func(workflow.Context) any {
		rec := EventsRecord{Kind: EventsRecordKind, Events: evs}
		if b, err := rec.Compressed(); err == nil {
			return b
		}
		return rec // as JSON: readers take both
	})
	rec.next, rec.bytes = end, 0
}

// recordedAll reports whether this execution's history holds every event from base on
// (flushRecords first). An execution that emitted nothing holds them all.
func (r *runner) recordedAll() bool {
	if !r.records.asked {
		return r.nextSeq() == r.base
	}
	return r.records.on && r.records.from == r.base && r.records.next == r.nextSeq()
}

// execNumber is this execution's place in the run's chain: 0 for the first.
func (r *runner) execNumber() int {
	if r.carried == nil {
		return 0
	}
	return r.carried.Generation + 1
}

// anchorsWithThis is the sparse index the next execution carries: this execution
// joins each level whose stride its number is a multiple of.
func (r *runner) anchorsWithThis(this activities.Segment) [][]activities.Segment {
	n, stride := r.execNumber(), 1
	out := make([][]activities.Segment, anchorLevels)
	for k := range out {
		stride *= MaxSegmentLinks
		var level []activities.Segment
		if k < len(r.anchors) {
			level = r.anchors[k]
		}
		if n%stride == 0 {
			level = append([]activities.Segment{this}, level...)
			if len(level) > MaxSegmentLinks {
				level = level[:MaxSegmentLinks]
			}
		}
		out[k] = level
	}
	return out
}

// indexLinks is the sparse index as one list, each level newest first.
func indexLinks(anchors [][]activities.Segment) []activities.Segment {
	var out []activities.Segment
	for _, level := range anchors {
		out = append(out, level...)
	}
	return out
}

// CarriedLinks returns the executions before the one whose RunInput.Carried is
// carried: the newest ones (newest first) and the sparse index. An execution that did
// not continue from another has none; one that continued from a state of the earlier
// shape (which carried the whole log) has none either: it holds every event itself.
func CarriedLinks(carried json.RawMessage) (earlier, index []activities.Segment, err error) {
	if len(carried) == 0 {
		return nil, nil, nil
	}
	var st struct {
		Segments []activities.Segment   `json:"segments"`
		Anchors  [][]activities.Segment `json:"anchors"`
	}
	if err := json.Unmarshal(carried, &st); err != nil {
		return nil, nil, fmt.Errorf("decode the carried state: %w", err)
	}
	return st.Segments, indexLinks(st.Anchors), nil
}
