package activities

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/fakemodel"
)

const testAzureKey = "azure-key-0123456789abcdef-SECRET"

// newAzureFake serves a fakemodel.Server over TLS, as Azure's endpoints are, and
// returns it with a provider pointed at it.
func newAzureFake(t *testing.T, answer func(fakemodel.Call) fakemodel.Reply, cfg AzureOpenAIConfig) (*fakemodel.Server, *OpenAIProvider) {
	t.Helper()
	fake := &fakemodel.Server{Answer: answer}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	cfg.Endpoint, cfg.HTTPClient = srv.URL, srv.Client()
	if cfg.Deployment == "" {
		cfg.Deployment = "gpt-4o-prod"
	}
	p, err := NewAzureOpenAIProvider(cfg)
	require.NoError(t, err)
	return fake, p
}

func TestAzureOpenAIStreamsFromTheDeployment(t *testing.T) {
	fake, p := newAzureFake(t, func(fakemodel.Call) fakemodel.Reply {
		return fakemodel.Reply{Text: "Hello from Azure.", Model: "gpt-4o-2024-11-20", InputTokens: 9, OutputTokens: 3}
	}, AzureOpenAIConfig{APIKey: testAzureKey})
	var pieces []string
	res, err := p.Complete(context.Background(), &Request{
		Input:    convo.ModelRoundInput{System: "Be brief.", Parameters: []byte(`{"max_tokens":50}`)},
		Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}},
		Stream:   func(s string) { pieces = append(pieces, s) },
	})
	require.NoError(t, err)
	assert.Equal(t, &convo.ModelRoundResult{Text: "Hello from Azure.", Provider: ProviderAzureOpenAI, Model: "gpt-4o-2024-11-20",
		Usage: convo.Usage{InputTokens: 9, OutputTokens: 3}, FinishReason: "stop"}, res)
	assert.Equal(t, []string{"Hello", " from", " Azure."}, pieces)

	calls := fake.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "/openai/deployments/gpt-4o-prod/chat/completions", calls[0].Path)
	assert.Equal(t, testAzureKey, calls[0].Header.Get("Api-Key"), "Azure keys go in the api-key header")
	assert.Empty(t, calls[0].Header.Get("Authorization"))
	assert.Equal(t, true, calls[0].Body["stream"])
	assert.EqualValues(t, 50, calls[0].Body["max_completion_tokens"])
}

func TestAzureOpenAIToolCalls(t *testing.T) {
	fake, p := newAzureFake(t, func(fakemodel.Call) fakemodel.Reply {
		return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "call_z", Name: "verify_account", Arguments: `{"account_id":"ACC-9"}`}}}
	}, AzureOpenAIConfig{APIKey: testAzureKey})
	res, err := p.Complete(context.Background(), conversationRequest())
	require.NoError(t, err)
	require.Len(t, res.ToolCalls, 1)
	assert.Equal(t, convo.ToolCall{ID: "call_z", Name: "verify_account", Args: []byte(`{"account_id":"ACC-9"}`)}, res.ToolCalls[0])
	assert.Equal(t, "tool_calls", res.FinishReason)
	body := fake.Calls()[0].Body
	assert.JSONEq(t, `{"role":"tool","tool_call_id":"call_b","content":"ERROR: {\"error\":\"no executor\"}"}`, jsonOf(t, body["messages"].([]any)[4]))
	assert.Len(t, body["tools"], 2)
}

// staticAzureToken is an Entra ID credential for tests.
type staticAzureToken string

func (s staticAzureToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func TestAzureOpenAIWithEntraID(t *testing.T) {
	fake, p := newAzureFake(t, nil, AzureOpenAIConfig{Credential: staticAzureToken("entra-token-1"), APIVersion: "2025-01-01-preview"})
	_, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	calls := fake.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "Bearer entra-token-1", calls[0].Header.Get("Authorization"))
	assert.Empty(t, calls[0].Header.Get("Api-Key"))
}

func TestAzureOpenAIErrors(t *testing.T) {
	body := func(code, msg string) string {
		return `{"error":{"code":"` + code + `","message":` + jsonString(msg) + `}}`
	}
	cases := []struct {
		name         string
		fail         fakemodel.Failure
		wantType     string
		nonRetryable bool
		retryDelay   time.Duration
	}{
		{"400", fakemodel.Failure{Status: 400, Body: body("BadRequest", "Invalid value for 'tools'")}, ErrTypeBadRequest, true, 0},
		{"401", fakemodel.Failure{Status: 401, Body: body("401", "Access denied due to invalid subscription key "+testAzureKey)}, ErrTypeAuth, true, 0},
		{"404 deployment", fakemodel.Failure{Status: 404, Body: body("DeploymentNotFound", "The API deployment for this resource does not exist.")}, ErrTypeBadRequest, true, 0},
		{"429 retry-after-ms", fakemodel.Failure{Status: 429, Header: map[string]string{"Retry-After-Ms": "2500", "Retry-After": "3"},
			Body: body("429", "Requests to the ChatCompletions_Create Operation have exceeded the token rate limit.")}, ErrTypeRateLimited, false, 2500 * time.Millisecond},
		{"500", fakemodel.Failure{Status: 500, Body: body("InternalServerError", "Backend returned unexpected response.")}, ErrTypeUnavailable, false, 0},
		{"503", fakemodel.Failure{Status: 503, Header: map[string]string{"Retry-After": "4"}, Body: body("ServiceUnavailable", "busy")}, ErrTypeUnavailable, false, 4 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fl := tc.fail
			fake, p := newAzureFake(t, func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Fail: &fl} }, AzureOpenAIConfig{APIKey: testAzureKey})
			_, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
			appErr := requireAppError(t, err, tc.wantType, tc.nonRetryable)
			assert.Equal(t, tc.retryDelay, appErr.NextRetryDelay())
			assert.Contains(t, err.Error(), ProviderAzureOpenAI)
			assert.NotContains(t, err.Error(), testAzureKey)
			assert.Len(t, fake.Calls(), 1, "the SDK must not retry on its own")
		})
	}
}

func TestAzureOpenAIConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  AzureOpenAIConfig
		want string
	}{
		{AzureOpenAIConfig{Endpoint: "https://r.openai.azure.com", APIKey: "k"}, EnvModel},
		{AzureOpenAIConfig{Endpoint: "https://r.openai.azure.com", Deployment: "d"}, EnvAzureOpenAIKey},
		{AzureOpenAIConfig{Endpoint: "http://r.openai.azure.com", Deployment: "d", APIKey: "k"}, "https only"},
		{AzureOpenAIConfig{Endpoint: "r.openai.azure.com", Deployment: "d", APIKey: "k"}, EnvAzureOpenAIEndpoint},
	} {
		_, err := NewAzureOpenAIProvider(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	// A loopback endpoint (an emulator, a local proxy) may be plain http.
	fake := &fakemodel.Server{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	p, err := NewAzureOpenAIProvider(AzureOpenAIConfig{Endpoint: srv.URL, Deployment: "d", APIKey: testAzureKey})
	require.NoError(t, err)
	_, err = p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
	require.NoError(t, err)
	assert.Equal(t, "/openai/deployments/d/chat/completions", fake.Calls()[0].Path)
}
