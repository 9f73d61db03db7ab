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
