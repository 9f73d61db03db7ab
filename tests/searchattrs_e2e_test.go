package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestWorkflowE2ESearchAttributeTags: a run of the tags keeps what changes within it in
// WopTags, across continue-as-new, and sets none of the legacy Keyword attributes; a run
// created before them (RunInput.Attributes 0) keeps setting those for its whole life.
func TestWorkflowE2ESearchAttributeTags(t *testing.T) {
	s := wfStack(t)
	for _, tc := range []struct {
		name       string
		attributes int
	}{{"tags", workflows.AttributesTags}, {"legacy", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			id := "e2e-attrs-" + tc.name
			run := wfStart(t, s, id, "conformance-conversation-council", "", func(in *workflows.RunInput) {
				in.ContinueAsNewAfterEvents = 6
				in.Attributes = tc.attributes
			})
			wfWaitStatus(t, s, id, protocol.StatusWaitingApproval)
			for i, text := range []string{"one", "two", "three"} {
				c := wfResolve(t, s, id, workflows.ResolveRequest{RequestID: fmt.Sprintf("m%d", i), NodeID: "convo", ResumeValue: json.RawMessage(`{"text":"` + text + `"}`), ReceivedAtMs: int64(1000 + i)})
				require.True(t, c.OK, c.Message)
				wfWaitSnapshot(t, s, id, fmt.Sprintf("with %d turns", 1+2*(i+1)), func(snap workflows.Snapshot) bool {
					var turns []protocol.Turn
					return json.Unmarshal(snap.Channels["conversation"], &turns) == nil && len(turns) == 1+2*(i+1)
				})
			}
			desc, err := s.Client().DescribeWorkflowExecution(t.Context(), id, "")
			require.NoError(t, err)
			require.NotEqual(t, run.GetFirstExecutionRunID(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the run continued as new")
			sa := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
			if tc.attributes == workflows.AttributesTags {
				require.Equal(t, "conversation.exchange:convo", runTag(t, s.Client(), id, workflows.TagWaitingOn))
				require.Equal(t, workflows.WaitingConversation, runTag(t, s.Client(), id, workflows.TagWaitingKind))
				for _, name := range workflows.LegacySearchAttributes {
					require.NotContains(t, sa, name, "a run of the tags sets no legacy attribute")
				}
			} else {
				require.NotContains(t, sa, workflows.SATags.GetName())
				require.Contains(t, string(sa[workflows.SAWaitingOn.GetName()].GetData()), "conversation.exchange:convo")
				require.Contains(t, string(sa[workflows.SAWaitingKind.GetName()].GetData()), workflows.WaitingConversation)
			}
			require.True(t, wfResolve(t, s, id, workflows.ResolveRequest{RequestID: "close", NodeID: "convo", ResumeValue: json.RawMessage(`{"operation":"close","outcome":{"ok":true}}`)}).OK)
			require.Equal(t, protocol.StatusCompleted, wfResult(t, run).Status)
			require.Empty(t, runTag(t, s.Client(), id, workflows.TagWaitingOn), "a closed run waits on nothing")
			if tc.attributes == workflows.AttributesTags {
				wfRecord(t, s, run, "search-attribute-tags")
			}
		})
	}
}

// TestUpgradeFromLegacySearchAttributesE2E is the upgrade path from the release before
// the tags: runs started as that release's API started them (RunInput without
// Attributes) wait under the legacy attributes; the worker is replaced; the API lists
// them beside a run of the tags by every filter, serves them in the inbox, and they go
// on to their end on the new code, still under the legacy attributes.
func TestUpgradeFromLegacySearchAttributesE2E(t *testing.T) {
	c := startPrivateStack(t, stackOptions{DataDir: t.TempDir()})
	approval := startAsPreviousRelease(t, c, "legacy-approval", "conformance-approval", nil)
	chat := startAsPreviousRelease(t, c, "legacy-chat", "support", map[string]any{"message": "Hi, I have a question about my account."})
	cfWaitStatus(t, c, approval, protocol.StatusWaitingApproval)
	chatSnap := waitRounds(t, c, chat, 1, protocol.StatusWaitingApproval)
	require.Equal(t, workflows.WaitingApproval, keyword(t, c, approval, workflows.SAWaitingKind.GetName()))
	require.Equal(t, "conversation.exchange:"+packNode, keyword(t, c, chat, workflows.SAWaitingOn.GetName()))
	require.Equal(t, chatSnap.Pack.State, keyword(t, c, chat, workflows.SAPackState.GetName()))
	require.NotContains(t, searchAttributes(t, c.Stack.Client(), chat), workflows.SATags.GetName())

	// The upgrade: the worker goes, a worker of the new code takes over the open runs.
	c.Stack.StopWorker()
	require.NoError(t, c.Stack.StartWorker())
	fresh := cfCreate(t, c, "conformance-approval", nil)
	cfWaitStatus(t, c, fresh, protocol.StatusWaitingApproval)
	require.Equal(t, workflows.WaitingApproval, runTag(t, c.Stack.Client(), fresh, workflows.TagWaitingKind))

	all := []string{approval, chat, fresh}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for query, want := range map[string][]string{
			"waiting=approval":        {approval, fresh},
			"waiting=conversation":    {chat},
			"waiting=any":             all,
			"status=waiting-approval": all,
			"packId=support":          {chat},
		} {
			ids, _, _ := listRuns(t, c, query+"&limit=100")
			assert.ElementsMatch(ct, want, ids, query)
		}
		_, runs, _ := listRuns(t, c, "limit=100")
		for _, r := range runs {
			if assert.NotNil(ct, r.WaitingOn, r.RunID) && r.RunID == chat {
				assert.Equal(ct, workflows.WaitingConversation, r.WaitingOn.Kind)
				assert.Equal(ct, chatSnap.Pack.State, r.PackState, "a legacy run's pack state")
			}
		}
		// The inbox holds the operators' work of both schemes, not the end user's chat.
		_, items := pendingItems(t, c, "")
		var inbox []string
		for _, it := range items {
			inbox = append(inbox, it.RunID)
		}
		assert.ElementsMatch(ct, []string{approval, fresh}, inbox)
	}, 20*time.Second, 100*time.Millisecond)

	// The legacy runs go on to their end on the new code.
	status, body := cfResolve(t, c, c.Key, approval, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Less(t, status, 300, "%v", body)
	sayTo(t, c, chat, "It's ACC-12345. What's my balance?")
	cfWaitTerminal(t, c, approval)
	s := waitCompleted(t, c, chat)
	require.Len(t, turnsIn(t, events(t, c, chat)), 4, "every turn once")
	require.Equal(t, s.Pack.State, keyword(t, c, chat, workflows.SAPackState.GetName()), "still under the legacy attributes")
	require.Empty(t, keyword(t, c, chat, workflows.SAWaitingOn.GetName()), "a closed run waits on nothing")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ids, _, _ := listRuns(t, c, "status=completed&limit=100")
		assert.ElementsMatch(ct, []string{approval, chat}, ids)
		ids, _, _ = listRuns(t, c, "waiting=any&limit=100")
		assert.ElementsMatch(ct, []string{fresh}, ids)
	}, 20*time.Second, 100*time.Millisecond)
}

