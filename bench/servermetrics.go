package bench

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
)

// serverMetrics is a metrics.Handler for the embedded Temporal server that keeps the
// timers that say where a turn's time goes inside Temporal: each service's RPC latency,
// each persistence call, the history service's task queues, matching's sync matches and
// consistent queries. It records only while on, so the figures belong to one workload.
type serverMetrics struct {
	on atomic.Bool
	// countOn records the counters (independently of the timers).
	countOn atomic.Bool
	mu      sync.Mutex
	timers  map[string][]time.Duration
	// counters are every counter's sum while on, by key.
	counters map[string]int64
}

// keptTimers are the timer names serverMetrics records.
var keptTimers = map[string]bool{
	"service_latency":                true,
	"persistence_latency":            true,
	"visibility_persistence_latency": true,
	"task_latency_load":              true,
	"task_latency_queue":             true,
	"syncmatch_latency":              true,
	"workflow_task_query_latency":    true,
	"direct_query_dispatch_latency":  true,
}

func newServerMetrics() *serverMetrics {
	return &serverMetrics{timers: map[string][]time.Duration{}, counters: map[string]int64{}}
}

// startCounters clears the counters and records them from now on; stopCounters stops
// and returns what was counted since.
func (m *serverMetrics) startCounters() {
	m.mu.Lock()
	m.counters = map[string]int64{}
	m.mu.Unlock()
	m.countOn.Store(true)
}

func (m *serverMetrics) stopCounters() map[string]int64 {
	m.countOn.Store(false)
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.counters
	m.counters = map[string]int64{}
	return out
}

// start clears what was recorded and records from now on; stop stops recording and
// returns the timers recorded since start, by key ("name service operation").
func (m *serverMetrics) start() {
	m.mu.Lock()
	m.timers = map[string][]time.Duration{}
	m.mu.Unlock()
	m.on.Store(true)
}

func (m *serverMetrics) stop() map[string][]time.Duration {
	m.on.Store(false)
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.timers
	m.timers = map[string][]time.Duration{}
	return out
}

func (m *serverMetrics) handler() metrics.Handler { return &metricsScope{m: m} }

// metricsScope is serverMetrics with the tags of one scope.
type metricsScope struct {
	m    *serverMetrics
	tags []metrics.Tag
}

// timerKey is "name service operation": the service_name tag and the last operation
// tag, which is the most specific one.
func timerKey(name string, tags ...[]metrics.Tag) string {
	service, op := "", ""
	for _, ts := range tags {
		for _, t := range ts {
			switch t.Key {
			case "service_name":
				service = t.Value
			case "operation":
				op = t.Value
			}
		}
	}
	return name + " " + service + " " + op
}

func (s *metricsScope) WithTags(tags ...metrics.Tag) metrics.Handler {
	return &metricsScope{m: s.m, tags: append(slices.Clip(s.tags), tags...)}
}

func (s *metricsScope) Timer(name string) metrics.TimerIface {
	if !keptTimers[name] {
		return metrics.NoopTimerMetricFunc
	}
	return metrics.TimerFunc(func(d time.Duration, tags ...metrics.Tag) {
		if !s.m.on.Load() {
			return
		}
		k := timerKey(name, s.tags, tags)
		s.m.mu.Lock()
		s.m.timers[k] = append(s.m.timers[k], d)
		s.m.mu.Unlock()
	})
}

func (s *metricsScope) Counter(name string) metrics.CounterIface {
	return metrics.CounterFunc(func(n int64, tags ...metrics.Tag) {
		if !s.m.countOn.Load() {
			return
		}
		k := timerKey(name, s.tags, tags)
		s.m.mu.Lock()
		s.m.counters[k] += n
		s.m.mu.Unlock()
	})
}
func (s *metricsScope) Gauge(string) metrics.GaugeIface { return metrics.NoopGaugeMetricFunc }
func (s *metricsScope) Histogram(string, metrics.MetricUnit) metrics.HistogramIface {
	return metrics.NoopHistogramMetricFunc
}
func (s *metricsScope) Stop(log.Logger)                        {}
func (s *metricsScope) StartBatch(string) metrics.BatchHandler { return batchScope{s} }

// batchScope is a metricsScope used as a batch: its metrics are recorded one by one.
type batchScope struct{ *metricsScope }

func (batchScope) Close() error { return nil }

// timerRow is one recorded timer over a workload: calls per turn, median, and the time
// per turn it adds up to.
type timerRow struct {
	key         string
	perTurn     float64
	p50, msTurn float64
}

// timerRows summarises timers over turns, keeping those whose prefix (name and
// service) is in want, in the order of want, then by time per turn.
func timerRows(timers map[string][]time.Duration, turns int, want []string) []timerRow {
	var rows []timerRow
	for k, ds := range timers {
		if turns == 0 || len(ds) == 0 || !slices.ContainsFunc(want, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		rows = append(rows, timerRow{key: k, perTurn: float64(len(ds)) / float64(turns), p50: percentile(ds, 50), msTurn: ms(sum) / float64(turns)})
	}
	rank := func(k string) int {
		return slices.IndexFunc(want, func(p string) bool { return strings.HasPrefix(k, p) })
	}
	slices.SortFunc(rows, func(a, b timerRow) int {
		if ra, rb := rank(a.key), rank(b.key); ra != rb {
			return ra - rb
		}
		switch {
		case a.msTurn > b.msTurn:
			return -1
		case a.msTurn < b.msTurn:
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	return rows
}
