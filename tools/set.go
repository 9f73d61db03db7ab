package tools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
)

// Binding says where one tool runs. Exactly one of HTTP, Activity, MCP and Go is set.
type Binding struct {
	// Executor is where the calls run: an *HTTPBinding, *ActivityBinding, *MCPBinding,
	// or a Func of a custom worker binary (see Typed).
	Executor Executor

	// Idempotent says the target honours the call's idempotency key (the Idempotency-Key
	// header of an HTTP binding, the ActivityID of an activity binding), so a write or
	// external tool may be retried. Read tools are retried either way.
	Idempotent bool
	// MaxAttempts bounds the attempts of a call that may be retried; 0 means
	// activities.DefaultToolAttempts.
	MaxAttempts int
	// RetryFor, when set, makes a call that may be retried and still fails with a
	// retryable error after MaxAttempts wait out the outage: it is retried for this
	// long from its first attempt (backing off to RetryMaxInterval, default 1m), and the
	// run reports itself stalled meanwhile. Calls attempted once are not affected.
	RetryFor         time.Duration
	RetryMaxInterval time.Duration
	// Approval is "required" (a person approves each call first), "never" (no call
	// waits, whatever the pack's autonomy level), or "" (the pack's governance
	// decides: see docs/tools.md).
	Approval string
	// ApprovalSettings tune the wait of a call that needs a decision: its deadline,
	// reminders, approvers and escalation. Its Mode is ignored; Approval is the mode.
	ApprovalSettings activities.ToolApproval

	// Source is where the binding was declared ("file:line"), empty for code.
	Source string
	// pos is the binding's position in its file, for diagnostics.
	pos position
}

// position is a place in a bindings file.
type position struct {
	file      string
	line, col int
}

// HTTPBinding POSTs the call's arguments object as JSON to URL.
type HTTPBinding struct {
	URL string
	// Headers are sent with every call; values may hold secrets from ${VAR}.
	Headers map[string]Secret
	// Timeout bounds one attempt (default DefaultHTTPTimeout).
	Timeout time.Duration
}

// ActivityBinding is a Temporal activity of the deployment's own workers, in any SDK
// language: the run workflow schedules Type on TaskQueue with the call's arguments
// object as the single input; its result is the tool result.
type ActivityBinding struct {
	Type      string
	TaskQueue string
	// StartToCloseTimeout bounds one attempt (default DefaultActivityTimeout).
	StartToCloseTimeout time.Duration
	// ScheduleToCloseTimeout, when set, bounds the call with its retries and the time
	// it waits for a worker; unset, the call waits for the queue's workers as long as
	// the run lives.
	ScheduleToCloseTimeout time.Duration
	// HeartbeatTimeout, when set, fails an attempt that stops heartbeating.
	HeartbeatTimeout time.Duration
}

// MCPBinding calls Tool on the MCP server named Server (Set.AddMCPServer).
type MCPBinding struct {
	Server string
	Tool   string
	// Timeout bounds one attempt (default DefaultMCPTimeout).
	Timeout time.Duration
}

// MCPServer is an MCP server the worker connects to: a subprocess speaking stdio
// (Command) or a streamable HTTP endpoint (URL).
type MCPServer struct {
	// Command is the program and its arguments. The subprocess gets only HOME, LOGNAME,
	// PATH, SHELL, TERM, TMPDIR and USER from the worker's environment, plus Env.
	Command []string
	Env     map[string]Secret
	// Dir is the subprocess's working folder (default: the worker's).
	Dir string
	// URL is a streamable HTTP endpoint, e.g. http://127.0.0.1:9000/mcp.
	URL string
	// Headers are sent with every HTTP request to URL; values may hold secrets.
	Headers map[string]Secret

	// Source is where the server was declared ("file:line"), empty for code.
	Source string
	pos    position
}

// Defaults of the bindings' timeouts.
const (
	DefaultHTTPTimeout     = 30 * time.Second
	DefaultMCPTimeout      = 60 * time.Second
	DefaultActivityTimeout = 2 * time.Minute
	// MaxTimeout bounds the per-attempt timeouts a bindings file may set.
	MaxTimeout = time.Hour
)

// MaxResultBytes bounds the result of one HTTP or MCP call: results travel through the
// run's history and transcript, which Temporal keeps under 2 MB per payload.
const MaxResultBytes = 256 << 10

// Approval values of a binding.
const (
	ApprovalNever    = "never"
	ApprovalRequired = "required"
)

