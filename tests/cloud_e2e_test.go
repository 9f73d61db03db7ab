package tests

// Cloud providers end to end: one worker serves a pack that names two logical providers,
// "default" on Gemini and "judge" on Bedrock, configured the way a deployment configures
// them (a providers file and the worker's environment) and pointed at fakes that speak
// each provider's wire API (Gemini's streamGenerateContent?alt=sse, Bedrock's
// ConverseStream in the AWS event-stream framing). Each provider's first answer is a
// retryable failure that Temporal retries; the pack's unbound tool gets an error result,
// not the mock's data; and no key reaches the run's history, events, snapshot or logs.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/fakemodel"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

func TestPackOnTwoCloudProvidersOfOneWorker(t *testing.T) {
	t.Parallel()
	const geminiKey = "AIzaSy-e2e-5ecret-0a1b2c3d4e5f6a7b"
	const awsSecret = "aws-e2e-5ecret-9f8e7d6c5b4a3f2e1d0c"

	var mu sync.Mutex
	var problems []string
	fake := &fakemodel.Server{}
	counts := map[fakemodel.Format]int{}
	fake.Answer = func(c fakemodel.Call) fakemodel.Reply {
		mu.Lock()
		n := counts[c.Format]
		counts[c.Format]++
		mu.Unlock()
		body, _ := json.Marshal(c.Body)
		switch {
		case c.Format == fakemodel.Gemini && n == 0:
			return fakemodel.Reply{Fail: &fakemodel.Failure{Status: 503, Header: map[string]string{"Retry-After": "1"},
				Body: `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`}}
		case c.Format == fakemodel.Gemini && n == 1:
			return fakemodel.Reply{Signature: []byte("sig-of-lookup"), ToolCalls: []fakemodel.ToolCall{{Name: "lookup_order", Arguments: `{"order_id":"A-1"}`}}}
		case c.Format == fakemodel.Gemini:
			if !strings.Contains(string(body), `has no binding on this host`) || strings.Contains(string(body), "42.00") {
				mu.Lock()
				problems = append(problems, "the desk's second round did not get the no-binding result: "+string(body))
				mu.Unlock()
			}
			if !strings.Contains(string(body), base64.StdEncoding.EncodeToString([]byte("sig-of-lookup"))) {
				mu.Lock()
				problems = append(problems, "the thought signature did not come back: "+string(body))
				mu.Unlock()
			}
			return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "workflow__transition", Arguments: `{"event":"Review","context":"order A-1 not found"}`}}}
		case c.Format == fakemodel.Bedrock && n == 0:
			return fakemodel.Reply{Fail: &fakemodel.Failure{Status: 429, Header: map[string]string{"X-Amzn-ErrorType": "ThrottlingException", "Retry-After": "1"},
				Body: `{"message":"Too many requests, please wait before trying again."}`}}
		case c.Format == fakemodel.Bedrock:
			return fakemodel.Reply{Text: "The refund is approved.", InputTokens: 40, OutputTokens: 6}
		}
		return fakemodel.Reply{Fail: &fakemodel.Failure{Status: 400, Body: `{"message":"unexpected ` + string(c.Format) + ` call"}`}}
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	// The deployment's configuration: a providers file naming the two keys, and the
	// worker's environment holding the credentials.
	file := filepath.Join(t.TempDir(), "providers.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`providers:
  default:
    type: gemini
    model: gemini-2.5-flash
    base_url: `+srv.URL+`
  judge:
    type: bedrock
    model: anthropic.claude-sonnet-4-20250514-v1:0
    region: eu-west-1
    endpoint: `+srv.URL+`
`), 0o600))
	env := map[string]string{"WOP_PROVIDERS": file, "GEMINI_API_KEY": geminiKey,
		"AWS_ACCESS_KEY_ID": "AKIAE2ETESTKEY000001", "AWS_SECRET_ACCESS_KEY": awsSecret}
	getenv := func(k string) string { return env[k] }
	pc, err := activities.ProviderConfigFromEnv(getenv)
	require.NoError(t, err)
	require.Equal(t, []string{"default", "judge"}, pc.Keys("two-clouds"), "what the worker serves, as the API could read it")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set, err := pc.Build(ctx, getenv)
	require.NoError(t, err)

	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := startPrivateStack(t, stackOptions{PacksDir: "testdata/cloudpacks", Logger: logger, Tweak: func(o *stack.Options) {
		o.Worker.Providers, o.Worker.PackProviders = set.Providers, set.Packs
	}})

	id := createRun(t, c, "two-clouds", map[string]any{"message": "I want a refund for order A-1."})
	snap := waitSnapshot(t, c, id, 60*time.Second, "completed", func(s workflows.Snapshot) bool {
		return s.Status == protocol.StatusCompleted || s.Status == protocol.StatusFailed
	})
	require.Equal(t, protocol.StatusCompleted, snap.Status, "error: %+v", snap.Error)
	mu.Lock()
	require.Empty(t, problems)
	require.Equal(t, map[fakemodel.Format]int{fakemodel.Gemini: 3, fakemodel.Bedrock: 2}, counts,
		"the desk ran on Gemini and the review on Bedrock, each retried once after its 503/429")
	mu.Unlock()
	for _, call := range fake.Calls() {
		switch call.Format {
		case fakemodel.Gemini:
			require.Equal(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", call.Path)
		case fakemodel.Bedrock:
			require.Equal(t, "/model/anthropic.claude-sonnet-4-20250514-v1:0/converse-stream", call.Path)
		}
	}

	evs := events(t, c, id)
	turns := turnsIn(t, evs)
	require.NotEmpty(t, turns)
	require.Equal(t, "The refund is approved.", textOf(t, turns[len(turns)-1]), "the reviewer's reply came from Bedrock")
	lookup := toolReturned(t, evs)["call_0_0_lookup_order"]
	require.Equal(t, "lookup_order", lookup.Tool)
	require.Equal(t, "error", lookup.Status)
	require.Contains(t, string(lookup.Outcome), "has no binding on this host")
	require.NotContains(t, string(lookup.Outcome), "42.00", "never the mock's data on a real worker")
	var providers []string
	for _, e := range ofType(evs, "agent.decided") {
		var p struct {
			Decision struct {
				Provider string `json:"provider"`
			} `json:"decision"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		providers = append(providers, p.Decision.Provider)
	}
	require.Equal(t, []string{"gemini", "gemini", "bedrock"}, providers)

	history := historyText(ctx, t, c.Stack, id)
	require.Contains(t, history, "anthropic.claude-sonnet-4-20250514-v1:0", "the history records the rounds (sanity check of the search)")
	rawEvents, err := json.Marshal(evs)
	require.NoError(t, err)
	status, _, rawSnap := c.doRaw(http.MethodGet, "/v1/runs/"+id, nil, map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusOK, status)
	replayHistory(t, c, id, "pack-two-clouds")
	c.Stack.Stop() // flush every log line before reading them
	logText := logs.String()
	require.Contains(t, logText, "Model round failed", "the retried failures were logged")
	for name, text := range map[string]string{"temporal history": history, "run events": string(rawEvents), "run snapshot": string(rawSnap), "host logs": logText} {
		for _, secret := range []string{geminiKey, awsSecret} {
			require.NotContains(t, text, secret, "a provider secret leaked into the %s", name)
			require.NotContains(t, text, secret[len(secret)-12:], "a piece of a provider secret leaked into the %s", name)
		}
	}
}
