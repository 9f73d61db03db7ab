package api

// Rendering per reader. A run's log and snapshot are stored once, by the workflow; each
// reader is served them in its own major's shape:
//
//   - Major 1 is what it always was. A run of the v2 era stores the event types v2
//     renamed under their v2 names (workflows.writeType), so a v1 reader is served
//     their v1 names through the same codemap row, inverted; the fields v1 never had
//     (the era, the owner's subject) are left out.
//   - Major 2 gets the closed v2 documents: the event envelope with its type in v2
//     vocabulary (a run of the v1 era is translated through the codemap, never
//     rewritten), schemaVersion, bound ids; the snapshot with owner {tenant, subject},
//     the era and everything host-specific under extensions["wop.host"].
//
// Event types no codemap row names are served as they are at v1; at v2 only this
// host's vendor types (wop.*) pass, and any other is 500 event_type_unmapped: the host
// never serves an unregistered type.

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// hostExtension is the key of this host's extension records ("wop.host").
const hostExtension = protocol.Org + ".host"

// publicV1Snapshot clears what a v1 snapshot never carried: the request digest, the
// era and the owner's subject.
func publicV1Snapshot(snap *workflows.Snapshot) {
	snap.RequestDigest = ""
	snap.Era = 0
	snap.Owner.Subject = nil
	for name, raw := range snap.Channels {
		snap.Channels[name] = turnsV1(raw)
	}
}

// v1TurnKeys are the keys of a turn v1 readers are not served: v2's A2A parts and the
// agent reference with its model (workflows/turnparts.go), which /v1 never carried.
var v1TurnKeys = [][]byte{[]byte(`"parts"`), []byte(`"agent"`)}

func hasV2TurnKeys(raw json.RawMessage) bool {
	for _, k := range v1TurnKeys {
		if bytes.Contains(raw, k) {
			return true
		}
	}
	return false
}

// turnV1 is a turn document without the keys of v1TurnKeys.
func turnV1(raw json.RawMessage) json.RawMessage {
	if !hasV2TurnKeys(raw) {
		return raw
	}
	var t map[string]json.RawMessage
	if json.Unmarshal(raw, &t) != nil || t == nil {
		return raw
	}
	delete(t, "parts")
	delete(t, "agent")
	return mustJSON(t)
}

// turnsV1 is turnV1 for each turn of a channel's array.
func turnsV1(raw json.RawMessage) json.RawMessage {
	if !hasV2TurnKeys(raw) {
		return raw
	}
	var turns []json.RawMessage
	if json.Unmarshal(raw, &turns) != nil {
		return raw
	}
	for i := range turns {
		turns[i] = turnV1(turns[i])
	}
	return mustJSON(turns)
}

// ownerV2 is a run's owner at v2: {tenant, subject}, the recorded subject or, for a run
// that recorded none, the legacy stamp.
func ownerV2(o workflows.Owner) map[string]any {
	return protocol.OwnerV2(o.Tenant, o.Principal, o.Subject)
}

// errorV2 is a run's or node's error at v2: a registered (or wop.) code, a non-empty
// message, details only as an object.
func errorV2(e *protocol.RunError) map[string]any {
	out := map[string]any{"code": protocol.V2Code(e.Code), "message": e.Message}
	if e.Message == "" {
		out["message"] = e.Code
	}
	if isJSONObject(e.Details) {
		out["details"] = e.Details
	}
	return out
}

// snapshotV2 is the closed v2 RunSnapshot of snap (run-snapshot.schema.json), for a
// reader through w. The interrupt tokens decorate set stay with it, under the host's
// extension.
func (w wire) snapshotV2(snap *workflows.Snapshot) map[string]any {
	doc := map[string]any{
		"runId": w.id(snap.RunID), "workflowId": snap.WorkflowID, "status": snap.Status,
		"owner":                 ownerV2(snap.Owner),
		"eventLogSchemaVersion": protocol.EraOf(snap.Era),
		"engineVersion":         protocol.EngineVersion,
		"tags":                  nonNilTags(snap.Tags),
		"metadata":              objectOr(snap.Metadata, json.RawMessage(`{}`)),
	}
	if snap.CurrentNodeID != "" {
		doc["currentNodeId"] = snap.CurrentNodeID
	}
	if snap.StartedAt != "" {
		doc["startedAt"] = snap.StartedAt
	}
	if snap.CompletedAt != "" {
		doc["completedAt"] = snap.CompletedAt
	}
	if len(snap.Variables) > 0 {
		doc["variables"] = snap.Variables
	}
	if len(snap.Channels) > 0 {
		doc["channels"] = snap.Channels
	}
	if snap.Error != nil {
		doc["error"] = errorV2(snap.Error)
	}
	if isJSONObject(snap.Configurable) {
		doc["configurable"] = snap.Configurable
	}
	if snap.ParentRunID != "" {
		doc["parentRunId"] = w.id(snap.ParentRunID)
	}
	ext := map[string]any{"lastSequence": snap.LastSequence}
	if snap.Owner.Principal != "" {
		ext["principal"] = snap.Owner.Principal
	}
	if snap.Interrupt != nil {
		ext["interrupt"] = w.interruptV2(*snap.Interrupt)
	}
	if len(snap.Interrupts) > 0 {
		list := make([]any, len(snap.Interrupts))
		for i, pi := range snap.Interrupts {
			list[i] = w.interruptV2(pi)
		}
		ext["interrupts"] = list
	}
	if len(snap.ChildRuns) > 0 {
		list := make([]workflows.ChildRun, len(snap.ChildRuns))
		for i, cr := range snap.ChildRuns {
			cr.RunID = w.id(cr.RunID)
			list[i] = cr
		}
		ext["childRuns"] = list
	}
	if len(snap.Conversations) > 0 {
		ext["conversations"] = snap.Conversations
	}
	if snap.Pack != nil {
		ext["pack"] = snap.Pack
	}
	if snap.TemporalClose != nil {
		ext["temporalClose"] = snap.TemporalClose
	}
	if snap.Stalled != nil {
		st := *snap.Stalled
		if st.LastError != nil {
			le := *st.LastError
			le.Code = protocol.V2Code(le.Code)
			st.LastError = &le
		}
		ext["stalled"] = st
	}
	doc["extensions"] = map[string]any{hostExtension: ext}
	return doc
}

