package protocol

// A stored run event as OpenWOP v2 serves it: to an API reader (package api) and in the
// body of a delivery to a subscription registered at major 2 (activities/webhooks.go).
// The event log stores v1 (or, for runs of the v2 era, v2) type names and unbound ids;
// a v2 reader gets the v2 type, schemaVersion, the run's tenant-bound ids, and v2's
// owner and error codes in payloads.

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// StoredEvent is a run event as the run's log stores it (the fields of
// workflows.Event a reader is served).
type StoredEvent struct {
	EventID     string          `json:"eventId"`
	RunID       string          `json:"runId"`
	NodeID      string          `json:"nodeId,omitempty"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Timestamp   string          `json:"timestamp"`
	Sequence    int64           `json:"sequence"`
	CausationID string          `json:"causationId,omitempty"`
}

// EventDocV2 is a run event as a v2 reader is served it (run-event.schema.json, closed).
type EventDocV2 struct {
	EventID       string          `json:"eventId"`
	RunID         string          `json:"runId"`
	NodeID        string          `json:"nodeId,omitempty"`
	Type          string          `json:"type"`
	Payload       json.RawMessage `json:"payload"`
	Timestamp     string          `json:"timestamp"`
	Sequence      int64           `json:"sequence"`
	SchemaVersion int             `json:"schemaVersion"`
	CausationID   string          `json:"causationId,omitempty"`
}

// UnmappedEventError is a stored event whose type no row of the event codemap names.
type UnmappedEventError struct{ Event StoredEvent }

func (e *UnmappedEventError) Error() string {
	return fmt.Sprintf("event %d of run %s has type %q, which no row of the event codemap names", e.Event.Sequence, e.Event.RunID, e.Event.Type)
}

// UnprojectableError is a stored payload that cannot be served at v2.
type UnprojectableError struct {
	Event StoredEvent
	Type  string // the v2 type
	Err   error
}

func (e *UnprojectableError) Error() string {
	return fmt.Sprintf("the payload of event %d (%s) of run %s cannot be served at v2: %v", e.Event.Sequence, e.Type, e.Event.RunID, e.Err)
}

// EventV2 is ev as a v2 reader of tenant is served it.
func EventV2(tenant string, ev StoredEvent) (*EventDocV2, error) {
	typ, ok := EventTypeV2(ev.Type)
	if !ok {
		if !IsVendorEventType(ev.Type) {
			return nil, &UnmappedEventError{Event: ev}
		}
		typ = ev.Type
	}
	payload, err := PayloadV2(tenant, typ, ev.Payload)
	if err != nil {
		return nil, &UnprojectableError{Event: ev, Type: typ, Err: err}
	}
	return &EventDocV2{
		EventID: ev.EventID, RunID: BindID(tenant, ev.RunID), NodeID: ev.NodeID, Type: typ, Payload: payload,
		Timestamp: ev.Timestamp, Sequence: ev.Sequence, SchemaVersion: EventSchemaVersion, CausationID: ev.CausationID,
	}, nil
}

// BoundPayloadKeys are the payload members that hold a tenant-bound id (a run's or an
// interrupt's), bound at v2 where they appear at the top of a payload (or in
// node.completed's outputs).
var BoundPayloadKeys = []string{"runId", "childRunId", "parentRunId", "sourceRunId", "interruptId"}

// PayloadV2 projects a stored payload of v2 type typ onto its v2 shape for a reader of
// tenant: run.started's owner becomes {tenant, subject}, its engineVersion and
// workflow.restored's the integer; an error's code is a v2 code; run and interrupt ids
// are bound. A payload without any of these is served as stored.
func PayloadV2(tenant, typ string, raw json.RawMessage) (json.RawMessage, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || !needsV2Projection(typ, raw) {
		return raw, nil
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	bindIDs(tenant, p)
	if out, ok := p["outputs"]; ok && typ == EvNodeCompleted && bytes.Contains(out, []byte(`"childRunId"`)) {
		var o map[string]json.RawMessage
		if json.Unmarshal(out, &o) == nil && o != nil {
			bindIDs(tenant, o)
			p["outputs"] = marshalled(o)
		}
	}
	if e, ok := p["error"]; ok && len(bytes.TrimSpace(e)) > 0 && bytes.TrimSpace(e)[0] == '{' {
		// The error's code is a v2 code; its other members (workflow.stalled's
		// retryable, a node's details) are kept as stored.
		var pe map[string]json.RawMessage
		var code string
		if json.Unmarshal(e, &pe) == nil && json.Unmarshal(pe["code"], &code) == nil && code != "" {
			pe["code"] = marshalled(V2Code(code))
			if msg := pe["message"]; string(msg) == `""` || msg == nil {
				pe["message"] = marshalled(code) // a message is never empty at v2
			}
			p["error"] = marshalled(pe)
		}
	}
	if typ == EvRunStarted {
		if o, ok := p["owner"]; ok {
			var owner struct {
				Tenant    string   `json:"tenant"`
				Principal string   `json:"principal"`
				Subject   *Subject `json:"subject"`
			}
			if err := json.Unmarshal(o, &owner); err != nil {
				return nil, fmt.Errorf("owner: %w", err)
			}
			p["owner"] = marshalled(OwnerV2(owner.Tenant, owner.Principal, owner.Subject))
		}
	}
	if _, ok := p["engineVersion"]; ok && (typ == EvRunStarted || typ == EvWorkflowRestored) {
		p["engineVersion"] = marshalled(EngineVersion)
	}
	return json.Marshal(p)
}

// OwnerV2 is a run's owner at v2: its tenant and its subject, the legacy stamp for a
// run created without one.
func OwnerV2(tenant, principal string, subject *Subject) map[string]any {
	if subject == nil {
		subject = LegacySubject(tenant, principal)
	}
	return map[string]any{"tenant": tenant, "subject": subject}
}

// needsV2Projection reports whether a payload holds anything PayloadV2 changes.
func needsV2Projection(typ string, raw json.RawMessage) bool {
	if typ == EvRunStarted || typ == EvWorkflowRestored || bytes.Contains(raw, []byte(`"error"`)) {
		return true
	}
	for _, k := range BoundPayloadKeys {
		if bytes.Contains(raw, []byte(`"`+k+`"`)) {
			return true
		}
	}
	return false
}

// bindIDs binds the string members of p named in BoundPayloadKeys.
func bindIDs(tenant string, p map[string]json.RawMessage) {
	for _, k := range BoundPayloadKeys {
		raw, ok := p[k]
		if !ok {
			continue
		}
		var id string
		if json.Unmarshal(raw, &id) == nil && id != "" {
			p[k] = marshalled(BindID(tenant, id))
		}
	}
}

// marshalled is v as JSON; the values passed are strings, ints and maps of JSON.
func marshalled(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
