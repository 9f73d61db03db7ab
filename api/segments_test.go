package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// execLinks are the links execution i of the fake run starts with: the newest links
// executions before it and, for a recorded run, the sparse index (multiples of 32 and
// of 1,024, newest 32 each), as the run workflow carries them.
func (r *fakeRun) execLinks(i int) (earlier, index []activities.Segment) {
	link := func(j int) activities.Segment {
		return activities.Segment{RunID: r.execs[j].runID, FirstSequence: r.execs[j].first, LastSequence: r.execs[j+1].first - 1, Recorded: r.recorded}
	}
	for j := i - 1; j >= 0 && len(earlier) < r.links; j-- {
		earlier = append(earlier, link(j))
	}
	if !r.recorded {
		return earlier, nil
	}
	for _, stride := range []int{32, 1024} {
		n := 0
		for j := i - 1; j >= 0 && n < 32; j-- {
			if j%stride == 0 {
				index, n = append(index, link(j)), n+1
			}
		}
	}
	return earlier, index
}

// fakeService answers GetWorkflowExecutionHistory for the executions of the fake's
// runs: a start event whose input carries the execution's links, then its events in
// event-record markers of two events each between other history events, in pages of
// four history events.
type fakeService struct {
	workflowservice.WorkflowServiceClient
	ft *fakeTemporal
}

func (f *fakeService) GetWorkflowExecutionHistory(_ context.Context, req *workflowservice.GetWorkflowExecutionHistoryRequest, _ ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryResponse, error) {
	f.ft.mu.Lock()
	defer f.ft.mu.Unlock()
	r := f.ft.runs[req.GetExecution().GetWorkflowId()]
	if r == nil {
		return nil, serviceerror.NewNotFound("no workflow")
	}
	for i, x := range r.execs {
		if x.runID != req.GetExecution().GetRunId() {
			continue
		}
		if r.gone[x.runID] {
			break
		}
		r.historyReads++
		hist, err := r.execHistory(i)
		if err != nil {
			return nil, err
		}
		from := 0
		if tok := req.GetNextPageToken(); len(tok) > 0 {
			from, _ = strconv.Atoi(string(tok))
		}
		size := 4
		if req.GetMaximumPageSize() > 0 {
			size = min(size, int(req.GetMaximumPageSize()))
		}
		to := min(from+size, len(hist))
		resp := &workflowservice.GetWorkflowExecutionHistoryResponse{History: &historypb.History{Events: hist[from:to]}}
		if to < len(hist) {
			resp.NextPageToken = []byte(strconv.Itoa(to))
		}
		return resp, nil
	}
	return nil, serviceerror.NewNotFound("no execution " + req.GetExecution().GetRunId())
}

// execHistory is the Temporal history of execution i of the fake run.
func (r *fakeRun) execHistory(i int) ([]*historypb.HistoryEvent, error) {
	dc := converter.GetDefaultDataConverter()
	earlier, index := r.execLinks(i)
	carried, err := json.Marshal(map[string]any{"shape": 1, "segments": earlier, "anchors": [][]activities.Segment{index}})
	if err != nil {
		return nil, err
	}
	input, err := dc.ToPayloads(map[string]any{"runId": "r_1", "carried": json.RawMessage(carried)})
	if err != nil {
		return nil, err
	}
	hist := []*historypb.HistoryEvent{{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: input}}}}
	marker := func(name string, v any) (*historypb.HistoryEvent, error) {
		p, err := dc.ToPayloads(v)
		if err != nil {
			return nil, err
		}
		return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
			Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
				MarkerName: name, Details: map[string]*commonpb.Payloads{"data": p}}}}, nil
	}
	// A side effect of another kind, which the reader passes over.
	other, err := marker("SideEffect", map[string]string{"kind": "something else"})
	if err != nil {
		return nil, err
	}
	hist = append(hist, other)
	end := r.execs[i+1].first
	for s := r.execs[i].first; s < end; s += 2 {
		var evs []workflows.Event
		for q := s; q < min(s+2, end); q++ {
			if !r.unrecorded[q] {
				evs = append(evs, r.events[q])
			}
		}
		// Records are held compressed; those that could not be are JSON.
		var value any = workflows.EventsRecord{Kind: workflows.EventsRecordKind, Events: evs}
		if s%4 == 0 {
			if value, err = value.(workflows.EventsRecord).Compressed(); err != nil {
				return nil, err
			}
		}
		m, err := marker("SideEffect", value)
		if err != nil {
			return nil, err
		}
		hist = append(hist, &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED}, m)
	}
	return append(hist, &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW}), nil
}

