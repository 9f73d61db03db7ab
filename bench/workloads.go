package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// turnTimeout bounds one measured turn; a turn that takes longer is a failure of the
// run, not a sample.
const turnTimeout = time.Minute

// busyTurnTimeout bounds one turn of the throughput workload, whose hundreds of
// conversations on two cores make each turn wait for the others (500 conversations at
// 50 turns/s are ten seconds a turn on average).
const busyTurnTimeout = 5 * time.Minute

// latency measures single turns, one at a time, alternating the floor, the host, the
// activity floor and the update floor so all four see the same machine load.
func (b *bench) latency(ctx context.Context, res *Result) error {
	var fl, ex, fa, fu, first, later []time.Duration
	var f, fact *floorConv
	var fupd *updateFloorConv
	var c *conv
	total := b.opts.Warmup + b.opts.Samples
	for i := 0; i < total; i++ {
		if i%b.opts.TurnsPerConversation == 0 {
			for _, old := range []*floorConv{f, fact} {
				if old != nil {
					old.stop(ctx)
				}
			}
			if fupd != nil {
				fupd.stop(ctx)
			}
			var err error
			if f, err = b.startFloor(ctx, fmt.Sprintf("wop-bench-floor-%s-lat-%d", b.runID, i), true); err != nil {
				return err
			}
			if fact, err = b.startFloor(ctx, fmt.Sprintf("wop-bench-floor-%s-lat-act-%d", b.runID, i), false); err != nil {
				return err
			}
			if fupd, err = b.startUpdateFloor(ctx, fmt.Sprintf("wop-bench-floor-%s-lat-upd-%d", b.runID, i)); err != nil {
				return err
			}
			if c, err = b.openConv(ctx); err != nil {
				return err
			}
		}
		tctx, cancel := context.WithTimeout(ctx, turnTimeout)
		var df, de, da, du time.Duration
		df, err := f.exchange(tctx)
		if err == nil {
			de, err = c.exchange(tctx)
		}
		if err == nil {
			da, err = fact.exchange(tctx)
		}
		if err == nil {
			du, err = fupd.exchange(tctx)
		}
		cancel()
		if err != nil {
			return err
		}
		if i >= b.opts.Warmup {
			fl, ex, fa, fu = append(fl, df), append(ex, de), append(fa, da), append(fu, du)
			// A conversation's first turn apart: its first model round cannot be a local
			// activity yet (the provider is known after it), and its first workflow task
			// carries the run's start.
			if i%b.opts.TurnsPerConversation == 0 {
				first = append(first, de)
			} else {
				later = append(later, de)
			}
		}
	}
	for _, old := range []*floorConv{f, fact} {
		if old != nil {
			old.stop(ctx)
		}
	}
	if fupd != nil {
		fupd.stop(ctx)
	}
	res.UpdateFloorP50Ms, res.UpdateFloorP99Ms = percentile(fu, 50), percentile(fu, 99)
	res.FirstTurns, res.FirstTurnP50Ms, res.LaterTurnP50Ms = len(first), percentile(first, 50), percentile(later, 50)
	res.FloorP50Ms, res.FloorP99Ms = percentile(fl, 50), percentile(fl, 99)
	res.ExchangeP50Ms, res.ExchangeP99Ms = percentile(ex, 50), percentile(ex, 99)
	res.FloorActivityP50Ms, res.FloorActivityP99Ms = percentile(fa, 50), percentile(fa, 99)
	return nil
}

// turner is one turn of a conversation (floor or host).
type turner func(context.Context) (time.Duration, error)

// warmTurn runs one untimed turn.
func warmTurn(ctx context.Context, t turner) error {
	tctx, cancel := context.WithTimeout(ctx, busyTurnTimeout)
	defer cancel()
	_, err := t(tctx)
	return err
}

// timedTurns runs every turner in a loop of its own for Duration, each at least one
// turn, and returns the turns finished per second: every turn that finished, over the
// time from the start until the last one did (turns in flight at the deadline are
// awaited and counted with the time they took, so a busy machine gives a low figure,
// never zero), and how many finished in all.
func (b *bench) timedTurns(ctx context.Context, ts []turner) (float64, int, error) {
	var all atomic.Int64
	start := time.Now()
	deadline := start.Add(b.opts.Duration)
	err := parallel(ctx, len(ts), len(ts), func(ctx context.Context, i int) error {
		for {
			tctx, cancel := context.WithTimeout(ctx, busyTurnTimeout)
			_, err := ts[i](tctx)
			cancel()
			if err != nil {
				return err
			}
			all.Add(1)
			if !time.Now().Before(deadline) {
				return nil
			}
		}
	})
	n := int(all.Load())
	return float64(n) / time.Since(start).Seconds(), n, err
}

