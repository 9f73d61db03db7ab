package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A workload left out by --only shows no row: no zero figure, and above all no verdict
// on a figure that was never measured.
func TestTableShowsOnlyTheWorkloadsThatRan(t *testing.T) {
	var out bytes.Buffer
	b := &bench{opts: Options{Only: []string{"latency", "throughput"}, Concurrency: 50}, out: &out, api: &apiClient{}}
	b.table(&Result{FloorP50Ms: 9, ExchangeP50Ms: 7, RatioP50: 0.78, UpdateFloorP50Ms: 7.5, RatioUpdateFloorP50: 0.93,
		Throughput: []ThroughputLevel{{Conversations: 50, HostTurnsPerS: 280, FloorTurnsPerS: 281, UpdateFloorTurnsPerS: 290, RatioUpdateFloor: 0.97, RatioFloor: 1, UpdatesPerTurn: 1}}})
	s := out.String()
	assert.Contains(t, s, "host turn (POST exchange → reply event)")
	assert.Contains(t, s, "ratio p50 host / update floor")
	assert.Contains(t, s, "ratio p50 host / signal floor")
	assert.Contains(t, s, "host throughput")
	for _, absent := range []string{"RSS growth", "history added", "state carried", "first chunk", "streamed turn", "events page"} {
		assert.NotContains(t, s, absent)
	}
	assert.NotContains(t, s, "MISSED", "every figure shown was measured and within its target")

	// Every workload: a history workload that measured nothing is not "met".
	out.Reset()
	b.opts.Only = nil
	b.table(&Result{})
	assert.Contains(t, out.String(), "history added")
	assert.NotContains(t, out.String(), "(met)", "figures never measured meet no target")
}

// The multi-instance rows: the overall figures, then each path a turn took with its own
// bound; a path no turn took has no verdict.
func TestTableShowsTheKillPaths(t *testing.T) {
	var out bytes.Buffer
	b := &bench{opts: Options{Only: []string{"multi-instance"}}, out: &out, api: &apiClient{}}
	b.table(&Result{MultiInstance: &MultiInstance{MultiKills: 20, MultiTurns: 80, MultiP50Ms: 1226, MultiMaxMs: 10277, MultiAccepted: 200,
		MultiStickyTurns: 80, MultiStickyP50Ms: 1190, MultiStickyMaxMs: 1287, MultiStickyBoundMs: 1500, MultiDeadPollBoundMs: 10500}})
	s := out.String()
	assert.Contains(t, s, "80 turns: p50 1190 ms, max 1287 ms")
	assert.Contains(t, s, "max ≤ 1500 ms (met)")
	assert.Regexp(t, `handed to the killed worker's poll \(the workflow task timeout\)\s+no turn\s*\n`, s)
	assert.NotContains(t, s, "10500", "no verdict on a path no turn took")
	assert.NotContains(t, s, "straight to a live worker")
	assert.Contains(t, s, "sent at the kill")

	assert.NotContains(t, s, "running on the killed worker", "no in-task row when no turn ran at a kill")

	out.Reset()
	b.table(&Result{MultiInstance: &MultiInstance{MultiKills: 20, MultiTurns: 80, MultiKillDelayMs: 200, MultiAccepted: 200}})
	assert.Contains(t, out.String(), "sent 200 ms after the kill")

	// Turns sent before the kill: the in-task row with its bound.
	out.Reset()
	b.table(&Result{MultiInstance: &MultiInstance{MultiKills: 20, MultiTurns: 60, MultiKillInTurnMs: 200, MultiAccepted: 180,
		MultiInTaskTurns: 60, MultiInTaskP50Ms: 10900, MultiInTaskMaxMs: 11300, MultiInTaskBoundMs: 10500,
		MultiInTaskResumedP50Ms: 9850, MultiInTaskResumedMaxMs: 9990}})
	s = out.String()
	assert.Contains(t, s, "sent 200 ms before the kill (running on the killed worker)")
	assert.Regexp(t, `running on the killed worker at the kill: resumed by another worker \(the workflow task timeout from its start\)\s+60 turns: p50 9850 ms, max 9990 ms \(replied p50 10900 ms, max 11300 ms\)\s+max ≤ 10500 ms \(met\)`, s)
	assert.Regexp(t, `in a model round on the killed worker at the kill\s+no turn`, s)

	// Rounds held on the killed worker: the in-round row with the heartbeat's bound.
	out.Reset()
	b.table(&Result{MultiInstance: &MultiInstance{MultiKills: 20, MultiTurns: 60, MultiKillInTurnMs: 200, MultiAccepted: 180,
		MultiInRoundTurns: 58, MultiInRoundP50Ms: 3100, MultiInRoundMaxMs: 3400, MultiInRoundBoundMs: 1600,
		MultiInRoundResumedP50Ms: 1010, MultiInRoundResumedMaxMs: 1700}})
	assert.Regexp(t, `in a model round on the killed worker at the kill: its next attempt started by another worker \(the heartbeat timeout\)\s+58 turns: p50 1010 ms, max 1700 ms \(replied p50 3100 ms, max 3400 ms\)\s+max ≤ 1600 ms \(MISSED\)`, out.String())
}
