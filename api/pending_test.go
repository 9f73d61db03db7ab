package api

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/workflows"
)

func TestPendingQueryLeavesEndUserChatsToVisibility(t *testing.T) {
	q, err := pendingQuery("acme", "", AnsweredByOperator, []string{"helpdesk", "o'brien"})
	require.NoError(t, err)
	assert.Contains(t, q, "WopTenant = 'acme'")
	assert.Contains(t, q, "(WopWaitingKind IS NULL OR WopWaitingKind != 'conversation' OR WopPackId IN ('helpdesk', 'o\\'brien'))")
	q, err = pendingQuery("acme", "", AnsweredByOperator, nil)
	require.NoError(t, err)
	assert.Contains(t, q, "(WopWaitingKind IS NULL OR WopWaitingKind != 'conversation')")
	q, err = pendingQuery("acme", "", AnsweredByUser, nil)
	require.NoError(t, err)
	assert.Contains(t, q, "(WopWaitingKind = 'conversation' OR WopWaitingOn STARTS_WITH 'conversation.')")
	q, err = pendingQuery("acme", "approval", answeredByAny, nil)
	require.NoError(t, err)
	assert.NotContains(t, q, "WopWaitingKind != ")
	assert.Contains(t, q, "WopWaitingKind = 'approval'")
}

// TestInterruptsHoldOperatorWork: the inbox's listing holds approvals, decisions and
// the conversations staff answer; a chat waiting for its end user is listed only on
// request, and a refund waiting for its reviewer is listed once, as the decision.
func TestInterruptsHoldOperatorWork(t *testing.T) {
	env := newTestEnv(t)
	handoff, _, err := packs.Parse("handoff.yaml", []byte(`id: helpdesk
name: Helpdesk
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  chat: { id: chat, name: Chat, version: 1.0.0, system_template: Help. }
workflow:
  version: 2
  entry: chat
  states:
    chat: { prompt_task: chat, on_event: { Handoff: human } }
    human: { prompt_task: chat, terminal: true, extensions: { wop: { answered_by: operator } } }
`))
	require.NoError(t, err)
	env.cat.packs = map[string]*packs.Pack{"helpdesk": handoff}

	conv := func(node string) workflows.PendingInterrupt {
		return workflows.PendingInterrupt{NodeID: node, InterruptID: "int_c_" + node, Kind: "conversation.exchange", Key: "k:" + node, RequestedAt: "2026-01-01T00:00:00Z"}
	}
	turns := json.RawMessage(`[{"messageId":"m1","role":"agent","from":"host:refund","content":{"text":"I've filed it."},"ts":1,"turnIndex":1}]`)
	runs := []workflows.Snapshot{
		{RunID: "r_chat", WorkflowID: "support", Status: "waiting-approval", Interrupts: []workflows.PendingInterrupt{conv("agent")},
			Pack: &workflows.PackStatus{PackID: "support", NodeID: "agent", State: "verifying"}},
		{RunID: "r_refund", WorkflowID: "refund", Status: "waiting-external", Channels: map[string]json.RawMessage{"conversation": turns},
			Interrupts: []workflows.PendingInterrupt{conv("agent"), {NodeID: "agent", InterruptID: "int_ext", Kind: "external-event", Key: "k:ext", RequestedAt: "2026-01-01T00:00:01Z"}},
			Pack:       &workflows.PackStatus{PackID: "refund", NodeID: "agent", State: "awaiting_approval"}},
		{RunID: "r_early", WorkflowID: "helpdesk", Status: "waiting-approval", Interrupts: []workflows.PendingInterrupt{conv("agent")},
			Pack: &workflows.PackStatus{PackID: "helpdesk", NodeID: "agent", State: "chat"}},
		{RunID: "r_human", WorkflowID: "helpdesk", Status: "waiting-approval", Interrupts: []workflows.PendingInterrupt{conv("agent")},
			Pack: &workflows.PackStatus{PackID: "helpdesk", NodeID: "agent", State: "human"}},
		{RunID: "r_gate", WorkflowID: "conformance-approval", Status: "waiting-approval",
			Interrupts: []workflows.PendingInterrupt{{NodeID: "gate", InterruptID: "int_gate", Kind: "approval", Key: "k:gate", RequestedAt: "2026-01-01T00:00:02Z"}}},
	}
	var execs []*workflowpb.WorkflowExecutionInfo
	for _, snap := range runs {
		snap.Interrupt = &snap.Interrupts[0]
		env.ft.add(&fakeRun{snap: snap})
		execs = append(execs, &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: snap.RunID, RunId: "t-" + snap.RunID},
			Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		})
	}
	var queries []string
	env.mc.On("ListWorkflow", mock.Anything, mock.Anything).Return(
		func(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			queries = append(queries, req.GetQuery())
			return &workflowservice.ListWorkflowExecutionsResponse{Executions: execs}, nil
		})
	list := func(query string) map[string][]string {
		t.Helper()
		rec := env.do("GET", "/v1/interrupts?"+query, fullKey, "")
		require.Equal(t, 200, rec.Code, rec.Body.String())
		got := map[string][]string{}
		for _, it := range decode[PendingList](t, rec.Body.Bytes()).Interrupts {
			got[it.RunID] = append(got[it.RunID], it.WaitingKind+"/"+it.AnsweredBy)
			if it.RunID == "r_refund" {
				assert.Equal(t, "awaiting_approval", it.PackState)
				assert.NotEmpty(t, it.RecentTurns, "the decision carries the conversation's last turns")
			}
		}
		return got
	}

	assert.Equal(t, map[string][]string{
		"r_refund": {"external-event/operator"},
		"r_human":  {"conversation/operator"},
		"r_gate":   {"approval/operator"},
	}, list(""), "operator work only, each waiting thing once")
	assert.Contains(t, queries[len(queries)-1], "WopPackId IN ('helpdesk')", "only packs with an operator state may list their chats")
	assert.Equal(t, map[string][]string{
		"r_chat":  {"conversation/user"},
		"r_early": {"conversation/user"},
	}, list("answeredBy=user"), "on request, the chats waiting for their end users")
	assert.Equal(t, map[string][]string{
		"r_chat":   {"conversation/user"},
		"r_refund": {"external-event/operator"},
		"r_early":  {"conversation/user"},
		"r_human":  {"conversation/operator"},
		"r_gate":   {"approval/operator"},
	}, list("answeredBy=any"))
	assert.Equal(t, map[string][]string{"r_gate": {"approval/operator"}}, list("waiting=approval"))
	e := env.expectError(env.do("GET", "/v1/interrupts?answeredBy=customer", fullKey, ""), 400, CodeValidation)
	assert.Equal(t, "answeredBy", e.Details["field"])
}