// toolNamePattern is PromptPack's tool name pattern.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Set holds the tool bindings of one worker and executes the calls bound to HTTP
// endpoints, MCP servers and Go functions. It implements activities.ToolBindings. Build
// it with NewSet, add bindings with Add and LoadFile, and Close it when the worker
// stops (it ends MCP subprocesses). It is safe for concurrent use once built.
type Set struct {
	mu       sync.Mutex
	bindings map[string]*Binding
	servers  map[string]*MCPServer
	// approvals are the approval settings by tool: of bindings, and of entries that set
	// only approval settings (the tool runs where it would without a binding).
	approvals map[string]activities.ToolApproval
	// approvalPos is where an entry of approval settings only was declared.
	approvalPos map[string]position
	files       []string
	secrets     []string

	http *http.Client
	mcp  *mcpPool
}

// NewSet returns an empty set.
func NewSet() *Set {
	s := &Set{bindings: map[string]*Binding{}, servers: map[string]*MCPServer{}, approvals: map[string]activities.ToolApproval{}, approvalPos: map[string]position{}}
	s.http = &http.Client{
		// A tool endpoint answers; it does not send the call (and its headers) elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	s.mcp = newMCPPool(s)
	return s
}

// Add binds a tool. The name must be a PromptPack tool name, bound once; the binding
// must set exactly one of HTTP, Activity, MCP and Go, and an MCP binding must name a
// server added before.
func (s *Set) Add(name string, b Binding) error {
	return s.add(name, b, secretsOf(b))
}

// add is Add with the values to redact from results and errors: the header values of a
// binding built in code, the ${VAR} values of one read from a file.
func (s *Set) add(name string, b Binding, secrets []string) error {
	if !toolNamePattern.MatchString(name) {
		return fmt.Errorf("tool name %q must match %s", name, toolNamePattern)
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("tool name %q: names with a double underscore are system tools (workflow__transition, ...), which the host answers itself", name)
	}
	if b.Executor == nil {
		return fmt.Errorf("tool %q: a binding needs an executor: http, activity, mcp or a Go function", name)
	}
	approval := b.ApprovalSettings
	approval.Mode = b.Approval
	if err := approval.Check(); err != nil {
		return fmt.Errorf("tool %q: %w", name, err)
	}
	if b.MaxAttempts < 0 {
		return fmt.Errorf("tool %q: max_attempts must be at least 1", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.bindings[name]; prev != nil {
		where := ""
		if prev.Source != "" {
			where = " at " + prev.Source
		}
		return fmt.Errorf("tool %q is bound twice (first%s)", name, where)
	}
	exec, err := b.Executor.prepare(s, name)
	if err != nil {
		return fmt.Errorf("tool %q: %w", name, err)
	}
	b.Executor = exec
	if _, ok := s.approvals[name]; ok {
		return fmt.Errorf("tool %q has approval settings twice", name)
	}
	cp := b
	s.bindings[name] = &cp
	if !approval.IsZero() {
		s.approvals[name] = approval
	}
	s.secrets = append(s.secrets, secrets...)
	return nil
}

// AddApproval sets the approval settings of a tool that has no binding of its own: its
// calls run where they would without one (a Go function, the mock's tool_results), and
// wait for a decision as the settings say.
func (s *Set) AddApproval(name string, approval activities.ToolApproval) error {
	return s.addApproval(name, approval, position{})
}

func (s *Set) addApproval(name string, approval activities.ToolApproval, pos position) error {
	if !toolNamePattern.MatchString(name) {
		return fmt.Errorf("tool name %q must match %s", name, toolNamePattern)
	}
	if err := approval.Check(); err != nil {
		return fmt.Errorf("tool %q: %w", name, err)
	}
	if approval.IsZero() {
		return fmt.Errorf("tool %q: an entry without a binding needs approval settings (approval, approval_timeout, approvers, ...)", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bindings[name] != nil {
		return fmt.Errorf("tool %q is bound; give its approval settings with its binding", name)
	}
	if _, ok := s.approvals[name]; ok {
		return fmt.Errorf("tool %q has approval settings twice", name)
	}
	s.approvals[name] = approval
	s.approvalPos[name] = pos
	return nil
}

// ApprovalOf implements activities.ToolApprovals: the approval settings of a tool's
// entry, bound or not.
func (s *Set) ApprovalOf(tool string) (activities.ToolApproval, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.approvals[tool]
	return a, ok
}

// Approvals returns the tools with approval settings, sorted, and their settings.
func (s *Set) Approvals() map[string]activities.ToolApproval {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.approvals)
}

// AddMCPServer declares an MCP server that MCP bindings may name.
func (s *Set) AddMCPServer(name string, srv MCPServer) error {
	var secrets []string
	for _, v := range srv.Env {
		secrets = append(secrets, v.Value())
	}
	for _, v := range srv.Headers {
		secrets = append(secrets, v.Value())
	}
	return s.addMCPServer(name, srv, secrets)
}

func (s *Set) addMCPServer(name string, srv MCPServer, secrets []string) error {
	if name == "" {
		return errors.New("an MCP server needs a name")
	}
	if (len(srv.Command) > 0) == (srv.URL != "") {
		return fmt.Errorf("MCP server %q: set exactly one of command (stdio) and url (streamable HTTP)", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers[name] != nil {
		return fmt.Errorf("MCP server %q is declared twice", name)
	}
	cp := srv
	s.servers[name] = &cp
	s.secrets = append(s.secrets, secrets...)
	return nil
}

// secretsOf lists the values of a binding built in code that may be secrets (the
// header values of an HTTP binding).
func secretsOf(b Binding) []string {
	if b.Executor == nil {
		return nil
	}
	return b.Executor.secrets()
}

// Names returns the bound tool names, sorted.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.bindings))
}

// Binding returns the binding of a tool, or nil.
func (s *Set) Binding(name string) *Binding {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bindings[name]
}

// Files returns the bindings files loaded into the set.
func (s *Set) Files() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.files)
}

// Len is the number of bound tools.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bindings)
}

// Kind names the binding's kind: http, activity, mcp or go (the activities.Route*
// constants).
func (b *Binding) Kind() string { return b.Executor.Kind() }

// Target describes where the binding runs, without secrets.
func (b *Binding) Target() string { return b.Executor.Target() }

// Route implements activities.ToolBindings.
func (s *Set) Route(call activities.ToolRouteCall) (activities.ToolRoute, bool) {
	b := s.Binding(call.Tool)
	if b == nil {
		return activities.ToolRoute{}, false
	}
	r := activities.ToolRoute{Kind: b.Kind(), Target: b.Target(), MaxAttempts: activities.ToolAttempts(call.Effect, b.Idempotent, b.MaxAttempts)}
	if b.RetryFor > 0 {
		r.Outage = &activities.OutagePolicy{RetryFor: b.RetryFor, MaxInterval: b.RetryMaxInterval}
	}
	b.Executor.route(&r)
	return r, true
}

// callTimeout is the ToolCall activity's StartToCloseTimeout for a binding whose
// attempts take up to d: ToolCallOptions' unless d needs more.
func callTimeout(d time.Duration) time.Duration {
	if need := d + 30*time.Second; need > activities.ToolCallOptions().StartToCloseTimeout {
		return need
	}
	return 0
}

// Execute implements activities.ToolBindings: it runs HTTP, MCP and Go bindings.
// Activity bindings are scheduled by the workflow itself, so a ToolCall for one (from a
// run started before bindings were routed) is not handled here.
func (s *Set) Execute(ctx context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	b := s.Binding(in.Tool)
	if b == nil {
		return nil, false, nil
	}
	return b.Executor.execute(ctx, s, in)
}

// redact removes every secret of the set from s.
func (s *Set) redact(text string) string {
	s.mu.Lock()
	secrets := slices.Clone(s.secrets)
	s.mu.Unlock()
	return activities.Redactor(secrets...)(text)
}

// Close ends the set's MCP sessions and subprocesses.
func (s *Set) Close() error {
	return s.mcp.close()
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// server returns a declared MCP server, or nil.
func (s *Set) server(name string) *MCPServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servers[name]
}

// serverNames returns the declared MCP servers' names, sorted.
func (s *Set) serverNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.servers))
}

// Merge adds every binding and MCP server of other (bindings built in code) to the set.
// The set gets its own connections; other is left as it is.
func (s *Set) Merge(other *Set) error {
	other.mu.Lock()
	servers := maps.Clone(other.servers)
	bindings := maps.Clone(other.bindings)
	approvals := maps.Clone(other.approvals)
	secrets := slices.Clone(other.secrets)
	other.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		if err := s.addMCPServer(name, *servers[name], nil); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(bindings)) {
		if err := s.add(name, *bindings[name], nil); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(approvals)) {
		if bindings[name] != nil {
			continue // came with its binding
		}
		if err := s.AddApproval(name, approvals[name]); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.secrets = append(s.secrets, secrets...)
	s.mu.Unlock()
	return nil
}