// startAsPreviousRelease starts a run as the API of the release before the tags did:
// the same start options, and a RunInput without Attributes.
func startAsPreviousRelease(t *testing.T, c *apiClient, runID, defID string, inputs map[string]any) string {
	t.Helper()
	var raw json.RawMessage
	if inputs != nil {
		b, err := json.Marshal(inputs)
		require.NoError(t, err)
		raw = b
	}
	in, err := c.Stack.Catalog().NewRunInput(workflows.RunRequest{RunID: runID, WorkflowID: defID, Inputs: raw, Owner: workflows.Owner{Tenant: "default", Principal: "test"}})
	require.NoError(t, err)
	in.Attributes = 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Stack.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: runID, TaskQueue: c.Stack.Options().Worker.Queue(), WorkflowTaskTimeout: workflows.RunWorkflowTaskTimeout,
		StaticSummary: workflows.RunSummary(in), TypedSearchAttributes: workflows.StartSearchAttributes(*in, time.Now()), Memo: workflows.StartMemo(*in),
	}, workflows.RunWorkflowName, in)
	require.NoError(t, err)
	return runID
}

// TestFourKeywordSlotsE2E: on a namespace set up without the legacy attributes (four
// Keyword slots), runs start, wait and are listed by every filter and in the inbox, with
// queries that name no legacy attribute.
func TestFourKeywordSlotsE2E(t *testing.T) {
	c := startPrivateStack(t, stackOptions{Tweak: func(o *stack.Options) { o.API.NoLegacyAttributes = true }})
	resp, err := c.Stack.Client().OperatorService().ListSearchAttributes(t.Context(), &operatorservice.ListSearchAttributesRequest{Namespace: c.Stack.Namespace()})
	require.NoError(t, err)
	keywords := 0
	for name, typ := range resp.GetCustomAttributes() {
		if typ == enumspb.INDEXED_VALUE_TYPE_KEYWORD && strings.HasPrefix(name, "Wop") {
			keywords++
		}
	}
	require.Equal(t, 4, keywords, "%v", resp.GetCustomAttributes())

	approval := cfCreate(t, c, "conformance-approval", nil)
	chat := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	cfWaitStatus(t, c, approval, protocol.StatusWaitingApproval)
	snap := waitRounds(t, c, chat, 1, protocol.StatusWaitingApproval)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for query, want := range map[string][]string{
			"waiting=approval":     {approval},
			"waiting=conversation": {chat},
			"waiting=any":          {approval, chat},
		} {
			ids, _, _ := listRuns(t, c, query)
			assert.ElementsMatch(ct, want, ids, query)
		}
		_, runs, _ := listRuns(t, c, "packId=support")
		if assert.Len(ct, runs, 1) {
			assert.Equal(ct, snap.Pack.State, runs[0].PackState)
		}
		_, items := pendingItems(t, c, "")
		if assert.Len(ct, items, 1) {
			assert.Equal(ct, approval, items[0].RunID)
		}
	}, 20*time.Second, 100*time.Millisecond)
}

