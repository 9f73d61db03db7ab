package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/packs"
)

// LoadOptions tune LoadFile and Parse.
type LoadOptions struct {
	// Getenv reads the ${VAR} references of header and MCP environment values; nil
	// means os.Getenv.
	Getenv func(string) string
	// UnsetIsWarning makes an unset ${VAR} a warning instead of an error, for checking
	// a file away from the worker's environment (wop pack validate).
	UnsetIsWarning bool
}

// LoadFile reads a bindings file into the set (docs/tools.md has its format).
// ${VAR} references are read once, now. Every problem is a diagnostic with
// file:line:col; when any is an error the returned error is a *packs.DiagnosticsError
// and the set must not be used.
func (s *Set) LoadFile(path string, opts LoadOptions) (packs.Diagnostics, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tool bindings: %w", err)
	}
	return s.Parse(path, data, opts)
}

// Parse reads a bindings document into the set; filename is used in diagnostics. See
// LoadFile.
func (s *Set) Parse(filename string, data []byte, opts LoadOptions) (packs.Diagnostics, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	d := &fileDecoder{file: filename, getenv: getenv, lenient: opts.UnsetIsWarning, set: s}
	root, ok := d.parse(data)
	if ok {
		d.document(root)
	}
	d.diags.Sort()
	if d.diags.HasErrors() {
		return d.diags, &packs.DiagnosticsError{File: filename, Diags: d.diags}
	}
	s.mu.Lock()
	s.files = append(s.files, filename)
	s.mu.Unlock()
	return d.diags, nil
}

type fileDecoder struct {
	file    string
	getenv  func(string) string
	lenient bool // an unset ${VAR} is a warning
	set     *Set
	diags   packs.Diagnostics
}

func (d *fileDecoder) add(sev string, n *yaml.Node, path, format string, args ...any) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
	}
	d.diags = append(d.diags, packs.Diagnostic{File: d.file, Line: line, Col: col, Severity: sev, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (d *fileDecoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.add(packs.SeverityError, n, path, format, args...)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse decodes the YAML document into its root mapping.
func (d *fileDecoder) parse(data []byte) (*yaml.Node, bool) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add(packs.SeverityWarning, nil, "", "the tool bindings file is empty; no tool is bound")
			return nil, false
		}
		line, msg := 1, strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		d.diags = append(d.diags, packs.Diagnostic{File: d.file, Line: line, Col: 1, Severity: packs.SeverityError, Message: "YAML syntax error: " + msg})
		return nil, false
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			d.add(packs.SeverityWarning, nil, "", "the tool bindings file is empty; no tool is bound")
			return nil, false
		}
		root = root.Content[0]
	}
	return root, true
}

// field is one key of a mapping with its value.
type field struct {
	key       string
	keyNode   *yaml.Node
	valueNode *yaml.Node
}

// mapping checks that n is a mapping whose keys are all allowed and unique, and returns
// its fields in source order.
func (d *fileDecoder) mapping(n *yaml.Node, path string, allowed ...string) ([]field, bool) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "must be a mapping (got %s)", describe(n))
		return nil, false
	}
	var out []field
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if seen[k.Value] {
			d.errorf(k, join(path, k.Value), "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		if allowed != nil && !contains(allowed, k.Value) {
			msg := fmt.Sprintf("unknown field %q", k.Value)
			if s := packs.Suggest(k.Value, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += "; allowed fields: " + strings.Join(allowed, ", ")
			}
			d.errorf(k, path, "%s", msg)
			continue
		}
		out = append(out, field{key: k.Value, keyNode: k, valueNode: v})
	}
	return out, true
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return fmt.Sprintf("the string %q", n.Value)
	}
	return "an unknown value"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// str reads a string scalar.
func (d *fileDecoder) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Tag == "!!map" || n.Tag == "!!seq" {
		d.errorf(n, path, "must be a string (got %s)", describe(n))
		return "", false
	}
	if n.Tag != "!!str" {
		d.errorf(n, path, "must be a string (got %s); quote it", describe(n))
		return "", false
	}
	return n.Value, true
}

// required reads a non-empty string.
func (d *fileDecoder) required(n *yaml.Node, path string) (string, bool) {
	v, ok := d.str(n, path)
	if ok && strings.TrimSpace(v) == "" {
		d.errorf(n, path, "must not be empty")
		return "", false
	}
	return v, ok
}

