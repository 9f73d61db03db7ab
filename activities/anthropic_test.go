package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
)

const testAnthropicKey = "sk-ant-test-0123456789abcdefSECRET"

func anthropicBody(content, stop string) string {
	return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test-2025","content":` + content +
		`,"stop_reason":"` + stop + `","stop_sequence":null,"usage":{"input_tokens":21,"output_tokens":9}}`
}

func TestAnthropicPlainText(t *testing.T) {
	ws := newWireServer(t, wireResponse{status: 200, body: anthropicBody(
		`[{"type":"text","text":"Hello"},{"type":"text","text":"there."}]`, "end_turn")})
	p := NewAnthropicProvider(testAnthropicKey, "claude-test", ws.URL)
	res, err := p.Complete(context.Background(), &Request{
		Input: convo.ModelRoundInput{System: "Be brief."},
		Messages: []convo.Message{
			{Role: convo.RoleSystem, Text: "Conversation with pack bank, state verifying."},
			{Role: convo.RoleUser, Text: "hi"},
		},
	})
	require.NoError(t, err)
	assert.Equal(t, &convo.ModelRoundResult{Text: "Hello\n\nthere.", Provider: ProviderAnthropic, Model: "claude-test-2025",
		Usage: convo.Usage{InputTokens: 21, OutputTokens: 9}, FinishReason: "end_turn"}, res)

	reqs := ws.got()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1/messages", reqs[0].Path)
	assert.Equal(t, "Bearer "+testAnthropicKey, reqs[0].Header.Get("Authorization"), "this SDK version sends the API key as a Bearer token")
	assert.NotEmpty(t, reqs[0].Header.Get("Anthropic-Version"))
	assert.JSONEq(t, `{"model":"claude-test","max_tokens":4096,
		"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Conversation with pack bank, state verifying."}],
		"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`, reqs[0].Raw, "the message is streamed")
}

func TestAnthropicToolUseBothWays(t *testing.T) {
	ws := newWireServer(t, wireResponse{status: 200, body: anthropicBody(`[
		{"type":"text","text":"Let me move on."},
		{"type":"tool_use","id":"toolu_01","name":"workflow__transition","input":{"event":"AccountVerified","context":"ok"}},
		{"type":"tool_use","id":"toolu_02","name":"verify_account","input":{"account_id":"ACC-1"}}]`, "tool_use")})
	p := NewAnthropicProvider(testAnthropicKey, "claude-test", ws.URL+"/")
	req := conversationRequest()
	req.Input.ToolChoice = "required"
	// A user message right after the tool results joins the same user turn.
	req.Messages = append(req.Messages, convo.Message{Role: convo.RoleUser, Text: "also, hurry"})
	res, err := p.Complete(context.Background(), req)
	require.NoError(t, err)

	assert.Equal(t, "Let me move on.", res.Text)
	assert.Equal(t, "tool_use", res.FinishReason)
	require.Len(t, res.ToolCalls, 2)
	assert.Equal(t, "toolu_01", res.ToolCalls[0].ID)
	assert.Equal(t, "workflow__transition", res.ToolCalls[0].Name)
	assert.JSONEq(t, `{"event":"AccountVerified","context":"ok"}`, string(res.ToolCalls[0].Args))
	assert.Equal(t, "toolu_02", res.ToolCalls[1].ID)
	assert.JSONEq(t, `{"account_id":"ACC-1"}`, string(res.ToolCalls[1].Args))

	reqs := ws.got()
	require.Len(t, reqs, 1)
	body := reqs[0].Body
	assert.JSONEq(t, `[
		{"role":"user","content":[{"type":"text","text":"What is the balance of ACC-1?"}]},
		{"role":"assistant","content":[
			{"type":"text","text":"Checking."},
			{"type":"tool_use","id":"call_a","name":"verify_account","input":{"account_id":"ACC-1"}},
			{"type":"tool_use","id":"call_b","name":"get_balance","input":{"account_id":"ACC-1"}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"call_a","content":[{"type":"text","text":"{\"ok\":true}"}],"is_error":false},
			{"type":"tool_result","tool_use_id":"call_b","content":[{"type":"text","text":"{\"error\":\"no executor\"}"}],"is_error":true},
			{"type":"text","text":"also, hurry"}]}
	]`, jsonOf(t, body["messages"]))
	assert.JSONEq(t, `[
		{"name":"verify_account","description":"Verify an account",
			"input_schema":{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}},
		{"name":"workflow__transition","description":"Transition the workflow",
			"input_schema":{"type":"object","properties":{"event":{"type":"string","enum":["AccountVerified"]},"context":{"type":"string"}},"required":["event","context"]}}
	]`, jsonOf(t, body["tools"]))
	assert.JSONEq(t, `{"type":"any"}`, jsonOf(t, body["tool_choice"]))
	assert.EqualValues(t, 300, body["max_tokens"])
	assert.InDelta(t, 0.2, body["temperature"], 1e-9)
	assert.InDelta(t, 0.9, body["top_p"], 1e-9)
	assert.EqualValues(t, 40, body["top_k"])
}

