package tests

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// replayHistory fetches the Temporal history of workflow id (a run, a webhook
// dispatcher or a delivery) and replays it against the current workflow code: it must
// make the same decisions again (determinism). With WOP_RECORD_HISTORIES=1 it also
// writes the history to workflows/testdata/<name>.0.history.json, where
// workflows.TestReplayRecordedHistories replays it on every test run. An empty name
// replays without recording.
func replayHistory(t *testing.T, c *apiClient, id, name string) {
	t.Helper()
	hist := workflowHistory(t, c, id)
	r := worker.NewWorkflowReplayer()
	packagent.Register()
	r.RegisterWorkflowWithOptions(workflows.Run, workflow.RegisterOptions{Name: workflows.RunWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDispatcher, workflow.RegisterOptions{Name: webhooks.WebhookDispatcherWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDelivery, workflow.RegisterOptions{Name: webhooks.WebhookDeliveryWorkflowName})
	require.NoError(t, r.ReplayWorkflowHistory(nil, hist), "replay of %s (%d history events)", id, len(hist.Events))
	if name != "" {
		recordHistory(t, hist, filepath.Join("..", "workflows", "testdata", name+".0.history.json"))
	}
}

// workflowHistory fetches the whole Temporal history of workflow id's current execution.
func workflowHistory(t *testing.T, c *apiClient, id string) *historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	return hist
}

// recordHistory writes hist to path when WOP_RECORD_HISTORIES=1.
func recordHistory(t *testing.T, hist *historypb.History, path string) {
	t.Helper()
	if os.Getenv("WOP_RECORD_HISTORIES") != "1" {
		return
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}
