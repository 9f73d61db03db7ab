package tools

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
)

// An Executor is where a bound tool's calls run: an *HTTPBinding, an *ActivityBinding,
// an *MCPBinding, or a Func of a custom worker binary. The set is closed: the
// unexported methods are how a Set prepares, routes and runs each kind.
type Executor interface {
	// Kind names the executor's kind: activities.RouteHTTP, RouteActivity, RouteMCP or
	// RouteGo.
	Kind() string
	// Target describes where the calls run, without secrets.
	Target() string

	// prepare checks the executor of tool name against s and fills its defaults. It
	// returns the executor to keep: a copy when it changed, so the caller's value is
	// left as it is. s.mu is held.
	prepare(s *Set, name string) (Executor, error)
	// route fills what the workflow needs to schedule a call (its task queue and
	// timeouts).
	route(r *activities.ToolRoute)
	// execute runs a call on this worker; ok is false for an executor the workflow
	// schedules itself (an activity binding).
	execute(ctx context.Context, s *Set, in convo.ToolCallInput) (res *convo.ToolCallResult, ok bool, err error)
	// secrets lists the values of a binding built in code that results and errors must
	// not show.
	secrets() []string
}

// Func is a tool implemented in Go by a custom worker binary (see Typed).
type Func activities.ToolFunc

// Kind implements Executor.
func (Func) Kind() string { return activities.RouteGo }

// Target implements Executor.
func (Func) Target() string { return "Go function" }

func (f Func) prepare(*Set, string) (Executor, error) {
	if f == nil {
		return nil, fmt.Errorf("the Go function is nil")
	}
	return f, nil
}

func (Func) route(*activities.ToolRoute) {}

func (f Func) execute(ctx context.Context, _ *Set, in convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	res, err := f(ctx, in)
	if err != nil {
		err = fmt.Errorf("tool %q (call %s): %w", in.Tool, in.CallID, err)
	}
	return res, true, err
}

func (Func) secrets() []string { return nil }

// Kind implements Executor.
func (*HTTPBinding) Kind() string { return activities.RouteHTTP }

// Target implements Executor.
func (b *HTTPBinding) Target() string { return "POST " + b.URL }

func (b *HTTPBinding) prepare(*Set, string) (Executor, error) {
	if b.Timeout != 0 {
		return b, nil
	}
	cp := *b
	cp.Timeout = DefaultHTTPTimeout
	return &cp, nil
}

func (b *HTTPBinding) route(r *activities.ToolRoute) { r.StartToCloseTimeout = callTimeout(b.Timeout) }

func (b *HTTPBinding) execute(ctx context.Context, s *Set, in convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	res, err := s.callHTTP(ctx, b, in)
	return res, true, err
}

func (b *HTTPBinding) secrets() []string {
	var out []string
	for _, v := range b.Headers {
		out = append(out, v.Value())
	}
	return out
}

// Kind implements Executor.
func (*ActivityBinding) Kind() string { return activities.RouteActivity }

// Target implements Executor.
func (b *ActivityBinding) Target() string {
	return fmt.Sprintf("activity %s on task queue %s", b.Type, b.TaskQueue)
}

func (b *ActivityBinding) prepare(*Set, string) (Executor, error) {
	if b.StartToCloseTimeout != 0 {
		return b, nil
	}
	cp := *b
	cp.StartToCloseTimeout = DefaultActivityTimeout
	return &cp, nil
}

func (b *ActivityBinding) route(r *activities.ToolRoute) {
	r.Activity = &activities.ActivityTarget{Type: b.Type, TaskQueue: b.TaskQueue, StartToCloseTimeout: b.StartToCloseTimeout,
		ScheduleToCloseTimeout: b.ScheduleToCloseTimeout, HeartbeatTimeout: b.HeartbeatTimeout}
}

// execute does not run an activity binding: the workflow schedules it on its task
// queue, so a ToolCall for one (from a run started before bindings were routed) is not
// handled here.
func (*ActivityBinding) execute(context.Context, *Set, convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	return nil, false, nil
}

func (*ActivityBinding) secrets() []string { return nil }

// Kind implements Executor.
func (*MCPBinding) Kind() string { return activities.RouteMCP }

// Target implements Executor.
func (b *MCPBinding) Target() string { return fmt.Sprintf("MCP server %s, tool %s", b.Server, b.Tool) }

func (b *MCPBinding) prepare(s *Set, name string) (Executor, error) {
	if s.servers[b.Server] == nil {
		return nil, fmt.Errorf("MCP server %q is not declared (mcp_servers: %s)", b.Server, orNone(slices.Sorted(maps.Keys(s.servers))))
	}
	cp := *b
	if cp.Tool == "" {
		cp.Tool = name
	}
	if cp.Timeout == 0 {
		cp.Timeout = DefaultMCPTimeout
	}
	return &cp, nil
}

func (b *MCPBinding) route(r *activities.ToolRoute) { r.StartToCloseTimeout = callTimeout(b.Timeout) }

func (b *MCPBinding) execute(ctx context.Context, s *Set, in convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	res, err := s.callMCP(ctx, b, in)
	return res, true, err
}

func (*MCPBinding) secrets() []string { return nil }

// executorOf is e as an Executor, nil when e is a nil pointer (a binding whose
// declaration had errors).
func executorOf[E interface {
	*HTTPBinding | *ActivityBinding | *MCPBinding
	Executor
}](e E) Executor {
	if e == nil {
		return nil
	}
	return e
}
