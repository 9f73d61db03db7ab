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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.Run, workflow.RegisterOptions{Name: workflows.RunWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDispatcher, workflow.RegisterOptions{Name: webhooks.WebhookDispatcherWorkflowName})
	r.RegisterWorkflowWithOptions(webhooks.WebhookDelivery, workflow.RegisterOptions{Name: webhooks.WebhookDeliveryWorkflowName})
	require.NoError(t, r.ReplayWorkflowHistory(nil, hist), "replay of %s (%d history events)", id, len(hist.Events))
	if os.Getenv("WOP_RECORD_HISTORIES") == "1" && name != "" {
		b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join("..", "workflows", "testdata", name+".0.history.json"), b, 0o644))
	}
}