// recordedRun is a run of 100 executions of 5 events each, which recorded their
// events, the current one naming the newest 32 before it and the sparse index.
func recordedRun(t *testing.T, env *testEnv) *fakeRun {
	t.Helper()
	var evs []workflows.Event
	for i := 0; i < 500; i++ {
		evs = append(evs, ev("r_1", int64(i), "node.started", `{"n":"`+strings.Repeat("x", 100)+`"}`))
	}
	var execs []fakeExec
	for i := 0; i < 100; i++ {
		execs = append(execs, fakeExec{runID: fmt.Sprintf("e%d", i), first: int64(5 * i)})
	}
	return env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: protocol.StatusWaitingApproval, Owner: workflows.Owner{Tenant: "default"}},
		events: evs, execs: execs, links: workflows.MaxSegmentLinks, recorded: true, open: true})
}

// readAllJSON reads the run's whole log with the JSON read, page after page.
func readAllJSON(t *testing.T, env *testEnv) (got []workflows.Event, pages int) {
	t.Helper()
	after := int64(-1)
	for ; pages < 1000; pages++ {
		rec := env.do("GET", fmt.Sprintf("/v1/runs/r_1/events?afterSequence=%d", after), fullKey, "", "Accept", "application/json")
		if rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		page := decode[EventsResponse](t, rec.Body.Bytes())
		got = append(got, page.Events...)
		if !page.HasMore {
			return got, pages + 1
		}
		after = page.Events[len(page.Events)-1].Sequence
	}
	t.Fatal("no end of the log after 1000 pages")
	return nil, 0
}

func requireSequences(t *testing.T, got []workflows.Event, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("read %d events, want %d", len(got), n)
	}
	for i, e := range got {
		if e.Sequence != int64(i) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
}

// TestEventsOfRecordedExecutions: the older events of a run whose executions recorded
// them are decoded from those executions' histories, none of them is queried, and the
// execution holding an event is found through the sparse index in few reads.
func TestEventsOfRecordedExecutions(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.EventsPageBytes = 400; c.RateLimitPerSecond, c.RateLimitBurst = 1e6, 1e6 })
	run := recordedRun(t, env)
	// A page deep in the run, read first: execution 10 is found through execution 32's
	// start event.
	rec := env.do("GET", "/v1/runs/r_1/events?afterSequence=52", fullKey, "", "Accept", "application/json")
	page := decode[EventsResponse](t, rec.Body.Bytes())
	if rec.Code != 200 || len(page.Events) == 0 || page.Events[0].Sequence != 53 || !page.HasMore {
		t.Fatalf("page after 52: %d %s", rec.Code, rec.Body)
	}
	if run.historyReads > 3 {
		t.Fatalf("%d history reads to find and read execution 10", run.historyReads)
	}
	got, pages := readAllJSON(t, env)
	requireSequences(t, got, 500)
	if run.execQueries != 0 {
		t.Fatalf("%d queries of closed executions", run.execQueries)
	}
	// Each execution's history (three pages of the fake's) is read once, not once per
	// page of events: what was read of a closed execution is kept.
	if run.historyReads > 3*len(run.execs)+5 || pages < 200 {
		t.Fatalf("%d history reads for %d pages", run.historyReads, pages)
	}
	// The poll from the start answers the first page at once.
	rec = env.do("GET", "/v1/runs/r_1/events/poll?lastSequence=0&timeout=1", fullKey, "")
	if p := decode[EventsResponse](t, rec.Body.Bytes()); rec.Code != 200 || len(p.Events) == 0 || p.Events[0].Sequence != 0 || !p.HasMore {
		t.Fatalf("poll from the start: %d %s", rec.Code, rec.Body)
	}
	// Another tenant's key sees nothing of it.
	env.expectError(env.do("GET", "/v1/runs/r_1/events?afterSequence=52", otherKey, "", "Accept", "application/json"), 404, CodeNotFound)
}

