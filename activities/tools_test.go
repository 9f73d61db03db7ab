package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// fakeBindings binds "lookup" (HTTP-like, executed here) and "balance" (an activity).
type fakeBindings struct {
	executed []convo.ToolCallInput
}

func (f *fakeBindings) Route(c ToolRouteCall) (ToolRoute, bool) {
	switch c.Tool {
	case "lookup":
		return ToolRoute{Kind: RouteHTTP, Target: "POST http://x/lookup", MaxAttempts: ToolAttempts(c.Effect, false, 0), StartToCloseTimeout: 3 * time.Minute}, true
	case "balance":
		return ToolRoute{Kind: RouteActivity, Activity: &ActivityTarget{Type: "GetBalance", TaskQueue: "bank"}, MaxAttempts: ToolAttempts(c.Effect, false, 0)}, true
	}
	return ToolRoute{}, false
}

func (f *fakeBindings) Execute(_ context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	switch in.Tool {
	case "lookup":
		f.executed = append(f.executed, in)
		return &convo.ToolCallResult{Content: json.RawMessage(`{"from":"binding"}`)}, true, nil
	case "flaky":
		return nil, true, errors.New("the endpoint is down")
	}
	return nil, false, nil
}

func TestRouteTools(t *testing.T) {
	scripts := map[string]*packs.MockScript{"bank": {ToolResults: map[string]json.RawMessage{
		"verify": json.RawMessage(`{"ok":true}`), "lookup": json.RawMessage(`{"from":"mock"}`)}}}
	goTools := map[string]ToolFunc{"note": func(context.Context, convo.ToolCallInput) (*convo.ToolCallResult, error) {
		return &convo.ToolCallResult{}, nil
	}}
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, MockScripts: scripts, Tools: goTools, Bindings: &fakeBindings{}})
	val, err := env.ExecuteActivity(a.RouteTools, RouteToolsInput{RunID: "r", PackID: "bank", Calls: []ToolRouteCall{
		{CallID: "1", Tool: "lookup", Effect: "read"},
		{CallID: "2", Tool: "lookup", Effect: "write"},
		{CallID: "3", Tool: "balance", Effect: "read"},
		{CallID: "4", Tool: "verify", Effect: "write"},
		{CallID: "5", Tool: "missing"},
		{CallID: "6", Tool: "note", Effect: "external"},
	}})
	require.NoError(t, err)
	var res RouteToolsResult
	require.NoError(t, val.Get(&res))
	approval := &ToolApproval{Timeout: DefaultApprovalTimeout} // the host's default deadline
	require.Equal(t, []ToolRoute{
		{Kind: RouteHTTP, Target: "POST http://x/lookup", MaxAttempts: DefaultToolAttempts, StartToCloseTimeout: 3 * time.Minute, Approval: approval},
		{Kind: RouteHTTP, Target: "POST http://x/lookup", MaxAttempts: 1, StartToCloseTimeout: 3 * time.Minute, Approval: approval}, // a write is not retried
		{Kind: RouteActivity, Activity: &ActivityTarget{Type: "GetBalance", TaskQueue: "bank"}, MaxAttempts: DefaultToolAttempts, Approval: approval},
		{Kind: RouteMock, Target: "mock tool_results", MaxAttempts: DefaultToolAttempts, Approval: approval}, // the mock acts on nothing
		{Kind: RouteNone, MaxAttempts: DefaultToolAttempts, Approval: approval},
		{Kind: RouteGo, Target: "Go function note", MaxAttempts: 1, Approval: approval},
	}, res.Routes)
}

// approvalBindings binds nothing and carries approval settings for "refund".
type approvalBindings struct{ fakeBindings }

func (approvalBindings) ApprovalOf(tool string) (ToolApproval, bool) {
	if tool == "refund" {
		return ToolApproval{Mode: ApprovalRequired, Approvers: []string{"finance"}, EscalateAfter: time.Hour, EscalateTo: []string{"cfo"}}, true
	}
	return ToolApproval{}, false
}

// TestRouteToolsAnswersApprovalSettings: a route carries its tool's approval settings
// over the host's defaults, so the workflow decides from the recorded answer.
func TestRouteToolsAnswersApprovalSettings(t *testing.T) {
	defaults := ToolApproval{Timeout: 48 * time.Hour, RemindEvery: 12 * time.Hour, EscalateAfter: 24 * time.Hour, EscalateTo: []string{"ops"}}
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, Bindings: &approvalBindings{}, ApprovalDefaults: defaults})
	val, err := env.ExecuteActivity(a.RouteTools, RouteToolsInput{RunID: "r", PackID: "p", Calls: []ToolRouteCall{{CallID: "1", Tool: "refund"}, {CallID: "2", Tool: "lookup"}}})
	require.NoError(t, err)
	var res RouteToolsResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, &ToolApproval{Mode: ApprovalRequired, Timeout: 48 * time.Hour, RemindEvery: 12 * time.Hour, Approvers: []string{"finance"},
		EscalateAfter: time.Hour, EscalateTo: []string{"cfo"}}, res.Routes[0].Approval, "the binding's settings win, the rest are the host's")
	require.Equal(t, &defaults, res.Routes[1].Approval)

	_, err = New(Config{Transcripts: &fakeTranscripts{}, ApprovalDefaults: ToolApproval{EscalateAfter: time.Hour}})
	require.ErrorContains(t, err, "escalate_after and escalate_to go together")
}

