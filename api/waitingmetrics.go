package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/wop-dev/wop/workflows"
)

// The gauges of what waits on people, served with the API's metrics:
//
//	wop_interrupts_waiting{waiting_kind, answered_by}              how many wait now
//	wop_interrupts_waiting_oldest_seconds{waiting_kind, answered_by} the longest wait
//	wop_interrupts_waiting_age_seconds{waiting_kind, answered_by}  how long they have
//	                                                               waited (a histogram)
//	wop_interrupts_waiting_truncated                               1 when more runs wait
//	                                                               than one scan reads
//
// They count what the inbox would list, across every tenant: each waiting thing of a
// run once (a conversation beside its node's decision is the decision), with the
// answeredBy of the inbox. They are read from Temporal, not counted in this process:
// the waiting runs come from visibility (one listing per scan, pages of
// waitingScanPage) and each run's interrupts from its snapshot, queried again only when
// its visibility record changed. So they are true for runs started, resolved or
// continued through any API process, and after a restart. Every API process serves
// the same figures; aggregate them with max, not sum.

// Scan bounds of the waiting gauges.
const (
	// waitingScanEvery is the least time between two scans: scrapes in between are
	// answered with the last scan's figures.
	waitingScanEvery = 5 * time.Second
	// waitingScanTimeout bounds one scan; when it runs out the last figures are kept.
	waitingScanTimeout = 10 * time.Second
	// waitingScanMax is the most runs one scan reads.
	waitingScanMax  = 10000
	waitingScanPage = 1000
)

// WaitingAgeBuckets are the buckets (seconds) of wop_interrupts_waiting_age_seconds:
// a minute to a week, as OpenWOP's openwop.interrupt.duration recommends.
var WaitingAgeBuckets = []float64{60, 300, 900, 1800, 3600, 14400, 86400, 604800}

// waitingSeries are the series the gauges always have (zero when nothing waits): every
// waiting kind for an operator, and conversations for their users.
var waitingSeries = func() [][2]string {
	var out [][2]string
	for _, k := range workflows.WaitingKinds {
		out = append(out, [2]string{k, AnsweredByOperator})
	}
	return append(out, [2]string{workflows.WaitingConversation, AnsweredByUser})
}()

var (
	descWaiting = prometheus.NewDesc("wop_interrupts_waiting",
		"Interrupts waiting for a person now, by waiting kind and who answers them (operator: the inbox's work; user: a conversation's end user); from Temporal visibility and the runs' snapshots, across every tenant.",
		[]string{"waiting_kind", "answered_by"}, nil)
	descWaitingOldest = prometheus.NewDesc("wop_interrupts_waiting_oldest_seconds",
		"How long the interrupt waiting longest has waited, by waiting kind and who answers it (0 when none waits).",
		[]string{"waiting_kind", "answered_by"}, nil)
	descWaitingAge = prometheus.NewDesc("wop_interrupts_waiting_age_seconds",
		"How long the interrupts waiting now have waited, by waiting kind and who answers them: a histogram of the current waits, not of past ones.",
		[]string{"waiting_kind", "answered_by"}, nil)
	descWaitingTruncated = prometheus.NewDesc("wop_interrupts_waiting_truncated",
		"1 when more runs wait than one scan reads (10000), so the wop_interrupts_waiting figures count the first ones only; else 0.",
		nil, nil)
)

// waitingCollector serves the gauges from scans made when they are scraped.
type waitingCollector struct {
	s *Server

	mu        sync.Mutex
	scannedAt time.Time
	last      *waitingFigures
	// runs are the waiting things of each run at its last read, by run id, with the
	// fingerprint of the visibility record they were read at.
	runs map[string]waitingRun
}

type waitingRun struct {
	fingerprint string
	things      []waitingThing
}

// waitingThing is one thing a run waits on: its kind, who answers it and since when.
type waitingThing struct {
	kind, answeredBy string
	since            time.Time
}

// waitingFigures are one scan's figures, by series.
type waitingFigures struct {
	ages      map[[2]string][]float64 // seconds waited, per waiting thing
	truncated bool
}

func newWaitingCollector(s *Server) *waitingCollector {
	return &waitingCollector{s: s, runs: map[string]waitingRun{}}
}

// Describe implements prometheus.Collector.
func (w *waitingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWaiting
	ch <- descWaitingOldest
	ch <- descWaitingAge
	ch <- descWaitingTruncated
}

