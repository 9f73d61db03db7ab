package tests

// Tools that act: pack tools bound to an HTTP endpoint, a Temporal activity of another
// worker, and MCP servers over stdio and streamable HTTP, on the embedded stack. The
// scripted mock's expect_tool_result checks that each tool's real result reached the
// model's next round; the test servers check what the tools received.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/mcptest"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/tools"
	"github.com/wop-dev/wop/workflows"
)

// toolPacksDir holds the packs of the tool tests.
const toolPacksDir = "testdata/toolpacks"

// mcpStdioVar makes the test binary serve internal/mcptest on stdio (see TestMain).
const mcpStdioVar = "WOP_TESTS_MCP_STDIO"

func serveMCPStdio() int {
	if err := mcptest.ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// writeBindings writes a bindings file for one test and returns its path.
func writeBindings(t *testing.T, src string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(f, []byte(src), 0o644))
	return f
}

// httpToolCall is one request the order service received.
type httpToolCall struct {
	Path, Key, RunID, CallID, Attempt, Auth, Body string
}

// orderService is the HTTP endpoint of the tools-http pack's tools.
type orderService struct {
	*httptest.Server
	mu    sync.Mutex
	calls []httpToolCall
}

func newOrderService(t *testing.T) *orderService {
	o := &orderService{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		o.mu.Lock()
		o.calls = append(o.calls, httpToolCall{Path: r.URL.Path, Key: r.Header.Get(tools.HeaderIdempotencyKey), RunID: r.Header.Get(tools.HeaderRunID),
			CallID: r.Header.Get(tools.HeaderCallID), Attempt: r.Header.Get(tools.HeaderAttempt), Auth: r.Header.Get("Authorization"), Body: string(body)})
		tracked := 0
		for _, c := range o.calls {
			if c.Path == "/track" {
				tracked++
			}
		}
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/lookup":
			_, _ = io.WriteString(w, `{"order_id":"ORD-1042","status":"shipped","total":"89.90"}`)
		case "/track":
			if tracked == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":"tracking is warming up"}`)
				return
			}
			_, _ = io.WriteString(w, `{"order_id":"ORD-1042","parcel":"in transit","carrier":"DHL"}`)
		case "/cancel":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"database is read-only"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *orderService) received(path string) []httpToolCall {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []httpToolCall
	for _, c := range o.calls {
		if c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// toolReturned decodes the agent.toolReturned events of a run by call id.
func toolReturned(t *testing.T, evs []workflows.Event) map[string]struct {
	Tool, Status string
	Outcome      json.RawMessage
} {
	t.Helper()
	out := map[string]struct {
		Tool, Status string
		Outcome      json.RawMessage
	}{}
	for _, e := range ofType(evs, "agent.toolReturned") {
		var p struct {
			ToolName string          `json:"toolName"`
			CallID   string          `json:"callId"`
			Status   string          `json:"status"`
			Outcome  json.RawMessage `json:"outcome"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		out[p.CallID] = struct {
			Tool, Status string
			Outcome      json.RawMessage
		}{p.ToolName, p.Status, p.Outcome}
	}
	return out
}

// TestToolHTTPBindingE2E binds the tools-http pack's tools to a test server: arguments
// go in as the POST body, results reach the model's next round, a 503 is retried with
// the same Idempotency-Key, a failing write tool is attempted once and its failure is
// the model's to read, and a worker restart between turns calls no tool twice.
func TestToolHTTPBindingE2E(t *testing.T) {
	t.Parallel()
	svc := newOrderService(t)
	file := writeBindings(t, `tools:
  lookup_order:
    http:
      url: `+svc.URL+`/lookup
      headers: { Authorization: "Bearer ${ORDERS_TOKEN}" }
  track_parcel:
    http: { url: "`+svc.URL+`/track", timeout: 5s }
  cancel_order:
    http: { url: "`+svc.URL+`/cancel" }
`)
	c := startPrivateStack(t, stackOptions{PacksDir: toolPacksDir, ToolsFile: file, Env: map[string]string{"ORDERS_TOKEN": "orders-token-1"}})
	rep := c.Stack.ToolsReport()
	require.Len(t, rep.Bound, 3)
	require.Equal(t, "POST "+svc.URL+"/lookup", rep.Bound[1].Target)

	id := createRun(t, c, "tools-http", map[string]any{"message": "Where is ORD-1042?"})
	s := waitRounds(t, c, id, 2, protocol.StatusWaitingApproval)
	require.Equal(t, "desk", s.Pack.State)

	lookups := svc.received("/lookup")
	require.Len(t, lookups, 1)
	require.Equal(t, httpToolCall{Path: "/lookup", Key: lookups[0].Key, RunID: id, CallID: "call_0_0_lookup_order", Attempt: "1",
		Auth: "Bearer orders-token-1", Body: `{"order_id":"ORD-1042"}`}, lookups[0])
	want := convo.ToolCallInput{RunID: id, NodeID: packNode, Round: 0, CallID: "call_0_0_lookup_order", Tool: "lookup_order"}
	require.Equal(t, activities.ToolIdempotencyKey("default", want), lookups[0].Key, "the key is OpenWOP's logical invocation id")

	tracks := svc.received("/track")
	require.Len(t, tracks, 2, "the 503 was retried")
	require.Equal(t, tracks[0].Key, tracks[1].Key, "both attempts carry one Idempotency-Key")
	require.NotEqual(t, lookups[0].Key, tracks[0].Key)
	require.Equal(t, []string{"1", "2"}, []string{tracks[0].Attempt, tracks[1].Attempt})

	// The next message arrives while no worker runs.
	c.Stack.StopWorker()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := workflows.ResolveRequest{
		RequestID: "msg-2", NodeID: packNode, ResolvedBy: "key_test", ReceivedAtMs: time.Now().UnixMilli(), Via: "rest",
		ResumeValue: json.RawMessage(`{"text":"Cancel it, please."}`),
	}
	require.NoError(t, c.Stack.Client().SignalWorkflow(ctx, id, "", workflows.ResolveSignal, req))
	require.NoError(t, c.Stack.StartWorker())

	s = waitCompleted(t, c, id)
	require.Equal(t, "closed", s.Pack.State)
	require.Len(t, svc.received("/lookup"), 1, "no tool ran twice across the restart")
	require.Len(t, svc.received("/track"), 2)
	require.Len(t, svc.received("/cancel"), 1, "a write tool that is not idempotent is attempted once")

	evs := events(t, c, id)
	turns := turnsIn(t, evs)
	require.Equal(t, "ORD-1042 has shipped and is in transit.", textOf(t, turns[1]))
	returned := toolReturned(t, evs)
	require.Equal(t, "ok", returned["call_0_0_lookup_order"].Status)
	require.JSONEq(t, `{"order_id":"ORD-1042","status":"shipped","total":"89.90"}`, string(returned["call_0_0_lookup_order"].Outcome))
	cancelled := returned["call_2_0_cancel_order"]
	require.Equal(t, "error", cancelled.Status)
	require.Contains(t, string(cancelled.Outcome), "tool cancel_order failed: POST "+svc.URL+"/cancel answered HTTP 500 Internal Server Error")
}

// TestToolActivityBindingE2E serves get_balance from a second worker on its own task
// queue: the run's workflow schedules the activity there with the arguments object as
// its input, and the activity's result (or its failure) reaches the model.
func TestToolActivityBindingE2E(t *testing.T) {
	t.Parallel()
	queue := "banking-tools-" + randomHex(4)
	file := writeBindings(t, `tools:
  get_balance:
    activity:
      type: GetBalance
      task_queue: `+queue+`
      start_to_close_timeout: 20s
`)
	c := startPrivateStack(t, stackOptions{PacksDir: toolPacksDir, ToolsFile: file})

	type seen struct {
		Args       map[string]any
		ActivityID string
		Queue      string
	}
	var mu sync.Mutex
	var calls []seen
	w := sdkworker.New(c.Stack.Client(), queue, sdkworker.Options{})
	w.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any) (map[string]any, error) {
		info := activity.GetInfo(ctx)
		mu.Lock()
		calls = append(calls, seen{Args: args, ActivityID: info.ActivityID, Queue: info.TaskQueue})
		mu.Unlock()
		if args["account_id"] != "ACC-12345" {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no such account %v", args["account_id"]), "NoSuchAccount", nil)
		}
		return map[string]any{"account_id": "ACC-12345", "balance": "42.00", "currency": "USD"}, nil
	}, activity.RegisterOptions{Name: "GetBalance"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	id := createRun(t, c, "tools-activity", map[string]any{"message": "What is the balance of ACC-12345? And of ACC-00000?"})
	s := waitCompleted(t, c, id)
	require.Equal(t, "closed", s.Pack.State)

	mu.Lock()
	got := append([]seen(nil), calls...)
	mu.Unlock()
	require.Len(t, got, 2, "one activity per call, the failure not retried (non-retryable)")
	byAccount := map[any]seen{}
	for _, g := range got {
		byAccount[g.Args["account_id"]] = g
		require.Equal(t, queue, g.Queue)
	}
	ok := byAccount["ACC-12345"]
	require.Equal(t, map[string]any{"account_id": "ACC-12345"}, ok.Args, "the arguments object is the activity's input")
	require.Equal(t, activities.ToolIdempotencyKey("default", convo.ToolCallInput{RunID: id, NodeID: packNode, Round: 0, CallID: "call_0_0_get_balance", Tool: "get_balance"}),
		ok.ActivityID, "the ActivityID is the call's idempotency key")

	evs := events(t, c, id)
	returned := toolReturned(t, evs)
	require.JSONEq(t, `{"account_id":"ACC-12345","balance":"42.00","currency":"USD"}`, string(returned["call_0_0_get_balance"].Outcome))
	require.Equal(t, "error", returned["call_0_1_get_balance"].Status)
	require.JSONEq(t, `{"error":"tool get_balance failed: no such account ACC-00000"}`, string(returned["call_0_1_get_balance"].Outcome))
	turns := turnsIn(t, evs)
	require.Equal(t, "ACC-12345 holds $42.00; I found no account ACC-00000.\n\nGoodbye.", textOf(t, turns[len(turns)-1]))

	// The Temporal history shows the routing (a local activity) and the team's activity
	// on its queue, with a summary.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	markers, scheduled := 0, 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		// The scripted mock's rounds after the first are local activities too; the
		// routing's marker is the one whose summary says so.
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" &&
			strings.Contains(string(ev.GetUserMetadata().GetSummary().GetData()), "route tool calls: ") {
			markers++
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "GetBalance" {
			scheduled++
			require.Equal(t, queue, a.GetTaskQueue().GetName())
			require.Contains(t, string(ev.GetUserMetadata().GetSummary().GetData()), "activity GetBalance on task queue "+queue)
		}
	}
	require.Equal(t, 1, markers, "one RouteTools per tool batch")
	require.Equal(t, 2, scheduled)
	replayHistory(t, c, id, "pack-tools-activity")
}

// TestToolMCPBindingE2E serves search_docs from an MCP server over stdio (this test
// binary, started again as the server) and search_help from one over streamable HTTP.
func TestToolMCPBindingE2E(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	help := httptest.NewServer(mcptest.Handler())
	t.Cleanup(help.Close)
	file := writeBindings(t, fmt.Sprintf(`tools:
  search_docs:
    mcp: { server: docs, tool: search }
  search_help:
    mcp: { server: help, tool: search }
mcp_servers:
  docs:
    command: [%q, "-test.run=^$"]
    env: { %s: "1" }
  help:
    url: %s
`, exe, mcpStdioVar, help.URL))
	c := startPrivateStack(t, stackOptions{PacksDir: toolPacksDir, ToolsFile: file})
	require.Empty(t, c.Stack.ToolsReport().Diags.Errors())

	id := createRun(t, c, "tools-mcp", map[string]any{"message": "Can I get a refund?"})
	s := waitCompleted(t, c, id)
	require.Equal(t, 4, s.Pack.ModelRounds, "both results reached the model (expect_tool_result)")

	returned := toolReturned(t, events(t, c, id))
	var docs, helpHits struct {
		Query     string           `json:"query"`
		Transport string           `json:"transport"`
		Hits      []map[string]any `json:"hits"`
		Key       string           `json:"idempotencyKey"`
	}
	require.NoError(t, json.Unmarshal(returned["call_0_0_search_docs"].Outcome, &docs))
	require.Equal(t, "refunds", docs.Query)
	require.Equal(t, "stdio", docs.Transport)
	require.Len(t, docs.Hits, 1, "limit 1 reached the server")
	require.NoError(t, json.Unmarshal(returned["call_1_0_search_help"].Outcome, &helpHits))
	require.Equal(t, "returns", helpHits.Query)
	require.Equal(t, "http", helpHits.Transport)
	// Each call's idempotency key reached its server in the call's _meta.
	require.Equal(t, activities.ToolIdempotencyKey("default", convo.ToolCallInput{RunID: id, NodeID: packNode, Round: 0, CallID: "call_0_0_search_docs", Tool: "search_docs"}), docs.Key)
	require.Equal(t, activities.ToolIdempotencyKey("default", convo.ToolCallInput{RunID: id, NodeID: packNode, Round: 1, CallID: "call_1_0_search_help", Tool: "search_help"}), helpHits.Key)
}

// TestToolBindingRefusedAtStart starts a stack whose bindings do not fit the packs'
// declarations: the start fails and names the binding's file and line.
func TestToolBindingRefusedAtStart(t *testing.T) {
	t.Parallel()
	help := httptest.NewServer(mcptest.Handler())
	t.Cleanup(help.Close)
	file := writeBindings(t, "tools:\n  search_help:\n    mcp: { server: help, tool: broken }\nmcp_servers:\n  help:\n    url: "+help.URL+"\n")
	opts := harnessOptions("", randomHex(8))
	opts.Worker.PacksDir = toolPacksDir
	opts.Worker.ToolsFile = file
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := stack.Start(ctx, opts)
	if st != nil {
		st.Stop()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), file+`:2:3: error: tools.search_help: pack tools-mcp's parameters for search_help do not match tool broken of MCP server help: the pack's parameters declare "query", which the server does not accept`)
	require.True(t, strings.HasPrefix(err.Error(), "tool bindings do not fit the packs: "), err.Error())
}