// history measures the history bytes turn HistoryEarlyTurn and turn HistoryTurns of one
// conversation add.
func (b *bench) history(ctx context.Context, res *Result) error {
	c, err := b.openConv(ctx)
	if err != nil {
		return err
	}
	for turn := 1; turn <= b.opts.HistoryTurns; turn++ {
		measure := turn == b.opts.HistoryEarlyTurn || turn == b.opts.HistoryTurns
		var before historySize
		if measure {
			if before, err = settledHistory(ctx, b.tc, c.runID); err != nil {
				return err
			}
		}
		tctx, cancel := context.WithTimeout(ctx, turnTimeout)
		_, err := c.exchange(tctx)
		cancel()
		if err != nil {
			return err
		}
		if !measure {
			continue
		}
		after, err := settledHistory(ctx, b.tc, c.runID)
		if err != nil {
			return err
		}
		delta, err := historyDelta(ctx, b.tc, c.runID, before, after)
		if err != nil {
			return err
		}
		if turn == b.opts.HistoryEarlyTurn {
			res.HistoryBytesTurn5 = delta
		}
		if turn == b.opts.HistoryTurns {
			res.HistoryBytesTurn200 = delta
		}
	}
	return nil
}

// idle opens IdleRuns conversations that then wait, and reports the RSS growth.
//
// The process first opens a tenth as many conversations that are not counted: the first
// burst of traffic a fresh process serves grows its heap, pools and connection buffers by
// tens of megabytes whatever the number of runs, and the figure is what waiting
// conversations hold. (In the full run the other workloads have already warmed the
// process.) The RSS is read again half-way, so the table also shows the marginal cost
// of one more waiting run.
func (b *bench) idle(ctx context.Context, res *Result) error {
	var mu sync.Mutex
	var opened []*conv // of the measured openings, in the order they were opened
	open := func(n int) error {
		err := parallel(ctx, n, 16, func(ctx context.Context, _ int) error {
			c, err := b.openConv(ctx)
			if err == nil {
				mu.Lock()
				opened = append(opened, c)
				mu.Unlock()
			}
			return err
		})
		if err != nil {
			return err
		}
		// Idle means settled: let the last workflow tasks, visibility updates and
		// transfer tasks of the openings finish before reading the memory.
		return sleepCtx(ctx, idleSettle)
	}
	if err := open(max(b.opts.IdleRuns/10, 1)); err != nil {
		return err
	}
	opened = nil
	if b.opts.MemProfile != "" {
		// The heap before the workload, so `go tool pprof -base` shows what the
		// waiting runs hold.
		if err := writeHeapProfile(b.opts.MemProfile + ".idle-base"); err != nil {
			return err
		}
	}
	before, err := takeMemSample()
	if err != nil {
		return err
	}
	half := b.opts.IdleRuns / 2
	if err := open(half); err != nil {
		return err
	}
	mid, err := takeMemSample()
	if err != nil {
		return err
	}
	if err := open(b.opts.IdleRuns - half); err != nil {
		return err
	}
	after, err := takeMemSample()
	if err != nil {
		return err
	}
	res.IdleRuns = b.opts.IdleRuns
	res.IdleRSSMB = round(float64(after.rss-before.rss)/(1<<20), 1)
	n := float64(b.opts.IdleRuns)
	kb := func(a, b uint64) float64 { return (float64(a) - float64(b)) / 1024 / n }
	rssKB := float64(after.rss-before.rss) / 1024 / n
	heapKB, stackKB := kb(after.mem.HeapInuse, before.mem.HeapInuse), kb(after.mem.StackInuse, before.mem.StackInuse)
	b.idleNote = fmt.Sprintf("per waiting run: %.1f KB RSS = %.1f KB Go heap in use (%.1f KB of it live objects) + %.1f KB goroutine stacks + %.1f KB other (SQLite's own memory, heap kept by the runtime); %.1f goroutines",
		rssKB, heapKB, kb(after.live, before.live), stackKB, rssKB-heapKB-stackKB, float64(after.goroutines-before.goroutines)/n)
	if rest := b.opts.IdleRuns - half; half > 0 && rest > 0 {
		res.IdleMarginalKB = round(float64(after.rss-mid.rss)/1024/float64(rest), 1)
		b.idleNote += fmt.Sprintf("\nRSS growth over the first %d runs %.1f MB, over the last %d runs %.1f MB (%.1f KB per run)",
			half, float64(mid.rss-before.rss)/(1<<20), rest, float64(after.rss-mid.rss)/(1<<20), float64(after.rss-mid.rss)/1024/float64(rest))
	}
	return b.idleTurns(ctx, opened)
}

