package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/workflows"
)

// The breakdown workload times turns of each kind alone (the floor, then the host) and
// says where each turn's time went: the steps of the workflow's history, whose event
// times the history service stamps as each step happens (on the clock this process
// reads too), and, on the embedded server, the server's own metrics recorded over the
// same turns (serverMetrics).

// turnTimes are a turn's client-side instants.
type turnTimes struct {
	start time.Time // the turn sent (the signal, or the POST)
	sent  time.Time // the POST answered (host only)
	done  time.Time // the result read
}

// kindBreakdown is what the breakdown found for one kind of turn.
type kindBreakdown struct {
	name   string
	turns  []turnTimes
	steps  []stepRow
	timers map[string][]time.Duration
}

// stepRow is one step of a turn: the median time from the previous step.
type stepRow struct {
	label string
	p50   float64
	n     int
}

func (b *bench) breakdown(ctx context.Context, _ *Result) error {
	floor, err := b.breakdownKind(ctx, "floor", func(ctx context.Context, i int) (string, func(context.Context) (turnTimes, error), error) {
		f, err := b.startFloor(ctx, fmt.Sprintf("wop-bench-floor-%s-bd-%d", b.runID, i), true)
		if err != nil {
			return "", nil, err
		}
		return f.id, func(ctx context.Context) (turnTimes, error) {
			start := time.Now()
			_, err := f.exchange(ctx)
			return turnTimes{start: start, done: time.Now()}, err
		}, nil
	}, floorSignal)
	if err != nil {
		return err
	}
	host, err := b.breakdownKind(ctx, "host", func(ctx context.Context, _ int) (string, func(context.Context) (turnTimes, error), error) {
		c, err := b.openConv(ctx)
		if err != nil {
			return "", nil, err
		}
		return c.runID, func(ctx context.Context) (turnTimes, error) {
			var t turnTimes
			c.onPosted = func() { t.sent = time.Now() }
			t.start = time.Now()
			_, err := c.exchange(ctx)
			t.done = time.Now()
			c.onPosted = nil
			return t, err
		}, nil
	}, workflows.ResolveSignal, workflows.ResolveUpdate)
	if err != nil {
		return err
	}
	b.breakdowns = []*kindBreakdown{floor, host}
	return nil
}

// breakdownKind opens a conversation of one kind, warms it up, and times
// Options.BreakdownTurns turns with the server's metrics on.
func (b *bench) breakdownKind(ctx context.Context, name string,
	open func(context.Context, int) (string, func(context.Context) (turnTimes, error), error), arrivals ...string,
) (*kindBreakdown, error) {
	id, turn, err := open(ctx, 0)
	if err != nil {
		return nil, err
	}
	kb := &kindBreakdown{name: name}
	for i := 0; i < b.opts.Warmup; i++ {
		if _, err := turnWithTimeout(ctx, turn); err != nil {
			return nil, err
		}
	}
	if b.metrics != nil {
		b.metrics.start()
	}
	for i := 0; i < b.opts.BreakdownTurns; i++ {
		t, err := turnWithTimeout(ctx, turn)
		if err != nil {
			return nil, err
		}
		kb.turns = append(kb.turns, t)
	}
	if b.metrics != nil {
		kb.timers = b.metrics.stop()
	}
	events, err := historyEvents(ctx, b.tc, id)
	if err != nil {
		return nil, err
	}
	kb.steps = turnSteps(events, arrivals, kb.turns)
	return kb, nil
}

func turnWithTimeout(ctx context.Context, turn func(context.Context) (turnTimes, error)) (turnTimes, error) {
	tctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	return turn(tctx)
}