// interruptV2 is a pending interrupt as the v2 snapshot's extension carries it, with
// its id bound.
func (w wire) interruptV2(pi workflows.PendingInterrupt) workflows.PendingInterrupt {
	pi.InterruptID = w.id(pi.InterruptID)
	return pi
}

func nonNilTags(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}

// objectOr is raw when it is a JSON object, else def.
func objectOr(raw, def json.RawMessage) json.RawMessage {
	if isJSONObject(raw) {
		return raw
	}
	return def
}

// eventDocV2 is a run event as a v2 reader is served it (protocol.EventV2).
type eventDocV2 = protocol.EventDocV2

// unmappedEvent is the 500 of a stored event a v2 reader cannot be served.
func unmappedEvent(ev *workflows.Event) *Error {
	return codeErr(protocol.CodeEventTypeUnmapped, "event %d of run %s has type %q, which no row of the event codemap names", ev.Sequence, ev.RunID, ev.Type).
		with("type", ev.Type).with("sequence", ev.Sequence)
}

// storedEvent is ev as protocol's renderers take it.
func storedEvent(ev *workflows.Event) protocol.StoredEvent {
	return protocol.StoredEvent{EventID: ev.EventID, RunID: ev.RunID, NodeID: ev.NodeID, Type: ev.Type, Payload: ev.Payload,
		Timestamp: ev.Timestamp, Sequence: ev.Sequence, CausationID: ev.CausationID}
}

// eventV2 is ev as a v2 reader is served it.
func (w wire) eventV2(ev *workflows.Event) (*eventDocV2, error) {
	d, err := protocol.EventV2(w.tenant, storedEvent(ev))
	var unmapped *protocol.UnmappedEventError
	var unprojectable *protocol.UnprojectableError
	switch {
	case errors.As(err, &unmapped):
		return nil, unmappedEvent(ev)
	case errors.As(err, &unprojectable):
		return nil, codeErr(protocol.CodePayloadUnprojectable, "%s", unprojectable.Error()).
			with("type", unprojectable.Type).with("sequence", ev.Sequence).with("eventId", ev.EventID)
	}
	return d, err
}

// eventsV2 renders a page of events for a v2 reader.
func (w wire) eventsV2(evs []workflows.Event) ([]*eventDocV2, error) {
	out := make([]*eventDocV2, 0, len(evs))
	for i := range evs {
		d, err := w.eventV2(&evs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// payloadV2 projects a stored payload onto its v2 shape (protocol.PayloadV2).
func (w wire) payloadV2(typ string, raw json.RawMessage) (json.RawMessage, error) {
	return protocol.PayloadV2(w.tenant, typ, raw)
}

// eventV1 is ev as a v1 reader is served it: a type stored under its v2 name gets its
// v1 name back, run.started's owner loses the subject v1 never carried,
// conversation.opened the participants v1's closed payload has no key for, and a
// conversation event's turn its parts and agent (turnV1). Events
// stored the v1 way are returned as they are.
func eventV1(ev workflows.Event) (workflows.Event, error) {
	if _, renamed := protocol.RenamedAtV2(ev.Type); !renamed {
		if v1, ok := protocol.EventTypeV1(ev.Type); ok {
			ev.Type = v1
		} else if _, known := protocol.EventTypeV2(ev.Type); known {
			// A v2 name the codemap folds: it has no single v1 name.
			return ev, unmappedEvent(&ev)
		}
	}
	if strings.HasPrefix(ev.Type, "conversation.") && (bytes.Contains(ev.Payload, []byte(`"participants"`)) || hasV2TurnKeys(ev.Payload)) {
		var p map[string]json.RawMessage
		if json.Unmarshal(ev.Payload, &p) == nil {
			if ev.Type == protocol.EvConversationOpened {
				delete(p, "participants")
			}
			for _, k := range []string{"turn", "initialTurn", "finalTurn"} {
				if p[k] != nil {
					p[k] = turnV1(p[k])
				}
			}
			ev.Payload = mustJSON(p)
		}
	}
	if ev.Type == protocol.EvRunStarted && bytes.Contains(ev.Payload, []byte(`"subject"`)) {
		var p map[string]json.RawMessage
		if json.Unmarshal(ev.Payload, &p) == nil {
			var owner map[string]json.RawMessage
			if json.Unmarshal(p["owner"], &owner) == nil && owner != nil {
				delete(owner, "subject")
				p["owner"] = mustJSON(owner)
				ev.Payload = mustJSON(p)
			}
		}
	}
	return ev, nil
}

// eventsV1 renders a page of events for a v1 reader, sharing the page when nothing in
// it changes.
func eventsV1(evs []workflows.Event) ([]workflows.Event, error) {
	var out []workflows.Event
	for i := range evs {
		ev, err := eventV1(evs[i])
		if err != nil {
			return nil, err
		}
		if out == nil && (ev.Type != evs[i].Type || !bytes.Equal(ev.Payload, evs[i].Payload)) {
			out = make([]workflows.Event, i, len(evs))
			copy(out, evs[:i])
		}
		if out != nil {
			out = append(out, ev)
		}
	}
	if out == nil {
		return evs, nil
	}
	return out, nil
}
