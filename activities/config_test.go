package activities

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestProvidersFromEnv(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		provider string
		model    string
		baseURL  string
	}{
		{"nothing set is the mock", nil, ProviderMock, "", ""},
		{"explicit mock wins over a key", map[string]string{EnvModelProvider: "mock", EnvOpenAIKey: "sk-1"}, ProviderMock, "", ""},
		{"openai key picks openai", map[string]string{EnvOpenAIKey: "sk-1"}, ProviderOpenAI, DefaultOpenAIModel, DefaultOpenAIBaseURL},
		{"openai before anthropic", map[string]string{EnvOpenAIKey: "sk-1", EnvAnthropicKey: "sk-ant"}, ProviderOpenAI, DefaultOpenAIModel, DefaultOpenAIBaseURL},
		{"anthropic key picks anthropic", map[string]string{EnvAnthropicKey: "sk-ant", EnvModel: "claude-x"}, ProviderAnthropic, "claude-x", DefaultAnthropicBaseURL},
		{"explicit anthropic with base URL", map[string]string{EnvModelProvider: " Anthropic ", EnvAnthropicKey: "k", EnvAnthropicBaseURL: "http://proxy:9000"}, ProviderAnthropic, DefaultAnthropicModel, "http://proxy:9000"},
		{"openai base URL", map[string]string{EnvOpenAIKey: "k", EnvOpenAIBaseURL: "https://gw.example/v1"}, ProviderOpenAI, DefaultOpenAIModel, "https://gw.example/v1"},
		{"compatible from its base URL", map[string]string{EnvOpenAICompatibleBaseURL: "http://localhost:11434/v1", EnvModel: "llama3.2"}, ProviderOpenAICompatible, "llama3.2", "http://localhost:11434/v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := ProvidersFromEnv(envOf(tc.env))
			require.NoError(t, err)
			require.Len(t, ps, 1)
			p := ps[DefaultProviderKey]
			require.NotNil(t, p)
			assert.Equal(t, tc.provider, p.Name())
			switch p := p.(type) {
			case *OpenAIProvider:
				assert.Equal(t, tc.model, p.Model)
				assert.Equal(t, tc.baseURL, p.BaseURL)
			case *AnthropicProvider:
				assert.Equal(t, tc.model, p.Model)
				assert.Equal(t, tc.baseURL, p.BaseURL)
			case *MockProvider:
				assert.Equal(t, ProviderMock, tc.provider)
			}
		})
	}
}

func TestProvidersFromEnvErrors(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvModelProvider: "gemma"}, "is not a provider"},
		{map[string]string{EnvModelProvider: "gemini"}, EnvGeminiKey + " or " + EnvGoogleKey},
		{map[string]string{EnvModelProvider: "vertex"}, EnvGoogleCloudProject},
		{map[string]string{EnvModelProvider: "bedrock", EnvAWSRegion: "us-east-1"}, EnvModel},
		{map[string]string{EnvModelProvider: "azure-openai", EnvModel: "d", EnvAzureOpenAIKey: "sk-az"}, EnvAzureOpenAIEndpoint},
		{map[string]string{EnvModelProvider: "azure-openai", EnvAzureOpenAIEndpoint: "https://r.openai.azure.com", EnvAzureOpenAIKey: "sk-az"}, EnvModel},
		{map[string]string{EnvModelProvider: "gemini", EnvGeminiKey: "sk-g", EnvGeminiBaseURL: "gw:1"}, "not an absolute http(s) URL"},
		{map[string]string{EnvModelProvider: "openai"}, EnvOpenAIKey},
		{map[string]string{EnvModelProvider: "anthropic", EnvOpenAIKey: "sk-x"}, EnvAnthropicKey},
		{map[string]string{EnvModelProvider: "openai-compatible", EnvModel: "m"}, EnvOpenAICompatibleBaseURL},
		{map[string]string{EnvOpenAICompatibleBaseURL: "http://localhost:11434/v1"}, EnvModel},
		{map[string]string{EnvOpenAIKey: "sk-x", EnvOpenAIBaseURL: "localhost:8080"}, "not an absolute http(s) URL"},
		{map[string]string{EnvAnthropicKey: "sk-x", EnvAnthropicBaseURL: "https://user:sk-inurl@host/"}, "must not carry credentials"},
	}
	for _, tc := range cases {
		_, err := ProvidersFromEnv(envOf(tc.env))
		require.Error(t, err, tc.env)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "sk-", "errors never print a key")
	}
}

func TestProviderStringsHideKeys(t *testing.T) {
	ps := []any{
		NewOpenAIProvider(testOpenAIKey, "", ""),
		NewOpenAICompatibleProvider(testOpenAIKey, "m", "http://h/v1"),
		NewAnthropicProvider(testAnthropicKey, "", ""),
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	for _, p := range ps {
		for _, s := range []string{fmt.Sprint(p), fmt.Sprintf("%v %+v %s", p, p, p)} {
			assert.NotContains(t, s, "SECRET")
			assert.Contains(t, s, "[REDACTED]")
		}
		log.Info("Provider", "provider", p)
	}
	assert.NotContains(t, logs.String(), "SECRET")
	assert.Contains(t, logs.String(), `"key":"[REDACTED]"`)
}

func TestMockMismatchNamesScriptFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bank.mock.yaml")
	require.NoError(t, os.WriteFile(path, []byte("mock:\n  rounds:\n    - text: hi\n    - expect_state: triage\n      text: there\n"), 0o600))
	script, _, err := packs.LoadMock(path)
	require.NoError(t, err)
	p := &MockProvider{Scripts: map[string]*packs.MockScript{"bank": script}, Strict: true}
	_, err = p.Complete(t.Context(), mockReq("verifying", 1, convo.Message{Role: convo.RoleUser, Text: "hi"}, earlierRound("verifying")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bank.mock.yaml:4")
}

// The worked example's script (§12), loaded the way the worker will load it, drives
// the mock and the mock tool executor end to end through both activities.
func TestActivitiesWithLoadedScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bank.mock.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join([]string{
		"rounds:",
		"  - expect_state: verifying",
		"    text: Let me check that account.",
		"    tool_calls: [{ name: verify_account, args: { account_id: ACC-12345 } }]",
		"tool_results:",
		"  verify_account: { ok: true }",
	}, "\n")), 0o600))
	script, _, err := packs.LoadMock(path)
	require.NoError(t, err)
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, MockScripts: map[string]*packs.MockScript{"bank": script}})

	val, err := env.ExecuteActivity(a.ModelRound, convo.ModelRoundInput{PackID: "bank", State: "verifying"})
	require.NoError(t, err)
	var round convo.ModelRoundResult
	require.NoError(t, val.Get(&round))
	require.Len(t, round.ToolCalls, 1)
	call := round.ToolCalls[0]
	assert.JSONEq(t, `{"account_id":"ACC-12345"}`, string(call.Args))

	val, err = env.ExecuteActivity(a.ToolCall, convo.ToolCallInput{PackID: "bank", Tool: call.Name, CallID: call.ID, Args: call.Args})
	require.NoError(t, err)
	var out convo.ToolCallResult
	require.NoError(t, val.Get(&out))
	assert.False(t, out.IsError)
	var got map[string]any
	require.NoError(t, json.Unmarshal(out.Content, &got))
	assert.Equal(t, map[string]any{"ok": true}, got)
}
