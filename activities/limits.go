package activities

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// DefaultMaxResultBytes bounds what one activity hands back to a run: the text of a
// model reply and the content of a tool result. Whatever an activity returns becomes a
// run event and part of the model's transcript, and Temporal rejects a payload over
// 2 MB; 256 KiB is the API's per-turn limit too (api.DefaultMaxTurnBytes).
const DefaultMaxResultBytes = 256 << 10

// ErrTypeResultTooLarge is the (non-retryable) error type of a model round whose tool
// calls carry more argument bytes than a result may hold: there is no sensible way to
// cut a tool call's arguments, so the round fails and the run ends with this code.
const ErrTypeResultTooLarge = protocol.CodePayloadTooLarge

// limitReply cuts a model reply whose text exceeds max bytes, visibly: the kept text
// ends with a note saying how long the reply was. Tool calls whose arguments together
// exceed max fail the round.
func limitReply(res *convo.ModelRoundResult, max int, log *slog.Logger) error {
	args := 0
	for _, tc := range res.ToolCalls {
		args += len(tc.Args)
	}
	if args > max {
		return nonRetryable(ErrTypeResultTooLarge, "the model asked for tool calls with %d bytes of arguments; a round's results hold at most %d bytes", args, max)
	}
	if len(res.Text) > max {
		log.Warn("Model reply truncated", "bytes", len(res.Text), "maxBytes", max)
		res.Text = truncateText(res.Text, max)
	}
	return nil
}

// truncateText cuts s to at most max bytes, at a character boundary, ending with a
// note that names the original length.
func truncateText(s string, max int) string {
	note := fmt.Sprintf("\n\n[truncated by the host: %d bytes, of which the first %%d are kept (limit %d bytes)]", len(s), max)
	keep := max - len(note) - 8
	if keep < 0 {
		keep = 0
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + fmt.Sprintf(note, keep)
}

// limitToolResult replaces a tool result whose content exceeds max bytes by an object
// that says so and keeps the beginning of the content as text:
// {"truncated": true, "bytes": N, "maxBytes": M, "head": "..."}.
func limitToolResult(res *convo.ToolCallResult, max int) *convo.ToolCallResult {
	if res == nil || len(res.Content) <= max {
		return res
	}
	keep := max / 2
	for {
		head := string(res.Content[:keep])
		for len(head) > 0 && !utf8.ValidString(head) {
			head = head[:len(head)-1]
		}
		content, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(res.Content), "maxBytes": max, "head": head})
		if len(content) <= max || keep == 0 {
			return &convo.ToolCallResult{Content: content, IsError: res.IsError, Route: res.Route}
		}
		keep /= 2 // escaping made the head longer than the limit
	}
}
