package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// MockModel is the model name the scripted mock reports.
const MockModel = "scripted-mock"

// MockProvider is the scripted mock (promptpack-workflow.md §12), the embedded default
// provider and the test oracle. Each pack's script (<pack>.mock.yaml) is played one step
// per model round (packs.MockScript.Play, docs/packs.md):
//
//   - A step's expect_state must equal the round's state, and one of its expect_user
//     texts must be in the latest user message of the transcript, and its
//     expect_tool_result in the latest tool result; a one_of step plays its first
//     alternative that matches.
//   - A round that does not match is off script. A strict mock (Strict, or strict: true
//     in the script) fails it with a non-retryable ErrTypeMockMismatch naming the round,
//     the expectation and what it got. Otherwise it answers the script's default, or a
//     marked note of what the script expected, and the script waits where it is.
//   - error fails the round with a non-retryable ErrTypeMockFailure.
//   - text and tool_calls are the reply; tool-call ids are call_<round>_<i>_<name>.
//   - Past the last step the script answers its default text, or fails with
//     ErrTypeMockExhausted when fail_when_exhausted is set.
//
// A pack without a script answers a fixed text naming the pack and the state. Usage
// is synthetic: about one token per four characters.
//
// The mock keeps no cursor of its own: where the script stands is worked out from the
// run's whole transcript (one assistant message per earlier round, with its state and
// the user message before it), so a retried or replayed round gets the same answer.
type MockProvider struct {
	// Scripts maps a pack id to its script. Nil entries and missing packs use the
	// fixed reply.
	Scripts map[string]*packs.MockScript
	// Strict fails off-script rounds for every script (the project's tests set it).
	Strict bool
	// ChunkDelay is paused before each piece (word) of a reply as it streams to
	// Request.Stream; 0 streams the reply at once.
	ChunkDelay time.Duration
	// RoundDelay is paused once before each round answers, streamed or not: the time a
	// model takes to think, so that a round is still running when a test kills its
	// worker (the multi-instance witness's kills in a turn).
	RoundDelay time.Duration
}

// Name implements Provider.
func (*MockProvider) Name() string { return ProviderMock }

// wantsWholeTranscript reports that rounds of pack need the messages before their
// context window too (Request.Earlier): the script's position depends on every round.
func (p *MockProvider) wantsWholeTranscript(pack string) bool {
	s := p.Scripts[pack]
	return s != nil && len(s.Rounds) > 0
}

// Complete implements Provider. The reply's text streams word by word, ChunkDelay
// before each word.
func (p *MockProvider) Complete(ctx context.Context, req *Request) (*convo.ModelRoundResult, error) {
	in := req.Input
	script := p.Scripts[in.PackID]
	var text string
	var calls []convo.ToolCall
	switch {
	case script == nil:
		text = fmt.Sprintf("Mock reply from pack %q in state %q (no mock script is configured for this pack).", in.PackID, in.State)
	case in.Round < 0:
		return nil, nonRetryable(ErrTypeMockMismatch, "mock script of pack %q: round index %d is negative", in.PackID, in.Round)
	default:
		ans := script.Play(mockRounds(req))
		at := scriptLocation(script, ans.Line)
		switch {
		case ans.Exhausted:
			if script.FailWhenExhausted {
				return nil, nonRetryable(ErrTypeMockExhausted,
					"mock script of pack %q%s is exhausted: round %d found no step left (the script has %d rounds and fail_when_exhausted is set); state %q",
					in.PackID, at, in.Round, len(script.Rounds), in.State)
			}
			text = script.Default
			if text == "" {
				text = fmt.Sprintf("Mock reply from pack %q in state %q (the mock script is exhausted).", in.PackID, in.State)
			}
		case ans.Round == nil:
			if p.Strict || script.Strict {
				return nil, nonRetryable(ErrTypeMockMismatch, "mock script of pack %q, round %d%s (state %q): %s",
					in.PackID, in.Round, at, in.State, ans.OffScript)
			}
			text = script.Default
			if text == "" {
				text = fmt.Sprintf("[scripted mock] This message is off the script of pack %q%s, which expects %s. The conversation goes on; "+
					"see the script for the messages it answers.", in.PackID, at, ans.Expected)
			}
		default:
			entry := ans.Round
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
				calls = append(calls, convo.ToolCall{ID: callID(in.Round, i, c.Name), Name: c.Name, Args: args})
			}
		}
	}
	if err := pause(ctx, p.RoundDelay); err != nil {
		return nil, err
	}
	if err := p.stream(ctx, req, text); err != nil {
		return nil, err
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	return &convo.ModelRoundResult{
		Text:         text,
		ToolCalls:    calls,
		Provider:     ProviderMock,
		Model:        MockModel,
		Usage:        convo.Usage{InputTokens: inputTokens(req), OutputTokens: outputTokens(text, calls)},
		FinishReason: finish,
	}, nil
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stream passes text to req.Stream word by word, ChunkDelay before each word.
func (p *MockProvider) stream(ctx context.Context, req *Request, text string) error {
	if req.Stream == nil {
		return nil
	}
	for _, w := range convo.Pieces(text) {
		if p.ChunkDelay > 0 {
			t := time.NewTimer(p.ChunkDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		req.emit(w)
	}
	return nil
}

// mockRounds lists what the script saw of every round of the run so far, the current one
// last: each assistant message of the whole transcript (Earlier, then Messages) is one
// earlier round, in its state, after the user message before it.
func mockRounds(req *Request) []packs.MockSeen {
	var out []packs.MockSeen
	var cur packs.MockSeen
	for _, msgs := range [][]convo.Message{req.Earlier, req.Messages} {
		for _, m := range msgs {
			switch m.Role {
			case convo.RoleUser:
				cur.User, cur.HasUser = m.Text, true
			case convo.RoleTool:
				cur.ToolResult, cur.HasToolResult = m.Text, true
			case convo.RoleAssistant:
				seen := cur
				seen.State = m.State
				out = append(out, seen)
			}
		}
	}
	cur.State = req.Input.State
	return append(out, cur)
}

// scriptLocation names the file and line of a script step, " (file:line)", when the
// script was loaded from a file.
func scriptLocation(script *packs.MockScript, line int) string {
	switch {
	case script.File() != "" && line > 0:
		return fmt.Sprintf(" (%s:%d)", script.File(), line)
	case script.File() != "":
		return fmt.Sprintf(" (%s)", script.File())
	}
	return ""
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

func outputTokens(text string, calls []convo.ToolCall) int {
	n := len(text)
	for _, c := range calls {
		n += len(c.Name) + len(c.Args)
	}
	return tokens(n)
}
