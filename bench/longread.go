package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/api"
)

// The longread workload measures what reading a run's events costs as the run grows:
// one bench-echo conversation of LongReadEarlyTurn turns and one of LongReadTurns
// turns, both with user messages of longReadMessageBytes (the size of the report that
// found reads slowing with a run's length), driven through the API with Temporal's own
// continue-as-new suggestion. Then, alternating the two runs, LongReadSamples times
// each:
//
//   - first page: GET /v1/runs/{id}/events?afterSequence=-1 (Accept: application/json);
//   - poll: GET /v1/runs/{id}/events/poll?lastSequence=0&timeout=1, which must answer
//     the first page at once (never an empty page while events exist);
//   - middle page: the JSON read from the middle of the log.
//
// Each is timed from the request to the last byte of the answer; the p50 is mostly of
// reads of what the API process keeps of closed executions (closedcache.go), and the
// note below the table gives the first read of each kind, before it kept anything. A
// read costs by the
// bytes it answers, and the API's default page (1 MiB) holds the short run's whole log
// (about 50 KB) but only a part of the long one's, so the reads are made twice: on the
// bench's API, and on a second API process over the same Temporal whose pages are
// longReadPageBytes, less than the short run's log, so that every page read is full at
// both lengths and the ratio (long / short) is the run's length alone.
const (
	longReadMessageBytes = 3 << 10
	longReadPageBytes    = 32 << 10
)

// readFigures are the samples of the three reads on one run.
type readFigures struct{ first, poll, middle []time.Duration }

