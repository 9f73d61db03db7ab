package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/wop-dev/wop/protocol"
	"go.temporal.io/sdk/workflow"
)

// EngineVersion is stamped on run.started.
const EngineVersion = "wop/1"

// timestampLayout is RFC 3339 with milliseconds, always UTC ("Z").
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timestampLayout) }

// FormatTime formats t as event timestamps are (RFC 3339 with milliseconds, UTC), for
// the host's other workflows.
func FormatTime(t time.Time) string { return formatTime(t) }

// EventID returns the deterministic id of the event at seq in run runID:
// "evt-<runId>-<seq>", or, when that would exceed the 128 characters the run-event
// schema allows, "evt-<first 32 hex of sha256(runId)>-<seq>".
func EventID(runID string, seq int64) string {
	id := fmt.Sprintf("evt-%s-%d", runID, seq)
	if len(id) <= 128 {
		return id
	}
	sum := sha256.Sum256([]byte(runID))
	return fmt.Sprintf("evt-%s-%d", hex.EncodeToString(sum[:])[:32], seq)
}

// mustJSON is protocol.MustJSON, the run's payload encoding.
func mustJSON(v any) json.RawMessage { return protocol.MustJSON(v) }

// emit appends one event to the run's log and returns its eventId. It is the only
// writer of the log: sequence = position, timestamp = workflow.Now. This execution
// keeps the events from r.base on; earlier ones are held by earlier executions (see
// carry.go).
func (r *runner) emit(typ, nodeID string, payload any, causation string) string {
	typ = r.writeType(typ)
	seq := r.nextSeq()
	ev := Event{
		EventID:     EventID(r.in.RunID, seq),
		RunID:       r.in.RunID,
		NodeID:      nodeID,
		Type:        typ,
		Payload:     mustJSON(payload),
		Timestamp:   formatTime(workflow.Now(r.ctx)),
		Sequence:    seq,
		CausationID: causation,
	}
	r.events = append(r.events, ev)
	r.recordEmitted(&r.events[len(r.events)-1])
	r.lastID = ev.EventID
	if nodeID != "" {
		r.nodeLast[nodeID] = ev.EventID
	}
	r.notifyWebhooks(ev)
	return ev.EventID
}

// writeType is the name the run's log stores an event type under. The workflow code
// names types in v1 vocabulary; a run of the v2 era (RunInput.Era, fixed when it was
// created) stores the 36 types OpenWOP v2 renamed (protocol's codemap) under their v2
// names, for its whole life; a run of the v1 era stores v1 names. Readers are served
// their own major's names either way (the API's projection), so nothing is rewritten.
func (r *runner) writeType(typ string) string {
	if r.in.Era < protocol.EraV2 {
		return typ
	}
	v2, renamed := protocol.RenamedAtV2(typ)
	if !renamed || !r.changed(GateEventVocabulary) {
		return typ
	}
	return v2
}

// Bounds of an EventsQuery page.
const (
	// DefaultEventsPageBytes bounds a page whose request names no bound.
	DefaultEventsPageBytes = 1 << 20
	// MaxEventsPageBytes bounds every page, whatever its request asks: within
	// Temporal's 2 MB payload limit with room to spare.
	MaxEventsPageBytes = 3 << 19
)

// EventBytes is the size an event counts for in a page: its payload, its strings and a
// fixed overhead for the encoding.
func EventBytes(e *Event) int {
	return 128 + len(e.Payload) + len(e.EventID) + len(e.RunID) + len(e.NodeID) + len(e.Type) + len(e.Timestamp) + len(e.CausationID)
}

// eventsPage answers EventsQuery from the events this execution holds. A cursor before
// them gets no events, FirstSequence and the earlier executions to ask (Earlier).
func (r *runner) eventsPage(req EventsRequest) EventsPage {
	page := EventsPage{Events: []Event{}, LastSequence: r.nextSeq() - 1, FirstSequence: r.base, Terminal: r.terminal || r.closing != "", Tenant: r.in.Owner.Tenant}
	start := max(req.After+1, 0)
	if start < r.base {
		page.Earlier, page.Index = r.segments, indexLinks(r.anchors)
		return page
	}
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultEventsPageBytes
	}
	maxBytes = min(maxBytes, MaxEventsPageBytes)
	size := 0
	for i := start - r.base; i < int64(len(r.events)); i++ {
		b := EventBytes(&r.events[i])
		if len(page.Events) > 0 && (size+b > maxBytes || (req.Limit > 0 && len(page.Events) >= req.Limit)) {
			page.More = true
			break
		}
		size += b
		page.Events = append(page.Events, r.events[i])
	}
	return page
}