// historyEvents reads the whole history of the workflow's current run.
func historyEvents(ctx context.Context, c client.Client, id string) ([]*historypb.HistoryEvent, error) {
	var out []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of %s: %w", id, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// turnSteps matches the timed turns with the last turns of the history and returns
// the median time of each step of a turn: from the turn sent to its arrival in the
// history, from each event to the next up to the turn's last event before its result
// was read, and from there to the result read by the client (for the host, also when
// its POST was answered). A turn arrives as a signal or an update named in arrivals;
// an update at the workflow task that carried it (the WorkflowTaskScheduled before its
// WorkflowExecutionUpdateAccepted).
func turnSteps(events []*historypb.HistoryEvent, arrivals []string, turns []turnTimes) []stepRow {
	named := func(n string) bool { return slices.Contains(arrivals, n) }
	var signals []int
	arrival := "turn sent → signal in history"
	for i, e := range events {
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && named(a.GetSignalName()) {
			signals = append(signals, i)
		}
		if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && named(a.GetAcceptedRequest().GetInput().GetName()) {
			for j := i - 1; j >= 0; j-- {
				if events[j].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED {
					if len(signals) == 0 || signals[len(signals)-1] < j {
						signals = append(signals, j)
					}
					break
				}
			}
			arrival = "turn sent → update's task in history"
		}
	}
	if len(signals) < len(turns) {
		turns = turns[len(turns)-len(signals):] // the run continued as new in between
	}
	signals = signals[len(signals)-len(turns):]
	anchor := map[int]bool{}
	for _, si := range signals {
		anchor[si] = true
	}
	var order []string
	steps := map[string][]time.Duration{}
	add := func(label string, d time.Duration) {
		if _, ok := steps[label]; !ok {
			order = append(order, label)
		}
		steps[label] = append(steps[label], d)
	}
	for k, si := range signals {
		t := turns[k]
		prev := events[si].GetEventTime().AsTime()
		add(arrival, prev.Sub(t.start))
		for j := si + 1; j < len(events); j++ {
			e := events[j]
			at := e.GetEventTime().AsTime()
			if at.After(t.done) || anchor[j] {
				break
			}
			add(fmt.Sprintf("→ %s", eventName(e.GetEventType())), at.Sub(prev))
			prev = at
		}
		if !t.sent.IsZero() {
			add("last event → POST answered", t.sent.Sub(prev))
		}
		add("last event → result read", t.done.Sub(prev))
		add("total", t.done.Sub(t.start))
	}
	rows := make([]stepRow, 0, len(order))
	for _, l := range order {
		rows = append(rows, stepRow{label: l, p50: percentile(steps[l], 50), n: len(steps[l])})
	}
	return rows
}

// eventName is an event type without its prefix ("WorkflowTaskStarted").
func eventName(t enumspb.EventType) string {
	s := t.String()
	// The enum's String is "WorkflowTaskStarted" in the Go API; older ones spell it
	// EVENT_TYPE_WORKFLOW_TASK_STARTED.
	return strings.TrimPrefix(s, "EVENT_TYPE_")
}

// serverTimers are the server metrics the breakdown prints, by key prefix, in order.
var serverTimers = []string{
	"service_latency frontend ",
	"persistence_latency ",
	"visibility_persistence_latency ",
	"task_latency_load history ",
	"task_latency_queue history ",
	"syncmatch_latency matching ",
	"workflow_task_query_latency history ",
	"direct_query_dispatch_latency history ",
}

// printBreakdown prints the steps of each kind and the server's timers per turn.
func printBreakdown(w io.Writer, kinds []*kindBreakdown) {
	if len(kinds) == 0 {
		return
	}
	fmt.Fprintf(w, "One turn, step by step (median of %d turns of each kind, run alone; event times from the workflow's history):\n", len(kinds[0].turns))
	for _, k := range kinds {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  %s\tms\t\n", k.name)
		for _, s := range k.steps {
			fmt.Fprintf(tw, "  %s\t%6.1f\t\n", s.label, s.p50)
		}
		_ = tw.Flush()
	}
	if kinds[0].timers == nil {
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "\nInside Temporal, per turn (the embedded server's metrics: calls per turn × median = time per turn; long polls count their wait):\n")
	rows := map[string]map[string]timerRow{}
	var keys []string
	for _, k := range kinds {
		rows[k.name] = map[string]timerRow{}
		for _, r := range timerRows(k.timers, len(k.turns), serverTimers) {
			if r.msTurn < 0.05 {
				continue
			}
			rows[k.name][r.key] = r
			if !slices.Contains(keys, r.key) {
				keys = append(keys, r.key)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "  metric\t")
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t", k.name)
	}
	fmt.Fprintln(tw)
	for _, key := range keys {
		fmt.Fprintf(tw, "  %s\t", key)
		for _, k := range kinds {
			if r, ok := rows[k.name][key]; ok {
				fmt.Fprintf(tw, "%.2f × %.2f = %.2f ms\t", r.perTurn, r.p50, r.msTurn)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}
