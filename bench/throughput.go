package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ThroughputLevel is what the throughput workload found with one number of concurrent
// conversations: each kind (the signal floor, the update floor, the host) ran that many
// conversations turn after turn for Options.Duration, one kind after the other.
type ThroughputLevel struct {
	Conversations int `json:"conversations"`
	// Turns per second of each kind (every turn finished over the time they took).
	HostTurnsPerS        float64 `json:"host_turns_per_s"`
	FloorTurnsPerS       float64 `json:"floor_turns_per_s"`
	UpdateFloorTurnsPerS float64 `json:"update_floor_turns_per_s"`
	// RatioUpdateFloor is host / update floor (the fair floor: the host's own
	// primitive); RatioFloor host / signal floor.
	RatioUpdateFloor float64 `json:"ratio_update_floor"`
	RatioFloor       float64 `json:"ratio_floor"`
	// UpdatesPerTurn is UpdateWorkflowExecution calls per host turn (1 when every
	// resolve is one update that Temporal completed at its first call).
	UpdatesPerTurn float64 `json:"updates_per_turn"`
	// CPU time per turn of this process (server, worker, API, the bench's clients; on an
	// external Temporal, the worker, the API and the clients only), and of each watched
	// process (--cpu-process) during the host's turns.
	HostCPUMsPerTurn          float64            `json:"host_cpu_ms_per_turn"`
	FloorCPUMsPerTurn         float64            `json:"floor_cpu_ms_per_turn"`
	UpdateFloorCPUMsPerTurn   float64            `json:"update_floor_cpu_ms_per_turn"`
	HostCPUMsPerTurnBy        map[string]float64 `json:"host_cpu_ms_per_turn_by_process,omitempty"`
	UpdateFloorCPUMsPerTurnBy map[string]float64 `json:"update_floor_cpu_ms_per_turn_by_process,omitempty"`
	// Load is the machine's 1-minute load average when the level started.
	Load string `json:"load_average"`
	// FloorError is why the signal floor failed at this level, if it did.
	FloorError string `json:"signal_floor_error,omitempty"`

	floor, updateFloor, host phaseResult
}

// phaseResult is one kind's run at one level.
type phaseResult struct {
	turns   int
	rate    float64
	rpcs    map[string]int64
	failed  map[string]int64
	cpu     time.Duration
	procCPU map[string]time.Duration
	// counters are the embedded server's counters over the phase (nil on an external one).
	counters map[string]int64
	// queued and unavailable are the host's turns answered 202 and 503 (conv.send).
	queued, unavailable int64
}

// throughput runs each level of Options.Concurrencies: the signal floor, then the
// update floor, then the host, each with that many conversations turn after turn for
// Duration. Each conversation has had one turn before its timed window, and each
// kind's workflows end before the next kind starts, so every kind finds the workers'
// and the server's caches holding only its own.
func (b *bench) throughput(ctx context.Context, res *Result) error {
	for _, n := range b.opts.Concurrencies {
		lv := ThroughputLevel{Conversations: n, Load: loadAverage()}
		var err error
		// The signal floor is not the host's primitive and no target reads it; its reader
		// (queries, and a history long poll per turn) drowns a loaded server at hundreds
		// of conversations (at 200 on 2 shared cores: 5.9 turns/s, 2.5 queries per turn,
		// a quarter of them timed out, against the update floor's 38.9), so it runs only
		// up to signalFloorMax conversations, and its failure is reported, not fatal.
		if n > signalFloorMax {
			lv.FloorError = fmt.Sprintf("not run above %d conversations", signalFloorMax)
		} else if lv.floor, err = b.throughputFloor(ctx, n); err != nil {
			if ctx.Err() != nil {
				return err
			}
			lv.FloorError = err.Error()
			fmt.Fprintf(b.out, "  %d conversations: the signal floor failed: %v\n", n, err)
		}
		if lv.updateFloor, err = b.throughputUpdateFloor(ctx, n); err != nil {
			return fmt.Errorf("update floor, %d conversations: %w", n, err)
		}
		if lv.host, err = b.throughputHost(ctx, n); err != nil {
			return fmt.Errorf("host, %d conversations: %w", n, err)
		}
		lv.fill()
		res.Throughput = append(res.Throughput, lv)
		fmt.Fprintf(b.out, "  %d conversations (load %s): host %.1f, update floor %.1f, signal floor %.1f turns/s; %.2f updates per host turn\n",
			n, lv.Load, lv.HostTurnsPerS, lv.UpdateFloorTurnsPerS, lv.FloorTurnsPerS, lv.UpdatesPerTurn)
		// At once, so a later level that fails leaves this one's diagnostics.
		printPhaseDiagnostics(b.out, lv, b.metrics != nil)
	}
	if len(res.Throughput) > 0 {
		first := res.Throughput[0]
		res.TurnsPerS, res.FloorTurnsPerS, res.UpdateFloorTurnsPerS = first.HostTurnsPerS, first.FloorTurnsPerS, first.UpdateFloorTurnsPerS
	}
	return nil
}

