package activities

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/convo"
)

func TestLimitReplyTruncatesVisibly(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	res := &convo.ModelRoundResult{Text: strings.Repeat("é", 1000)} // 2,000 bytes
	if err := limitReply(res, 500, log); err != nil {
		t.Fatal(err)
	}
	if len(res.Text) > 500 || !strings.Contains(res.Text, "[truncated by the host: 2000 bytes") {
		t.Fatalf("truncated reply (%d bytes): %q", len(res.Text), res.Text)
	}
	if !json.Valid(mustMarshal(t, res.Text)) || strings.ContainsRune(res.Text, '\uFFFD') {
		t.Fatal("the cut must fall on a character boundary")
	}
	short := &convo.ModelRoundResult{Text: "fine"}
	if err := limitReply(short, 500, log); err != nil || short.Text != "fine" {
		t.Fatalf("a short reply is left alone: %q %v", short.Text, err)
	}
	calls := &convo.ModelRoundResult{ToolCalls: []convo.ToolCall{{Name: "x", Args: json.RawMessage(`"` + strings.Repeat("a", 600) + `"`)}}}
	err := limitReply(calls, 500, log)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypeResultTooLarge || !appErr.NonRetryable() {
		t.Fatalf("oversized tool call arguments: %v", err)
	}
}

func TestLimitToolResultKeepsAMarkedHead(t *testing.T) {
	big := &convo.ToolCallResult{Content: json.RawMessage(`"` + strings.Repeat("\"q\"", 1000) + `"`), IsError: true}
	got := limitToolResult(big, 1000)
	if len(got.Content) > 1000 || !got.IsError {
		t.Fatalf("limited result: %d bytes, isError %v", len(got.Content), got.IsError)
	}
	var body struct {
		Truncated bool   `json:"truncated"`
		Bytes     int    `json:"bytes"`
		MaxBytes  int    `json:"maxBytes"`
		Head      string `json:"head"`
	}
	if err := json.Unmarshal(got.Content, &body); err != nil || !body.Truncated || body.Bytes != len(big.Content) || body.MaxBytes != 1000 || body.Head == "" {
		t.Fatalf("limited result %s: %v", got.Content, err)
	}
	small := &convo.ToolCallResult{Content: json.RawMessage(`{"ok":true}`)}
	if limitToolResult(small, 1000) != small {
		t.Fatal("a small result is left alone")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
