package api

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wop-dev/wop/workflows"
)

func queryOf(v url.Values) func(string) string { return v.Get }

func TestRunListQueryFilters(t *testing.T) {
	q, err := parseRunListQuery(queryOf(url.Values{
		"status": {"waiting-approval,completed"}, "workflowId": {"support"}, "packId": {"support"},
		"waiting": {"conversation"}, "createdAfter": {"2026-05-01T00:00:00Z"},
	}), "acme", true)
	require.NoError(t, err)
	for _, want := range []string{
		"WorkflowType = 'OpenWOPRun'",
		"WopTenant = 'acme'",
		"ExecutionStatus != 'ContinuedAsNew'",
		"((WopStatus = 'waiting-approval' AND ExecutionStatus = 'Running') OR WopStatus = 'completed')",
		"WopWorkflowId = 'support'",
		"WopPackId = 'support'",
		"(WopTags = 'waitingKind:conversation' OR WopWaitingKind = 'conversation' OR WopWaitingOn STARTS_WITH 'conversation.')",
		"(WopCreatedAt > '2026-05-01T00:00:00Z' OR (WopCreatedAt IS NULL AND StartTime > '2026-05-01T00:00:00Z'))",
	} {
		assert.Contains(t, q, want)
	}
}

// On a namespace without the legacy search attributes no filter names one.
func TestRunListQueryWithoutLegacyAttributes(t *testing.T) {
	for _, waiting := range append([]string{"any"}, workflows.WaitingKinds...) {
		q, err := parseRunListQuery(queryOf(url.Values{"waiting": {waiting}}), "acme", false)
		require.NoError(t, err)
		for _, name := range workflows.LegacySearchAttributes {
			assert.NotContains(t, q, name, waiting)
		}
		assert.Contains(t, q, "WopTags", waiting)
	}
}

func TestRunListQueryRejectsBadFilters(t *testing.T) {
	cases := map[string]url.Values{
		"status":        {"status": {"sleeping"}},
		"workflowId":    {"workflowId": {"x' OR WopTenant = 'other"}},
		"waiting":       {"waiting": {"coffee"}},
		"createdBefore": {"createdBefore": {"yesterday"}},
	}
	for field, v := range cases {
		_, err := parseRunListQuery(queryOf(v), "acme", true)
		var e *Error
		require.ErrorAs(t, err, &e, field)
		assert.Equal(t, 400, e.Status)
		assert.Equal(t, field, e.Details["field"])
	}
	_, err := parseLimit("0")
	require.Error(t, err)
	n, err := parseLimit("1000")
	require.NoError(t, err)
	assert.Equal(t, MaxListPageSize, n)
}

func TestQuoteEscapes(t *testing.T) {
	assert.Equal(t, `'a\'b\\c'`, quote(`a'b\c`))
}

func TestListCursorIsBoundToItsListing(t *testing.T) {
	env := newTestEnv(t)
	cur := env.srv.mintCursor("query A", []byte("temporal-token"))
	tok, err := env.srv.readCursor(cur, "query A")
	require.NoError(t, err)
	assert.Equal(t, []byte("temporal-token"), tok)
	for name, bad := range map[string]string{
		"other listing": cur,
		"forged":        strings.Split(cur, ".")[0] + ".AAAA",
		"garbage":       "not-a-cursor",
	} {
		listing := "query A"
		if name == "other listing" {
			listing = "query B"
		}
		_, err := env.srv.readCursor(bad, listing)
		require.Error(t, err, name)
	}
	assert.Empty(t, env.srv.mintCursor("q", nil), "no next page, no cursor")
}

