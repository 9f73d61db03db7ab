package tools

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/packs"
)

// Report is what Check found: which pack tools are bound and to what, which are not,
// and the problems of the bindings (errors refuse a worker's start).
type Report struct {
	Bound   []BoundTool
	Unbound []UnboundTool
	// Approvals are the pack tools whose calls wait for a person's decision.
	Approvals []ApprovalTool
	// Diags are located in the bindings file where possible.
	Diags packs.Diagnostics
}

// ApprovalTool is a pack tool whose calls wait for approval.
type ApprovalTool struct {
	Pack, Tool string
	// Reason says why (the binding, or the pack's autonomy level and the tool's effect).
	Reason string
	// Settings are the tool's approval settings from the bindings file (the host's
	// defaults apply to what they leave unset).
	Settings activities.ToolApproval
}

// BoundTool is a pack tool with a binding.
type BoundTool struct {
	Pack, Tool string
	Kind       string // http, activity, mcp, go
	Target     string // where it runs, without secrets
	Effect     string // the pack's action_scope.effect, "" when undeclared
	// Attempts is how often a call may be attempted (1: never retried).
	Attempts int32
}

// UnboundTool is a pack tool without a binding.
type UnboundTool struct {
	Pack, Tool string
	// Mock says the pack's mock script has tool_results for it, which answer its calls.
	Mock bool
}

// Err returns the report's errors as one error, or nil.
func (r *Report) Err() error {
	errs := r.Diags.Errors()
	if len(errs) == 0 {
		return nil
	}
	return &packs.DiagnosticsError{File: errs[0].File, Diags: errs}
}

// Check checks the set against the loaded packs: every pack tool is bound or not (a
// binding no pack declares is a warning), and every MCP binding's server is connected
// to see that it has the tool and that each pack's parameters for the tool match the
// server's input schema (mismatches are errors). A server that cannot be reached is a
// warning: its calls connect again later. Connections stay open for the calls.
func (s *Set) Check(ctx context.Context, loaded []*packs.Loaded) *Report {
	r := &Report{}
	declared := map[string][]*packs.Loaded{} // tool -> packs declaring it
	sorted := slices.Clone(loaded)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Pack.ID < sorted[j].Pack.ID })
	for _, l := range sorted {
		for _, name := range l.Pack.ToolNames() {
			tool := l.Pack.Tools[name]
			declared[name] = append(declared[name], l)
			settings, _ := s.ApprovalOf(name)
			for _, prompt := range l.Pack.PromptKeys() {
				if !slices.Contains(l.Pack.Prompts[prompt].Tools, name) {
					continue
				}
				if ok, why := activities.ApprovalNeeded(settings.Mode, l.Pack.AutonomyLevel(prompt), name, tool.Effect()); ok {
					r.Approvals = append(r.Approvals, ApprovalTool{Pack: l.Pack.ID, Tool: name, Reason: why, Settings: settings})
					break
				}
			}
			b := s.Binding(name)
			if b == nil {
				mock := false
				if l.Mock != nil {
					_, mock = l.Mock.ToolResults[name]
				}
				r.Unbound = append(r.Unbound, UnboundTool{Pack: l.Pack.ID, Tool: name, Mock: mock})
				continue
			}
			effect := tool.Effect()
			attempts := activities.ToolAttempts(effect, b.Idempotent, b.MaxAttempts)
			r.Bound = append(r.Bound, BoundTool{Pack: l.Pack.ID, Tool: name, Kind: b.Kind(), Target: b.Target(), Effect: effect, Attempts: attempts})
			if b.MaxAttempts > 1 && attempts == 1 {
				r.warn(b.pos, "tools."+name, "tool %s of pack %s has effect %s, so its calls are attempted once; max_attempts applies only when the binding says idempotent: true (the target honours the Idempotency-Key)",
					name, l.Pack.ID, cmp.Or(effect, "undeclared"))
			}
			if b.RetryFor > 0 && attempts == 1 {
				r.warn(b.pos, "tools."+name, "tool %s of pack %s has effect %s, so its calls are attempted once and never wait out an outage; retry_for applies only when the binding says idempotent: true (the target honours the Idempotency-Key)",
					name, l.Pack.ID, cmp.Or(effect, "undeclared"))
			}
		}
	}
	usedServers := map[string][]string{} // server -> bound tool names
	for _, name := range s.Names() {
		b := s.Binding(name)
		if len(declared[name]) == 0 {
			r.warn(b.pos, "tools."+name, "no loaded pack declares tool %s; the binding is not used", name)
		}
		if m, ok := b.Executor.(*MCPBinding); ok {
			usedServers[m.Server] = append(usedServers[m.Server], name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Approvals())) {
		if s.Binding(name) == nil && len(declared[name]) == 0 {
			r.warn(s.approvalPosition(name), "tools."+name, "no loaded pack declares tool %s; its approval settings are not used", name)
		}
	}
	for _, name := range s.serverNames() {
		srv := s.server(name)
		if len(usedServers[name]) == 0 {
			r.warn(srv.pos, "mcp_servers."+name, "no tool binding uses MCP server %s", name)
			continue
		}
		s.checkServer(ctx, r, name, srv, usedServers[name], declared)
	}
	r.Diags.Sort()
	return r
}

