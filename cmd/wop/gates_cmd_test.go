//go:build !nodev

package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/internal/devserver"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// `wop gates` counts, through the visibility API of a real server, the open runs
// created before each gate's day: a run created before every gate counts for all, one
// created on 2026-12-02 for the gates of that day and later, and neither a closed run
// nor another workflow type counts; a gate with none may retire.
func TestGatesCountTheOpenRunsCreatedBeforeEachGate(t *testing.T) {
	t.Parallel()
	ctx, srv := startServer(t, devserver.Options{SearchAttributes: workflows.SearchAttributes})
	c := dialServer(t, srv, srv.Namespace())

	// No worker polls the queue: the runs stay open as Temporal's visibility shows them.
	start := func(id, typ string, created time.Time) {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: "gates-test",
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.SACreatedAt.ValueSet(created)),
		}, typ)
		require.NoError(t, err)
	}
	old := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	start("r_old", workflows.RunWorkflowName, old)
	start("r_dec2", workflows.RunWorkflowName, time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC))
	start("r_closed", workflows.RunWorkflowName, old)
	require.NoError(t, c.TerminateWorkflow(ctx, "r_closed", "", "closed runs do not count"))
	start("other", "SomeOtherWorkflow", old)

	want := func(g workflows.Gate) int64 {
		if g.Added >= "2026-12-02" {
			return 2
		}
		return 1
	}
	args := []string{"--address", srv.FrontendAddress(), "--namespace", srv.Namespace(), "--json"}
	env := func(string) string { return "" }
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var out, errOut bytes.Buffer
		if !assert.Equal(ct, 0, runGates(ctx, args, env, &out, &errOut), errOut.String()) {
			return
		}
		var gates []worker.GateOpenRuns
		require.NoError(t, json.Unmarshal(out.Bytes(), &gates))
		assert.Len(ct, gates, len(workflows.Gates))
		for i, g := range gates {
			assert.Equal(ct, workflows.Gates[i].ID, g.ID)
			assert.Equal(ct, want(g.Gate), g.OpenRuns, "gate %s of %s", g.ID, g.Added)
			assert.False(ct, g.MayRetire, "gate %s: a run created before it is open", g.ID)
		}
	}, 20*time.Second, 200*time.Millisecond)

	// Once the old run ends, the gates before 2026-12-02 may retire; the table says so
	// and names the attributes that go with the search attribute gate.
	require.NoError(t, c.TerminateWorkflow(ctx, "r_old", "", "ended"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var out, errOut bytes.Buffer
		if !assert.Equal(ct, 0, runGates(ctx, args[:4], env, &out, &errOut), errOut.String()) {
			return
		}
		assert.Regexp(ct, `(?m)^trigger-rules\s+2026-11-30\s+0\s+may retire$`, out.String())
		assert.Regexp(ct, `(?m)^event-vocabulary-v2\s+2026-12-02\s+1\s+keep: never while a run of the v2 era is open: `, out.String(), "a gate that does not retire by date says so")
		assert.Regexp(ct, `(?m)^search-attribute-slots\s+2026-12-03\s+1\s+keep \(with WopPackState, WopWaitingOn, WopWaitingKind, WopWaitingTool, WopStalledOn\)$`, out.String())
		assert.Contains(ct, out.String(), "ExecutionStatus = 'Running' AND (WopCreatedAt < '2026-12-01T00:00:00Z'")
	}, 20*time.Second, 200*time.Millisecond)
}