// TestIncompleteRecordsAreQueried: an execution whose records miss an event is read by
// query instead, and the log is still whole.
func TestIncompleteRecordsAreQueried(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.EventsPageBytes = 1000; c.RateLimitPerSecond, c.RateLimitBurst = 1e6, 1e6 })
	run := recordedRun(t, env)
	run.unrecorded = map[int64]bool{51: true}
	got, _ := readAllJSON(t, env)
	requireSequences(t, got, 500)
	if run.execQueries == 0 {
		t.Fatal("the execution with incomplete records was not queried")
	}
}

// TestEventsOfAnExecutionNoLongerKept: a closed execution Temporal deleted (the
// namespace's retention) answers 404 saying so, not an internal error.
func TestEventsOfAnExecutionNoLongerKept(t *testing.T) {
	env := newTestEnv(t)
	run := recordedRun(t, env)
	run.gone = map[string]bool{"e10": true}
	e := env.expectError(env.do("GET", "/v1/runs/r_1/events?afterSequence=52", fullKey, "", "Accept", "application/json"), 404, CodeNotFound)
	if !strings.Contains(e.Message, "e10") || !strings.Contains(e.Message, "retention") {
		t.Fatalf("the error names the execution and the retention: %q", e.Message)
	}
	rec := env.do("GET", "/v1/runs/r_1/events?afterSequence=102", fullKey, "", "Accept", "application/json")
	if rec.Code != 200 {
		t.Fatalf("the executions still kept are read: %d %s", rec.Code, rec.Body)
	}
}

// TestSegmentRecordsPages: the records cut a page as an EventsQuery page is cut, start
// after the cursor, stop at the execution's last event, and say when more of the
// history must be read first.
func TestSegmentRecordsPages(t *testing.T) {
	var evs []workflows.Event
	for i := 10; i < 20; i++ {
		evs = append(evs, ev("r_1", int64(i), "node.started", `{"n":"`+strings.Repeat("x", 100)+`"}`))
	}
	marker := func(evs []workflows.Event) *historypb.HistoryEvent {
		p, err := converter.GetDefaultDataConverter().ToPayloads(workflows.EventsRecord{Kind: workflows.EventsRecordKind, Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
			Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
				MarkerName: "SideEffect", Details: map[string]*commonpb.Payloads{"data": p}}}}
	}
	one := workflows.EventBytes(&evs[0])
	sr := &segmentRecords{seg: activities.Segment{RunID: "e1", FirstSequence: 10, LastSequence: 19, Recorded: true}}
	if err := sr.take(marker(evs[:5]), nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := sr.page(12, 1<<20); ok {
		t.Fatal("a page that runs past the events read is not answered yet")
	}
	if page, ok := sr.page(11, 2*one); !ok || len(page) != 2 || page[0].Sequence != 12 {
		t.Fatalf("a page of two after 11: %v, %d events", ok, len(page))
	}
	if err := sr.take(marker(evs[3:]), nil); err != nil {
		t.Fatalf("records that overlap what was read: %v", err)
	}
	if page, ok := sr.page(16, 1<<20); !ok || len(page) != 3 || page[2].Sequence != 19 {
		t.Fatalf("the rest after 16: %v, %d events", ok, len(page))
	}
	if page, ok := sr.page(5, 1); !ok || len(page) != 1 || page[0].Sequence != 10 {
		t.Fatalf("a cursor before the execution starts at its first event, one event at least: %v, %d events", ok, len(page))
	}
	gap := &segmentRecords{seg: activities.Segment{RunID: "e0", FirstSequence: 8, LastSequence: 19, Recorded: true}}
	if err := gap.take(marker(evs), nil); err == nil {
		t.Fatal("records that skip events 8 and 9 are not an error")
	}
}

// TestClosedCacheIsBounded: the records kept stay within closedCacheBytes, the least
// recently used dropped first, never the one being read.
func TestClosedCacheIsBounded(t *testing.T) {
	c := newClosedCache()
	var srs []*segmentRecords
	for i := 0; i < 5; i++ {
		sr := c.records("r_1", activities.Segment{RunID: fmt.Sprintf("e%d", i)})
		c.grew(sr, closedCacheBytes/3)
		srs = append(srs, sr)
	}
	if c.bytes > closedCacheBytes {
		t.Fatalf("the cache holds %d bytes", c.bytes)
	}
	if c.records("r_1", activities.Segment{RunID: "e4"}) != srs[4] || c.records("r_1", activities.Segment{RunID: "e3"}) != srs[3] {
		t.Fatal("the newest records were dropped")
	}
	if c.records("r_1", activities.Segment{RunID: "e0"}) == srs[0] {
		t.Fatal("the oldest records were kept")
	}
	huge := c.records("r_1", activities.Segment{RunID: "big"})
	c.grew(huge, 2*closedCacheBytes)
	if c.records("r_1", activities.Segment{RunID: "big"}) != huge {
		t.Fatal("the records being read were dropped")
	}
}

