package activities

// This file is where a tool call runs. The run workflow cannot read the worker's tool
// bindings (deployment configuration, package tools), so before it schedules a batch of
// tool calls it asks the RouteTools local activity, whose answer Temporal records in the
// run's history: a replay reads the recorded routes, and a binding changed while a run
// waits takes effect from the run's next tool batch.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/convo"
)

// Route kinds (ToolRoute.Kind): where a tool call runs.
const (
	RouteHTTP     = "http"     // ToolCall POSTs the arguments to the binding's URL
	RouteMCP      = "mcp"      // ToolCall calls a tool of an MCP server
	RouteGo       = "go"       // ToolCall runs a Go function registered on the worker
	RouteActivity = "activity" // the workflow schedules the binding's activity on its task queue
	RouteMock     = "mock"     // ToolCall answers from the pack's mock tool_results
	RouteNone     = "none"     // ToolCall answers that no executor is configured
)

// DefaultToolAttempts is how many attempts a tool call that may be retried gets when its
// binding does not say (ToolCallOptions' RetryPolicy).
const DefaultToolAttempts = 5

// ToolBindings are the tool bindings of a worker: the deployment's bindings file and the
// Go functions a custom worker registers (package tools implements it). Implementations
// must be safe for concurrent use.
type ToolBindings interface {
	// Route says where a call of the tool runs, or false when the tool has no binding.
	Route(call ToolRouteCall) (ToolRoute, bool)
	// Execute runs a call whose tool is bound on this worker (HTTP, MCP, Go). It reports
	// false when it has no such binding for the tool. A returned error fails the activity
	// attempt (Temporal retries it as the call's RetryPolicy allows).
	Execute(ctx context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, bool, error)
}

// RouteToolsInput asks where each call of one tool batch runs.
type RouteToolsInput struct {
	RunID  string          `json:"runId"`
	PackID string          `json:"packId"`
	Calls  []ToolRouteCall `json:"calls"`
}

// ToolRouteCall is one call to route.
type ToolRouteCall struct {
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	// Effect is the tool's action_scope.effect in the run's pack: read, write, external,
	// or "" when undeclared. It decides whether the call may be retried.
	Effect string `json:"effect,omitempty"`
}

// RouteToolsResult holds one route per call, in call order.
type RouteToolsResult struct {
	Routes []ToolRoute `json:"routes"`
}

// ToolRoute is where one tool call runs and how often it may be attempted.
type ToolRoute struct {
	// Kind is one of the Route* constants.
	Kind string `json:"kind"`
	// Target describes the binding for people (the Temporal UI, logs): a URL, an MCP
	// server and tool, an activity type and task queue. It holds no secret.
	Target string `json:"target,omitempty"`
	// Activity is set for RouteActivity: the workflow schedules it instead of ToolCall.
	Activity *ActivityTarget `json:"activity,omitempty"`
	// StartToCloseTimeout of the ToolCall activity; 0 keeps ToolCallOptions'.
	StartToCloseTimeout time.Duration `json:"startToCloseTimeout,omitempty"`
	// MaxAttempts of the call's activity: 1 means it is never retried.
	MaxAttempts int32 `json:"maxAttempts"`
	// Approval is the tool's approval settings (its binding's over the host's
	// defaults); the workflow decides with them and the pack's governance whether the
	// call waits for a person. Routes recorded before approvals have none.
	Approval *ToolApproval `json:"approval,omitempty"`
	// Outage, when set, is how long a call that failed its attempts with a retryable
	// error waits out the outage of what it calls (its binding's retry_for), reported
	// as a stalled run. Only calls that may be retried (MaxAttempts > 1) get one.
	Outage *OutagePolicy `json:"outage,omitempty"`
}

// ErrTypeOutcomeUnknown is the retryable failure of a tool call that may have been
// applied: the request was sent and no answer came (a timeout, a connection lost after
// the request went out). The model of a write or external tool then reads that the
// outcome is unknown, with the call's idempotency key, rather than that it failed.
const ErrTypeOutcomeUnknown = "ToolOutcomeUnknown"

// ActivityTarget is an activity of the deployment's own workers that serves a tool: the
// workflow schedules Type on TaskQueue with the call's arguments object as the single
// input, and its result is the tool result.
type ActivityTarget struct {
	Type                   string        `json:"type"`
	TaskQueue              string        `json:"taskQueue"`
	StartToCloseTimeout    time.Duration `json:"startToCloseTimeout,omitempty"`
	ScheduleToCloseTimeout time.Duration `json:"scheduleToCloseTimeout,omitempty"`
	HeartbeatTimeout       time.Duration `json:"heartbeatTimeout,omitempty"`
}

