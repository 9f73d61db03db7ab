package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/packs"
)

func TestBenchPackLoadsWithoutDiagnostics(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writePacks(dir, ""))
	loaded, diags, err := packs.LoadDir(dir)
	require.NoError(t, err, "diagnostics: %v", diags)
	assert.Empty(t, diags, "the bench pack should load cleanly")
	require.Len(t, loaded, 2)
	ids := []string{}
	for _, l := range loaded {
		ids = append(ids, l.Pack.ID)
		require.NotNil(t, l.Pack.Workflow)
		assert.Equal(t, "chat", l.Pack.Workflow.Entry)
	}
	assert.ElementsMatch(t, []string{PackID, StreamPackID}, ids)
}

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	samples := ms(9, 1, 8, 2, 7, 3, 6, 4, 5, 10)
	assert.Equal(t, 5.0, percentile(samples, 50))
	assert.Equal(t, 10.0, percentile(samples, 99))
	assert.Equal(t, 1.0, percentile(samples, 0))
	assert.Equal(t, 0.0, percentile(nil, 50))
	assert.Equal(t, ms(9, 1, 8, 2, 7, 3, 6, 4, 5, 10), samples, "the input is not reordered")
}

func TestOptionsDefaults(t *testing.T) {
	full := Options{}.withDefaults()
	assert.Equal(t, 200, full.Samples)
	assert.Equal(t, 200, full.HistoryTurns)
	assert.Equal(t, 1000, full.IdleRuns)
	assert.Equal(t, 50, full.Concurrency)
	quick := Options{Quick: true, IdleRuns: 7}.withDefaults()
	assert.Equal(t, 40, quick.Samples)
	assert.False(t, quick.Memory, "a quick run uses a SQLite file, as the full run does")
	assert.Equal(t, 20, quick.BreakdownTurns)
	assert.Equal(t, 30, full.BreakdownTurns)
	assert.Equal(t, 40, quick.HistoryTurns)
	assert.Equal(t, 7, quick.IdleRuns, "a set count is kept")
	assert.Equal(t, 3, Options{HistoryTurns: 3}.withDefaults().HistoryEarlyTurn, "the early turn is within the conversation")
}

func TestCommandRejectsBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, Command([]string{"--samples=x"}, &out, &errOut))
	assert.Equal(t, 2, Command([]string{"extra"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "unexpected argument")
	assert.Equal(t, 2, Command([]string{"--kill-in-turn=200ms", "--kill-delay=20ms"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "at most one is set")
	assert.Equal(t, 0, Command([]string{"-h"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "usage: wop bench")
}

// TestRunPrintsEveryFigure runs the whole bench with tiny counts against the embedded
// stack and checks the last line: every key present, finite and non-zero where a
// figure must be. It checks no speed.
func TestRunPrintsEveryFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, Options{
		Samples: 3, Warmup: 1, TurnsPerConversation: 2, Concurrency: 3, Duration: time.Second,
		HistoryTurns: 6, HistoryEarlyTurn: 5, IdleRuns: 5, Memory: true, BreakdownTurns: 2,
		CarriedTurns: 20, CarriedEarlyTurn: 10, LongReadTurns: 3, LongReadEarlyTurn: 2, LongReadSamples: 1,
	}, &out)
	require.NoError(t, err, "output:\n%s", out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	var all map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(last), &all), "last line: %s", last)
	got := map[string]float64{}
	for k, raw := range all {
		if k == "throughput" {
			continue
		}
		var v float64
		require.NoError(t, json.Unmarshal(raw, &v), "%s in %s", k, last)
		got[k] = v
	}
	var levels []ThroughputLevel
	require.NoError(t, json.Unmarshal(all["throughput"], &levels), "throughput in %s", last)
	if assert.Len(t, levels, 1, "one level: Concurrency alone") {
		lv := levels[0]
		assert.Equal(t, 3, lv.Conversations)
		assert.Greater(t, lv.HostTurnsPerS, 0.0)
		assert.Greater(t, lv.UpdateFloorTurnsPerS, 0.0)
		assert.Greater(t, lv.HostCPUMsPerTurn, 0.0)
		// Every host turn is at least one resolve.
		assert.GreaterOrEqual(t, lv.UpdatesPerTurn, 1.0)
	}
	// The throughput figures are every finished turn over the time they took, each
	// conversation at least one turn, so they are above zero however busy the machine.
	for _, k := range []string{"floor_p50_ms", "floor_p99_ms", "floor_activity_p50_ms", "floor_activity_p99_ms", "exchange_p50_ms", "exchange_p99_ms", "ratio_p50",
		"turns_per_s", "floor_turns_per_s", "update_floor_p50_ms", "update_floor_p99_ms", "ratio_update_floor_p50", "update_floor_turns_per_s", "first_turn_p50_ms", "later_turn_p50_ms", "history_bytes_turn5", "history_bytes_turn200", "idle_runs",
		"carried_bytes_turn10", "carried_bytes_turn2000",
		"first_chunk_p50_ms", "first_chunk_p99_ms", "provider_first_chunk_p50_ms", "streamed_reply_p50_ms",
		"longread_first_page_p50_ms_turn10", "longread_first_page_p50_ms_turn1000", "longread_poll_p50_ms_turn10", "longread_poll_p50_ms_turn1000",
		"longread_32k_first_page_p50_ms_turn10", "longread_32k_first_page_p50_ms_turn1000", "longread_32k_poll_p50_ms_turn10", "longread_32k_poll_p50_ms_turn1000",
		"longread_32k_middle_page_p50_ms_turn10", "longread_32k_middle_page_p50_ms_turn1000"} {
		v, ok := got[k]
		if assert.True(t, ok, "key %s in %s", k, last) {
			assert.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s is finite", k)
			assert.Greater(t, v, 0.0, "%s > 0", k)
		}
	}
	// Both throughput workloads finished turns: the calls per turn are printed only then.
	assert.Contains(t, out.String(), "Temporal calls per turn, 3 conversations")
	v, ok := got["idle_rss_mb"]
	assert.True(t, ok, "key idle_rss_mb in %s", last)
	assert.False(t, math.IsNaN(v) || math.IsInf(v, 0), "idle_rss_mb is finite (a few runs may not move RSS)")
	assert.Equal(t, 5.0, got["idle_runs"])
	assert.Len(t, got, 37, "exactly the documented keys: %s", last)
	assert.Contains(t, out.String(), "long-run reads: 3 turns", "the longread workload says what it read")
	assert.GreaterOrEqual(t, got["first_chunk_p50_ms"], got["provider_first_chunk_p50_ms"], "the host adds to the provider's own delay")
	assert.GreaterOrEqual(t, got["floor_p99_ms"], got["floor_p50_ms"])
	assert.GreaterOrEqual(t, got["exchange_p99_ms"], got["exchange_p50_ms"])
	assert.Contains(t, out.String(), "ratio p50", "the table precedes the JSON line")
	// The breakdown names the steps of a turn from the history and the server's timers.
	assert.Contains(t, out.String(), "→ WorkflowTaskCompleted")
	assert.Contains(t, out.String(), "persistence_latency history UpdateWorkflowExecution")
}

// TestCarriedStateStaysFlat runs the carried workload: what a run carries across
// continue-as-new after turn 2000 of a conversation of 2 KB messages is within 1.2
// times what it carries after turn 10.
func TestCarriedStateStaysFlat(t *testing.T) {
	early, late, err := carriedBytes(context.Background(), 10, 2000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("carried_bytes_turn10 %d, carried_bytes_turn2000 %d (%.2f×)", early, late, float64(late)/float64(early))
	if early <= 0 || float64(late) > 1.2*float64(early) {
		t.Fatalf("carried %d bytes after turn 2000 against %d after turn 10", late, early)
	}
}