// duration reads a Go duration string such as 10s or 1m30s.
func (d *fileDecoder) duration(n *yaml.Node, path string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		d.errorf(n, path, "must be a duration with a unit, such as %ss", n.Value)
		return 0, false
	}
	v, ok := d.str(n, path)
	if !ok {
		return 0, false
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur <= 0 {
		d.errorf(n, path, "must be a positive duration such as 10s, 2m or 1m30s (got %q)", v)
		return 0, false
	}
	if dur > MaxTimeout {
		d.errorf(n, path, "must be at most %s (got %s)", MaxTimeout, dur)
		return 0, false
	}
	return dur, true
}

// longDuration reads a duration of an approval wait, which may be days long: Go
// durations such as 90m or 72h, or whole days such as 7d.
func (d *fileDecoder) longDuration(n *yaml.Node, path string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		d.errorf(n, path, "must be a duration with a unit, such as %sh", n.Value)
		return 0, false
	}
	v, ok := d.str(n, path)
	if !ok {
		return 0, false
	}
	dur, err := parseLongDuration(v)
	if err != nil || dur <= 0 {
		d.errorf(n, path, "must be a positive duration such as 30m, 72h or 7d (got %q)", v)
		return 0, false
	}
	if dur > activities.MaxApprovalWait {
		d.errorf(n, path, "must be at most %s (got %s)", activities.MaxApprovalWait, dur)
		return 0, false
	}
	return dur, true
}

// parseLongDuration reads a Go duration, or a whole number of days ("7d").
func parseLongDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad number of days %q", days)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

// ParseApprovalDuration reads an approval duration as the bindings file does: a Go
// duration such as 90m or 72h, or whole days such as 7d.
func ParseApprovalDuration(v string) (time.Duration, error) {
	d, err := parseLongDuration(strings.TrimSpace(v))
	if err != nil || d < 0 || d > activities.MaxApprovalWait {
		return 0, fmt.Errorf("want a duration such as 30m, 72h or 7d, at most %s (got %q)", activities.MaxApprovalWait, v)
	}
	return d, nil
}

// names reads a non-empty list of principal names (approvers).
func (d *fileDecoder) names(n *yaml.Node, path string) []string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n = &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{n}, Line: n.Line, Column: n.Column}
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		d.errorf(n, path, "must be a list of names, e.g. [finance, alice] (got %s)", describe(n))
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		v, ok := d.required(resolve(item), ip)
		if !ok {
			return nil
		}
		if seen[v] {
			d.errorf(item, ip, "%q is listed twice", v)
			return nil
		}
		seen[v] = true
		out = append(out, v)
	}
	return out
}

// secrets reads a mapping of names to values, expanding ${VAR} from the worker's
// environment. It returns the values and the expanded variables' values (secrets).
func (d *fileDecoder) secrets(n *yaml.Node, path, what string) (map[string]Secret, []string) {
	fields, ok := d.mapping(n, path)
	if !ok {
		return nil, nil
	}
	out := map[string]Secret{}
	var used []string
	for _, f := range fields {
		fp := join(path, f.key)
		if what == "header" && !validHeaderName.MatchString(f.key) {
			d.errorf(f.keyNode, fp, "%q is not a valid HTTP header name", f.key)
			continue
		}
		if what == "variable" && !validVarName.MatchString(f.key) {
			d.errorf(f.keyNode, fp, "%q is not a valid environment variable name", f.key)
			continue
		}
		raw, ok := d.str(f.valueNode, fp)
		if !ok {
			continue
		}
		v, u, err := expand(raw, d.getenv)
		var unset *unsetError
		if errors.As(err, &unset) && d.lenient {
			d.add(packs.SeverityWarning, f.valueNode, fp, "%v; the worker needs it", err)
			err = nil
		}
		if err != nil {
			d.errorf(f.valueNode, fp, "%v", err)
			continue
		}
		out[f.key] = Secret(v)
		used = append(used, u...)
	}
	return out, used
}

var validHeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// noVars refuses ${VAR} where a secret would end up in messages (URLs, commands).
func (d *fileDecoder) noVars(n *yaml.Node, path, v string) bool {
	if strings.Contains(v, "${") {
		d.errorf(n, path, "${VAR} is not read here, because this value appears in logs and errors; put secrets in headers or env")
		return false
	}
	return true
}

func (d *fileDecoder) document(root *yaml.Node) {
	fields, ok := d.mapping(root, "", "tools", "mcp_servers")
	if !ok {
		return
	}
	var toolsNode *yaml.Node
	for _, f := range fields {
		switch f.key {
		case "mcp_servers":
			d.servers(f.valueNode)
		case "tools":
			toolsNode = f.valueNode
		}
	}
	if toolsNode != nil {
		d.tools(toolsNode)
	}
}

func (d *fileDecoder) servers(n *yaml.Node) {
	fields, ok := d.mapping(n, "mcp_servers")
	if !ok {
		return
	}
	for _, f := range fields {
		path := join("mcp_servers", f.key)
		sf, ok := d.mapping(f.valueNode, path, "command", "env", "dir", "url", "headers")
		if !ok {
			continue
		}
		srv := MCPServer{Source: fmt.Sprintf("%s:%d", d.file, f.keyNode.Line), pos: position{d.file, f.keyNode.Line, f.keyNode.Column}}
		var secrets []string
		var envNode, headersNode *yaml.Node
		errs := len(d.diags.Errors())
		for _, g := range sf {
			gp := join(path, g.key)
			switch g.key {
			case "command":
				srv.Command = d.command(g.valueNode, gp)
			case "env":
				envNode = g.keyNode
				var used []string
				srv.Env, used = d.secrets(g.valueNode, gp, "variable")
				secrets = append(secrets, used...)
			case "dir":
				if v, ok := d.required(g.valueNode, gp); ok && d.noVars(g.valueNode, gp, v) {
					srv.Dir = v
				}
			case "url":
				if v, ok := d.required(g.valueNode, gp); ok && d.noVars(g.valueNode, gp, v) && d.checkURL(g.valueNode, gp, v) {
					srv.URL = v
				}
			case "headers":
				headersNode = g.keyNode
				var used []string
				srv.Headers, used = d.secrets(g.valueNode, gp, "header")
				secrets = append(secrets, used...)
			}
		}
		if len(d.diags.Errors()) > errs {
			continue
		}
		switch {
		case len(srv.Command) == 0 && srv.URL == "":
			d.errorf(f.keyNode, path, "an MCP server needs command (a stdio subprocess) or url (streamable HTTP)")
			continue
		case len(srv.Command) > 0 && srv.URL != "":
			d.errorf(f.keyNode, path, "set command (stdio) or url (streamable HTTP), not both")
			continue
		case srv.URL != "" && (envNode != nil || srv.Dir != ""):
			at := envNode
			if at == nil {
				at = f.keyNode
			}
			d.errorf(at, path, "env and dir apply to a command; a url server runs elsewhere")
			continue
		case len(srv.Command) > 0 && headersNode != nil:
			d.errorf(headersNode, path, "headers apply to a url server; pass a command's secrets in env")
			continue
		}
		if err := d.set.addMCPServer(f.key, srv, secrets); err != nil {
			d.errorf(f.keyNode, path, "%v", err)
		}
	}
}

func (d *fileDecoder) command(n *yaml.Node, path string) []string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		d.errorf(n, path, "must be a list: the program and its arguments, e.g. [docs-mcp, --stdio]")
		return nil
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		d.errorf(n, path, "must be a non-empty list: the program and its arguments (got %s)", describe(n))
		return nil
	}
	var out []string
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		v, ok := d.str(resolve(item), ip)
		if !ok || !d.noVars(item, ip, v) {
			return nil
		}
		out = append(out, v)
	}
	if strings.TrimSpace(out[0]) == "" {
		d.errorf(n, path, "the program name must not be empty")
		return nil
	}
	return out
}

func (d *fileDecoder) checkURL(n *yaml.Node, path, v string) bool {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.errorf(n, path, "must be an absolute http:// or https:// URL (got %q)", v)
		return false
	}
	if u.User != nil {
		d.errorf(n, path, "must not hold credentials; send them in a header with ${VAR}")
		return false
	}
	return true
}

