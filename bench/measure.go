package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
)

// percentile returns the nearest-rank percentile p (0..100) of ds in milliseconds.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return float64(s[rank-1].Microseconds()) / 1000
}

// rssBytes reads the resident set size of this process (VmRSS of /proc/self/status)
// after a garbage collection that returns freed memory to the OS.
func rssBytes() (int64, error) {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read RSS (only Linux exposes /proc/self/status): %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("VmRSS:")) {
			continue
		}
		fields := bytes.Fields(line[len("VmRSS:"):])
		if len(fields) < 1 {
			break
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse VmRSS line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line in /proc/self/status")
}

// historySize is a workflow's Temporal history size (DescribeWorkflowExecution's
// HistorySizeBytes) and the run it belongs to.
type historySize struct {
	runID string
	bytes int64
}

// settledHistory waits until the workflow has no pending workflow task and no pending
// activity, so the size read covers everything the last turn wrote, and returns it.
func settledHistory(ctx context.Context, c client.Client, id string) (historySize, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return historySize{}, fmt.Errorf("describe workflow %s: %w", id, err)
		}
		info := d.GetWorkflowExecutionInfo()
		if d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0 {
			return historySize{runID: info.GetExecution().GetRunId(), bytes: info.GetHistorySizeBytes()}, nil
		}
		if time.Now().After(deadline) {
			return historySize{}, fmt.Errorf("workflow %s did not settle within 30s", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// historyDelta is the history a turn added between two settled readings. When the
// workflow continued as new in between, it is what the old run grew by plus the whole
// new run.
func historyDelta(ctx context.Context, c client.Client, id string, before, after historySize) (int64, error) {
	if before.runID == after.runID {
		return after.bytes - before.bytes, nil
	}
	d, err := c.DescribeWorkflowExecution(ctx, id, before.runID)
	if err != nil {
		return 0, fmt.Errorf("describe run %s of workflow %s: %w", before.runID, id, err)
	}
	return d.GetWorkflowExecutionInfo().GetHistorySizeBytes() - before.bytes + after.bytes, nil
}

// idleSettle is how long the idle workload waits after its last opening before it reads
// the memory, so work still in flight (workflow tasks, visibility and transfer tasks) is
// not counted as what a waiting run holds.
const idleSettle = 3 * time.Second

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// memSample is the process's memory at one moment of the idle workload.
type memSample struct {
	rss        int64
	mem        runtime.MemStats
	live       uint64
	goroutines int
}

// takeMemSample reads the RSS after a collection (rssBytes), then the Go heap figures
// of that collection.
func takeMemSample() (memSample, error) {
	var m memSample
	var err error
	if m.rss, err = rssBytes(); err != nil {
		return m, err
	}
	runtime.ReadMemStats(&m.mem)
	m.live = liveHeapBytes()
	m.goroutines = runtime.NumGoroutine()
	return m, nil
}

// liveHeapBytes is the heap the last garbage collection found reachable (rssBytes runs
// one just before): the objects themselves, without the free space of their spans.
func liveHeapBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