// signalFloorMax is the most conversations the throughput workload runs the signal
// floor with.
const signalFloorMax = 100

// fill computes the level's figures from its phases.
func (lv *ThroughputLevel) fill() {
	lv.HostTurnsPerS, lv.FloorTurnsPerS, lv.UpdateFloorTurnsPerS = round(lv.host.rate, 2), round(lv.floor.rate, 2), round(lv.updateFloor.rate, 2)
	lv.RatioUpdateFloor = round(safeDiv(lv.host.rate, lv.updateFloor.rate), 3)
	lv.RatioFloor = round(safeDiv(lv.host.rate, lv.floor.rate), 3)
	if lv.host.turns > 0 {
		lv.UpdatesPerTurn = round(float64(lv.host.rpcs["UpdateWorkflowExecution"])/float64(lv.host.turns), 3)
	}
	perTurn := func(p phaseResult) float64 {
		if p.turns == 0 {
			return 0
		}
		return round(ms(p.cpu)/float64(p.turns), 2)
	}
	lv.HostCPUMsPerTurn, lv.FloorCPUMsPerTurn, lv.UpdateFloorCPUMsPerTurn = perTurn(lv.host), perTurn(lv.floor), perTurn(lv.updateFloor)
	by := func(p phaseResult) map[string]float64 {
		if len(p.procCPU) == 0 || p.turns == 0 {
			return nil
		}
		out := map[string]float64{}
		for k, d := range p.procCPU {
			out[k] = round(ms(d)/float64(p.turns), 2)
		}
		return out
	}
	lv.HostCPUMsPerTurnBy, lv.UpdateFloorCPUMsPerTurnBy = by(lv.host), by(lv.updateFloor)
}

// measurePhase runs ts turn after turn for Duration and records what the phase cost.
func (b *bench) measurePhase(ctx context.Context, ts []turner) (phaseResult, error) {
	var p phaseResult
	rpcs, failed, cpu, procs := b.rpcs.snapshot(), b.rpcs.failures(), cpuTime(), b.watch.sample()
	queued, unavailable := b.api.queued.Load(), b.api.unavailable.Load()
	if b.metrics != nil {
		b.metrics.startCounters()
	}
	rate, all, err := b.timedTurns(ctx, ts)
	if b.metrics != nil {
		p.counters = b.metrics.stopCounters()
	}
	p.cpu = cpuTime() - cpu
	p.procCPU = b.watch.since(procs)
	p.rpcs, p.failed = rpcDelta(rpcs, b.rpcs.snapshot()), rpcDelta(failed, b.rpcs.failures())
	p.turns, p.rate = all, rate
	p.queued, p.unavailable = b.api.queued.Load()-queued, b.api.unavailable.Load()-unavailable
	return p, err
}