// longRead runs the longread workload.
func (b *bench) longRead(ctx context.Context, r *Result) error {
	short, err := b.longConv(ctx, b.opts.LongReadEarlyTurn)
	if err != nil {
		return err
	}
	long, err := b.longConv(ctx, b.opts.LongReadTurns)
	if err != nil {
		return err
	}
	small, stop, err := b.pagedAPI(longReadPageBytes)
	if err != nil {
		return err
	}
	defer stop()
	var def, paged [2]readFigures
	var defBytes, pagedBytes [2]int
	for i := 0; i < b.opts.LongReadSamples; i++ {
		for k, c := range []*conv{short, long} {
			if defBytes[k], err = b.readSamples(ctx, b.api.base, c, &def[k]); err != nil {
				return err
			}
			if pagedBytes[k], err = b.readSamples(ctx, small, c, &paged[k]); err != nil {
				return err
			}
		}
	}
	p50 := func(ds []time.Duration) float64 { return percentile(ds, 50) }
	r.LongReadFirstPageP50MsShort, r.LongReadFirstPageP50MsLong = p50(def[0].first), p50(def[1].first)
	r.LongReadPollP50MsShort, r.LongReadPollP50MsLong = p50(def[0].poll), p50(def[1].poll)
	r.LongReadPagedFirstP50MsShort, r.LongReadPagedFirstP50MsLong = p50(paged[0].first), p50(paged[1].first)
	r.LongReadPagedPollP50MsShort, r.LongReadPagedPollP50MsLong = p50(paged[0].poll), p50(paged[1].poll)
	r.LongReadPagedMiddleP50MsShort, r.LongReadPagedMiddleP50MsLong = p50(paged[0].middle), p50(paged[1].middle)
	execs, histBytes, err := b.executions(ctx, long.runID)
	if err != nil {
		return err
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.longReadNote = fmt.Sprintf("long-run reads: %d turns of %d-byte messages in %d executions (%d events, %.1f MB of Temporal history) against %d turns in 1 (%d events);\n"+
		"first pages of %d and %d bytes on the API's default page, %d and %d bytes with %d KiB pages; the middle page of the long run on the default page: p50 %.1f ms;\n"+
		"the first read of each kind on the long run, before the API process kept anything of its closed executions (1 MiB / 32 KiB pages): first page %.1f / %.1f ms, poll %.1f / %.1f ms, middle page %.1f / %.1f ms",
		b.opts.LongReadTurns, longReadMessageBytes, execs, long.lastSeq+1, float64(histBytes)/1e6, b.opts.LongReadEarlyTurn, short.lastSeq+1,
		defBytes[1], defBytes[0], pagedBytes[1], pagedBytes[0], longReadPageBytes>>10, p50(def[1].middle),
		ms(def[1].first[0]), ms(paged[1].first[0]), ms(def[1].poll[0]), ms(paged[1].poll[0]), ms(def[1].middle[0]), ms(paged[1].middle[0]))
	return nil
}

// readSamples times one read of each kind on run c through the API at base and returns
// the size of its first page.
func (b *bench) readSamples(ctx context.Context, base string, c *conv, f *readFigures) (int, error) {
	d, n, err := b.timedRead(ctx, base, fmt.Sprintf("/v1/runs/%s/events?afterSequence=-1", c.runID), true, 0)
	if err != nil {
		return 0, err
	}
	f.first = append(f.first, d)
	if d, _, err = b.timedRead(ctx, base, fmt.Sprintf("/v1/runs/%s/events/poll?lastSequence=0&timeout=1", c.runID), false, 0); err != nil {
		return 0, err
	}
	f.poll = append(f.poll, d)
	mid := c.lastSeq / 2
	if d, _, err = b.timedRead(ctx, base, fmt.Sprintf("/v1/runs/%s/events?afterSequence=%d", c.runID, mid), true, mid+1); err != nil {
		return 0, err
	}
	f.middle = append(f.middle, d)
	return n, nil
}

// longConv opens a bench-echo conversation and holds turns turns of
// longReadMessageBytes messages with it.
func (b *bench) longConv(ctx context.Context, turns int) (*conv, error) {
	c, err := b.openConv(ctx)
	if err != nil {
		return nil, err
	}
	c.textBytes = longReadMessageBytes
	for i := 0; i < turns; i++ {
		tctx, cancel := context.WithTimeout(ctx, turnTimeout)
		_, err := c.exchange(tctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// pagedAPI serves a second API process over the bench's Temporal client and catalog,
// as another `wop api` would, with pages of pageBytes; it returns its base URL and a
// function that stops it.
func (b *bench) pagedAPI(pageBytes int) (string, func(), error) {
	cfg := b.st.Options().API
	cfg.EventsPageBytes, cfg.Namespace = pageBytes, b.st.Namespace()
	cfg.Metrics, cfg.MetricsHandler, cfg.TracerProvider = nil, nil, nil
	srv, err := api.New(cfg, b.tc, b.st.Catalog(), slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, fmt.Errorf("a second API: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := srv.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
	}, nil
}

// timedRead GETs path from the API at base (as JSON, or the long poll) and returns the
// time to the last byte of a 200 answer and its size. The answer must hold events,
// starting at want.
func (b *bench) timedRead(ctx context.Context, base, path string, asJSON bool, want int64) (time.Duration, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+b.api.key)
	if asJSON {
		req.Header.Set("Accept", "application/json")
	}
	start := time.Now()
	resp, err := b.api.http.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("GET %s: %w", path, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET %s: status %d: %.300s", path, resp.StatusCode, raw)
	}
	var page struct {
		Events []struct {
			Sequence int64 `json:"sequence"`
		} `json:"events"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return 0, 0, fmt.Errorf("GET %s: %w", path, err)
	}
	if len(page.Events) == 0 || page.Events[0].Sequence != want {
		return 0, 0, fmt.Errorf("GET %s: the page does not start at event %d (%d events)", path, want, len(page.Events))
	}
	return d, len(raw), nil
}

// executions counts the executions of a run (its continue-as-new chain, followed from
// the first by each one's close event) and the Temporal history they hold.
func (b *bench) executions(ctx context.Context, runID string) (n int, bytes int64, err error) {
	d, err := b.tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return 0, 0, err
	}
	for rid := d.GetWorkflowExecutionInfo().GetFirstRunId(); rid != ""; n++ {
		if n > 1<<16 {
			return 0, 0, errors.New("the run's executions do not end")
		}
		d, err := b.tc.DescribeWorkflowExecution(ctx, runID, rid)
		if err != nil {
			return 0, 0, err
		}
		bytes += d.GetWorkflowExecutionInfo().GetHistorySizeBytes()
		if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			return n + 1, bytes, nil
		}
		it := b.tc.GetWorkflowHistory(ctx, runID, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		rid = ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return 0, 0, err
			}
			rid = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return n, bytes, nil
}
