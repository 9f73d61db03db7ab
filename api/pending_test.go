package api

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	q, err := pendingQuery("acme", "", AnsweredByOperator, []string{"helpdesk", "o'brien"}, true)
	require.NoError(t, err)
	assert.Contains(t, q, "WopTenant = 'acme'")
	assert.Contains(t, q, "(WopTags IN ('waitingKind:approval', 'waitingKind:clarification', 'waitingKind:external-event', 'waitingKind:custom') OR (WopTags IS NULL AND (WopWaitingKind IS NULL OR WopWaitingKind != 'conversation')) OR WopPackId IN ('helpdesk', 'o\\'brien'))")
	q, err = pendingQuery("acme", "", AnsweredByOperator, nil, true)
	require.NoError(t, err)
	assert.Contains(t, q, "(WopTags IS NULL AND (WopWaitingKind IS NULL OR WopWaitingKind != 'conversation'))")
	q, err = pendingQuery("acme", "", AnsweredByUser, nil, true)
	require.NoError(t, err)
	assert.Contains(t, q, "(WopTags = 'waitingKind:conversation' OR WopWaitingKind = 'conversation' OR WopWaitingOn STARTS_WITH 'conversation.')")
	q, err = pendingQuery("acme", "approval", answeredByAny, nil, true)
	require.NoError(t, err)
	assert.NotContains(t, q, "WopWaitingKind != ")
	assert.Contains(t, q, "WopTags = 'waitingKind:approval' OR WopWaitingKind = 'approval'")

	// On a namespace without the legacy attributes the queries name none of them.
	for _, answeredBy := range []string{AnsweredByOperator, AnsweredByUser, answeredByAny} {
		q, err = pendingQuery("acme", "", answeredBy, []string{"helpdesk"}, false)
		require.NoError(t, err)
		for _, name := range workflows.LegacySearchAttributes {
			assert.NotContains(t, q, name, answeredBy)
		}
	}
	q, err = pendingQuery("acme", "", AnsweredByOperator, nil, false)
	require.NoError(t, err)
	assert.Contains(t, q, "(WopTags IN ('waitingKind:approval', 'waitingKind:clarification', 'waitingKind:external-event', 'waitingKind:custom'))")
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