// idleTurns times a turn on the conversations opened last, which the worker's sticky
// cache still holds, and on those opened first, which it has evicted when more runs
// wait than it keeps: their turn replays the run's history first. Not a target; it
// shows what the cache size trades.
func (b *bench) idleTurns(ctx context.Context, opened []*conv) error {
	const n = 5
	if len(opened) < 2*n {
		return nil
	}
	timeTurns := func(cs []*conv) (time.Duration, error) {
		var total time.Duration
		for _, c := range cs {
			tctx, cancel := context.WithTimeout(ctx, turnTimeout)
			d, err := c.exchange(tctx)
			cancel()
			if err != nil {
				return 0, err
			}
			total += d
		}
		return total / time.Duration(len(cs)), nil
	}
	warm, err := timeTurns(opened[len(opened)-n:])
	if err != nil {
		return err
	}
	// The uncounted tenth was opened before these, so at least len(opened) runs wait.
	if len(opened) <= b.cacheSize() {
		b.idleNote += fmt.Sprintf("\nfirst turn of a waiting conversation (mean of %d): %.1f ms; the %d runs measured and the uncounted tenth fit in the worker's cache of %d, so none was evicted",
			n, ms(warm), len(opened), b.cacheSize())
		return nil
	}
	cold, err := timeTurns(opened[:n])
	if err != nil {
		return err
	}
	b.idleNote += fmt.Sprintf("\nfirst turn of a waiting conversation (mean of %d): %.1f ms opened last (in the worker's cache of %d), %.1f ms opened first (evicted from it: the turn replays the history)",
		n, ms(warm), b.cacheSize(), ms(cold))
	return nil
}

// openConv opens a bench-echo conversation and remembers it for clean-up.
func (b *bench) openConv(ctx context.Context) (*conv, error) {
	return b.openConvOf(ctx, PackID)
}

// openConvOf opens a conversation with a run of pack, ended with the bench.
func (b *bench) openConvOf(ctx context.Context, pack string) (*conv, error) {
	tctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	c, err := openConv(tctx, b.api, pack)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.openRuns = append(b.openRuns, c.runID)
	b.mu.Unlock()
	return c, nil
}

// startUpdateFloor starts a fair-floor workflow and remembers it for clean-up.
func (b *bench) startUpdateFloor(ctx context.Context, id string) (*updateFloorConv, error) {
	f, err := startUpdateFloor(ctx, b.tc, id)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.openRuns = append(b.openRuns, id)
	b.mu.Unlock()
	return f, nil
}

// startFloor starts a floor workflow and remembers it for clean-up.
func (b *bench) startFloor(ctx context.Context, id string, local bool) (*floorConv, error) {
	f, err := startFloor(ctx, b.tc, id, local)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.openRuns = append(b.openRuns, id)
	b.mu.Unlock()
	return f, nil
}

// stop ends what the bench left running on an external server (the embedded one is
// discarded as a whole) and stops the stack.
func (b *bench) stop() {
	if b.opts.TemporalAddress != "" && b.tc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = parallel(ctx, len(b.openRuns), 16, func(ctx context.Context, i int) error {
			_ = b.tc.TerminateWorkflow(ctx, b.openRuns[i], "", "wop bench finished")
			return nil
		})
		cancel()
	}
	for _, f := range b.stopFns {
		f()
	}
}