func (d *fileDecoder) tools(n *yaml.Node) {
	fields, ok := d.mapping(n, "tools")
	if !ok {
		return
	}
	for _, f := range fields {
		path := join("tools", f.key)
		bf, ok := d.mapping(f.valueNode, path, "http", "activity", "mcp", "idempotent", "max_attempts", "retry_for", "retry_max_interval",
			"approval", "approval_timeout", "approval_reminder", "approvers", "required_approvals", "escalate_after", "escalate_to")
		if !ok {
			continue
		}
		b := Binding{Source: fmt.Sprintf("%s:%d", d.file, f.keyNode.Line), pos: position{d.file, f.keyNode.Line, f.keyNode.Column}}
		var secrets []string
		var kinds []string
		errs := len(d.diags.Errors())
		for _, g := range bf {
			gp := join(path, g.key)
			switch g.key {
			case "http":
				kinds = append(kinds, g.key)
				var hb *HTTPBinding
				hb, secrets = d.httpBinding(g.valueNode, gp)
				b.Executor = executorOf(hb)
			case "activity":
				kinds = append(kinds, g.key)
				b.Executor = executorOf(d.activityBinding(g.valueNode, gp))
			case "mcp":
				kinds = append(kinds, g.key)
				b.Executor = executorOf(d.mcpBinding(g.valueNode, gp))
			case "idempotent":
				if g.valueNode.Kind != yaml.ScalarNode || g.valueNode.Tag != "!!bool" {
					d.errorf(g.valueNode, gp, "must be true or false (got %s)", describe(g.valueNode))
					continue
				}
				b.Idempotent = g.valueNode.Value == "true"
			case "max_attempts":
				v, err := strconv.Atoi(g.valueNode.Value)
				if g.valueNode.Tag != "!!int" || err != nil || v < 1 || v > 100 {
					d.errorf(g.valueNode, gp, "must be a whole number from 1 to 100 (got %s)", describe(g.valueNode))
					continue
				}
				b.MaxAttempts = v
			case "retry_for":
				b.RetryFor, _ = d.longDuration(g.valueNode, gp)
			case "retry_max_interval":
				b.RetryMaxInterval, _ = d.duration(g.valueNode, gp)
			case "approval":
				if v, ok := d.str(g.valueNode, gp); ok {
					switch v {
					case ApprovalNever, ApprovalRequired:
						b.Approval = v
					default:
						d.errorf(g.valueNode, gp, "must be never or required (got %q)", v)
					}
				}
			case "approval_timeout":
				b.ApprovalSettings.Timeout, _ = d.longDuration(g.valueNode, gp)
			case "approval_reminder":
				b.ApprovalSettings.RemindEvery, _ = d.longDuration(g.valueNode, gp)
			case "escalate_after":
				b.ApprovalSettings.EscalateAfter, _ = d.longDuration(g.valueNode, gp)
			case "approvers":
				b.ApprovalSettings.Approvers = d.names(g.valueNode, gp)
			case "escalate_to":
				b.ApprovalSettings.EscalateTo = d.names(g.valueNode, gp)
			case "required_approvals":
				v, err := strconv.Atoi(g.valueNode.Value)
				if g.valueNode.Tag != "!!int" || err != nil || v < 1 || v > 100 {
					d.errorf(g.valueNode, gp, "must be a whole number from 1 to 100 (got %s)", describe(g.valueNode))
					continue
				}
				b.ApprovalSettings.RequiredApprovals = v
			}
		}
		if len(kinds) > 1 {
			d.errorf(f.keyNode, path, "a binding has one kind; this one sets %s", strings.Join(kinds, " and "))
			continue
		}
		if b.RetryMaxInterval > 0 && b.RetryFor == 0 {
			d.errorf(f.keyNode, path, "retry_max_interval applies with retry_for: set how long a call waits out an outage")
			continue
		}
		if len(d.diags.Errors()) > errs {
			continue
		}
		if len(kinds) == 0 {
			// An entry of approval settings only: the tool runs where it would without
			// a binding, and its calls wait for a decision as the entry says.
			approval := b.ApprovalSettings
			approval.Mode = b.Approval
			switch {
			case b.Idempotent || b.MaxAttempts > 0 || b.RetryFor > 0 || b.RetryMaxInterval > 0:
				d.errorf(f.keyNode, path, "idempotent, max_attempts, retry_for and retry_max_interval apply to a binding; add one of http, activity or mcp")
			case approval.IsZero():
				d.errorf(f.keyNode, path, "a binding needs one of http, activity or mcp (or, for a tool that runs where it would without one, only approval settings)")
			default:
				if err := d.set.addApproval(f.key, approval, position{d.file, f.keyNode.Line, f.keyNode.Column}); err != nil {
					d.errorf(f.keyNode, path, "%v", err)
				}
			}
			continue
		}
		if err := d.set.add(f.key, b, secrets); err != nil {
			d.errorf(f.keyNode, path, "%v", err)
		}
	}
}