// ToolAttempts is the retry rule of tool calls: a read tool is retried (maxAttempts, or
// DefaultToolAttempts when 0); a write or external tool, and one whose effect is not
// declared, is attempted once unless its binding says the target honours the
// Idempotency-Key (idempotent), because a second attempt could act twice.
func ToolAttempts(effect string, idempotent bool, maxAttempts int) int32 {
	if effect != "read" && !idempotent {
		return 1
	}
	if maxAttempts <= 0 {
		return DefaultToolAttempts
	}
	return int32(maxAttempts)
}

// RouteTools is a local activity: it routes each call of a tool batch, from the
// worker's bindings (Config.Bindings) and registered functions (Config.Tools), else, on
// a worker whose every provider is the scripted mock, to the pack's mock tool_results,
// else to none (an error result saying the tool has no binding). It reads only this worker's
// configuration, so its recorded result is what keeps the workflow deterministic.
func (a *Activities) RouteTools(_ context.Context, in RouteToolsInput) (*RouteToolsResult, error) {
	out := &RouteToolsResult{Routes: make([]ToolRoute, len(in.Calls))}
	for i, c := range in.Calls {
		out.Routes[i] = a.route(in.PackID, c)
		out.Routes[i].Approval = a.approvalOf(c.Tool)
		if o := out.Routes[i].Outage; o != nil {
			if out.Routes[i].MaxAttempts <= 1 || o.RetryFor <= 0 {
				out.Routes[i].Outage = nil // a call attempted once never waits for a second attempt
			} else {
				pol := o.Merge(OutagePolicy{InitialInterval: time.Second, MaxInterval: DefaultOutageMaxInterval, RemindEvery: a.stallReminder})
				out.Routes[i].Outage = &pol
			}
		}
	}
	return out, nil
}

func (a *Activities) route(packID string, c ToolRouteCall) ToolRoute {
	if a.tools[c.Tool] != nil {
		return ToolRoute{Kind: RouteGo, Target: "Go function " + c.Tool, MaxAttempts: ToolAttempts(c.Effect, false, 0)}
	}
	if a.bindings != nil {
		if r, ok := a.bindings.Route(c); ok {
			return r
		}
	}
	if script := a.mockScript(packID); script != nil {
		if _, ok := script.ToolResults[c.Tool]; ok {
			return ToolRoute{Kind: RouteMock, Target: "mock tool_results", MaxAttempts: DefaultToolAttempts}
		}
	}
	return ToolRoute{Kind: RouteNone, MaxAttempts: DefaultToolAttempts}
}

// RouteToolsOptions are the local activity options of RouteTools: it only reads memory.
func RouteToolsOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         retryPolicy(100*time.Millisecond, time.Second, 3),
	}
}

// ToolIdempotencyKey is the idempotency key of one tool call: the same for every attempt
// of the call, different for every other call. It is OpenWOP's logical invocation id
// (openwop-host.md §8, layer 2): base64url(sha256("openwop:activity:v2" \0 tenant \0
// runId \0 nodeId \0 ordinal \0 providerKey)), with ordinal "<round>:<callId>" and
// providerKey "tool:<name>". HTTP bindings send it as the Idempotency-Key header;
// activity bindings get it as their ActivityID.
func ToolIdempotencyKey(tenant string, in convo.ToolCallInput) string {
	h := sha256.New()
	for i, part := range []string{"openwop:activity:v2", tenant, in.RunID, in.NodeID, fmt.Sprintf("%d:%s", in.Round, in.CallID), "tool:" + in.Tool} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(part))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// RetryAfter reads a response's Retry-After-Ms or Retry-After header (seconds or an
// HTTP date) as a delay, capped at 10 minutes; 0 when there is none.
func RetryAfter(h http.Header) time.Duration { return retryAfter(h, time.Now()) }

// Redactor returns a function that replaces every occurrence of the given secrets, and
// of long fragments of them, with "[REDACTED]".
func Redactor(secrets ...string) func(string) string { return redactor(secrets...) }

// Truncate shortens s to at most n bytes on a rune boundary, marking the cut with "…".
func Truncate(s string, n int) string { return truncate(s, n) }
