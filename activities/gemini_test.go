package activities

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/fakemodel"
)

const testGeminiKey = "AIzaSy-test-0123456789abcdef-SECRET"

// fakeModelServer serves a fakemodel.Server over HTTP for the test.
func fakeModelServer(t *testing.T, answer func(fakemodel.Call) fakemodel.Reply) (*fakemodel.Server, string) {
	t.Helper()
	fake := &fakemodel.Server{Answer: answer}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

func newGemini(t *testing.T, base string, noStream bool) *GeminiProvider {
	t.Helper()
	p, err := NewGeminiProvider(context.Background(), GeminiConfig{Model: "gemini-test", APIKey: testGeminiKey, BaseURL: base, NoStream: noStream})
	require.NoError(t, err)
	return p
}

func TestGeminiStreamsTextWithUsage(t *testing.T) {
	fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply {
		return fakemodel.Reply{Text: "Hello there, friend.", Model: "gemini-test-001", InputTokens: 12, OutputTokens: 5}
	})
	p := newGemini(t, base, false)
	var pieces []string
	req := &Request{
		Input:    convo.ModelRoundInput{System: "Be brief.", Parameters: []byte(`{"temperature":0.5,"max_tokens":64,"top_k":20}`)},
		Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}},
		Stream:   func(s string) { pieces = append(pieces, s) },
	}
	res, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, &convo.ModelRoundResult{Text: "Hello there, friend.", Provider: ProviderGemini, Model: "gemini-test-001",
		Usage: convo.Usage{InputTokens: 12, OutputTokens: 5}, FinishReason: "STOP"}, res)
	assert.Equal(t, []string{"Hello", " there,", " friend."}, pieces, "the reply streams as it arrives")

	calls := fake.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "/v1beta/models/gemini-test:streamGenerateContent", calls[0].Path)
	assert.Equal(t, testGeminiKey, calls[0].Header.Get("x-goog-api-key"))
	assert.JSONEq(t, `{"parts":[{"text":"Be brief."}],"role":"user"}`, jsonOf(t, calls[0].Body["systemInstruction"]))
	assert.JSONEq(t, `[{"parts":[{"text":"hi"}],"role":"user"}]`, jsonOf(t, calls[0].Body["contents"]))
	assert.JSONEq(t, `{"temperature":0.5,"maxOutputTokens":64,"topK":20}`, jsonOf(t, calls[0].Body["generationConfig"]))
}

func TestGeminiWholeReplyWithoutStream(t *testing.T) {
	fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Text: "All at once."} })
	p := newGemini(t, base, true)
	var pieces []string
	res, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}},
		Stream: func(s string) { pieces = append(pieces, s) }})
	require.NoError(t, err)
	assert.Equal(t, "All at once.", res.Text)
	assert.Equal(t, []string{"All at once."}, pieces, "a whole reply reaches readers as one chunk")
	require.Len(t, fake.Calls(), 1)
	assert.Equal(t, "/v1beta/models/gemini-test:generateContent", fake.Calls()[0].Path)
	assert.False(t, fake.Calls()[0].Stream)
}

func TestGeminiToolCallsBothWays(t *testing.T) {
	sig := []byte("opaque-thought-signature")
	fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply {
		return fakemodel.Reply{Signature: sig, ToolCalls: []fakemodel.ToolCall{
			{Name: "workflow__transition", Arguments: `{"event":"AccountVerified","context":"ok"}`},
			{Name: "verify_account", Arguments: `{"account_id":"ACC-2"}`},
		}}
	})
	p := newGemini(t, base, false)
	req := conversationRequest()
	req.Messages[1].ToolCalls[0].Signature = base64.StdEncoding.EncodeToString([]byte("sig-of-call-a"))
	res, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, res.ToolCalls, 2)
	assert.Equal(t, convo.ToolCall{ID: "call_1_0_workflow__transition", Name: "workflow__transition",
		Args: []byte(`{"context":"ok","event":"AccountVerified"}`), Signature: base64.StdEncoding.EncodeToString(sig)}, res.ToolCalls[0],
		"the signature is kept with its call, base64, and a call without id gets the deterministic form")
	assert.Equal(t, "verify_account", res.ToolCalls[1].Name)
	assert.Empty(t, res.ToolCalls[1].Signature)

	body := fake.Calls()[0].Body
	assert.JSONEq(t, `[
		{"role":"user","parts":[{"text":"What is the balance of ACC-1?"}]},
		{"role":"model","parts":[{"text":"Checking."},
			{"functionCall":{"name":"verify_account","args":{"account_id":"ACC-1"}},"thoughtSignature":"`+base64.StdEncoding.EncodeToString([]byte("sig-of-call-a"))+`"},
			{"functionCall":{"name":"get_balance","args":{"account_id":"ACC-1"}}}]},
		{"role":"user","parts":[
			{"functionResponse":{"name":"verify_account","response":{"output":{"ok":true}}}},
			{"functionResponse":{"name":"get_balance","response":{"error":{"error":"no executor"}}}}]}
	]`, jsonOf(t, body["contents"]), "a round's results form one user content; errors go under error")
	assert.JSONEq(t, `[{"functionDeclarations":[
		{"name":"verify_account","description":"Verify an account",
			"parametersJsonSchema":{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}},
		{"name":"workflow__transition","description":"Transition the workflow",
			"parametersJsonSchema":{"type":"object","properties":{"event":{"type":"string","enum":["AccountVerified"]},"context":{"type":"string"}},"required":["event","context"]}}]}]`,
		jsonOf(t, body["tools"]))
	assert.JSONEq(t, `{"functionCallingConfig":{"mode":"AUTO"}}`, jsonOf(t, body["toolConfig"]))
}