// TestTagsClearInheritedLegacyAttributesE2E: an execution of the tags that holds legacy
// attributes (continue-as-new copies them from an execution a worker of the earlier
// code ran; here the start sets one) clears them at its first update.
func TestTagsClearInheritedLegacyAttributesE2E(t *testing.T) {
	s := wfStack(t)
	const id = "e2e-attrs-inherited"
	in, err := s.Catalog().NewRunInput(workflows.RunRequest{RunID: id, WorkflowID: "conformance-approval", Owner: workflows.Owner{Tenant: "t1", Principal: "key_e2e"}})
	require.NoError(t, err)
	require.Equal(t, workflows.AttributesTags, in.Attributes, "runs are created with the tags")
	_, err = s.Client().ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SAWaitingOn.ValueSet("approval:stale"), workflows.SAStalledOn.ValueSet("model:mock")),
	}, workflows.RunWorkflowName, in)
	require.NoError(t, err)
	wfWaitStatus(t, s, id, protocol.StatusWaitingApproval)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		sa := searchAttributes(t, s.Client(), id)
		assert.NotContains(ct, sa, workflows.SAWaitingOn.GetName())
		assert.NotContains(ct, sa, workflows.SAStalledOn.GetName())
		assert.Equal(ct, "approval:gate", runTag(t, s.Client(), id, workflows.TagWaitingOn))
	}, 10*time.Second, 50*time.Millisecond)
}
