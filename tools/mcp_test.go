package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/mcptest"
	"github.com/wop-dev/wop/packs"
)

// stdioServerVar makes the test binary serve the test MCP server on stdio instead of
// running tests: the stdio binding's subprocess.
const stdioServerVar = "WOP_TOOLS_TEST_MCP_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerVar) == "1" {
		if err := mcptest.ServeStdio(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// docsPack declares search_docs with the given parameters, and a second tool.
func docsPack(t *testing.T, id, params string) *packs.Loaded {
	t.Helper()
	src := `id: ` + id + `
name: Docs
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
tools:
  search_docs:
    name: search_docs
    description: Search the docs.
    parameters: ` + params + `
    action_scope: { effect: read }
  broken_docs:
    name: broken_docs
    description: Always fails.
    parameters: { type: object, properties: {} }
prompts:
  ask:
    id: ask
    name: Ask
    version: 1.0.0
    system_template: Answer from the docs.
    tools: [search_docs, broken_docs]
workflow:
  version: 2
  entry: ask
  states:
    ask: { prompt_task: ask, terminal: true }
`
	p, diags, err := packs.Parse(id+".yaml", []byte(src))
	require.NoError(t, err, "%s", diags)
	return &packs.Loaded{Pack: p, Path: id + ".yaml"}
}

const goodParams = `{ type: object, properties: { query: { type: string }, limit: { type: integer } }, required: [query] }`

func mcpSet(t *testing.T, server string) *Set {
	t.Helper()
	s := NewSet()
	src := "tools:\n  search_docs:\n    mcp: { server: docs, tool: search }\n  broken_docs:\n    mcp: { server: docs, tool: broken }\nmcp_servers:\n  docs:\n" + server
	_, err := s.Parse("tools.yaml", []byte(src), LoadOptions{Getenv: envOf(map[string]string{"DOCS_TOKEN": "docs-tok-0123456789"})})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func stdioServer(t *testing.T) string {
	exe, err := os.Executable()
	require.NoError(t, err)
	return fmt.Sprintf("    command: [%q, \"-test.run=^$\"]\n    env: { %s: \"1\", %s: \"${DOCS_TOKEN}\", %s: %q }\n",
		exe, stdioServerVar, mcptest.TokenVar, mcptest.TokenHashVar, mcptest.Hash("docs-tok-0123456789"))
}

func httpServer(t *testing.T) string {
	ts := httptest.NewServer(mcptest.Handler())
	t.Cleanup(ts.Close)
	return "    url: " + ts.URL + "\n"
}

func TestMCPBinding(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			var s *Set
			if transport == "stdio" {
				s = mcpSet(t, stdioServer(t))
			} else {
				s = mcpSet(t, httpServer(t))
			}
			report := s.Check(context.Background(), []*packs.Loaded{docsPack(t, "docs", goodParams)})
			require.Empty(t, report.Diags, "%s", report.Diags)
			require.Len(t, report.Bound, 2)

			in := convo.ToolCallInput{RunID: "r_1", Tool: "search_docs", CallID: "c1", Args: json.RawMessage(`{"query":"refunds","limit":1}`)}
			in.IdempotencyKey = activities.ToolIdempotencyKey("t1", in)
			res, ok, err := s.Execute(context.Background(), in)
			require.True(t, ok)
			require.NoError(t, err)
			require.False(t, res.IsError)
			var got struct {
				Query      string              `json:"query"`
				Transport  string              `json:"transport"`
				Hits       []map[string]string `json:"hits"`
				Authorized bool                `json:"authorized"`
				Key        string              `json:"idempotencyKey"`
			}
			require.NoError(t, json.Unmarshal(res.Content, &got), "%s", res.Content)
			require.Equal(t, "refunds", got.Query)
			require.Equal(t, in.IdempotencyKey, got.Key, "the call's idempotency key travels in _meta")
			require.NotEmpty(t, got.Key)
			require.Equal(t, transport, got.Transport)
			require.Len(t, got.Hits, 1)
			require.Equal(t, transport == "stdio", got.Authorized, "the stdio server got its token through env")

			res, _, err = s.Execute(context.Background(), convo.ToolCallInput{Tool: "broken_docs", Args: json.RawMessage(`{}`)})
			require.NoError(t, err)
			require.True(t, res.IsError)
			require.JSONEq(t, `{"error":"the index is being rebuilt"}`, string(res.Content))

			// Arguments the server's schema refuses reach the model as an error result.
			res, _, err = s.Execute(context.Background(), convo.ToolCallInput{Tool: "search_docs", Args: json.RawMessage(`{"limit":"many"}`)})
			require.NoError(t, err)
			require.True(t, res.IsError, "%s", res.Content)
		})
	}
}

func TestMCPBindingReconnectsAfterTheServerWentAway(t *testing.T) {
	ts := httptest.NewServer(mcptest.Handler())
	s := mcpSet(t, "    url: "+ts.URL+"\n")
	in := convo.ToolCallInput{Tool: "search_docs", Args: json.RawMessage(`{"query":"a"}`)}
	_, _, err := s.Execute(context.Background(), in)
	require.NoError(t, err)
	ts.Close()
	_, _, err = s.Execute(context.Background(), in)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr, "a server that went away is a retryable failure")
	require.Equal(t, ErrTypeToolUnavailable, appErr.Type())
}

