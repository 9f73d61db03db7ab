package activities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// balanceScript is the worked example of promptpack-workflow.md §12.
func balanceScript() *packs.MockScript {
	return &packs.MockScript{
		Default: "OK.",
		Rounds: []packs.MockRound{
			{ExpectState: "verifying", ExpectUser: []string{"balance"}, Text: "Let me check that account.",
				ToolCalls: []packs.MockToolCall{{Name: "verify_account", Args: json.RawMessage(`{"account_id":"ACC-12345"}`)}}},
			{ExpectState: "verifying", ToolCalls: []packs.MockToolCall{
				{Name: "workflow__transition", Args: json.RawMessage(`{"event":"AccountVerified","context":"wants balance"}`)},
				{Name: "note"},
			}},
			{ExpectState: "resolution", Error: "provider exploded"},
		},
		ToolResults: map[string]json.RawMessage{"verify_account": json.RawMessage(`{"ok":true}`)},
	}
}

func mockReq(state string, round int, msgs ...convo.Message) *Request {
	return &Request{
		Input:    convo.ModelRoundInput{RunID: "run-1", PackID: "bank", State: state, Round: round, System: "You are a bank."},
		Messages: msgs,
	}
}

// earlierRound is the assistant message an earlier round left in the transcript.
func earlierRound(state string) convo.Message {
	return convo.Message{Role: convo.RoleAssistant, Text: "…", State: state}
}

func appErrType(t *testing.T, err error) (string, bool) {
	t.Helper()
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %T: %v", err, err)
	return appErr.Type(), appErr.NonRetryable()
}

func strictMock(s *packs.MockScript) *MockProvider {
	return &MockProvider{Scripts: map[string]*packs.MockScript{"bank": s}, Strict: true}
}

func TestMockFollowsScriptInOrder(t *testing.T) {
	p := strictMock(balanceScript())
	user := convo.Message{Role: convo.RoleUser, Text: "what is my balance?"}

	r0, err := p.Complete(context.Background(), mockReq("verifying", 0, user))
	require.NoError(t, err)
	assert.Equal(t, "Let me check that account.", r0.Text)
	require.Len(t, r0.ToolCalls, 1)
	assert.Equal(t, convo.ToolCall{ID: "call_0_0_verify_account", Name: "verify_account", Args: json.RawMessage(`{"account_id":"ACC-12345"}`)}, r0.ToolCalls[0])
	assert.Equal(t, "tool_calls", r0.FinishReason)
	assert.Equal(t, ProviderMock, r0.Provider)
	assert.Equal(t, MockModel, r0.Model)
	// Synthetic usage: ceil(chars/4). Input = system + user text; output = text + tool name + args.
	assert.Equal(t, (len("You are a bank.")+len(user.Text)+3)/4, r0.Usage.InputTokens)
	assert.Equal(t, (len(r0.Text)+len("verify_account")+len(`{"account_id":"ACC-12345"}`)+3)/4, r0.Usage.OutputTokens)

	// The second round sees the first one's assistant message in the transcript.
	r1, err := p.Complete(context.Background(), mockReq("verifying", 1, user, earlierRound("verifying")))
	require.NoError(t, err)
	assert.Empty(t, r1.Text)
	require.Len(t, r1.ToolCalls, 2)
	assert.Equal(t, "call_1_0_workflow__transition", r1.ToolCalls[0].ID)
	assert.Equal(t, "call_1_1_note", r1.ToolCalls[1].ID)
	assert.JSONEq(t, `{}`, string(r1.ToolCalls[1].Args), "missing args become an empty object")

	// Rounds before the context window (Earlier) count too.
	req := mockReq("verifying", 1, user)
	req.Earlier = []convo.Message{user, earlierRound("verifying")}
	r1b, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, r1.ToolCalls, r1b.ToolCalls)
}