// table prints the readable summary: a row for each figure of the workloads that ran,
// so a workload left out by --only shows no figure and no verdict.
func (b *bench) table(r *Result) {
	o := b.opts
	ran := func(workload string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, workload) }
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tfigure\ttarget\t")
	if ran("latency") {
		fmt.Fprintf(tw, "floor turn (signal → local activity → query)\tp50 %.1f ms, p99 %.1f ms\t\t\n", r.FloorP50Ms, r.FloorP99Ms)
		fmt.Fprintf(tw, "floor turn with an activity task\tp50 %.1f ms, p99 %.1f ms\t\t\n", r.FloorActivityP50Ms, r.FloorActivityP99Ms)
		fmt.Fprintf(tw, "host turn (POST exchange → reply event)\tp50 %.1f ms, p99 %.1f ms\tp50 ≤ %.0f ms %s\t\n", r.ExchangeP50Ms, r.ExchangeP99Ms,
			TargetHostP50Ms, mark(r.ExchangeP50Ms > 0 && r.ExchangeP50Ms <= TargetHostP50Ms))
		fmt.Fprintf(tw, "update floor turn, the fair floor (update → local activity → its result)\tp50 %.1f ms, p99 %.1f ms\t\t\n", r.UpdateFloorP50Ms, r.UpdateFloorP99Ms)
		fmt.Fprintf(tw, "ratio p50 host / update floor (the host's own primitive)\t%.2f\t≤ %.2f %s\t\n", r.RatioUpdateFloorP50, TargetRatioUpdateFloor,
			mark(r.RatioUpdateFloorP50 > 0 && r.RatioUpdateFloorP50 <= TargetRatioUpdateFloor))
		if r.FirstTurns > 0 {
			fmt.Fprintf(tw, "a conversation's first turn (%d conversations)\tp50 %.1f ms (%.2f × a later turn's %.1f ms)\t≤ 2 × %s\t\n", r.FirstTurns, r.FirstTurnP50Ms,
				safeDiv(r.FirstTurnP50Ms, r.LaterTurnP50Ms), r.LaterTurnP50Ms, mark(r.LaterTurnP50Ms > 0 && r.FirstTurnP50Ms <= 2*r.LaterTurnP50Ms))
		}
		fmt.Fprintf(tw, "ratio p50 host / signal floor (signal → local activity → query)\t%.2f\t≤ %.1f %s\t\n", r.RatioP50, TargetRatio, mark(r.RatioP50 > 0 && r.RatioP50 <= TargetRatio))
	}
	if ran("throughput") {
		for i, lv := range r.Throughput {
			fmt.Fprintf(tw, "floor throughput (%d conversations, %s)\tsignal floor %.1f, update floor %.1f turns/s\t\t\n", lv.Conversations, o.Duration, lv.FloorTurnsPerS, lv.UpdateFloorTurnsPerS)
			target := fmt.Sprintf("≥ %.1f × update floor %s", TargetThroughputRatio, mark(lv.RatioUpdateFloor >= TargetThroughputRatio))
			if i == 0 && lv.Conversations == 50 {
				target += fmt.Sprintf(", ≥ %.0f turns/s %s", TargetTurnsPerS, mark(lv.HostTurnsPerS >= TargetTurnsPerS))
			}
			fmt.Fprintf(tw, "host throughput (%d conversations, %s)\t%.1f turns/s (%.2f × update floor, %.2f × signal floor), %.2f updates per turn\t%s\t\n",
				lv.Conversations, o.Duration, lv.HostTurnsPerS, lv.RatioUpdateFloor, lv.RatioFloor, lv.UpdatesPerTurn, target)
		}
	}
	if ran("history") {
		fmt.Fprintf(tw, "history added by turn %d\t%d bytes\t\t\n", o.HistoryEarlyTurn, r.HistoryBytesTurn5)
		fmt.Fprintf(tw, "history added by turn %d\t%d bytes (%.2f × turn %d)\t≤ 1.2 × %s\t\n", o.HistoryTurns, r.HistoryBytesTurn200,
			safeDiv(float64(r.HistoryBytesTurn200), float64(r.HistoryBytesTurn5)), o.HistoryEarlyTurn,
			mark(r.HistoryBytesTurn5 > 0 && float64(r.HistoryBytesTurn200) <= 1.2*float64(r.HistoryBytesTurn5)))
	}
	if ran("idle") {
		fmt.Fprintf(tw, "RSS growth for %d waiting conversations\t%.1f MB\t≤ 50 MB per 1000 %s\t\n", r.IdleRuns, r.IdleRSSMB,
			mark(r.IdleRuns > 0 && r.IdleRSSMB*1000/float64(r.IdleRuns) <= 50))
		fmt.Fprintf(tw, "marginal RSS per waiting conversation (the second half's growth over its conversations)\t%.1f KB\t\t\n", r.IdleMarginalKB)
	}
	if ran("recovery") && r.RecoveryTurns > 0 {
		fmt.Fprintf(tw, "kill of a worker process → its conversations' next turns answered (%d turns, %d kills)\tp50 %.0f ms, max %.0f ms\tmax ≤ %.0f ms (the timeouts' bound) %s\t\n",
			r.RecoveryTurns, r.RecoveryKills, r.RecoveryP50Ms, r.RecoveryMaxMs, r.RecoveryBoundMs, mark(r.RecoveryMaxMs <= r.RecoveryBoundMs))
	}
	if ran("multi-instance") && r.MultiInstance != nil && r.MultiTurns > 0 {
		sent := "at the kill"
		switch {
		case r.MultiKillInTurnMs > 0:
			sent = fmt.Sprintf("%.0f ms before the kill (running on the killed worker)", r.MultiKillInTurnMs)
		case r.MultiKillDelayMs > 0:
			sent = fmt.Sprintf("%.0f ms after the kill", r.MultiKillDelayMs)
		}
		fmt.Fprintf(tw, "2 workers + 2 APIs: kill of the worker holding the conversations → their turns, sent %s, resumed by another worker (%d turns, %d kills)\tp50 %.0f ms, max %.0f ms; %d lost, %d duplicated of %d\tno turn lost or duplicated %s\t\n",
			sent, r.MultiTurns, r.MultiKills, r.MultiP50Ms, r.MultiMaxMs, r.MultiLost, r.MultiDuplicated, r.MultiAccepted, mark(r.MultiLost == 0 && r.MultiDuplicated == 0))
		// One row per path a turn took; a path no turn took has no verdict.
		path := func(what string, turns int, p50, longest, bound float64) {
			if turns == 0 {
				fmt.Fprintf(tw, "  of them %s\tno turn\t\t\n", what)
				return
			}
			verdict := ""
			if bound > 0 {
				verdict = fmt.Sprintf("max ≤ %.0f ms %s", bound, mark(longest <= bound))
			}
			fmt.Fprintf(tw, "  of them %s\t%d turns: p50 %.0f ms, max %.0f ms\t%s\t\n", what, turns, p50, longest, verdict)
		}
		path("resumed via the sticky timeout (the killed worker's sticky queue, unpolled)",
			r.MultiStickyTurns, r.MultiStickyP50Ms, r.MultiStickyMaxMs, r.MultiStickyBoundMs)
		path("handed to the killed worker's poll (the workflow task timeout)",
			r.MultiDeadPollTurns, r.MultiDeadPollP50Ms, r.MultiDeadPollMaxMs, r.MultiDeadPollBoundMs)
		if r.MultiKillInTurnMs > 0 || r.MultiInTaskTurns > 0 || r.MultiInRoundTurns > 0 {
			// The bound holds the resumption; the reply adds the turn's work, run again.
			resumed := func(what, how string, turns int, p50, longest, replyP50, replyMax, bound float64) {
				if turns == 0 {
					fmt.Fprintf(tw, "  of them %s at the kill\tno turn\t\t\n", what)
					return
				}
				fmt.Fprintf(tw, "  of them %s at the kill: %s\t%d turns: p50 %.0f ms, max %.0f ms (replied p50 %.0f ms, max %.0f ms)\tmax ≤ %.0f ms %s\t\n",
					what, how, turns, p50, longest, replyP50, replyMax, bound, mark(longest > 0 && longest <= bound))
			}
			resumed("running on the killed worker", "resumed by another worker (the workflow task timeout from its start)", r.MultiInTaskTurns,
				r.MultiInTaskResumedP50Ms, r.MultiInTaskResumedMaxMs, r.MultiInTaskP50Ms, r.MultiInTaskMaxMs, r.MultiInTaskBoundMs)
			resumed("in a model round on the killed worker", "its next attempt started by another worker (the heartbeat timeout)", r.MultiInRoundTurns,
				r.MultiInRoundResumedP50Ms, r.MultiInRoundResumedMaxMs, r.MultiInRoundP50Ms, r.MultiInRoundMaxMs, r.MultiInRoundBoundMs)
		}
		if r.MultiDirectTurns > 0 {
			path("sent straight to a live worker (no timeout)", r.MultiDirectTurns, r.MultiDirectP50Ms, r.MultiDirectMaxMs, 0)
		}
	}
	if ran("carried") {
		fmt.Fprintf(tw, "state carried after turn %d\t%d bytes\t\t\n", o.CarriedEarlyTurn, r.CarriedBytesTurn10)
		fmt.Fprintf(tw, "state carried after turn %d\t%d bytes (%.2f × turn %d)\t≤ 1.2 × %s\t\n", o.CarriedTurns, r.CarriedBytesTurn2000,
			safeDiv(float64(r.CarriedBytesTurn2000), float64(r.CarriedBytesTurn10)), o.CarriedEarlyTurn,
			mark(r.CarriedBytesTurn10 > 0 && float64(r.CarriedBytesTurn2000) <= 1.2*float64(r.CarriedBytesTurn10)))
	}
	if ran("stream") {
		fmt.Fprintf(tw, "time to first chunk (POST exchange → ai.message.chunk on SSE)\tp50 %.1f ms, p99 %.1f ms\tprovider's own p50 %.1f ms (%s per piece)\t\n",
			r.FirstChunkP50Ms, r.FirstChunkP99Ms, r.ProviderFirstChunkP50Ms, o.StreamChunkDelay)
		fmt.Fprintf(tw, "streamed turn (POST exchange → reply event)\tp50 %.1f ms\t\t\n", r.StreamedReplyP50Ms)
	}
	if ran("longread") {
		for _, row := range []struct {
			what        string
			short, long float64
			target      bool
		}{
			{"32 KiB events page from the start", r.LongReadPagedFirstP50MsShort, r.LongReadPagedFirstP50MsLong, true},
			{"32 KiB poll from the start (lastSequence=0, timeout=1)", r.LongReadPagedPollP50MsShort, r.LongReadPagedPollP50MsLong, true},
			{"32 KiB events page from the middle", r.LongReadPagedMiddleP50MsShort, r.LongReadPagedMiddleP50MsLong, true},
			{"1 MiB events page from the start (the whole log at turn 10)", r.LongReadFirstPageP50MsShort, r.LongReadFirstPageP50MsLong, false},
			{"1 MiB poll from the start", r.LongReadPollP50MsShort, r.LongReadPollP50MsLong, false},
		} {
			ratio := safeDiv(row.long, row.short)
			target := ""
			if row.target {
				target = fmt.Sprintf("≤ %.1f × %s", TargetLongReadRatio, mark(row.short > 0 && ratio <= TargetLongReadRatio))
			}
			fmt.Fprintf(tw, "%s, turn %d / turn %d\tp50 %.1f ms / %.1f ms (%.2f ×)\t%s\t\n", row.what, o.LongReadTurns, o.LongReadEarlyTurn,
				row.long, row.short, ratio, target)
		}
	}
	_ = tw.Flush()
	if b.idleNote != "" {
		fmt.Fprintf(b.out, "\n%s\n", b.idleNote)
	}
	if b.recoveryNote != "" {
		fmt.Fprintf(b.out, "\n%s\n", b.recoveryNote)
	}
	if b.multiNote != "" {
		fmt.Fprintf(b.out, "\n%s\n", b.multiNote)
	}
	if b.longReadNote != "" {
		fmt.Fprintf(b.out, "\n%s\n", b.longReadNote)
	}
	if n := b.api.pollRetries.Load(); n > 0 {
		fmt.Fprintf(b.out, "\nnote: %d event long polls failed (5xx or connection) and were repeated\n", n)
	}
	fmt.Fprintln(b.out)
}

func mark(ok bool) string {
	if ok {
		return "(met)"
	}
	return "(MISSED)"
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// parallel runs f(i) for i in [0, n) with at most width at once; the first error
// cancels the rest and is returned.
func parallel(parent context.Context, n, width int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  atomic.Int64
	)
	for w := 0; w < min(width, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		return parent.Err()
	}
	return first
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func randomHex(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(buf)
}
