package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

const goodFile = `# every kind of binding
tools:
  lookup_order:
    http:
      url: http://orders.internal/lookup
      headers: { Authorization: "Bearer ${ORDERS_TOKEN}", X-Team: billing }
      timeout: 10s
  refund_order:
    http: { url: "https://payments.internal/refund" }
    idempotent: true
    max_attempts: 3
    approval: never
  get_balance:
    activity:
      type: GetBalance
      task_queue: banking-tools
      start_to_close_timeout: 30s
      schedule_to_close_timeout: 5m
  search_docs:
    mcp: { server: docs, tool: search }
  web_search:
    mcp: { server: web }
mcp_servers:
  docs:
    command: [docs-mcp, --stdio]
    env: { DOCS_TOKEN: "${DOCS_TOKEN}" }
  web:
    url: http://127.0.0.1:9000/mcp
    headers: { Authorization: "Bearer ${WEB_TOKEN}" }
`

func TestLoadBindingsFile(t *testing.T) {
	s := NewSet()
	env := envOf(map[string]string{"ORDERS_TOKEN": "ord-secret-1234", "DOCS_TOKEN": "docs-secret-5678", "WEB_TOKEN": "web-secret-9012"})
	diags, err := s.Parse("tools.yaml", []byte(goodFile), LoadOptions{Getenv: env})
	require.NoError(t, err, "%s", diags)
	require.Empty(t, diags)
	require.Equal(t, []string{"get_balance", "lookup_order", "refund_order", "search_docs", "web_search"}, s.Names())

	lookup := s.Binding("lookup_order").Executor.(*HTTPBinding)
	require.Equal(t, "http://orders.internal/lookup", lookup.URL)
	require.Equal(t, "Bearer ord-secret-1234", lookup.Headers["Authorization"].Value())
	require.Equal(t, "billing", lookup.Headers["X-Team"].Value())
	require.Equal(t, 10*time.Second, lookup.Timeout)
	require.Equal(t, "tools.yaml:3", s.Binding("lookup_order").Source)
	require.Equal(t, DefaultHTTPTimeout, s.Binding("refund_order").Executor.(*HTTPBinding).Timeout)

	ga := s.Binding("get_balance").Executor.(*ActivityBinding)
	require.Equal(t, ActivityBinding{Type: "GetBalance", TaskQueue: "banking-tools", StartToCloseTimeout: 30 * time.Second, ScheduleToCloseTimeout: 5 * time.Minute}, *ga)
	require.Equal(t, MCPBinding{Server: "docs", Tool: "search", Timeout: DefaultMCPTimeout}, *s.Binding("search_docs").Executor.(*MCPBinding))
	require.Equal(t, "web_search", s.Binding("web_search").Executor.(*MCPBinding).Tool, "the tool defaults to the binding's name")
	require.Equal(t, "docs-secret-5678", s.server("docs").Env["DOCS_TOKEN"].Value())

	// Secrets never print.
	printed := fmt.Sprintf("%v %+v %#v %v", *s.Binding("lookup_order"), *lookup, lookup.Headers, *s.server("docs"))
	for _, secret := range []string{"ord-secret-1234", "docs-secret-5678", "web-secret-9012"} {
		require.NotContains(t, printed, secret)
		require.Equal(t, "token [REDACTED]", s.redact("token "+secret))
	}
	require.Contains(t, printed, "[REDACTED]")
	require.Equal(t, "X-Team billing", s.redact("X-Team billing"), "only ${VAR} values are secrets")
}

func TestRouteFollowsActionScope(t *testing.T) {
	s := NewSet()
	_, err := s.Parse("tools.yaml", []byte(goodFile), LoadOptions{Getenv: envOf(map[string]string{"ORDERS_TOKEN": "a", "DOCS_TOKEN": "b", "WEB_TOKEN": "c"})})
	require.NoError(t, err)
	cases := []struct {
		tool, effect string
		attempts     int32
	}{
		{"lookup_order", "read", activities.DefaultToolAttempts},
		{"lookup_order", "write", 1},    // not idempotent: one attempt
		{"lookup_order", "", 1},         // undeclared is not safe
		{"refund_order", "external", 3}, // idempotent: its max_attempts
		{"refund_order", "read", 3},     // max_attempts applies to reads too
		{"get_balance", "read", activities.DefaultToolAttempts},
	}
	for _, c := range cases {
		r, ok := s.Route(activities.ToolRouteCall{Tool: c.tool, Effect: c.effect})
		require.True(t, ok)
		assert.Equal(t, c.attempts, r.MaxAttempts, "%s with effect %q", c.tool, c.effect)
	}
	r, _ := s.Route(activities.ToolRouteCall{Tool: "get_balance", Effect: "read"})
	require.Equal(t, activities.RouteActivity, r.Kind)
	require.Equal(t, &activities.ActivityTarget{Type: "GetBalance", TaskQueue: "banking-tools", StartToCloseTimeout: 30 * time.Second, ScheduleToCloseTimeout: 5 * time.Minute}, r.Activity)
	r, _ = s.Route(activities.ToolRouteCall{Tool: "search_docs"})
	require.Equal(t, activities.RouteMCP, r.Kind)
	require.Equal(t, "MCP server docs, tool search", r.Target)
	_, ok := s.Route(activities.ToolRouteCall{Tool: "unbound"})
	require.False(t, ok)
}

