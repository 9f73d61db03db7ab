package tests

// Secrets never enter workflow input, history, events or logs (DESIGN.md §6). This test
// runs a pack conversation against a real provider client (the official OpenAI SDK)
// pointed at a local server that speaks the OpenAI wire format, with a recognisable API
// key, then searches everything the host recorded for that key: the whole Temporal
// history of the run, the OpenWOP event log, the run snapshot and every log line the
// host wrote. A second test does the same for the secrets of tool bindings: an HTTP
// header and an MCP server's environment, both read from the worker's environment.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/fakemodel"
	"github.com/wop-dev/wop/internal/mcptest"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
)

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeDecodedPayloads appends the decoded bytes of every base64 "data" field of a
// protojson tree (the payloads of a history event) to w.
func writeDecodedPayloads(w *strings.Builder, node any) {
	switch v := node.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && k == "data" {
				if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
					w.Write(dec)
				}
				continue
			}
			writeDecodedPayloads(w, child)
		}
	case []any:
		for _, child := range v {
			writeDecodedPayloads(w, child)
		}
	}
}

// historyText is the whole Temporal history of a run as protojson, followed by the
// decoded bytes of every payload (protojson writes them in base64).
func historyText(ctx context.Context, t *testing.T, st *stack.Stack, id string) string {
	t.Helper()
	var recorded strings.Builder
	it := st.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		raw, err := protojson.Marshal(ev)
		require.NoError(t, err)
		recorded.Write(raw)
		var tree any
		require.NoError(t, json.Unmarshal(raw, &tree))
		writeDecodedPayloads(&recorded, tree)
		n++
	}
	require.Greater(t, n, 5, "the history holds the run")
	return recorded.String()
}