func TestMCPParametersMustMatchTheServer(t *testing.T) {
	s := mcpSet(t, httpServer(t))
	cases := []struct{ params, want string }{
		{`{ type: object, properties: { q: { type: string } }, required: [q] }`,
			`the server requires "query", which the pack's parameters do not declare`},
		{`{ type: object, properties: { query: { type: string } } }`,
			`the server requires "query", which the pack's parameters declare but do not require`},
		{`{ type: object, properties: { query: { type: integer } }, required: [query] }`,
			`"query" is integer in the pack's parameters but string on the server`},
		{`{ type: object, properties: { query: { type: string }, lang: { type: string } }, required: [query] }`,
			`the pack's parameters declare "lang", which the server does not accept (its input schema sets additionalProperties: false)`},
	}
	for i, c := range cases {
		report := s.Check(context.Background(), []*packs.Loaded{docsPack(t, fmt.Sprintf("docs%d", i), c.params)})
		errs := report.Diags.Errors()
		require.NotEmpty(t, errs)
		require.Equal(t, "tools.yaml", errs[0].File)
		require.Equal(t, 2, errs[0].Line, "located at the binding")
		require.Contains(t, errs.String(), fmt.Sprintf("pack docs%d's parameters for search_docs do not match tool search of MCP server docs: %s", i, c.want))
		require.Error(t, report.Err())
	}

	missing := NewSet()
	t.Cleanup(func() { _ = missing.Close() })
	_, err := missing.Parse("tools.yaml", []byte("tools:\n  search_docs:\n    mcp: { server: docs, tool: serch }\nmcp_servers:\n  docs:\n"+httpServer(t)), LoadOptions{})
	require.NoError(t, err)
	report := missing.Check(context.Background(), []*packs.Loaded{docsPack(t, "docs", goodParams)})
	require.Contains(t, report.Diags.Errors().String(), `tools.yaml:2:3: error: tools.search_docs.mcp.tool: MCP server docs has no tool "serch" (its tools: broken, search); did you mean "search"?`)
}

func TestUnreachableMCPServerIsAWarning(t *testing.T) {
	s := mcpSet(t, "    command: [/nonexistent/docs-mcp]\n")
	report := s.Check(context.Background(), []*packs.Loaded{docsPack(t, "docs", goodParams)})
	require.NoError(t, report.Err())
	require.Len(t, report.Diags, 1)
	require.Equal(t, packs.SeverityWarning, report.Diags[0].Severity)
	require.Contains(t, report.Diags[0].String(), "tools.yaml:7:3: warning: mcp_servers.docs: connect to MCP server docs (stdio: /nonexistent/docs-mcp)")

	_, _, err := s.Execute(context.Background(), convo.ToolCallInput{Tool: "search_docs", Args: json.RawMessage(`{"query":"a"}`)})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, ErrTypeToolUnavailable, appErr.Type())
}

func TestMCPContentMapping(t *testing.T) {
	cases := []struct {
		res  *mcp.CallToolResult
		want string
		err  bool
	}{
		{&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"a":1}`}}}, `{"a":1}`, false},
		{&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "plain words"}}}, `"plain words"`, false},
		{&mcp.CallToolResult{StructuredContent: map[string]any{"n": 2}, Content: []mcp.Content{&mcp.TextContent{Text: "ignored"}}}, `{"n":2}`, false},
		{&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "see"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte("12345")},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", MIMEType: "text/plain", Text: "hello"}}}},
			`[{"type":"text","text":"see"},{"type":"image","mimeType":"image/png","bytes":5},{"type":"resource","uri":"file:///a.txt","mimeType":"text/plain","text":"hello"}]`, false},
		{&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}, &mcp.TextContent{Text: "really"}}}, `{"error":"no\nreally"}`, true},
	}
	for _, c := range cases {
		got, isErr := mcpContent(c.res)
		require.JSONEq(t, c.want, string(got))
		require.Equal(t, c.err, isErr)
	}
}

func TestTypedGoFunction(t *testing.T) {
	type args struct {
		AccountID string `json:"account_id"`
	}
	fn := Typed(func(_ context.Context, a args) (map[string]string, error) {
		switch a.AccountID {
		case "ACC-1":
			return map[string]string{"balance": "42.00"}, nil
		case "ACC-404":
			return nil, Fail("no account %s", a.AccountID)
		}
		return nil, fmt.Errorf("core banking is down")
	})
	s := NewSet()
	require.NoError(t, s.Add("get_balance", Binding{Executor: Func(fn)}))
	call := func(args string) (*convo.ToolCallResult, error) {
		res, ok, err := s.Execute(context.Background(), convo.ToolCallInput{Tool: "get_balance", CallID: "c", Args: json.RawMessage(args)})
		require.True(t, ok)
		return res, err
	}
	res, err := call(`{"account_id":"ACC-1"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"balance":"42.00"}`, string(res.Content))
	res, err = call(`{"account_id":"ACC-404"}`)
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.JSONEq(t, `{"error":"no account ACC-404"}`, string(res.Content))
	res, err = call(`{"account_id":7}`)
	require.NoError(t, err)
	require.True(t, res.IsError, "arguments that do not fit are the model's to fix")
	require.True(t, strings.HasPrefix(string(res.Content), `{"error":"the arguments of get_balance do not fit its parameters`))
	_, err = call(`{"account_id":"ACC-2"}`)
	require.ErrorContains(t, err, "core banking is down", "other errors fail the attempt, which Temporal retries")
}
