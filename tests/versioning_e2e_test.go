package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/worker"
)

// TestWorkerVersioningAutoUpgradeE2E is a rolling upgrade with Worker Versioning on the
// embedded server: a conversation starts on build A of a Worker Deployment; build B's
// worker starts beside it and becomes the current version; the conversation, which
// auto-upgrades, takes its next turn on B; a worker of A that restarts does not take
// over again; the conversation goes on once A has stopped, and every user turn is
// answered once.
func TestWorkerVersioningAutoUpgradeE2E(t *testing.T) {
	const deployment = "wop-e2e"
	c := startPrivateStack(t, stackOptions{Tweak: func(o *stack.Options) {
		o.Worker.Versioning = worker.Versioning{Deployment: deployment, BuildID: "build-a", SetCurrent: true}
	}})
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "I don't remember my account number, can you look me up by name?")
	waitRounds(t, c, id, 2, protocol.StatusWaitingApproval)
	requireVersion(t, c, id, "build-a")

	began := time.Now()
	stopB, err := c.Stack.AddWorker(func(w *worker.Config) { w.Versioning.BuildID = "build-b" })
	require.NoError(t, err)
	t.Cleanup(stopB)
	t.Logf("build B polled, became current and reached the task queues in %s", time.Since(began).Round(time.Millisecond))
	d, err := c.Stack.Client().WorkerDeploymentClient().GetHandle(deployment).Describe(t.Context(), client.WorkerDeploymentDescribeOptions{})
	require.NoError(t, err)
	require.Equal(t, "build-b", d.Info.RoutingConfig.CurrentVersion.BuildID)

	sayTo(t, c, id, "Found it: ACC-12345.")
	waitRounds(t, c, id, 4, protocol.StatusWaitingApproval)
	requireVersion(t, c, id, "build-b")

	// A worker of build A restarts: it was current before, so it does not take over.
	c.Stack.StopWorker()
	require.NoError(t, c.Stack.StartWorker())
	d, err = c.Stack.Client().WorkerDeploymentClient().GetHandle(deployment).Describe(t.Context(), client.WorkerDeploymentDescribeOptions{})
	require.NoError(t, err)
	require.Equal(t, "build-b", d.Info.RoutingConfig.CurrentVersion.BuildID, "a restarted worker of build A leaves B current")

	c.Stack.StopWorker() // build A is gone
	sayTo(t, c, id, "What can you do?")
	waitRounds(t, c, id, 5, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "I see a card payment I don't recognise.")
	s := waitCompleted(t, c, id)
	require.Equal(t, "handoff", s.Pack.State)
	require.Equal(t, 9, s.Pack.ModelRounds, "no model round ran twice")
	agent := agentTexts(t, turnsIn(t, events(t, c, id)))
	require.Len(t, agent, 5, "one reply per user turn")
	assert.Contains(t, agent[2], "Your account ending 2345 is verified", "answered by build B")
	assert.Contains(t, agent[4], "ticket HT-20931")

	// The history says which build completed each workflow task: A's first, then B's.
	builds := workflowTaskBuilds(t, c, id)
	require.Equal(t, "build-a", builds[0])
	require.Equal(t, "build-b", builds[len(builds)-1])
	for i := 1; i < len(builds); i++ {
		require.False(t, builds[i-1] == "build-b" && builds[i] == "build-a", "no task went back to build A: %v", builds)
	}
}

// requireVersion requires that the run auto-upgrades and that its last workflow task
// ran on build.
func requireVersion(t *testing.T, c *apiClient, id, build string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		d, err := c.Stack.Client().DescribeWorkflowExecution(t.Context(), id, "")
		if !assert.NoError(ct, err) {
			return
		}
		vi := d.GetWorkflowExecutionInfo().GetVersioningInfo()
		assert.Equal(ct, enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE, vi.GetBehavior())
		assert.Equal(ct, build, vi.GetDeploymentVersion().GetBuildId())
	}, 30*time.Second, 50*time.Millisecond)
}

// workflowTaskBuilds are the build ids of the run's completed workflow tasks, in order.
func workflowTaskBuilds(t *testing.T, c *apiClient, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var builds []string
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			builds = append(builds, a.GetDeploymentVersion().GetBuildId())
		}
	}
	require.NotEmpty(t, builds)
	return builds
}
