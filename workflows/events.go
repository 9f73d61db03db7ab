package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Event types the run workflow emits.
const (
	EvRunStarted             = "run.started"
	EvRunCompleted           = "run.completed"
	EvRunFailed              = "run.failed"
	EvRunCancelled           = "run.cancelled"
	EvNodeStarted            = "node.started"
	EvNodeCompleted          = "node.completed"
	EvNodeFailed             = "node.failed"
	EvNodeSkipped            = "node.skipped"
	EvNodeCancelled          = "node.cancelled"
	EvNodeSuspended          = "node.suspended"
	EvNodeResumed            = "node.resumed"
	EvInterruptRequested     = "interrupt.requested"
	EvInterruptResolved      = "interrupt.resolved"
	EvApprovalRequested      = "approval.requested"
	EvApprovalReceived       = "approval.received"
	EvClarificationRequested = "clarification.requested"
	EvClarificationResolved  = "clarification.resolved"
	EvConversationOpened     = "conversation.opened"
	EvConversationExchanged  = "conversation.exchanged"
	EvConversationClosed     = "conversation.closed"
	EvReplayDiverged         = "replay.diverged"
)

// EngineVersion is stamped on run.started.
const EngineVersion = "wop/1"

// timestampLayout is RFC 3339 with milliseconds, always UTC ("Z").
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timestampLayout) }

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

// mustJSON marshals v; the values passed are built by this package from JSON-safe
// types, so a failure is a programming error and is turned into a JSON string that
// names it rather than a panic inside workflow code.
func mustJSON(v any) json.RawMessage {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return json.RawMessage("null")
		}
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"marshalError": err.Error()})
	}
	return b
}

// emit appends one event to the run's log and returns its eventId. It is the only
// writer of the log: sequence = position, timestamp = workflow.Now.
func (r *runner) emit(typ, nodeID string, payload any, causation string) string {
	seq := int64(len(r.events))
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
	r.notifyWebhooks(ev)
	return ev.EventID
}

// lastEventID returns the id of the newest event of type typ at nodeID ("" if none).
func (r *runner) lastEventID(typ, nodeID string) string {
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Type == typ && (nodeID == "" || r.events[i].NodeID == nodeID) {
			return r.events[i].EventID
		}
	}
	return ""
}

// eventsPage answers EventsQuery.
func (r *runner) eventsPage(req EventsRequest) EventsPage {
	page := EventsPage{Events: []Event{}, LastSequence: int64(len(r.events)) - 1, Terminal: r.terminal, Tenant: r.in.Owner.Tenant}
	start := req.After + 1
	if start < 0 {
		start = 0
	}
	for i := start; i < int64(len(r.events)); i++ {
		if req.Limit > 0 && len(page.Events) >= req.Limit {
			break
		}
		page.Events = append(page.Events, r.events[i])
	}
	return page
}