func TestSecretsStayOutOfHistoryEventsAndLogs(t *testing.T) {
	const apiKey = "sk-wop-secret-7f3a9c1e5b2d4f60"

	var calls atomic.Int32
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") || r.Method != http.MethodPost {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+apiKey {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`)
			return
		}
		calls.Add(1)
		completion := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello, I can help with that."},"finish_reason":"stop"}],` +
			`"usage":{"prompt_tokens":42,"completion_tokens":7,"total_tokens":49}}`
		var body struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if !body.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, completion)
			return
		}
		// The same completion, streamed, as OpenAI streams it.
		events, err := fakemodel.OpenAIChunks([]byte(completion))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range append(events, fakemodel.Event{Data: []byte("[DONE]")}) {
			_, _ = fmt.Fprintf(w, "data: %s\n\n", ev.Data)
		}
	}))
	defer fake.Close()

	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := harnessOptions("", randomHex(16))
	opts.Logger = logger
	opts.Worker.Logger = logger
	opts.Worker.Providers = map[string]activities.Provider{
		"default": activities.NewOpenAIProvider(apiKey, "gpt-test", fake.URL+"/v1"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := stack.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(st.Stop)
	c := newAPIClient(t, st, opts.API.Keys[0].Secret)

	id := createRun(t, c, "support", map[string]any{"message": "Hi, what is my balance?"})
	snap := waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	require.Equal(t, 1, snap.Pack.ModelRounds)
	require.EqualValues(t, 1, calls.Load(), "the provider was called once, with the configured key")

	evs := events(t, c, id)
	turns := turnsIn(t, evs)
	require.NotEmpty(t, turns)
	require.Equal(t, "Hello, I can help with that.", textOf(t, turns[len(turns)-1]), "the reply came from the provider")

	// Everything the host recorded about the run.
	history := historyText(ctx, t, st, id)
	require.Contains(t, history, "gpt-test", "the history records the model round (sanity check of the search)")

	rawEvents, err := json.Marshal(evs)
	require.NoError(t, err)
	status, _, rawSnap := c.doRaw(http.MethodGet, "/v1/runs/"+id, nil, map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusOK, status)

	st.Stop() // flush every log line before reading them
	logText := logs.String()
	require.NotEmpty(t, logText, "the host logged something to search")

	for name, text := range map[string]string{
		"temporal history": history,
		"run events":       string(rawEvents),
		"run snapshot":     string(rawSnap),
		"host logs":        logText,
	} {
		require.NotContains(t, text, apiKey, "the provider key leaked into the %s", name)
		require.NotContains(t, text, apiKey[len(apiKey)-12:], "a piece of the provider key leaked into the %s", name)
		require.NotContains(t, text, "Bearer "+c.Key, "the API key leaked into the %s", name)
	}
}

// TestToolSecretsStayOutOfHistoryEventsAndLogs binds tools whose secrets come from the
// worker's environment: an HTTP header (${ORDERS_TOKEN}) and an MCP subprocess's
// environment (${DOCS_TOKEN}). The secrets reach the tools, and the HTTP tool even
// echoes its token back in its result, yet neither appears in the run's history, its
// events, its snapshot or the host's logs.
func TestToolSecretsStayOutOfHistoryEventsAndLogs(t *testing.T) {
	t.Parallel()
	const ordersToken, docsToken = "orders-5ecret-a1b2c3d4e5f6", "docs-5ecret-f6e5d4c3b2a1"

	var gotAuth atomic.Value
	help := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		// A careless service that echoes the credential it was sent.
		_, _ = io.WriteString(w, `{"transport":"http","hits":[],"debug":"authorized with `+r.Header.Get("Authorization")+`"}`)
	}))
	defer help.Close()
	exe, err := os.Executable()
	require.NoError(t, err)
	file := writeBindings(t, fmt.Sprintf(`tools:
  search_help:
    http:
      url: %s/search
      headers: { Authorization: "Bearer ${ORDERS_TOKEN}" }
  search_docs:
    mcp: { server: docs, tool: search }
mcp_servers:
  docs:
    command: [%q, "-test.run=^$"]
    env: { %s: "1", %s: "${DOCS_TOKEN}", %s: %q }
`, help.URL, exe, mcpStdioVar, mcptest.TokenVar, mcptest.TokenHashVar, mcptest.Hash(docsToken)))

	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := startPrivateStack(t, stackOptions{PacksDir: toolPacksDir, ToolsFile: file, Logger: logger,
		Env: map[string]string{"ORDERS_TOKEN": ordersToken, "DOCS_TOKEN": docsToken}})

	id := createRun(t, c, "tools-mcp", map[string]any{"message": "Can I get a refund?"})
	waitCompleted(t, c, id)
	require.Equal(t, "Bearer "+ordersToken, gotAuth.Load(), "the HTTP tool got its secret header")

	evs := events(t, c, id)
	returned := toolReturned(t, evs)
	require.Contains(t, string(returned["call_0_0_search_docs"].Outcome), `"authorized":true`, "the MCP server got its secret environment")
	require.Contains(t, string(returned["call_1_0_search_help"].Outcome), `authorized with Bearer [REDACTED]`, "the echoed secret was redacted")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	history := historyText(ctx, t, c.Stack, id)
	require.Contains(t, history, "authorized with Bearer [REDACTED]", "the history holds the tool result (sanity check of the search)")
	rawEvents, err := json.Marshal(evs)
	require.NoError(t, err)
	status, _, rawSnap := c.doRaw(http.MethodGet, "/v1/runs/"+id, nil, map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusOK, status)

	c.Stack.Stop() // flush every log line before reading them
	logText := logs.String()
	require.Contains(t, logText, "Tool call done", "the host logged the tool calls")

	for name, text := range map[string]string{
		"temporal history": history,
		"run events":       string(rawEvents),
		"run snapshot":     string(rawSnap),
		"host logs":        logText,
	} {
		for _, secret := range []string{ordersToken, docsToken} {
			require.NotContains(t, text, secret, "a tool secret leaked into the %s", name)
			require.NotContains(t, text, secret[len(secret)-12:], "a piece of a tool secret leaked into the %s", name)
		}
	}
}