func TestMockExpectStateMismatch(t *testing.T) {
	p := strictMock(balanceScript())
	user := convo.Message{Role: convo.RoleUser, Text: "my balance"}
	_, err := p.Complete(context.Background(), mockReq("triage", 1, user, earlierRound("verifying")))
	require.Error(t, err)
	typ, nonRetryable := appErrType(t, err)
	assert.Equal(t, ErrTypeMockMismatch, typ)
	assert.True(t, nonRetryable)
	for _, want := range []string{"round 1", `"verifying"`, `"triage"`, `"bank"`} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestMockExpectUser(t *testing.T) {
	p := strictMock(balanceScript())

	// Only the latest user message counts.
	_, err := p.Complete(context.Background(), mockReq("verifying", 0,
		convo.Message{Role: convo.RoleUser, Text: "my balance please"},
		convo.Message{Role: convo.RoleSystem, Text: "sure"},
		convo.Message{Role: convo.RoleUser, Text: "actually, close my account"}))
	require.Error(t, err)
	typ, nonRetryable := appErrType(t, err)
	assert.Equal(t, ErrTypeMockMismatch, typ)
	assert.True(t, nonRetryable)
	assert.Contains(t, err.Error(), `"balance"`)
	assert.Contains(t, err.Error(), "close my account")

	_, err = p.Complete(context.Background(), mockReq("verifying", 0, convo.Message{Role: convo.RoleSystem, Text: "balance"}))
	require.Error(t, err)
	typ, _ = appErrType(t, err)
	assert.Equal(t, ErrTypeMockMismatch, typ)
	assert.Contains(t, err.Error(), "no user message")

	// Case does not matter.
	res, err := p.Complete(context.Background(), mockReq("verifying", 0, convo.Message{Role: convo.RoleUser, Text: "BALANCE?"}))
	require.NoError(t, err)
	assert.Equal(t, "Let me check that account.", res.Text)
}

// TestMockForgivesOffScriptRounds: without strictness an off-script round answers the
// script's default (or a note of what it expected), and the script waits where it is.
func TestMockForgivesOffScriptRounds(t *testing.T) {
	script := balanceScript()
	p := &MockProvider{Scripts: map[string]*packs.MockScript{"bank": script}}
	off := convo.Message{Role: convo.RoleUser, Text: "what's the weather?"}
	res, err := p.Complete(context.Background(), mockReq("verifying", 0, off))
	require.NoError(t, err)
	assert.Equal(t, "OK.", res.Text)
	assert.Empty(t, res.ToolCalls)

	// The next message is the one the script waits for: its first round answers.
	res, err = p.Complete(context.Background(), mockReq("verifying", 1, off, earlierRound("verifying"),
		convo.Message{Role: convo.RoleUser, Text: "my balance please"}))
	require.NoError(t, err)
	assert.Equal(t, "Let me check that account.", res.Text)

	script.Default = ""
	res, err = p.Complete(context.Background(), mockReq("verifying", 0, off))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(res.Text, "[scripted mock]"), res.Text)
	assert.Contains(t, res.Text, `a message containing "balance" in state "verifying"`)

	// strict: true in the script fails the round as a strict provider does.
	script.Strict = true
	_, err = p.Complete(context.Background(), mockReq("verifying", 0, off))
	typ, _ := appErrType(t, err)
	assert.Equal(t, ErrTypeMockMismatch, typ)
}

func TestMockScriptedError(t *testing.T) {
	p := &MockProvider{Scripts: map[string]*packs.MockScript{"bank": balanceScript()}}
	user := convo.Message{Role: convo.RoleUser, Text: "balance"}
	_, err := p.Complete(context.Background(), mockReq("resolution", 2, user, earlierRound("verifying"), earlierRound("verifying")))
	require.Error(t, err)
	typ, nonRetryable := appErrType(t, err)
	assert.Equal(t, ErrTypeMockFailure, typ)
	assert.True(t, nonRetryable)
	assert.Contains(t, err.Error(), "provider exploded")
}

func TestMockExhausted(t *testing.T) {
	script := &packs.MockScript{Default: "OK.", Rounds: []packs.MockRound{{Text: "one"}, {Text: "two"}, {Text: "three"}}}
	p := &MockProvider{Scripts: map[string]*packs.MockScript{"bank": script}}
	three := []convo.Message{{Role: convo.RoleUser, Text: "hi"}, earlierRound("a"), earlierRound("a"), earlierRound("a")}

	res, err := p.Complete(context.Background(), mockReq("anything", 3, three...))
	require.NoError(t, err)
	assert.Equal(t, "OK.", res.Text)
	assert.Equal(t, "stop", res.FinishReason)

	script.Default = ""
	res, err = p.Complete(context.Background(), mockReq("anything", 3, three...))
	require.NoError(t, err)
	assert.Contains(t, res.Text, `"bank"`)
	assert.Contains(t, res.Text, "exhausted")

	script.FailWhenExhausted = true
	_, err = p.Complete(context.Background(), mockReq("anything", 3, three...))
	require.Error(t, err)
	typ, nonRetryable := appErrType(t, err)
	assert.Equal(t, ErrTypeMockExhausted, typ)
	assert.True(t, nonRetryable)
	assert.Contains(t, err.Error(), "round 3")
	assert.Contains(t, err.Error(), "3 rounds")
}

// RoundDelay holds every round, streamed or not, before it answers, and gives way to
// the round's cancellation.
func TestMockRoundDelay(t *testing.T) {
	p := &MockProvider{Scripts: map[string]*packs.MockScript{"bank": {Default: "OK."}}, RoundDelay: 50 * time.Millisecond}
	start := time.Now()
	res, err := p.Complete(context.Background(), mockReq("verifying", 0, convo.Message{Role: convo.RoleUser, Text: "hi"}))
	require.NoError(t, err)
	assert.Equal(t, "OK.", res.Text)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.RoundDelay = time.Hour
	_, err = p.Complete(ctx, mockReq("verifying", 0, convo.Message{Role: convo.RoleUser, Text: "hi"}))
	assert.ErrorIs(t, err, context.Canceled)
}
