package convo

import (
	"fmt"
	"strings"
	"testing"
)

func texts(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s:%s|", m.Role, m.Text)
	}
	return b.String()
}

func TestTranscriptTail(t *testing.T) {
	msgs := []Message{
		{Role: RoleUser, Text: "hi"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "lookup"}}},
		{Role: RoleTool, ToolCallID: "1", Text: "{}"},
	}
	if got := texts(TranscriptTail(msgs)); got != "assistant:|tool:{}|" {
		t.Errorf("tail = %q, want from the last assistant message", got)
	}
	if got := TranscriptTail(msgs[:1]); len(got) != 1 {
		t.Errorf("first round: tail = %v, want the whole transcript", got)
	}
	long := []Message{{Role: RoleUser, Text: strings.Repeat("y", maxTailBytes)}}
	if got := TranscriptTail(long); got != nil {
		t.Errorf("a tail over %d bytes travels not: got %d messages", maxTailBytes, len(got))
	}
	if TranscriptDigest(msgs) == TranscriptDigest(msgs[:2]) || TranscriptDigest(msgs) != TranscriptDigest(append([]Message(nil), msgs...)) {
		t.Error("the digest must follow the messages, and only them")
	}
}