// TestApprovalSettings reads approval settings with a binding and on their own: a tool
// without a binding runs where it would (the mock, a Go function) and still waits.
func TestApprovalSettings(t *testing.T) {
	s := NewSet()
	src := `tools:
  issue_refund:
    approval: required
    approval_timeout: 7d
    approval_reminder: 24h
    approvers: [finance]
    escalate_after: 48h
    escalate_to: [finance-leads, cfo]
  pay:
    http: { url: "https://payments.internal/pay" }
    approval: required
    required_approvals: 2
    approvers: [ann, ben]
  read_only:
    http: { url: "https://x.internal/read" }
    approval: never
`
	diags, err := s.Parse("tools.yaml", []byte(src), LoadOptions{})
	require.NoError(t, err, "%s", diags)
	require.Equal(t, []string{"pay", "read_only"}, s.Names(), "an entry of approval settings binds nothing")
	a, ok := s.ApprovalOf("issue_refund")
	require.True(t, ok)
	require.Equal(t, activities.ToolApproval{Mode: activities.ApprovalRequired, Timeout: 7 * 24 * time.Hour, RemindEvery: 24 * time.Hour,
		Approvers: []string{"finance"}, EscalateAfter: 48 * time.Hour, EscalateTo: []string{"finance-leads", "cfo"}}, a)
	a, _ = s.ApprovalOf("pay")
	require.Equal(t, activities.ToolApproval{Mode: activities.ApprovalRequired, Approvers: []string{"ann", "ben"}, RequiredApprovals: 2}, a)
	a, _ = s.ApprovalOf("read_only")
	require.Equal(t, activities.ApprovalNever, a.Mode)
	_, ok = s.ApprovalOf("unknown")
	require.False(t, ok)
	_, ok = s.Route(activities.ToolRouteCall{Tool: "issue_refund"})
	require.False(t, ok, "issue_refund runs where it would without a binding")

	// A set merged into another keeps its approval settings.
	merged := NewSet()
	require.NoError(t, merged.Merge(s))
	a, ok = merged.ApprovalOf("issue_refund")
	require.True(t, ok)
	require.Equal(t, 7*24*time.Hour, a.Timeout)
	require.ErrorContains(t, merged.AddApproval("pay", activities.ToolApproval{Mode: activities.ApprovalNever}), "is bound")
}