// Collect implements prometheus.Collector: the figures of a scan at most
// waitingScanEvery old; nothing when no scan has succeeded yet.
func (w *waitingCollector) Collect(ch chan<- prometheus.Metric) {
	f := w.figures()
	if f == nil {
		return
	}
	for _, series := range waitingSeries {
		ages := f.ages[series]
		oldest, sum := 0.0, 0.0
		buckets := make(map[float64]uint64, len(WaitingAgeBuckets))
		for _, a := range ages {
			oldest, sum = max(oldest, a), sum+a
			for _, b := range WaitingAgeBuckets {
				if a <= b {
					buckets[b]++
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(len(ages)), series[0], series[1])
		ch <- prometheus.MustNewConstMetric(descWaitingOldest, prometheus.GaugeValue, oldest, series[0], series[1])
		ch <- prometheus.MustNewConstHistogram(descWaitingAge, uint64(len(ages)), sum, buckets, series[0], series[1])
	}
	truncated := 0.0
	if f.truncated {
		truncated = 1
	}
	ch <- prometheus.MustNewConstMetric(descWaitingTruncated, prometheus.GaugeValue, truncated)
}

// figures scans when the last scan is older than waitingScanEvery, and returns the
// latest figures. A failed scan keeps the figures before it (and is logged).
func (w *waitingCollector) figures() *waitingFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.s.cfg.Now()
	if w.last != nil && now.Sub(w.scannedAt) < waitingScanEvery {
		return w.last
	}
	ctx, cancel := context.WithTimeout(w.s.ctx, waitingScanTimeout)
	defer cancel()
	f, err := w.scan(ctx, now)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			w.s.log.Warn("Waiting interrupts metrics: scan failed; serving the last figures", "error", err)
		}
		return w.last
	}
	w.last, w.scannedAt = f, now
	return f
}

// waitingScanQuery finds the open runs that wait on anyone, of every tenant.
func waitingScanQuery(legacy bool) string {
	waits, _ := waitingClause("any", legacy)
	return "WorkflowType = " + quote(workflows.RunWorkflowName) + " AND " + waits
}

// scan reads the waiting runs from visibility and the waiting things of those whose
// record changed since their last read.
func (w *waitingCollector) scan(ctx context.Context, now time.Time) (*waitingFigures, error) {
	var execs []*workflowpb.WorkflowExecutionInfo
	var token []byte
	truncated := false
	for {
		page, next, err := w.s.listPage(ctx, waitingScanQuery(!w.s.cfg.NoLegacyAttributes), waitingScanPage, token)
		if err != nil {
			return nil, err
		}
		execs = append(execs, page...)
		if len(next) == 0 {
			break
		}
		if len(execs) >= waitingScanMax {
			truncated = true
			break
		}
		token = next
	}
	if len(execs) > waitingScanMax {
		execs, truncated = execs[:waitingScanMax], true
	}
	fresh := make(map[string]waitingRun, len(execs))
	var stale []*workflowpb.WorkflowExecutionInfo
	for _, e := range execs {
		id, fp := e.GetExecution().GetWorkflowId(), fingerprint(e)
		if r, ok := w.runs[id]; ok && r.fingerprint == fp {
			fresh[id] = r
			continue
		}
		stale = append(stale, e)
	}
	read := make([]*waitingRun, len(stale))
	var wg sync.WaitGroup
	sem := make(chan struct{}, snapshotFanOut)
	for i, e := range stale {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			id := e.GetExecution().GetWorkflowId()
			snap, err := w.s.querySnapshot(ctx, id)
			if err != nil {
				// Closed since the listing, or not answering: not counted this time.
				w.s.log.Debug("Waiting interrupts metrics: run skipped", "runId", id, "error", err)
				return
			}
			read[i] = &waitingRun{fingerprint: fingerprint(e), things: w.s.waitingOf(snap)}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, e := range stale {
		if read[i] != nil {
			fresh[e.GetExecution().GetWorkflowId()] = *read[i]
		}
	}
	w.runs = fresh
	f := &waitingFigures{ages: map[[2]string][]float64{}, truncated: truncated}
	for _, r := range fresh {
		for _, t := range r.things {
			series := [2]string{t.kind, t.answeredBy}
			f.ages[series] = append(f.ages[series], max(now.Sub(t.since).Seconds(), 0))
		}
	}
	return f, nil
}

// waitingOf lists what a run waits on, as the inbox counts it.
func (s *Server) waitingOf(snap *workflows.Snapshot) []waitingThing {
	if isTerminal(snap.Status) {
		return nil
	}
	var out []waitingThing
	for _, pi := range waitingThings(snap) {
		since, err := time.Parse(time.RFC3339Nano, pi.RequestedAt)
		if err != nil {
			s.log.Debug("Waiting interrupts metrics: interrupt without a request time", "runId", snap.RunID, "nodeId", pi.NodeID)
			continue
		}
		out = append(out, waitingThing{kind: workflows.WaitingKind(pi.Kind), answeredBy: s.answeredBy(snap, pi), since: since})
	}
	return out
}

// registerWaitingMetrics registers the gauges on reg, replacing those of an earlier
// server of this process (a restarted dev API).
func (s *Server) registerWaitingMetrics(reg prometheus.Registerer) error {
	c := newWaitingCollector(s)
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return err
		}
		reg.Unregister(are.ExistingCollector)
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	s.waiting = c
	return nil
}

// unregisterWaitingMetrics takes the gauges off the registry when the server stops.
func (s *Server) unregisterWaitingMetrics() {
	if s.waiting != nil && s.cfg.Metrics != nil {
		s.cfg.Metrics.Unregister(s.waiting)
	}
}