func saPayload(t *testing.T, v any) *commonpb.Payload {
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

func TestListRunsHandler(t *testing.T) {
	env := newTestEnv(t)
	started := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var got *workflowservice.ListWorkflowExecutionsRequest
	env.mc.On("ListWorkflow", mock.Anything, mock.Anything).Return(
		func(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
			got = req
			return &workflowservice.ListWorkflowExecutionsResponse{
				NextPageToken: []byte("page-2"),
				Executions: []*workflowpb.WorkflowExecutionInfo{{
					Execution: &commonpb.WorkflowExecution{WorkflowId: "r_1", RunId: "t1"},
					Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, StartTime: timestamppb.New(started.Add(time.Hour)),
					SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
						"WopWorkflowId": saPayload(t, "support"), "WopTenant": saPayload(t, "default"),
						"WopStatus": saPayload(t, "waiting-approval"), "WopPackId": saPayload(t, "support"),
						"WopTags":      saPayload(t, []string{"packState:triage", "waitingOn:conversation.exchange:agent", "waitingKind:conversation"}),
						"WopCreatedAt": saPayload(t, started),
					}},
				}, {
					// A run created before WopTags: its legacy attributes are read.
					Execution: &commonpb.WorkflowExecution{WorkflowId: "r_0", RunId: "t0"},
					Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, StartTime: timestamppb.New(started),
					SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
						"WopWorkflowId": saPayload(t, "support"), "WopStatus": saPayload(t, "waiting-approval"),
						"WopWaitingOn": saPayload(t, "conversation.exchange:agent"), "WopWaitingKind": saPayload(t, "conversation"),
						"WopPackId": saPayload(t, "support"), "WopPackState": saPayload(t, "verify"),
					}},
				}, {
					Execution: &commonpb.WorkflowExecution{WorkflowId: "r_2", RunId: "t2"},
					Status:    enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, StartTime: timestamppb.New(started), CloseTime: timestamppb.New(started.Add(time.Minute)),
					SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
						"WopWorkflowId": saPayload(t, "conformance-approval"), "WopStatus": saPayload(t, "waiting-approval"),
						"WopWaitingOn": saPayload(t, "approval:gate"),
					}},
				}},
			}, nil
		})
	rec := env.do("GET", "/v1/runs?status=waiting-approval&limit=2", fullKey, "")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Contains(t, got.GetQuery(), "WopTenant = 'default'")
	assert.EqualValues(t, 2, got.GetPageSize())
	list := decode[RunList](t, rec.Body.Bytes())
	require.Len(t, list.Runs, 3)
	r1 := list.Runs[0]
	assert.Equal(t, "triage", r1.PackState)
	assert.Equal(t, "r_1", r1.RunID)
	assert.Equal(t, "support", r1.WorkflowID)
	assert.Equal(t, "agent", r1.CurrentNodeID)
	assert.Equal(t, &WaitingOn{Kind: "conversation", InterruptKind: "conversation.exchange", NodeID: "agent"}, r1.WaitingOn)
	assert.Equal(t, started.Format(time.RFC3339Nano), r1.StartedAt, "WopCreatedAt, not the continued execution's start")
	r0 := list.Runs[1]
	assert.Equal(t, "verify", r0.PackState, "a legacy run's WopPackState")
	assert.Equal(t, &WaitingOn{Kind: "conversation", InterruptKind: "conversation.exchange", NodeID: "agent"}, r0.WaitingOn, "a legacy run's WopWaitingOn")
	r2 := list.Runs[2]
	assert.Equal(t, "cancelled", r2.Status, "terminated in Temporal without the run's own ending")
	assert.Nil(t, r2.WaitingOn, "a closed run waits on nothing")
	assert.NotEmpty(t, r2.CompletedAt)
	require.NotEmpty(t, list.NextCursor)

	// The next page carries Temporal's token; the cursor does not fit other filters.
	rec = env.do("GET", "/v1/runs?status=waiting-approval&limit=2&cursor="+url.QueryEscape(list.NextCursor), fullKey, "")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Equal(t, []byte("page-2"), got.GetNextPageToken())
	env.expectError(env.do("GET", "/v1/runs?status=completed&cursor="+url.QueryEscape(list.NextCursor), fullKey, ""), 400, CodeValidation)
	// Another tenant's key cannot use it either.
	env.expectError(env.do("GET", "/v1/runs?status=waiting-approval&limit=2&cursor="+url.QueryEscape(list.NextCursor), otherKey, ""), 400, CodeValidation)
	env.expectError(env.do("GET", "/v1/runs", "", ""), 401, CodeUnauthenticated)
}

func TestListWorkflowsAndDiscoveryNameThePacks(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do("GET", "/v1/workflows", fullKey, "")
	require.Equal(t, 200, rec.Code)
	body := decode[struct {
		Workflows []WorkflowSummary `json:"workflows"`
	}](t, rec.Body.Bytes())
	require.NotEmpty(t, body.Workflows)
	assert.Equal(t, "fixture", body.Workflows[0].Kind)
	env.expectError(env.do("GET", "/v1/workflows", lowKey, ""), 403, CodeForbidden)
	disc := decode[map[string]any](t, env.do("GET", "/.well-known/openwop", "", "").Body.Bytes())
	rl := disc["runList"].(map[string]any)
	assert.EqualValues(t, MaxListPageSize, rl["maxPageSize"])
	assert.Contains(t, rl["filters"], "status")
	assert.Contains(t, disc, "promptPacks")
}

func TestInboxIsServedWithItsPolicy(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do("GET", "/inbox", "", "")
	require.Equal(t, 200, rec.Code)
	assert.Contains(t, rec.Header().Get("Content-Type"), "text/html")
	assert.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'")
	assert.Contains(t, rec.Body.String(), `<script src="/inbox/app.js"`)
	rec = env.do("GET", "/inbox/app.js", "", "")
	require.Equal(t, 200, rec.Code)
	assert.Contains(t, rec.Header().Get("Content-Type"), "javascript")
	assert.Contains(t, rec.Body.String(), "/v1/interrupts")
	env.expectError(env.do("GET", "/inbox/nothing.js", "", ""), 404, CodeNotFound)
}