func TestGeminiThreeGetsASignatureForUnsignedCalls(t *testing.T) {
	fake, base := fakeModelServer(t, nil)
	p, err := NewGeminiProvider(context.Background(), GeminiConfig{Model: "gemini-3-pro-preview", APIKey: testGeminiKey, BaseURL: base})
	require.NoError(t, err)
	_, err = p.Complete(context.Background(), conversationRequest())
	require.NoError(t, err)
	contents := jsonOf(t, fake.Calls()[0].Body["contents"])
	skip := base64.StdEncoding.EncodeToString([]byte(geminiSkipSignature))
	assert.Equal(t, 1, strings.Count(contents, skip), "the first call of the batch carries the documented skip value: %s", contents)

	for model, want := range map[string]bool{"gemini-2.5-flash": false, "gemini-3-flash": true, "models/gemini-3.1-pro": true, "gemini-10-x": true, "my-tuned-model": false} {
		assert.Equal(t, want, needsSignature(model), model)
	}
}

func TestGeminiErrors(t *testing.T) {
	body := func(code, msg, status string) string {
		return `{"error":{"code":` + code + `,"message":` + jsonString(msg) + `,"status":"` + status + `"}}`
	}
	cases := []struct {
		name         string
		fail         fakemodel.Failure
		wantType     string
		nonRetryable bool
		retryDelay   time.Duration
		contains     string
	}{
		{"400", fakemodel.Failure{Status: 400, Body: body("400", "Invalid JSON payload received.", "INVALID_ARGUMENT")}, ErrTypeBadRequest, true, 0, "Invalid JSON payload"},
		{"401", fakemodel.Failure{Status: 401, Body: body("401", "API key "+testGeminiKey+" not valid", "UNAUTHENTICATED")}, ErrTypeAuth, true, 0, "key is invalid"},
		{"403", fakemodel.Failure{Status: 403, Body: body("403", "Permission denied", "PERMISSION_DENIED")}, ErrTypeAuth, true, 0, "HTTP 403"},
		{"429", fakemodel.Failure{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: body("429", "Resource has been exhausted for key "+testGeminiKey, "RESOURCE_EXHAUSTED")}, ErrTypeRateLimited, false, 7 * time.Second, "Resource has been exhausted"},
		{"500", fakemodel.Failure{Status: 500, Body: body("500", "Internal error", "INTERNAL")}, ErrTypeUnavailable, false, 0, "HTTP 500"},
		{"503", fakemodel.Failure{Status: 503, Header: map[string]string{"Retry-After": "2"}, Body: body("503", "The model is overloaded.", "UNAVAILABLE")}, ErrTypeUnavailable, false, 2 * time.Second, "overloaded"},
	}
	for _, tc := range cases {
		for _, noStream := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: " stream", true: " whole"}[noStream], func(t *testing.T) {
				fl := tc.fail
				fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Fail: &fl} })
				p := newGemini(t, base, noStream)
				_, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
				appErr := requireAppError(t, err, tc.wantType, tc.nonRetryable)
				assert.Equal(t, tc.retryDelay, appErr.NextRetryDelay())
				assert.Contains(t, err.Error(), tc.contains)
				assert.NotContains(t, err.Error(), testGeminiKey)
				assert.NotContains(t, err.Error(), "SECRET")
				assert.Len(t, fake.Calls(), 1, "the SDK must not retry on its own")
			})
		}
	}
}

func TestGeminiUnreachableIsRetryable(t *testing.T) {
	srv := httptest.NewServer(nil)
	base := srv.URL
	srv.Close()
	_, err := newGemini(t, base, false).Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
	requireAppError(t, err, ErrTypeUnavailable, false)
}

// staticToken is a token provider for Vertex tests: no Application Default Credentials.
type staticToken string

func (s staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

func TestVertexCallsTheProjectsModel(t *testing.T) {
	fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Text: "from vertex"} })
	p, err := NewGeminiProvider(context.Background(), GeminiConfig{Vertex: true, Project: "proj-1", Location: "europe-west4",
		Model: "gemini-2.5-pro", BaseURL: base, Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken("ya29.test-token")})})
	require.NoError(t, err)
	res, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	assert.Equal(t, ProviderVertex, res.Provider)
	assert.Equal(t, "from vertex", res.Text)
	calls := fake.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "/v1beta1/projects/proj-1/locations/europe-west4/publishers/google/models/gemini-2.5-pro:streamGenerateContent", calls[0].Path)
	assert.Equal(t, "Bearer ya29.test-token", calls[0].Header.Get("Authorization"), "Vertex authenticates with the credentials' token")
	assert.Empty(t, calls[0].Header.Get("x-goog-api-key"))
}
