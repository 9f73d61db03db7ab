package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/convo"
)

const testOpenAIKey = "sk-test-0123456789abcdefSECRET"

func openAIText(text string) wireResponse {
	return wireResponse{status: 200, body: `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test-2025",
		"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":` + jsonString(text) + `}}],
		"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// conversationRequest is a round after one tool round: the transcript holds the
// assistant's two tool calls and both results (one an error).
func conversationRequest() *Request {
	return &Request{
		Input: convo.ModelRoundInput{
			RunID: "run-1", PackID: "bank", State: "verifying", Round: 1,
			System: "You are a bank assistant.",
			Tools: []convo.ToolSpec{
				{Name: "verify_account", Description: "Verify an account",
					Parameters: json.RawMessage(`{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}`)},
				{Name: "workflow__transition", Description: "Transition the workflow",
					Parameters: json.RawMessage(`{"type":"object","properties":{"event":{"type":"string","enum":["AccountVerified"]},"context":{"type":"string"}},"required":["event","context"]}`)},
			},
			ToolChoice: "auto",
			Parameters: json.RawMessage(`{"temperature":0.2,"max_tokens":300,"top_p":0.9,"top_k":40}`),
		},
		Messages: []convo.Message{
			{Role: convo.RoleUser, Text: "What is the balance of ACC-1?"},
			{Role: convo.RoleAssistant, Text: "Checking.", ToolCalls: []convo.ToolCall{
				{ID: "call_a", Name: "verify_account", Args: json.RawMessage(`{"account_id":"ACC-1"}`)},
				{ID: "call_b", Name: "get_balance", Args: json.RawMessage(`{"account_id":"ACC-1"}`)},
			}},
			{Role: convo.RoleTool, ToolCallID: "call_a", Name: "verify_account", Text: `{"ok":true}`},
			{Role: convo.RoleTool, ToolCallID: "call_b", Name: "get_balance", Text: `{"error":"no executor"}`, IsError: true},
		},
	}
}

func TestOpenAIPlainText(t *testing.T) {
	ws := newWireServer(t, openAIText("Hello there."))
	p := NewOpenAIProvider(testOpenAIKey, "gpt-test", ws.URL+"/v1")
	res, err := p.Complete(context.Background(), &Request{
		Input:    convo.ModelRoundInput{System: "Be brief.", Round: 0},
		Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}, {Role: convo.RoleAssistant}},
	})
	require.NoError(t, err)
	assert.Equal(t, &convo.ModelRoundResult{Text: "Hello there.", Provider: ProviderOpenAI, Model: "gpt-test-2025",
		Usage: convo.Usage{InputTokens: 12, OutputTokens: 5}, FinishReason: "stop"}, res)

	reqs := ws.got()
	require.Len(t, reqs, 1)
	assert.Equal(t, "POST", reqs[0].Method)
	assert.Equal(t, "/v1/chat/completions", reqs[0].Path)
	assert.Equal(t, "Bearer "+testOpenAIKey, reqs[0].Header.Get("Authorization"))
	assert.JSONEq(t, `{"model":"gpt-test","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],
		"stream":true,"stream_options":{"include_usage":true}}`, reqs[0].Raw, "the completion is streamed, with its usage")
}

func TestOpenAIToolCallsBothWays(t *testing.T) {
	ws := newWireServer(t, wireResponse{status: 200, body: `{"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"gpt-test",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_X1","type":"function","function":{"name":"workflow__transition","arguments":"{\"event\":\"AccountVerified\",\"context\":\"ok\"}"}},
			{"id":"","type":"function","function":{"name":"verify_account","arguments":"{\"account_id\":"}}]}}],
		"usage":{"prompt_tokens":80,"completion_tokens":30,"total_tokens":110}}`})
	p := NewOpenAIProvider(testOpenAIKey, "gpt-test", ws.URL+"/v1/")
	res, err := p.Complete(context.Background(), conversationRequest())
	require.NoError(t, err)

	assert.Empty(t, res.Text)
	assert.Equal(t, "tool_calls", res.FinishReason)
	assert.Equal(t, convo.Usage{InputTokens: 80, OutputTokens: 30}, res.Usage)
	require.Len(t, res.ToolCalls, 2)
	assert.Equal(t, "call_X1", res.ToolCalls[0].ID)
	assert.Equal(t, "workflow__transition", res.ToolCalls[0].Name)
	assert.JSONEq(t, `{"event":"AccountVerified","context":"ok"}`, string(res.ToolCalls[0].Args))
	assert.Equal(t, "call_1_1_verify_account", res.ToolCalls[1].ID, "a missing id gets the deterministic form")
	assert.JSONEq(t, `{"_raw_arguments":"{\"account_id\":"}`, string(res.ToolCalls[1].Args), "broken JSON arguments are kept, not dropped")

	reqs := ws.got()
	require.Len(t, reqs, 1)
	body := reqs[0].Body
	assert.JSONEq(t, `[
		{"role":"system","content":"You are a bank assistant."},
		{"role":"user","content":"What is the balance of ACC-1?"},
		{"role":"assistant","content":"Checking.","tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"verify_account","arguments":"{\"account_id\":\"ACC-1\"}"}},
			{"id":"call_b","type":"function","function":{"name":"get_balance","arguments":"{\"account_id\":\"ACC-1\"}"}}]},
		{"role":"tool","tool_call_id":"call_a","content":"{\"ok\":true}"},
		{"role":"tool","tool_call_id":"call_b","content":"ERROR: {\"error\":\"no executor\"}"}
	]`, jsonOf(t, body["messages"]))
	assert.JSONEq(t, `[
		{"type":"function","function":{"name":"verify_account","description":"Verify an account",
			"parameters":{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}}},
		{"type":"function","function":{"name":"workflow__transition","description":"Transition the workflow",
			"parameters":{"type":"object","properties":{"event":{"type":"string","enum":["AccountVerified"]},"context":{"type":"string"}},"required":["event","context"]}}}
	]`, jsonOf(t, body["tools"]))
	assert.Equal(t, "auto", body["tool_choice"])
	assert.InDelta(t, 0.2, body["temperature"], 1e-9)
	assert.InDelta(t, 0.9, body["top_p"], 1e-9)
	assert.EqualValues(t, 300, body["max_completion_tokens"])
	assert.NotContains(t, body, "max_tokens")
	assert.NotContains(t, body, "top_k")
}

func TestOpenAICompatibleEndpoint(t *testing.T) {
	ws := newWireServer(t, openAIText("hi from llama"))
	p := NewOpenAICompatibleProvider("", "llama3.2", ws.URL+"/v1")
	req := conversationRequest()
	req.Input.ToolChoice = "none"
	res, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, ProviderOpenAICompatible, res.Provider)
	assert.Equal(t, "hi from llama", res.Text)

	reqs := ws.got()
	require.Len(t, reqs, 1)
	assert.Empty(t, reqs[0].Header.Get("Authorization"), "no key configured, no Authorization header")
	assert.Equal(t, "llama3.2", reqs[0].Body["model"])
	assert.EqualValues(t, 300, reqs[0].Body["max_tokens"], "compatible servers get max_tokens")
	assert.NotContains(t, reqs[0].Body, "tools", "tool_choice none offers no tools")
	assert.NotContains(t, reqs[0].Body, "tool_choice")
}

func requireAppError(t *testing.T, err error, wantType string, wantNonRetryable bool) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %T: %v", err, err)
	assert.Equal(t, wantType, appErr.Type(), appErr.Error())
	assert.Equal(t, wantNonRetryable, appErr.NonRetryable(), appErr.Error())
	return appErr
}

func TestOpenAIErrors(t *testing.T) {
	errBody := func(msg string) string {
		return `{"error":{"message":` + jsonString(msg) + `,"type":"x","param":null,"code":null}}`
	}
	cases := []struct {
		name         string
		resp         wireResponse
		wantType     string
		nonRetryable bool
		retryDelay   time.Duration
		contains     string
	}{
		{"400", wireResponse{status: 400, body: errBody("Invalid schema for function 'x'")}, ErrTypeBadRequest, true, 0, "Invalid schema"},
		{"401", wireResponse{status: 401, body: errBody("Incorrect API key provided: sk-test-***SECRET")}, ErrTypeAuth, true, 0, "key is invalid"},
		{"403", wireResponse{status: 403, body: errBody("forbidden")}, ErrTypeAuth, true, 0, "HTTP 403"},
		{"404", wireResponse{status: 404, body: errBody("The model `nope` does not exist")}, ErrTypeBadRequest, true, 0, "does not exist"},
		{"429", wireResponse{status: 429, header: map[string]string{"Retry-After": "7"}, body: errBody("Rate limit reached")}, ErrTypeRateLimited, false, 7 * time.Second, "Rate limit"},
		{"429ms", wireResponse{status: 429, header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "9"}, body: errBody("slow down")}, ErrTypeRateLimited, false, 1500 * time.Millisecond, "HTTP 429"},
		{"500", wireResponse{status: 500, body: errBody("The server had an error")}, ErrTypeUnavailable, false, 0, "HTTP 500"},
		{"503 retry-after", wireResponse{status: 503, header: map[string]string{"Retry-After": "2"}, body: errBody("overloaded")}, ErrTypeUnavailable, false, 2 * time.Second, "overloaded"},
		{"malformed", wireResponse{status: 200, body: `{"id":"chatcmpl-3","choices":[{"index":0,"message":`}, ErrTypeBadResponse, true, 0, "malformed"},
		{"no choices", wireResponse{status: 200, body: `{"id":"chatcmpl-4","object":"chat.completion","created":1,"model":"m","choices":[]}`}, ErrTypeBadResponse, true, 0, "no choices"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWireServer(t, tc.resp)
			p := NewOpenAIProvider(testOpenAIKey, "gpt-test", ws.URL+"/v1")
			_, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
			appErr := requireAppError(t, err, tc.wantType, tc.nonRetryable)
			assert.Equal(t, tc.retryDelay, appErr.NextRetryDelay())
			assert.Contains(t, err.Error(), tc.contains)
			assert.NotContains(t, err.Error(), "SECRET")
			assert.NotContains(t, err.Error(), testOpenAIKey)
			assert.Len(t, ws.got(), 1, "the SDK must not retry on its own")
		})
	}
}

func TestOpenAIUnreachableIsRetryable(t *testing.T) {
	ws := newWireServer(t)
	url := ws.URL
	ws.Close()
	p := NewOpenAIProvider(testOpenAIKey, "gpt-test", url+"/v1")
	_, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
	requireAppError(t, err, ErrTypeUnavailable, false)
}

func TestOpenAIRejectsUnknownRole(t *testing.T) {
	p := NewOpenAIProvider(testOpenAIKey, "gpt-test", "http://127.0.0.1:1/v1")
	_, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: "narrator", Text: "x"}}})
	requireAppError(t, err, ErrTypeBadRequest, true)
}
