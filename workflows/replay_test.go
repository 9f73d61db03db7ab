package workflows_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// TestReplayRecordedHistories replays every history recorded from real runs on the
// embedded server (tests/workflow_e2e_test.go with WOP_RECORD_HISTORIES=1) against the
// current workflow code: a change that breaks determinism for runs already in flight
// fails here. testdata/earlier keeps histories recorded by earlier workflow code whose
// current recordings differ (failed and cancelled runs closing as Completed, model
// rounds without a transcript tail; runs that continued as new carrying their whole
// state: their later executions restore that earlier carried shape; pack-legacy-*: a
// cancel the agent loop went on past, an event taken as a chat turn, a fork folded the
// earlier way; *-activity-rounds: the scripted mock's rounds as activities rather than
// local activities), so both paths stay replayable.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	require.NoError(t, err)
	earlier, err := filepath.Glob(filepath.Join("testdata", "earlier", "*.history.json"))
	require.NoError(t, err)
	require.NotEmpty(t, earlier, "no histories in workflows/testdata/earlier")
	files = append(files, earlier...)
	require.NotEmpty(t, files, "no recorded histories in workflows/testdata; record them with WOP_RECORD_HISTORIES=1 go test ./tests -run TestWorkflowE2E")
	for _, f := range files {
		name, _ := filepath.Rel("testdata", f)
		t.Run(name, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			packagent.Register()
			r.RegisterWorkflowWithOptions(workflows.Run, workflow.RegisterOptions{Name: workflows.RunWorkflowName})
			r.RegisterWorkflowWithOptions(webhooks.WebhookDispatcher, workflow.RegisterOptions{Name: webhooks.WebhookDispatcherWorkflowName})
			r.RegisterWorkflowWithOptions(webhooks.WebhookDelivery, workflow.RegisterOptions{Name: webhooks.WebhookDeliveryWorkflowName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, f))
		})
	}
}