// TestWaitingGaugesCountWhatWaits: the gauges count each waiting thing once by kind
// and who answers it, with its age, from visibility and the snapshots; a run whose
// visibility record did not change is not queried again, and a run that stopped
// waiting leaves the figures.
func TestWaitingGaugesCountWhatWaits(t *testing.T) {
	reg := prometheus.NewRegistry()
	env := newTestEnv(t, func(c *Config) { c.Metrics = reg })
	at := func(d time.Duration) string { return env.now.Add(-d).Format(time.RFC3339Nano) }
	conv := workflows.PendingInterrupt{NodeID: "agent", InterruptID: "int_c", Kind: "conversation.exchange", RequestedAt: at(10 * time.Minute)}
	runs := []*fakeRun{
		{snap: workflows.Snapshot{RunID: "r_chat", WorkflowID: "support", Status: "waiting-approval", Interrupts: []workflows.PendingInterrupt{conv},
			Pack: &workflows.PackStatus{PackID: "support", NodeID: "agent", State: "verifying"}}},
		{snap: workflows.Snapshot{RunID: "r_refund", WorkflowID: "refund", Status: "waiting-external", Pack: &workflows.PackStatus{PackID: "refund", NodeID: "agent", State: "awaiting_approval"},
			Interrupts: []workflows.PendingInterrupt{conv, {NodeID: "agent", InterruptID: "int_e", Kind: "external-event", RequestedAt: at(2 * time.Hour)}}}},
		{snap: workflows.Snapshot{RunID: "r_gate1", Status: "waiting-approval", Owner: workflows.Owner{Tenant: "tenant-b"},
			Interrupts: []workflows.PendingInterrupt{{NodeID: "gate", InterruptID: "int_g1", Kind: "approval", RequestedAt: at(30 * time.Second)}}}},
		{snap: workflows.Snapshot{RunID: "r_gate2", Status: "waiting-approval",
			Interrupts: []workflows.PendingInterrupt{{NodeID: "gate", InterruptID: "int_g2", Kind: "approval", RequestedAt: at(3 * 24 * time.Hour)}}}},
	}
	execs := map[string]*workflowpb.WorkflowExecutionInfo{}
	var order []string
	for _, r := range runs {
		env.ft.add(r)
		order = append(order, r.snap.RunID)
		execs[r.snap.RunID] = &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: r.snap.RunID, RunId: "t1"}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, HistoryLength: 10,
		}
	}
	var listed []string
	env.mc.On("ListWorkflow", mock.Anything, mock.Anything).Return(
		func(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			listed = append(listed, req.GetQuery())
			var out []*workflowpb.WorkflowExecutionInfo
			for _, id := range order {
				if e := execs[id]; e != nil {
					out = append(out, e)
				}
			}
			return &workflowservice.ListWorkflowExecutionsResponse{Executions: out}, nil
		})
	gauges := func() map[string]float64 {
		t.Helper()
		fams, err := reg.Gather()
		require.NoError(t, err)
		out := map[string]float64{}
		for _, f := range fams {
			require.NotEmpty(t, f.GetHelp(), f.GetName())
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				key := f.GetName()
				if k, ok := labels["waiting_kind"]; ok {
					key += "|" + k + "|" + labels["answered_by"]
				}
				switch {
				case m.Gauge != nil:
					out[key] = m.Gauge.GetValue()
				case m.Histogram != nil:
					out[key] = float64(m.Histogram.GetSampleCount())
					for _, b := range m.Histogram.GetBucket() {
						out[key+"|le="+strconv.FormatFloat(b.GetUpperBound(), 'f', -1, 64)] = float64(b.GetCumulativeCount())
					}
				}
			}
		}
		return out
	}

	g := gauges()
	assert.Equal(t, 2.0, g["wop_interrupts_waiting|approval|operator"], "both tenants' approvals")
	assert.Equal(t, 1.0, g["wop_interrupts_waiting|external-event|operator"], "the refund's decision")
	assert.Equal(t, 1.0, g["wop_interrupts_waiting|conversation|user"], "the customer's chat; not the refund's conversation")
	assert.Equal(t, 0.0, g["wop_interrupts_waiting|conversation|operator"])
	assert.Equal(t, 0.0, g["wop_interrupts_waiting|clarification|operator"], "a kind nothing waits on is 0, not absent")
	assert.Equal(t, (3 * 24 * time.Hour).Seconds(), g["wop_interrupts_waiting_oldest_seconds|approval|operator"])
	assert.Equal(t, (2 * time.Hour).Seconds(), g["wop_interrupts_waiting_oldest_seconds|external-event|operator"])
	assert.Equal(t, 1.0, g["wop_interrupts_waiting_age_seconds|approval|operator|le=60"])
	assert.Equal(t, 1.0, g["wop_interrupts_waiting_age_seconds|approval|operator|le=86400"])
	assert.Equal(t, 2.0, g["wop_interrupts_waiting_age_seconds|approval|operator|le=604800"])
	assert.Equal(t, 0.0, g["wop_interrupts_waiting_truncated"])
	require.Len(t, listed, 1)
	assert.NotContains(t, listed[0], "WopTenant", "every tenant's runs")

	// Within waitingScanEvery a scrape is answered from the last scan.
	gauges()
	assert.Len(t, listed, 1)
	// Later, runs whose record did not change are not queried again; one that stopped
	// waiting is gone from the listing and from the figures.
	env.now = env.now.Add(time.Minute)
	delete(execs, "r_gate1")
	execs["r_refund"].HistoryLength = 14
	env.ft.runs["r_refund"].snap.Interrupts = env.ft.runs["r_refund"].snap.Interrupts[:1]
	env.ft.runs["r_refund"].snap.Status = "waiting-approval"
	g = gauges()
	assert.Len(t, listed, 2)
	assert.Equal(t, 1.0, g["wop_interrupts_waiting|approval|operator"])
	assert.Equal(t, 0.0, g["wop_interrupts_waiting|external-event|operator"])
	assert.Equal(t, 2.0, g["wop_interrupts_waiting|conversation|user"], "the decided refund waits on its customer now")
	assert.Equal(t, (3*24*time.Hour + time.Minute).Seconds(), g["wop_interrupts_waiting_oldest_seconds|approval|operator"], "ages move with the clock")
	assert.Equal(t, 1, env.ft.runs["r_chat"].snapQueries, "an unchanged run is not queried again")
	assert.Equal(t, 2, env.ft.runs["r_refund"].snapQueries, "a changed one is")

	// A stopped server takes its gauges off the registry.
	require.NoError(t, env.srv.Shutdown(context.Background()))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		assert.NotContains(t, f.GetName(), "wop_interrupts_waiting")
	}
}