func TestAnthropicErrors(t *testing.T) {
	errBody := func(typ, msg string) string {
		return `{"type":"error","error":{"type":"` + typ + `","message":` + jsonString(msg) + `}}`
	}
	cases := []struct {
		name         string
		resp         wireResponse
		wantType     string
		nonRetryable bool
		retryDelay   time.Duration
		contains     string
	}{
		{"400", wireResponse{status: 400, body: errBody("invalid_request_error", "messages: text content blocks must be non-empty")}, ErrTypeBadRequest, true, 0, "non-empty"},
		{"401", wireResponse{status: 401, body: errBody("authentication_error", "invalid x-api-key "+testAnthropicKey)}, ErrTypeAuth, true, 0, "key is invalid"},
		{"429", wireResponse{status: 429, header: map[string]string{"Retry-After": "12"}, body: errBody("rate_limit_error", "Number of request tokens has exceeded your rate limit")}, ErrTypeRateLimited, false, 12 * time.Second, "rate limit"},
		{"500", wireResponse{status: 500, body: errBody("api_error", "Internal server error")}, ErrTypeUnavailable, false, 0, "HTTP 500"},
		{"529", wireResponse{status: 529, body: errBody("overloaded_error", "Overloaded")}, ErrTypeUnavailable, false, 0, "Overloaded"},
		{"malformed", wireResponse{status: 200, body: `{"id":"msg_1","type":"message","content":[{"type":"text","te`}, ErrTypeBadResponse, true, 0, "malformed"},
		{"empty", wireResponse{status: 200, body: `{}`}, ErrTypeBadResponse, true, 0, "no content"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWireServer(t, tc.resp)
			p := NewAnthropicProvider(testAnthropicKey, "claude-test", ws.URL)
			_, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
			appErr := requireAppError(t, err, tc.wantType, tc.nonRetryable)
			assert.Equal(t, tc.retryDelay, appErr.NextRetryDelay())
			assert.Contains(t, err.Error(), tc.contains)
			assert.NotContains(t, err.Error(), "SECRET")
			assert.Len(t, ws.got(), 1, "the SDK must not retry on its own")
		})
	}
}

func TestAnthropicTranscriptStartsWithUser(t *testing.T) {
	ws := newWireServer(t,
		wireResponse{status: 200, body: anthropicBody(`[{"type":"text","text":"a"}]`, "end_turn")},
		wireResponse{status: 200, body: anthropicBody(`[{"type":"text","text":"b"}]`, "end_turn")})
	p := NewAnthropicProvider(testAnthropicKey, "claude-test", ws.URL)
	_, err := p.Complete(context.Background(), &Request{Input: convo.ModelRoundInput{System: "s"}})
	require.NoError(t, err)
	_, err = p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleAssistant, Text: "Welcome!"}, {Role: convo.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	reqs := ws.got()
	require.Len(t, reqs, 2)
	assert.JSONEq(t, `[{"role":"user","content":[{"type":"text","text":"(continue)"}]}]`, jsonOf(t, reqs[0].Body["messages"]))
	assert.JSONEq(t, `[{"role":"user","content":[{"type":"text","text":"(continue)"}]},
		{"role":"assistant","content":[{"type":"text","text":"Welcome!"}]},
		{"role":"user","content":[{"type":"text","text":"hi"}]}]`, jsonOf(t, reqs[1].Body["messages"]))
}
