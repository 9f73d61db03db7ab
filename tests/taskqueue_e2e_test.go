package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestConversationOnItsOwnTaskQueueE2E: a host configured with a task queue of its own
// (WOP_TASK_QUEUE) starts its runs there, its worker polls it, and a conversation runs
// its turns (model rounds and all) on it.
func TestConversationOnItsOwnTaskQueueE2E(t *testing.T) {
	t.Parallel()
	const queue = "team-a-agents"
	c := startPrivateStack(t, stackOptions{Tweak: func(o *stack.Options) {
		o.Worker.TaskQueue, o.API.TaskQueue = queue, queue
	}})
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "I don't remember my account number, can you look me up by name?")
	waitSnapshot(t, c, id, 30*time.Second, "answered on its own queue", func(s workflows.Snapshot) bool {
		return s.Status == protocol.StatusWaitingApproval && len(s.Conversations) > 0 && s.Conversations[0].TurnCount >= 4
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, queue, d.GetExecutionConfig().GetTaskQueue().GetName(), "the run is on the host's queue")
	require.Equal(t, queue, d.GetWorkflowExecutionInfo().GetTaskQueue())
}

func TestTaskQueueNamesAreChecked(t *testing.T) {
	for _, bad := range []string{"two words", "/_sys/wop"} {
		_, err := workflows.TaskQueueFromEnv(func(string) string { return bad })
		require.Error(t, err, "%q", bad)
	}
	q, err := workflows.TaskQueueFromEnv(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, workflows.TaskQueue, q)
	q, err = workflows.TaskQueueFromEnv(func(string) string { return " team-a " })
	require.NoError(t, err)
	require.Equal(t, "team-a", q)
}