func TestToolCallRunsTheBinding(t *testing.T) {
	scripts := map[string]*packs.MockScript{"bank": {ToolResults: map[string]json.RawMessage{"lookup": json.RawMessage(`{"from":"mock"}`)}}}
	b := &fakeBindings{}
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, MockScripts: scripts, Bindings: b})
	in := convo.ToolCallInput{RunID: "r", NodeID: "agent", PackID: "bank", Tool: "lookup", CallID: "call_0_0_lookup", Args: json.RawMessage(`{}`)}
	val, err := env.ExecuteActivity(a.ToolCall, in)
	require.NoError(t, err)
	var res convo.ToolCallResult
	require.NoError(t, val.Get(&res))
	assert.JSONEq(t, `{"from":"binding"}`, string(res.Content), "a binding wins over the mock's tool_results")
	require.Len(t, b.executed, 1)
	assert.Equal(t, ToolIdempotencyKey("", in), b.executed[0].IdempotencyKey, "a call scheduled without a key gets one")

	_, err = env.ExecuteActivity(a.ToolCall, convo.ToolCallInput{PackID: "bank", Tool: "flaky", CallID: "c"})
	require.ErrorContains(t, err, "the endpoint is down", "a binding's error fails the attempt")
}

func TestToolAttempts(t *testing.T) {
	assert.Equal(t, int32(DefaultToolAttempts), ToolAttempts("read", false, 0))
	assert.Equal(t, int32(2), ToolAttempts("read", false, 2))
	assert.Equal(t, int32(1), ToolAttempts("write", false, 9))
	assert.Equal(t, int32(1), ToolAttempts("external", false, 0))
	assert.Equal(t, int32(1), ToolAttempts("", false, 0), "an undeclared effect is not safe")
	assert.Equal(t, int32(DefaultToolAttempts), ToolAttempts("external", true, 0))
	assert.Equal(t, int32(3), ToolAttempts("write", true, 3))
}

func TestToolIdempotencyKey(t *testing.T) {
	in := convo.ToolCallInput{RunID: "r_1", NodeID: "agent", Round: 2, CallID: "call_2_0_lookup", Tool: "lookup", State: "a", Args: json.RawMessage(`{"x":1}`)}
	k := ToolIdempotencyKey("acme", in)
	assert.Len(t, k, 43)
	same := in
	same.State, same.Args = "b", json.RawMessage(`{"x":2}`) // attempts of one call share the key
	assert.Equal(t, k, ToolIdempotencyKey("acme", same))
	for name, other := range map[string]convo.ToolCallInput{
		"round": {RunID: "r_1", NodeID: "agent", Round: 3, CallID: "call_2_0_lookup", Tool: "lookup"},
		"call":  {RunID: "r_1", NodeID: "agent", Round: 2, CallID: "call_2_1_lookup", Tool: "lookup"},
		"run":   {RunID: "r_2", NodeID: "agent", Round: 2, CallID: "call_2_0_lookup", Tool: "lookup"},
	} {
		assert.NotEqual(t, k, ToolIdempotencyKey("acme", other), name)
	}
	assert.NotEqual(t, k, ToolIdempotencyKey("other-tenant", in))
}

func TestMockExpectToolResult(t *testing.T) {
	script := &packs.MockScript{Rounds: []packs.MockRound{{ExpectToolResult: `"status":"shipped"`, Text: "It shipped."}}}
	p := &MockProvider{Scripts: map[string]*packs.MockScript{"bank": script}, Strict: true}

	_, err := p.Complete(context.Background(), mockReq("s", 0, convo.Message{Role: convo.RoleUser, Text: "where?"}))
	require.Error(t, err)
	typ, _ := appErrType(t, err)
	assert.Equal(t, ErrTypeMockMismatch, typ)
	assert.Contains(t, err.Error(), "no tool result")

	// Only the latest tool result counts.
	_, err = p.Complete(context.Background(), mockReq("s", 0,
		convo.Message{Role: convo.RoleTool, Text: `{"status":"shipped"}`},
		convo.Message{Role: convo.RoleTool, Text: `{"error":"connection refused"}`}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `expected the latest tool result to contain "\"status\":\"shipped\"" but it is "{\"error\":\"connection refused\"}"`)

	res, err := p.Complete(context.Background(), mockReq("s", 0, convo.Message{Role: convo.RoleTool, Text: `{"order":"ORD-1","status":"shipped"}`}))
	require.NoError(t, err)
	assert.Equal(t, "It shipped.", res.Text)
}
