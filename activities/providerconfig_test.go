package activities

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/fakemodel"
	"github.com/wop-dev/wop/packs"
)

func TestCloudProvidersFromEnv(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		provider string
		model    string
	}{
		{"gemini", map[string]string{EnvModelProvider: "gemini", EnvGeminiKey: "g-key"}, ProviderGemini, DefaultGeminiModel},
		{"gemini from GOOGLE_API_KEY", map[string]string{EnvModelProvider: "gemini", EnvGoogleKey: "g-key", EnvModel: "gemini-3-flash"}, ProviderGemini, "gemini-3-flash"},
		{"bedrock", map[string]string{EnvModelProvider: "bedrock", EnvModel: "amazon.nova-pro-v1:0", EnvAWSRegion: "eu-central-1",
			"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s"}, ProviderBedrock, "amazon.nova-pro-v1:0"},
		{"azure-openai", map[string]string{EnvModelProvider: "azure-openai", EnvModel: "gpt-4o-prod", EnvAzureOpenAIEndpoint: "https://r.openai.azure.com",
			EnvAzureOpenAIKey: "az-key"}, ProviderAzureOpenAI, "gpt-4o-prod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ProviderConfigFromEnv(envOf(tc.env))
			require.NoError(t, err)
			assert.Equal(t, EnvModelProvider+"="+tc.provider, cfg.Source)
			set, err := cfg.Build(context.Background(), envOf(tc.env))
			require.NoError(t, err)
			p := set.Providers[DefaultProviderKey]
			require.NotNil(t, p)
			assert.Equal(t, tc.provider, p.Name())
			assert.Equal(t, []ServedProvider{{Key: DefaultProviderKey, Provider: tc.provider, Model: tc.model}}, set.Served)
		})
	}
	// The cloud providers are chosen by name only: their variables are common in cloud
	// environments for other uses.
	cfg, err := ProviderConfigFromEnv(envOf(map[string]string{EnvGeminiKey: "g", EnvAzureOpenAIKey: "a", EnvAWSRegion: "us-east-1"}))
	require.NoError(t, err)
	assert.Equal(t, ProviderMock, cfg.Specs[DefaultProviderKey].Type)
	assert.Empty(t, cfg.Source, "nothing chose a provider: the mock serves only by default")

	cfg, err = ProviderConfigFromEnv(envOf(map[string]string{EnvModelProvider: "mock"}))
	require.NoError(t, err)
	assert.Equal(t, EnvModelProvider+"=mock", cfg.Source, "an explicit mock is a choice")
}

func writeProvidersFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "providers.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestProvidersFile(t *testing.T) {
	path := writeProvidersFile(t, `
providers:
  default:
    type: gemini
    model: gemini-2.5-pro
  judge:
    type: bedrock
    model: anthropic.claude-sonnet-4-20250514-v1:0
    region: us-west-2
  fast:
    type: azure-openai
    model: gpt-4o-mini-prod
    endpoint: https://r.openai.azure.com
    api_key_env: TEAM_AZURE_KEY
packs:
  refunds:
    default: judge
`)
	env := map[string]string{EnvProvidersFile: path, EnvGeminiKey: "g-key", "TEAM_AZURE_KEY": "az-key",
		"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s", EnvModelProvider: "openai"}
	cfg, err := ProviderConfigFromEnv(envOf(env))
	require.NoError(t, err)
	assert.Equal(t, EnvProvidersFile+"="+path, cfg.Source)
	assert.Equal(t, []string{"default", "fast", "judge"}, cfg.Keys("bank"))
	assert.Equal(t, map[string]string{"default": "judge"}, cfg.Packs["refunds"])
	set, err := cfg.Build(context.Background(), envOf(env))
	require.NoError(t, err)
	assert.Equal(t, []ServedProvider{
		{Key: "default", Provider: ProviderGemini, Model: "gemini-2.5-pro"},
		{Key: "fast", Provider: ProviderAzureOpenAI, Model: "gpt-4o-mini-prod"},
		{Key: "judge", Provider: ProviderBedrock, Model: "anthropic.claude-sonnet-4-20250514-v1:0"},
	}, set.Served, "the file's default wins over WOP_MODEL_PROVIDER")
	assert.Equal(t, "us-west-2", set.Providers["judge"].(*BedrockProvider).Region)

	// A file without a default takes it from the environment.
	path = writeProvidersFile(t, "providers:\n  judge:\n    type: mock\n")
	cfg, err = ProviderConfigFromEnv(envOf(map[string]string{EnvProvidersFile: path, EnvOpenAIKey: "sk-1"}))
	require.NoError(t, err)
	assert.Equal(t, ProviderOpenAI, cfg.Specs[DefaultProviderKey].Type)
	assert.Contains(t, cfg.Source, "default from "+EnvOpenAIKey)
	_, err = ProviderConfigFromEnv(envOf(map[string]string{EnvProvidersFile: path}))
	require.ErrorContains(t, err, `no "default" entry`)
}

