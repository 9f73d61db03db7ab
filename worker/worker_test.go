package worker

import (
	"crypto/tls"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestClientOptionsFromEnvDefaults(t *testing.T) {
	opts, err := ClientOptionsFromEnv(env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != DefaultTemporalAddress || opts.Namespace != client.DefaultNamespace {
		t.Errorf("defaults: %q %q", opts.HostPort, opts.Namespace)
	}
	if opts.ConnectionOptions.TLS != nil || opts.Credentials != nil {
		t.Error("no TLS and no credentials without TEMPORAL_API_KEY or certificates")
	}
}

func TestClientOptionsFromEnvAPIKeyTurnsOnTLS(t *testing.T) {
	opts, err := ClientOptionsFromEnv(env(map[string]string{
		"TEMPORAL_ADDRESS":         "ns.acct.tmprl.cloud:7233",
		"TEMPORAL_NAMESPACE":       "ns.acct",
		"TEMPORAL_API_KEY":         "secret",
		"TEMPORAL_TLS_SERVER_NAME": "ns.acct.tmprl.cloud",
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts.HostPort != "ns.acct.tmprl.cloud:7233" || opts.Namespace != "ns.acct" {
		t.Errorf("address/namespace: %q %q", opts.HostPort, opts.Namespace)
	}
	if opts.Credentials == nil {
		t.Error("TEMPORAL_API_KEY must set credentials")
	}
	tc := opts.ConnectionOptions.TLS
	if tc == nil || tc.ServerName != "ns.acct.tmprl.cloud" || tc.MinVersion != tls.VersionTLS12 {
		t.Errorf("TLS config %+v", tc)
	}
}

func TestClientOptionsFromEnvErrors(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"cert without key": {"TEMPORAL_TLS_CERT": "/x.pem"},
		"missing cert":     {"TEMPORAL_TLS_CERT": "/nope.pem", "TEMPORAL_TLS_KEY": "/nope.key"},
		"missing CA":       {"TEMPORAL_TLS_CA": "/nope-ca.pem"},
		"bad TLS flag":     {"TEMPORAL_TLS": "maybe"},
	} {
		if _, err := ClientOptionsFromEnv(env(m), nil); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestConfigDefaultCacheSize(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.WorkflowCacheSize != DefaultWorkflowCacheSize {
		t.Errorf("WorkflowCacheSize = %d without WOP_WORKER_CACHE_SIZE, want %d", cfg.WorkflowCacheSize, DefaultWorkflowCacheSize)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{"WOP_WORKER_CACHE_SIZE": "0"}))
	if err != nil || cfg.WorkflowCacheSize != 0 {
		t.Errorf("WOP_WORKER_CACHE_SIZE=0: got %d, %v; want 0 (the SDK's default)", cfg.WorkflowCacheSize, err)
	}
}

func TestConfigFromEnvAndFlags(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{
		"WOP_PACKS":                     "/srv/packs",
		"WOP_WORKER_MAX_ACTIVITIES":     "7",
		"WOP_WORKER_SHUTDOWN_TIMEOUT":   "3s",
		"WOP_WORKER_HEALTH_ADDR":        "127.0.0.1:9",
		"WOP_WORKER_MAX_WORKFLOW_TASKS": "",
		"WOP_WORKER_CACHE_SIZE":         "500",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PacksDir != "/srv/packs" || cfg.MaxConcurrentActivities != 7 || cfg.ShutdownTimeout != 3*time.Second || cfg.HealthAddr != "127.0.0.1:9" || cfg.WorkflowCacheSize != 500 {
		t.Errorf("from env: %+v", cfg)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"-packs", "other", "-max-activities", "2", "-workflow-cache", "50"}); err != nil {
		t.Fatal(err)
	}
	if cfg.PacksDir != "other" || cfg.MaxConcurrentActivities != 2 || cfg.ShutdownTimeout != 3*time.Second || cfg.WorkflowCacheSize != 50 {
		t.Errorf("flags override env: %+v", cfg)
	}

	_, err = ConfigFromEnv(env(map[string]string{"WOP_WORKER_MAX_ACTIVITIES": "lots", "WOP_WORKER_SHUTDOWN_TIMEOUT": "soon", "WOP_WORKER_CACHE_SIZE": "-1"}))
	if err == nil || !strings.Contains(err.Error(), "WOP_WORKER_MAX_ACTIVITIES") || !strings.Contains(err.Error(), "WOP_WORKER_SHUTDOWN_TIMEOUT") || !strings.Contains(err.Error(), "WOP_WORKER_CACHE_SIZE") {
		t.Errorf("malformed values: %v", err)
	}
}

func TestTurnLimitsFromEnv(t *testing.T) {
	lim, err := TurnLimitsFromEnv(env(nil))
	if err != nil || lim.MaxRounds != 25 || lim.MaxToolCalls != 50 {
		t.Fatalf("defaults = %+v, %v", lim, err)
	}
	lim, err = TurnLimitsFromEnv(env(map[string]string{"WOP_MAX_ROUNDS_PER_TURN": "8", "WOP_MAX_TOOL_CALLS_PER_TURN": "0"}))
	if err != nil || lim.MaxRounds != 8 || lim.MaxToolCalls != 0 {
		t.Fatalf("set = %+v, %v", lim, err)
	}
	if _, err := TurnLimitsFromEnv(env(map[string]string{"WOP_MAX_ROUNDS_PER_TURN": "-1"})); err == nil || !strings.Contains(err.Error(), "WOP_MAX_ROUNDS_PER_TURN") {
		t.Errorf("a negative limit: %v", err)
	}
	cfg, err := ConfigFromEnv(env(map[string]string{"WOP_MAX_ROUNDS_PER_TURN": "3"}))
	if err != nil || cfg.TurnLimits.MaxRounds != 3 || cfg.TurnLimits.MaxToolCalls != 50 {
		t.Errorf("ConfigFromEnv limits = %+v, %v", cfg.TurnLimits, err)
	}
}

// The worker states at start which providers and models it serves, from where, and
// which packs' keys another key serves; the lines name no key.
func TestConfigFromEnvStatesTheProvidersItServes(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/providers.yaml"
	if err := os.WriteFile(path, []byte("providers:\n  default:\n    type: gemini\n    model: gemini-2.5-pro\n"+
		"  judge:\n    type: azure-openai\n    model: gpt-4o-prod\n    endpoint: https://r.openai.azure.com\npacks:\n  refunds:\n    default: judge\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromEnv(env(map[string]string{"WOP_PROVIDERS": path, "GEMINI_API_KEY": "g-SECRET-key", "AZURE_OPENAI_API_KEY": "az-SECRET-key"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ProviderSource != "WOP_PROVIDERS="+path || len(cfg.Providers) != 2 || cfg.PackProviders["refunds"]["default"] != "judge" {
		t.Fatalf("config: source %q, providers %v, packs %v", cfg.ProviderSource, cfg.Providers, cfg.PackProviders)
	}
	var logs strings.Builder
	LogProviders(slog.New(slog.NewTextHandler(&logs, nil)), cfg)
	for _, want := range []string{
		`msg="Model provider" key=default provider=gemini model=gemini-2.5-pro from="WOP_PROVIDERS=` + path + `"`,
		`msg="Model provider" key=judge provider=azure-openai model=gpt-4o-prod`,
		`msg="Model provider of a pack" pack=refunds key=default servedBy=judge`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start lines lack %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("a key reached the log:\n%s", logs.String())
	}

	cfg, err = ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ProviderSource != "" {
		t.Errorf("nothing configured, source %q", cfg.ProviderSource)
	}
	logs.Reset()
	LogProviders(slog.New(slog.NewTextHandler(&logs, nil)), cfg)
	if !strings.Contains(logs.String(), `provider=mock model=scripted-mock from="none configured: the scripted mock"`) {
		t.Errorf("mock start line:\n%s", logs.String())
	}
}

// The client flags lay what was set over the environment and leave the rest to it.
func TestClientFlagsOverrideTheEnvironment(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	cf := RegisterClientFlags(fs)
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("secret-key\n"), 0o600))
	require.NoError(t, fs.Parse([]string{"--tls-ca", "/flag/ca.pem", "--tls-server-name", "temporal.internal", "--api-key-file", keyFile}))
	get, err := cf.Env(env(map[string]string{"TEMPORAL_TLS_CA": "/env/ca.pem", "TEMPORAL_TLS_CERT": "/env/cert.pem"}))
	require.NoError(t, err)
	assert.Equal(t, "/flag/ca.pem", get("TEMPORAL_TLS_CA"))
	assert.Equal(t, "temporal.internal", get("TEMPORAL_TLS_SERVER_NAME"))
	assert.Equal(t, "/env/cert.pem", get("TEMPORAL_TLS_CERT"), "an unset flag leaves the variable")
	assert.Equal(t, "secret-key", get("TEMPORAL_API_KEY"))
	assert.Equal(t, "", get("TEMPORAL_TLS"))
}

// WOP_MOCK_ROUND_DELAY is a duration the worker hands the scripted mock; anything else
// is refused by name.
func TestMockRoundDelayFromEnv(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{"WOP_MOCK_ROUND_DELAY": "750ms"}))
	require.NoError(t, err)
	assert.Equal(t, 750*time.Millisecond, cfg.MockRoundDelay)
	_, err = ConfigFromEnv(env(map[string]string{"WOP_MOCK_ROUND_DELAY": "soon"}))
	assert.ErrorContains(t, err, "WOP_MOCK_ROUND_DELAY")
}
