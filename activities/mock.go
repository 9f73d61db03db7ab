package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wop-dev/wop/packs"
)

// MockModel is the model name the scripted mock reports.
const MockModel = "scripted-mock"

// MockProvider is the scripted mock (promptpack-workflow.md §12), the embedded default
// provider and the test oracle. Each pack's script (<pack>.mock.yaml) is consumed
// strictly in order, one entry per model round, indexed by ModelRoundInput.Round:
//
//   - expect_state must equal the round's state, expect_user must be a substring
//     of the latest user message of the transcript, and expect_tool_result a substring
//     of its latest tool result; otherwise the round fails with a non-retryable
//     ErrTypeMockMismatch naming the round, the expectation and what it got.
//   - error fails the round with a non-retryable ErrTypeMockFailure.
//   - text and tool_calls are the reply; tool-call ids are call_<round>_<i>_<name>.
//   - Past the last entry the script answers its default text, or fails with
//     ErrTypeMockExhausted when fail_when_exhausted is set.
//
// A pack without a script answers a fixed text naming the pack and the state. Usage
// is synthetic: about one token per four characters.
//
// The mock keeps no cursor of its own: the round index comes from the workflow, so a
// retried or replayed round gets the same answer.
type MockProvider struct {
	// Scripts maps a pack id to its script. Nil entries and missing packs use the
	// fixed reply.
	Scripts map[string]*packs.MockScript
}

// Name implements Provider.
func (*MockProvider) Name() string { return ProviderMock }

// Complete implements Provider.
func (p *MockProvider) Complete(_ context.Context, req *Request) (*ModelRoundResult, error) {
	in := req.Input
	script := p.Scripts[in.PackID]
	var text string
	var calls []ToolCall
	switch {
	case script == nil:
		text = fmt.Sprintf("Mock reply from pack %q in state %q (no mock script is configured for this pack).", in.PackID, in.State)
	case in.Round < 0:
		return nil, nonRetryable(ErrTypeMockMismatch, "mock script of pack %q: round index %d is negative", in.PackID, in.Round)
	case in.Round >= len(script.Rounds):
		if script.FailWhenExhausted {
			return nil, nonRetryable(ErrTypeMockExhausted,
				"mock script of pack %q is exhausted: round %d asked for entry %d but the script has %d rounds (fail_when_exhausted is set); state %q",
				in.PackID, in.Round, in.Round+1, len(script.Rounds), in.State)
		}
		text = script.Default
		if text == "" {
			text = fmt.Sprintf("Mock reply from pack %q in state %q (the mock script is exhausted).", in.PackID, in.State)
		}
	default:
		entry := script.Rounds[in.Round]
		at := scriptLocation(script, entry)
		if entry.ExpectState != "" && entry.ExpectState != in.State {
			return nil, nonRetryable(ErrTypeMockMismatch,
				"mock script of pack %q, round %d%s: expected state %q but the round runs in state %q",
				in.PackID, in.Round, at, entry.ExpectState, in.State)
		}
		if entry.ExpectUser != "" {
			latest, ok := latestUser(req.Messages)
			if !ok {
				return nil, nonRetryable(ErrTypeMockMismatch,
					"mock script of pack %q, round %d%s (state %q): expected a user message containing %q but the transcript has no user message",
					in.PackID, in.Round, at, in.State, entry.ExpectUser)
			}
			if !strings.Contains(latest, entry.ExpectUser) {
				return nil, nonRetryable(ErrTypeMockMismatch,
					"mock script of pack %q, round %d%s (state %q): expected the latest user message to contain %q but it is %q",
					in.PackID, in.Round, at, in.State, entry.ExpectUser, truncate(latest, 200))
			}
		}
		if entry.ExpectToolResult != "" {
			latest, ok := latestToolResult(req.Messages)
			if !ok {
				return nil, nonRetryable(ErrTypeMockMismatch,
					"mock script of pack %q, round %d%s (state %q): expected a tool result containing %q but the transcript has no tool result",
					in.PackID, in.Round, at, in.State, entry.ExpectToolResult)
			}
			if !strings.Contains(latest, entry.ExpectToolResult) {
				return nil, nonRetryable(ErrTypeMockMismatch,
					"mock script of pack %q, round %d%s (state %q): expected the latest tool result to contain %q but it is %q",
					in.PackID, in.Round, at, in.State, entry.ExpectToolResult, truncate(latest, 300))
			}
		}
		if entry.Error != "" {
			return nil, nonRetryable(ErrTypeMockFailure, "mock script of pack %q, round %d%s (state %q) fails as scripted: %s",
				in.PackID, in.Round, at, in.State, entry.Error)
		}
		text = entry.Text
		for i, c := range entry.ToolCalls {
			args := json.RawMessage(`{}`)
			if len(c.Args) > 0 && string(c.Args) != "null" {
				args = append(json.RawMessage(nil), c.Args...)
			}
			calls = append(calls, ToolCall{ID: callID(in.Round, i, c.Name), Name: c.Name, Args: args})
		}
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	return &ModelRoundResult{
		Text:         text,
		ToolCalls:    calls,
		Provider:     ProviderMock,
		Model:        MockModel,
		Usage:        Usage{InputTokens: inputTokens(req), OutputTokens: outputTokens(text, calls)},
		FinishReason: finish,
	}, nil
}

// scriptLocation names the file and line of a script entry, " (file:line)", when the
// script was loaded from a file.
func scriptLocation(script *packs.MockScript, entry packs.MockRound) string {
	switch {
	case script.File() != "" && entry.Line() > 0:
		return fmt.Sprintf(" (%s:%d)", script.File(), entry.Line())
	case script.File() != "":
		return fmt.Sprintf(" (%s)", script.File())
	}
	return ""
}

// latestUser returns the text of the last user message of the transcript.
func latestUser(msgs []Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return msgs[i].Text, true
		}
	}
	return "", false
}

// latestToolResult returns the content of the last tool result of the transcript.
func latestToolResult(msgs []Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleTool {
			return msgs[i].Text, true
		}
	}
	return "", false
}

// tokens approximates a token count as one token per four characters, at least one
// for non-empty text.
func tokens(chars int) int {
	if chars <= 0 {
		return 0
	}
	return (chars + 3) / 4
}

func inputTokens(req *Request) int {
	n := len(req.Input.System)
	for _, t := range req.Input.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	for _, m := range req.Messages {
		n += len(m.Text)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Args)
		}
	}
	return tokens(n)
}

func outputTokens(text string, calls []ToolCall) int {
	n := len(text)
	for _, c := range calls {
		n += len(c.Name) + len(c.Args)
	}
	return tokens(n)
}
