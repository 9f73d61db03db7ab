package protocol

import (
	"encoding/json"
	"testing"
)

// The payload structs encode as the maps the host built before them did: every key in
// the maps' (sorted) order, absent keys absent, a present empty decidedBy present.
func TestApprovalReceivedEncodesAsItsMaps(t *testing.T) {
	empty, rev := "", 0
	for _, c := range []struct {
		name string
		v    ApprovalReceived
		m    map[string]any
	}{
		{"timeout", ApprovalReceived{NodeID: "n", Action: "timeout", DecidedAt: "2026-01-01T00:00:00.000Z"},
			map[string]any{"nodeId": "n", "action": "timeout", "decidedAt": "2026-01-01T00:00:00.000Z"}},
		{"decision without a decider", ApprovalReceived{NodeID: "n", Action: "accept", DecidedBy: &empty, DecidedAt: "t"},
			map[string]any{"nodeId": "n", "action": "accept", "decidedBy": "", "decidedAt": "t"}},
		{"every field", ApprovalReceived{
			Action: "edit-accept", Arguments: json.RawMessage(`{"a": 1}`), CallID: "c1", Caller: "relay", Comment: "ok <b>",
			DecidedAt: "t", DecidedBy: &empty, EditedArtifactData: json.RawMessage(`{"arguments":{"a":2}}`), Feedback: "f",
			NodeID: "n", Reason: "expired", RefineFeedback: json.RawMessage(`null`), Revision: &rev, Tool: "issue_refund", Voided: []string{"k1"},
		}, map[string]any{
			"action": "edit-accept", "arguments": json.RawMessage(`{"a": 1}`), "callId": "c1", "caller": "relay", "comment": "ok <b>",
			"decidedAt": "t", "decidedBy": "", "editedArtifactData": json.RawMessage(`{"arguments":{"a":2}}`), "feedback": "f",
			"nodeId": "n", "reason": "expired", "refineFeedback": json.RawMessage(`null`), "revision": 0, "tool": "issue_refund", "voided": []string{"k1"},
		}},
	} {
		got, err := json.Marshal(&c.v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(c.m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
	}
}