// checkServer lists a server's tools and compares them with the bindings that use it.
func (s *Set) checkServer(ctx context.Context, r *Report, name string, srv *MCPServer, bound []string, declared map[string][]*packs.Loaded) {
	cs, err := s.mcp.session(ctx, name)
	if err != nil {
		r.warn(srv.pos, "mcp_servers."+name, "%v; the parameters of %s were not checked, and their calls will connect again", err, strings.Join(bound, ", "))
		return
	}
	tools := map[string]*mcp.Tool{}
	var cursor string
	for {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			s.mcp.drop(name, cs)
			r.warn(srv.pos, "mcp_servers."+name, "MCP server %s did not list its tools: %s; the parameters of %s were not checked", name, s.redact(err.Error()), strings.Join(bound, ", "))
			return
		}
		for _, t := range res.Tools {
			tools[t.Name] = t
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			break
		}
		cursor = res.NextCursor
	}
	for _, toolName := range bound {
		b := s.Binding(toolName)
		mcp := b.Executor.(*MCPBinding) // bound names only MCP bindings of this server
		st := tools[mcp.Tool]
		if st == nil {
			msg := fmt.Sprintf("MCP server %s has no tool %q (its tools: %s)", name, mcp.Tool, orNone(slices.Sorted(maps.Keys(tools))))
			if sug := packs.Suggest(mcp.Tool, slices.Sorted(maps.Keys(tools))); sug != "" {
				msg += fmt.Sprintf("; did you mean %q?", sug)
			}
			r.error(b.pos, "tools."+toolName+".mcp.tool", "%s", msg)
			continue
		}
		for _, l := range declared[toolName] {
			for _, m := range schemaMismatches(l.Pack.Tools[toolName].Parameters, st.InputSchema) {
				r.error(b.pos, "tools."+toolName, "pack %s's parameters for %s do not match tool %s of MCP server %s: %s", l.Pack.ID, toolName, mcp.Tool, name, m)
			}
		}
	}
}

func (r *Report) warn(p position, path, format string, args ...any) {
	r.Diags = append(r.Diags, packs.Diagnostic{File: p.file, Line: p.line, Col: p.col, Severity: packs.SeverityWarning, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (r *Report) error(p position, path, format string, args ...any) {
	r.Diags = append(r.Diags, packs.Diagnostic{File: p.file, Line: p.line, Col: p.col, Severity: packs.SeverityError, Path: path, Message: fmt.Sprintf(format, args...)})
}

// Print writes the report as people read it: the bound tools with their targets, then
// the unbound ones (a warning: only the mock's tool_results answer them), then the
// diagnostics. indent starts every line.
func (r *Report) Print(w io.Writer, indent string) {
	if len(r.Bound) > 0 {
		width := 0
		for _, b := range r.Bound {
			width = max(width, len(b.Pack)+1+len(b.Tool))
		}
		for _, b := range r.Bound {
			retry := "retried"
			if b.Attempts <= 1 {
				retry = "not retried"
			}
			fmt.Fprintf(w, "%s%-*s  %s (%s, %s)\n", indent, width, b.Pack+"/"+b.Tool, b.Target, cmp.Or(b.Effect, "undeclared"), retry)
		}
	}
	if len(r.Unbound) > 0 {
		var mock, none []string
		for _, u := range r.Unbound {
			if u.Mock {
				mock = append(mock, u.Pack+"/"+u.Tool)
			} else {
				none = append(none, u.Pack+"/"+u.Tool)
			}
		}
		if len(mock) > 0 {
			fmt.Fprintf(w, "%swarning: unbound, answered by the mock's tool_results: %s\n", indent, strings.Join(mock, ", "))
		}
		if len(none) > 0 {
			fmt.Fprintf(w, "%swarning: unbound, calls get an error result: %s\n", indent, strings.Join(none, ", "))
		}
	}
	for _, a := range r.Approvals {
		fmt.Fprintf(w, "%s%s/%s waits for approval: %s%s\n", indent, a.Pack, a.Tool, a.Reason, approvalSummary(a.Settings))
	}
	for _, d := range r.Diags {
		fmt.Fprintf(w, "%s%s\n", indent, d.String())
	}
}

// approvalSummary describes approval settings in a few words ("" when none are set).
func approvalSummary(a activities.ToolApproval) string {
	var parts []string
	if len(a.Approvers) > 0 {
		parts = append(parts, "approvers "+strings.Join(a.Approvers, ", "))
	}
	if a.RequiredApprovals > 1 {
		parts = append(parts, fmt.Sprintf("%d approvals", a.RequiredApprovals))
	}
	if a.Timeout > 0 {
		parts = append(parts, "expires after "+a.Timeout.String())
	}
	if a.RemindEvery > 0 {
		parts = append(parts, "reminders every "+a.RemindEvery.String())
	}
	if a.EscalateAfter > 0 {
		parts = append(parts, fmt.Sprintf("escalates to %s after %s", strings.Join(a.EscalateTo, ", "), a.EscalateAfter))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// approvalPosition is where the approval settings of a tool without a binding were
// declared.
func (s *Set) approvalPosition(name string) position {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.approvalPos[name]
}