// TestPollAnswersEventsThatExistWhateverItsTimeout: a poll's timeout bounds its wait
// for new events, not the read of those that exist. A read Temporal answers only after
// the timeout (here its first fifteen queries time out, 1.5 s of retries against a
// timeout of 1 s) is answered with the events, never with an empty page.
func TestPollAnswersEventsThatExistWhateverItsTimeout(t *testing.T) {
	env := newTestEnv(t)
	run := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: protocol.StatusWaitingApproval}, events: noopEvents("r_1")[:3], eventsTimeouts: 15})
	rec := env.do("GET", "/v1/runs/r_1/events/poll?lastSequence=0&timeout=1", fullKey, "")
	got := decode[EventsResponse](t, rec.Body.Bytes())
	if rec.Code != 200 || len(got.Events) != 3 || run.eventsTimeouts != 0 {
		t.Fatalf("poll with its read outlasting its timeout: %d %s (%d timeouts left)", rec.Code, rec.Body, run.eventsTimeouts)
	}
}

// TestRecordedEventsPerReader: an era-3 run's closed executions hold its events under
// their v2 names (the records are what the run wrote); read from those histories, a v1
// reader is served the v1 names and a v2 reader the v2 names with the run's id bound,
// by the JSON read and by the poll alike.
func TestRecordedEventsPerReader(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.EventsPageBytes = 400; c.RateLimitPerSecond, c.RateLimitBurst = 1e6, 1e6 })
	run := recordedRun(t, env)
	run.snap.Era = protocol.EraV2
	for i := range run.events {
		if i%2 == 1 {
			run.events[i].Type = "agent.tool-returned" // as an era-3 run stores agent.toolReturned
		}
	}
	got, _ := readAllJSON(t, env)
	requireSequences(t, got, 500)
	for _, e := range got {
		want := map[bool]string{false: "node.started", true: "agent.toolReturned"}[e.Sequence%2 == 1]
		if e.Type != want {
			t.Fatalf("v1 reader, event %d: type %s, want %s", e.Sequence, e.Type, want)
		}
	}
	if run.execQueries != 0 {
		t.Fatalf("%d queries of closed executions", run.execQueries)
	}
	after, n := int64(-1), 0
	for pages := 0; pages < 1000; pages++ {
		rec := env.do("GET", fmt.Sprintf("/runs/r_1/events?afterSequence=%d", after), fullKey, "", "Accept", "application/json")
		require.Equal(t, 200, rec.Code, "%s", rec.Body)
		var page struct {
			RunID   string           `json:"runId"`
			Events  []map[string]any `json:"events"`
			HasMore bool             `json:"hasMore"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		require.Equal(t, "default/r_1", page.RunID)
		for _, e := range page.Events {
			require.Equal(t, float64(n), e["sequence"])
			require.Equal(t, map[bool]string{false: "node.started", true: "agent.tool-returned"}[n%2 == 1], e["type"], "v2 reader, event %d", n)
			require.Equal(t, "default/r_1", e["runId"])
			n++
		}
		if !page.HasMore {
			break
		}
		after = int64(page.Events[len(page.Events)-1]["sequence"].(float64))
	}
	require.Equal(t, 500, n, "the v2 read reaches every event")
	// A poll from a cursor in an early execution, per major.
	rec := env.do("GET", "/runs/r_1/events/poll?afterSequence=52&timeout=1", fullKey, "")
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	var poll struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &poll))
	require.NotEmpty(t, poll.Events)
	require.Equal(t, float64(53), poll.Events[0]["sequence"])
	require.Equal(t, "agent.tool-returned", poll.Events[0]["type"])
	rec = env.do("GET", "/v1/runs/r_1/events/poll?afterSequence=52&timeout=1", fullKey, "")
	p := decode[EventsResponse](t, rec.Body.Bytes())
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	require.NotEmpty(t, p.Events)
	require.Equal(t, "agent.toolReturned", p.Events[0].Type)
}