func TestBadBindingsFileIsLocated(t *testing.T) {
	env := envOf(map[string]string{"SET": "x"})
	cases := []struct {
		name, src string
		want      []string // substrings of the diagnostics, in order
	}{
		{"syntax", "tools:\n  a: [\n", []string{"tools.yaml:2:1: error: YAML syntax error: did not find expected node content"}},
		{"unknown top key", "tool:\n  a: {}\n", []string{`tools.yaml:1:1: error: unknown field "tool" (did you mean "tools"?)`}},
		{"no kind", "tools:\n  a: { idempotent: true }\n", []string{"tools.yaml:2:3: error: tools.a: idempotent, max_attempts, retry_for and retry_max_interval apply to a binding; add one of http, activity or mcp"}},
		{"retry without kind", "tools:\n  a: { retry_for: 6h }\n", []string{"tools.yaml:2:3: error: tools.a: idempotent, max_attempts, retry_for and retry_max_interval apply to a binding"}},
		{"retry for number", "tools:\n  a:\n    http: { url: http://x/ }\n    retry_for: 6\n", []string{"tools.yaml:4:16: error: tools.a.retry_for: must be a duration with a unit, such as 6h"}},
		{"retry interval alone", "tools:\n  a:\n    http: { url: http://x/ }\n    retry_max_interval: 1m\n", []string{"tools.yaml:2:3: error: tools.a: retry_max_interval applies with retry_for"}},
		{"empty", "tools:\n  a: {}\n", []string{"tools.yaml:2:3: error: tools.a: a binding needs one of http, activity or mcp (or, for a tool that runs where it would without one, only approval settings)"}},
		{"two kinds", "tools:\n  a:\n    http: { url: http://x/ }\n    activity: { type: A, task_queue: q }\n",
			[]string{"tools.yaml:2:3: error: tools.a: a binding has one kind; this one sets http and activity"}},
		{"typo", "tools:\n  a:\n    http: { url: http://x/, timout: 3s }\n", []string{`tools.yaml:3:29: error: tools.a.http: unknown field "timout" (did you mean "timeout"?)`}},
		{"relative url", "tools:\n  a:\n    http: { url: /lookup }\n", []string{`tools.yaml:3:18: error: tools.a.http.url: must be an absolute http:// or https:// URL (got "/lookup")`}},
		{"secret in url", "tools:\n  a:\n    http: { url: \"http://x/?key=${SET}\" }\n", []string{"tools.yaml:3:18: error: tools.a.http.url: ${VAR} is not read here"}},
		{"unset var", "tools:\n  a:\n    http:\n      url: http://x/\n      headers: { Authorization: \"Bearer ${MISSING}\" }\n",
			[]string{"tools.yaml:5:33: error: tools.a.http.headers.Authorization: ${MISSING} is not set in the worker's environment"}},
		{"bad duration", "tools:\n  a:\n    http: { url: http://x/, timeout: 10 }\n", []string{"tools.yaml:3:38: error: tools.a.http.timeout: must be a duration with a unit, such as 10s"}},
		{"missing fields", "tools:\n  a:\n    activity: { type: A }\n", []string{`tools.yaml:3:15: error: tools.a.activity: missing required field "task_queue"`}},
		{"unknown server", "tools:\n  a:\n    mcp: { server: dcos }\nmcp_servers:\n  docs: { url: http://x/mcp }\n",
			[]string{`tools.yaml:3:20: error: tools.a.mcp.server: MCP server "dcos" is not declared under mcp_servers (did you mean "docs"?)`}},
		{"server both", "mcp_servers:\n  docs: { url: http://x/mcp, command: [d] }\n", []string{"tools.yaml:2:3: error: mcp_servers.docs: set command (stdio) or url (streamable HTTP), not both"}},
		{"command string", "mcp_servers:\n  docs: { command: docs-mcp --stdio }\n", []string{"tools.yaml:2:20: error: mcp_servers.docs.command: must be a list"}},
		{"approval timeout number", "tools:\n  a:\n    approval: required\n    approval_timeout: 72\n", []string{"tools.yaml:4:23: error: tools.a.approval_timeout: must be a duration with a unit, such as 72h"}},
		{"approval timeout too long", "tools:\n  a:\n    approval: required\n    approval_timeout: 400d\n", []string{"tools.yaml:4:23: error: tools.a.approval_timeout: must be at most"}},
		{"escalation without group", "tools:\n  a:\n    http: { url: http://x/ }\n    escalate_after: 2h\n", []string{"tools.yaml:2:3: error: tools.a: tool \"a\": escalate_after and escalate_to go together"}},
		{"approvers not names", "tools:\n  a:\n    approval: required\n    approvers: { finance: true }\n", []string{"tools.yaml:4:16: error: tools.a.approvers: must be a list of names"}},
		{"approver twice", "tools:\n  a:\n    approval: required\n    approvers: [ann, ann]\n", []string{`tools.yaml:4:22: error: tools.a.approvers[1]: "ann" is listed twice`}},
		{"quorum", "tools:\n  a:\n    approval: required\n    required_approvals: 3\n    approvers: [ann, ben]\n", []string{"tools.yaml:2:3: error: tools.a: tool \"a\": required_approvals 3 is more than the 2 approvers listed"}},
		{"approval typo", "tools:\n  a:\n    http: { url: http://x/ }\n    approval: sometimes\n", []string{`tools.yaml:4:15: error: tools.a.approval: must be never or required (got "sometimes")`}},
		{"system tool", "tools:\n  workflow__transition:\n    http: { url: http://x/ }\n", []string{"tools.yaml:2:3: error: tools.workflow__transition: tool name \"workflow__transition\": names with a double underscore are system tools"}},
		{"duplicate", "tools:\n  a:\n    http: { url: http://x/ }\n  a:\n    http: { url: http://y/ }\n", []string{`tools.yaml:4:3: error: tools.a: duplicate key "a"`}},
		{"max attempts", "tools:\n  a:\n    http: { url: http://x/ }\n    max_attempts: 0\n", []string{"tools.yaml:4:19: error: tools.a.max_attempts: must be a whole number from 1 to 100"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			diags, err := NewSet().Parse("tools.yaml", []byte(c.src), LoadOptions{Getenv: env})
			require.Error(t, err)
			var de *packs.DiagnosticsError
			require.ErrorAs(t, err, &de)
			text := diags.String()
			at := 0
			for _, w := range c.want {
				i := strings.Index(text[at:], w)
				require.GreaterOrEqual(t, i, 0, "want %q in\n%s", w, text)
				at += i + len(w)
			}
			require.Contains(t, err.Error(), c.want[0], "the error names the first problem with its position")
		})
	}
}