func TestProvidersFileErrors(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{"providers:\n  default:\n    type: gemini\n    modle: x\n", "line 4: field modle not found"},
		{"providers:\n  default:\n    model: x\n", "providers.default: type is required"},
		{"providers:\n  default:\n    type: palm\n", `providers.default: type "palm" is not a provider`},
		{"providers:\n  'a b':\n    type: mock\n", "a provider key is letters"},
		{"providers:\n  default:\n    type: openai\n    stream: false\n", "stream: false is for gemini, vertex and bedrock"},
		{"providers:\n  default:\n    type: openai\n    api_key_env: sk-123\n", "api_key_env names a variable"},
		{"providers:\n  default:\n    type: mock\npacks:\n  bank:\n    default: judge\n", `packs.bank.default: "judge" is not a key of providers`},
		{"packs: {}\n", "no providers"},
	} {
		path := writeProvidersFile(t, tc.text)
		_, err := ProviderConfigFromEnv(envOf(map[string]string{EnvProvidersFile: path}))
		require.Error(t, err, tc.text)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), tc.want)
	}
	_, err := ProviderConfigFromEnv(envOf(map[string]string{EnvProvidersFile: filepath.Join(t.TempDir(), "missing.yaml")}))
	require.ErrorContains(t, err, EnvProvidersFile)
}

// A worker that serves two providers runs each round on the provider its key names
// (a prompt's provider:), maps a pack's keys as configured, and serves any other key
// with the default.
func TestRoundsChooseTheirProviderByKey(t *testing.T) {
	gemFake, gemBase := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Text: "gemini says hi"} })
	brFake, brBase := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply { return fakemodel.Reply{Text: "bedrock says hi"} })
	src := &fakeTranscripts{msgs: map[string][]convo.Message{"c": {{Role: convo.RoleUser, Text: "hello"}}}}
	a, env := newTestActivities(t, Config{Transcripts: src,
		Providers:     map[string]Provider{DefaultProviderKey: newGemini(t, gemBase, false), "judge": newBedrock(t, brBase, false)},
		PackProviders: map[string]map[string]string{"refunds": {DefaultProviderKey: "judge"}}})
	round := func(pack, key string) string {
		val, err := env.ExecuteActivity(a.ModelRound, convo.ModelRoundInput{RunID: "r", PackID: pack, State: "s", Provider: key,
			Transcript: convo.TranscriptRef{RunID: "r", Key: "c", To: 1}})
		require.NoError(t, err)
		var res convo.ModelRoundResult
		require.NoError(t, val.Get(&res))
		return res.Provider + ": " + res.Text
	}
	assert.Equal(t, "gemini: gemini says hi", round("bank", "default"))
	assert.Equal(t, "bedrock: bedrock says hi", round("bank", "judge"))
	assert.Equal(t, "gemini: gemini says hi", round("bank", "unknown-key"), "an unconfigured key is served by the default")
	assert.Equal(t, "bedrock: bedrock says hi", round("refunds", "default"), "the pack's default is mapped to judge")
	assert.Len(t, gemFake.Calls(), 2)
	assert.Len(t, brFake.Calls(), 2)

	_, err := New(Config{Transcripts: src, Providers: map[string]Provider{DefaultProviderKey: &MockProvider{}},
		PackProviders: map[string]map[string]string{"p": {"default": "nope"}}})
	require.ErrorContains(t, err, `"nope"`)
}

// On a worker that serves a real model, a tool without a binding answers with an error
// result saying so, never with the pack's mock tool_results; on a mock worker the mock
// answers.
func TestUnboundToolsNeverGetMockDataFromARealWorker(t *testing.T) {
	script := &packs.MockScript{ToolResults: map[string]json.RawMessage{"get_balance": json.RawMessage(`{"balance":"$42.00"}`)}}
	_, base := fakeModelServer(t, nil)
	for _, tc := range []struct {
		name      string
		providers map[string]Provider
		route     string
	}{
		{"mock worker", nil, RouteMock},
		{"gemini worker", map[string]Provider{DefaultProviderKey: newGemini(t, base, false)}, RouteNone},
		{"mock default with a real key", map[string]Provider{DefaultProviderKey: &MockProvider{}, "judge": newBedrock(t, base, false)}, RouteNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, Providers: tc.providers,
				MockScripts: map[string]*packs.MockScript{"bank": script}})
			routes, err := a.RouteTools(context.Background(), RouteToolsInput{PackID: "bank", Calls: []ToolRouteCall{{CallID: "c1", Tool: "get_balance"}}})
			require.NoError(t, err)
			assert.Equal(t, tc.route, routes.Routes[0].Kind)
			val, err := env.ExecuteActivity(a.ToolCall, convo.ToolCallInput{PackID: "bank", Tool: "get_balance", CallID: "c1"})
			require.NoError(t, err)
			var res convo.ToolCallResult
			require.NoError(t, val.Get(&res))
			if tc.route == RouteMock {
				assert.JSONEq(t, `{"balance":"$42.00"}`, string(res.Content))
				return
			}
			assert.True(t, res.IsError)
			assert.NotContains(t, string(res.Content), "42.00")
			assert.Contains(t, string(res.Content), `tool \"get_balance\" has no binding on this host`)
		})
	}
}