func (d *fileDecoder) httpBinding(n *yaml.Node, path string) (*HTTPBinding, []string) {
	fields, ok := d.mapping(n, path, "url", "headers", "timeout")
	if !ok {
		return nil, nil
	}
	b := &HTTPBinding{}
	var secrets []string
	for _, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "url":
			if v, ok := d.required(f.valueNode, fp); ok && d.noVars(f.valueNode, fp, v) && d.checkURL(f.valueNode, fp, v) {
				b.URL = v
			}
		case "headers":
			b.Headers, secrets = d.secrets(f.valueNode, fp, "header")
		case "timeout":
			b.Timeout, _ = d.duration(f.valueNode, fp)
		}
	}
	if b.URL == "" && !d.has(fields, "url") {
		d.errorf(n, path, "missing required field \"url\"")
	}
	return b, secrets
}

func (d *fileDecoder) activityBinding(n *yaml.Node, path string) *ActivityBinding {
	fields, ok := d.mapping(n, path, "type", "task_queue", "start_to_close_timeout", "schedule_to_close_timeout", "heartbeat_timeout")
	if !ok {
		return nil
	}
	b := &ActivityBinding{}
	for _, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "type":
			b.Type, _ = d.required(f.valueNode, fp)
		case "task_queue":
			b.TaskQueue, _ = d.required(f.valueNode, fp)
		case "start_to_close_timeout":
			b.StartToCloseTimeout, _ = d.duration(f.valueNode, fp)
		case "schedule_to_close_timeout":
			b.ScheduleToCloseTimeout, _ = d.duration(f.valueNode, fp)
		case "heartbeat_timeout":
			b.HeartbeatTimeout, _ = d.duration(f.valueNode, fp)
		}
	}
	for _, req := range []string{"type", "task_queue"} {
		if !d.has(fields, req) {
			d.errorf(n, path, "missing required field %q", req)
		}
	}
	if b.ScheduleToCloseTimeout > 0 && b.StartToCloseTimeout > b.ScheduleToCloseTimeout {
		d.errorf(n, path, "start_to_close_timeout (%s) is longer than schedule_to_close_timeout (%s)", b.StartToCloseTimeout, b.ScheduleToCloseTimeout)
	}
	return b
}

func (d *fileDecoder) mcpBinding(n *yaml.Node, path string) *MCPBinding {
	fields, ok := d.mapping(n, path, "server", "tool", "timeout")
	if !ok {
		return nil
	}
	b := &MCPBinding{}
	for _, f := range fields {
		fp := join(path, f.key)
		switch f.key {
		case "server":
			if v, ok := d.required(f.valueNode, fp); ok {
				b.Server = v
				if d.set.server(v) == nil {
					msg := fmt.Sprintf("MCP server %q is not declared under mcp_servers", v)
					if s := packs.Suggest(v, d.set.serverNames()); s != "" {
						msg += fmt.Sprintf(" (did you mean %q?)", s)
					}
					d.errorf(f.valueNode, fp, "%s", msg)
				}
			}
		case "tool":
			b.Tool, _ = d.required(f.valueNode, fp)
		case "timeout":
			b.Timeout, _ = d.duration(f.valueNode, fp)
		}
	}
	if !d.has(fields, "server") {
		d.errorf(n, path, "missing required field \"server\"")
	}
	return b
}

func (d *fileDecoder) has(fields []field, key string) bool {
	for _, f := range fields {
		if f.key == key {
			return true
		}
	}
	return false
}