func TestUnsetVariableIsAWarningWhenValidating(t *testing.T) {
	src := "tools:\n  a:\n    http:\n      url: http://x/\n      headers: { Authorization: \"Bearer ${MISSING}\" }\n"
	diags, err := NewSet().Parse("tools.yaml", []byte(src), LoadOptions{Getenv: envOf(nil), UnsetIsWarning: true})
	require.NoError(t, err)
	require.Len(t, diags, 1)
	require.Equal(t, "tools.yaml:5:33: warning: tools.a.http.headers.Authorization: ${MISSING} is not set in the worker's environment; the worker needs it", diags[0].String())
}

func TestEmptyFileBindsNothing(t *testing.T) {
	s := NewSet()
	diags, err := s.Parse("tools.yaml", []byte("# nothing yet\n"), LoadOptions{})
	require.NoError(t, err)
	require.Len(t, diags, 1)
	require.Equal(t, packs.SeverityWarning, diags[0].Severity)
	require.Zero(t, s.Len())
}

func TestCodeBindingsMergeWithTheFile(t *testing.T) {
	code := NewSet()
	require.NoError(t, code.Add("get_balance", Binding{Executor: Typed(func(_ context.Context, in struct{}) (int, error) { return 1, nil })}))
	s := NewSet()
	require.NoError(t, s.Merge(code))
	_, err := s.Parse("tools.yaml", []byte("tools:\n  get_balance:\n    http: { url: http://x/ }\n"), LoadOptions{})
	require.ErrorContains(t, err, `tools.yaml:2:3: error: tools.get_balance: tool "get_balance" is bound twice`)
	require.Equal(t, activities.RouteGo, s.Binding("get_balance").Kind())
	require.Equal(t, 1, code.Len(), "the code's set is left as it is")
}

// TestRetryForReachesTheRoute: retry_for and retry_max_interval become the route's
// outage policy; RouteTools keeps it only for calls that may be retried and fills in
// the interval and reminder a binding leaves unset.
func TestRetryForReachesTheRoute(t *testing.T) {
	s := NewSet()
	src := "tools:\n  lookup:\n    http: { url: http://x/ }\n    retry_for: 6h\n  search:\n    http: { url: http://y/ }\n    retry_for: 2d\n    retry_max_interval: 20s\n"
	_, err := s.Parse("tools.yaml", []byte(src), LoadOptions{Getenv: envOf(nil)})
	require.NoError(t, err)
	r, ok := s.Route(activities.ToolRouteCall{Tool: "search", Effect: "read"})
	require.True(t, ok)
	require.Equal(t, &activities.OutagePolicy{RetryFor: 48 * time.Hour, MaxInterval: 20 * time.Second}, r.Outage)

	acts, err := activities.New(activities.Config{Transcripts: noTranscripts{}, Bindings: s, StallReminder: 5 * time.Minute})
	require.NoError(t, err)
	res, err := acts.RouteTools(context.Background(), activities.RouteToolsInput{Calls: []activities.ToolRouteCall{
		{CallID: "1", Tool: "lookup", Effect: "read"}, {CallID: "2", Tool: "lookup", Effect: "write"}, {CallID: "3", Tool: "search", Effect: "read"},
	}})
	require.NoError(t, err)
	require.Equal(t, &activities.OutagePolicy{RetryFor: 6 * time.Hour, InitialInterval: time.Second, MaxInterval: activities.DefaultOutageMaxInterval, RemindEvery: 5 * time.Minute}, res.Routes[0].Outage)
	require.Nil(t, res.Routes[1].Outage, "a write attempted once does not wait for a second attempt")
	require.Equal(t, 20*time.Second, res.Routes[2].Outage.MaxInterval)
}

// noTranscripts is the transcript source of activities that run no model round.
type noTranscripts struct{}

func (noTranscripts) Transcript(context.Context, convo.TranscriptRef) ([]convo.Message, error) {
	return nil, errors.New("no transcripts here")
}
