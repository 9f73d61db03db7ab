package tests

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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