func (b *bench) throughputFloor(ctx context.Context, n int) (phaseResult, error) {
	return measureOpened(ctx, b, n, func(ctx context.Context, i int) (*floorConv, turner, error) {
		f, err := b.startFloor(ctx, fmt.Sprintf("wop-bench-floor-%s-tp%d-%d", b.runID, n, i), true)
		if err != nil {
			return nil, nil, err
		}
		return f, f.exchange, nil
	}, func(ctx context.Context, f *floorConv) { f.stop(ctx) })
}

func (b *bench) throughputUpdateFloor(ctx context.Context, n int) (phaseResult, error) {
	return measureOpened(ctx, b, n, func(ctx context.Context, i int) (*updateFloorConv, turner, error) {
		f, err := b.startUpdateFloor(ctx, fmt.Sprintf("wop-bench-floor-%s-tpu%d-%d", b.runID, n, i))
		if err != nil {
			return nil, nil, err
		}
		return f, f.exchange, nil
	}, func(ctx context.Context, f *updateFloorConv) { f.stop(ctx) })
}

func (b *bench) throughputHost(ctx context.Context, n int) (phaseResult, error) {
	return measureOpened(ctx, b, n, func(ctx context.Context, _ int) (*conv, turner, error) {
		c, err := b.openConv(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c, c.exchange, nil
	}, func(ctx context.Context, c *conv) { _ = c.closeConv(ctx) })
}

// measureOpened opens n conversations of one kind (10 at a time), warms each with a
// turn, measures the phase on them, and stops those that opened.
func measureOpened[T any](ctx context.Context, b *bench, n int, open func(context.Context, int) (*T, turner, error), stop func(context.Context, *T)) (phaseResult, error) {
	items := make([]*T, n)
	defer stopAllOf(ctx, items, func(ctx context.Context, i int) { stop(ctx, items[i]) })
	ts := make([]turner, n)
	err := parallel(ctx, n, 10, func(ctx context.Context, i int) error {
		item, turn, err := open(ctx, i)
		if err != nil {
			return err
		}
		items[i], ts[i] = item, turn
		return warmTurn(ctx, turn)
	})
	if err != nil {
		return phaseResult{}, err
	}
	return b.measurePhase(ctx, ts)
}

// stopAllOf ends the workflows of a phase (those that started: items[i] non-nil).
func stopAllOf[T any](ctx context.Context, items []*T, stop func(context.Context, int)) {
	_ = parallel(ctx, len(items), 16, func(ctx context.Context, i int) error {
		if items[i] != nil {
			stop(ctx, i)
		}
		return nil
	})
}

// printThroughput prints each level's figures (the calls per turn and the server's
// counters of each were printed as it ended).
func printThroughput(w io.Writer, levels []ThroughputLevel) {
	if len(levels) == 0 {
		return
	}
	fmt.Fprintln(w, "Throughput by concurrent conversations (turns/s; ratios host / update floor, the fair floor, and host / signal floor; CPU per turn of this process):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conversations\tload\thost\tupdate floor\tsignal floor\thost/update floor\thost/signal floor\tupdates per host turn\tCPU ms/turn host\tupdate floor\tsignal floor\t")
	for _, lv := range levels {
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", lv.Conversations, lv.Load, lv.HostTurnsPerS, lv.UpdateFloorTurnsPerS, lv.FloorTurnsPerS,
			lv.RatioUpdateFloor, lv.RatioFloor, lv.UpdatesPerTurn, lv.HostCPUMsPerTurn, lv.UpdateFloorCPUMsPerTurn, lv.FloorCPUMsPerTurn)
	}
	_ = tw.Flush()
	for _, lv := range levels {
		if len(lv.HostCPUMsPerTurnBy) == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(lv.HostCPUMsPerTurnBy)) {
			parts = append(parts, fmt.Sprintf("%s %.1f (update floor %.1f)", k, lv.HostCPUMsPerTurnBy[k], lv.UpdateFloorCPUMsPerTurnBy[k]))
		}
		fmt.Fprintf(w, "  CPU ms per host turn of the watched processes, %d conversations: %s\n", lv.Conversations, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
}

// printPhaseDiagnostics prints the Temporal calls per turn of each kind at one level,
// the calls that failed, and the embedded server's counters that tell a workflow's
// state reloaded (history cache misses, contexts cleared, updates aborted, tasks
// dropped).
func printPhaseDiagnostics(w io.Writer, lv ThroughputLevel, hasCounters bool) {
	kinds := []struct {
		name string
		p    phaseResult
	}{{"signal floor", lv.floor}, {"update floor", lv.updateFloor}, {"host", lv.host}}
	names := map[string]bool{}
	for _, k := range kinds {
		for m := range k.p.rpcs {
			names[m] = true
		}
	}
	fmt.Fprintf(w, "Temporal calls per turn, %d conversations (all callers in this process):\n", lv.Conversations)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  method\tsignal floor\tupdate floor\thost\t")
	totals := make([]float64, len(kinds))
	for _, m := range slices.Sorted(maps.Keys(names)) {
		row := "  " + m + "\t"
		show := false
		for i, k := range kinds {
			v := safeDiv(float64(k.p.rpcs[m]), float64(k.p.turns))
			totals[i] += v
			show = show || v >= 0.05
			row += fmt.Sprintf("%.2f\t", v)
		}
		if show {
			fmt.Fprintln(tw, row)
		}
	}
	fmt.Fprintf(tw, "  total\t%.2f\t%.2f\t%.2f\t\n", totals[0], totals[1], totals[2])
	_ = tw.Flush()
	if h := lv.host; h.turns > 0 && (h.queued > 0 || h.unavailable > 0) {
		fmt.Fprintf(w, "  host turns answered 202 queued: %d, 503 unavailable (awaited): %d, of %d\n", h.queued, h.unavailable, h.turns)
	}
	for _, k := range kinds {
		for _, f := range slices.Sorted(maps.Keys(k.p.failed)) {
			fmt.Fprintf(w, "  failed (%s): %s × %d\n", k.name, f, k.p.failed[f])
		}
	}
	if hasCounters {
		fmt.Fprintln(w, "  the embedded server, per turn:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  counter\tsignal floor\tupdate floor\thost\t")
		for _, c := range shownCounters {
			row := "  " + c.label + "\t"
			for _, k := range kinds {
				row += fmt.Sprintf("%.2f\t", safeDiv(float64(sumCounters(k.p.counters, c.prefix)), float64(k.p.turns)))
			}
			fmt.Fprintln(tw, row)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
}

// shownCounters are the embedded server's counters printed per turn: what a workflow
// loses when the history service drops it from its cache (its in-flight updates and
// speculative workflow task with it).
var shownCounters = []struct{ label, prefix string }{
	{"history cache misses (mutable state read from the database)", "cache_miss history HistoryCacheGetOrCreate"},
	{"workflow contexts cleared", "workflow_context_cleared "},
	{"updates aborted (the client retries them)", "workflow_update_aborted "},
	{"workflow tasks dropped by matching", "tasks_dropped matching"},
	{"workflow tasks timed out, started (start-to-close)", "start_to_close_timeout history TimerActiveTaskWorkflowTaskTimeout"},
	{"workflow tasks timed out, queued (sticky schedule-to-start)", "schedule_to_start_timeout history TimerActiveTaskWorkflowTaskTimeout"},
	// A live worker's round whose heartbeats came too late: lost and run again
	// (a second model call). Only rounds that run as activities heartbeat
	// (--round-delay for the scripted mock).
	{"model rounds and other activities timed out (heartbeat)", "heartbeat_timeout "},
}

func sumCounters(cs map[string]int64, prefix string) int64 {
	var n int64
	for k, v := range cs {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}
