package worker

import (
	"encoding/json"
	"testing"

	"github.com/wop-dev/wop/agentclient"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// turnEv is a conversation.exchanged event of turn t at seq.
func turnEv(seq int64, t protocol.Turn) workflows.Event {
	p, _ := json.Marshal(map[string]any{"turn": t})
	return workflows.Event{Sequence: seq, Type: protocol.EvConversationExchanged, Payload: p}
}

func text(s string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"text": s, "state": "desk"})
	return b
}

// TestScanFindsTheReplyToTheMessage: the reply is the first agent turn after the user
// turn with the message's id, not an earlier agent turn; the position moves up to the
// reply only, and a close right behind the reply is reported with it.
func TestScanFindsTheReplyToTheMessage(t *testing.T) {
	req := agentclient.SendRequest{RunID: "r1", MessageID: "m2"}
	evs := []workflows.Event{
		turnEv(3, protocol.Turn{MessageID: "m1", Role: protocol.RoleUser, Content: text("first")}),
		turnEv(4, protocol.Turn{MessageID: "a1", Role: protocol.RoleAgent, Content: text("answer one")}),
		turnEv(5, protocol.Turn{MessageID: "m2", Role: protocol.RoleUser, Content: text("second")}),
		{Sequence: 6, Type: protocol.EvNodeSuspended, Payload: json.RawMessage(`{}`)},
	}
	p := sendProgress{After: 2}
	if r := scan(req, evs, &p); r != nil {
		t.Fatalf("no reply yet, got %+v", r)
	}
	if !p.SawMessage || p.After != 6 {
		t.Fatalf("progress after the message: %+v", p)
	}
	closed, _ := json.Marshal(map[string]any{"finalTurn": protocol.Turn{Role: protocol.RoleSystem, Content: text("Conversation closed.")}, "outcome": map[string]bool{"paid": true}})
	more := []workflows.Event{
		turnEv(7, protocol.Turn{MessageID: "a2", Role: protocol.RoleAgent, TurnIndex: 4, Content: text("answer two")}),
		{Sequence: 8, Type: protocol.EvConversationClosed, Payload: closed},
	}
	r := scan(req, more, &p)
	if r == nil || r.Text != "answer two" || r.MessageID != "a2" || r.State != "desk" || r.TurnIndex != 4 || !r.Closed || string(r.Outcome) != `{"paid":true}` {
		t.Fatalf("reply: %+v", r)
	}
	if p.After != 6 {
		t.Errorf("the position stays before the reply (a retry finds it again): %+v", p)
	}
}

// TestScanReadsACloseWithoutReply: a conversation that closes after the message without
// an agent turn answers with its final turn.
func TestScanReadsACloseWithoutReply(t *testing.T) {
	req := agentclient.SendRequest{RunID: "r1", MessageID: "m1"}
	closed, _ := json.Marshal(map[string]any{"finalTurn": protocol.Turn{Role: protocol.RoleSystem, TurnIndex: 2, Content: text("Conversation closed: budget exhausted.")}, "outcome": nil})
	p := sendProgress{After: -1}
	r := scan(req, []workflows.Event{
		turnEv(0, protocol.Turn{MessageID: "m1", Role: protocol.RoleUser, Content: text("hi")}),
		{Sequence: 1, Type: protocol.EvConversationClosed, Payload: closed},
	}, &p)
	if r == nil || !r.Closed || r.Text != "Conversation closed: budget exhausted." || string(r.Outcome) != "null" {
		t.Fatalf("reply: %+v", r)
	}
}

// TestNexusOwnerFromEnv: WOP_NEXUS_TENANT and WOP_NEXUS_SUBJECT name the Nexus runs'
// owner; a tenant outside the tenant grammar is refused at start.
func TestNexusOwnerFromEnv(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{"WOP_NEXUS_TENANT": "acme", "WOP_NEXUS_SUBJECT": "orders-namespace"}))
	if err != nil || cfg.NexusTenant != "acme" || cfg.NexusSubject != "orders-namespace" {
		t.Fatalf("cfg %q %q, err %v", cfg.NexusTenant, cfg.NexusSubject, err)
	}
	if _, err := ConfigFromEnv(env(map[string]string{"WOP_NEXUS_TENANT": "a b"})); err == nil {
		t.Error("a tenant with a space is accepted")
	}
	if _, err := owner(agentclient.Owner{Tenant: "acme", Subject: "a/b"}); err == nil {
		t.Error("a subject with a slash is accepted")
	}
}
