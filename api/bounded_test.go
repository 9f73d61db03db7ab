package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestTurnOverTheLimitIsRefusedBeforeAnySignal: a resume value over MaxTurnBytes gets
// 413 payload_too_large naming the limit, and nothing reaches the run.
func TestTurnOverTheLimitIsRefusedBeforeAnySignal(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.MaxTurnBytes = 1000 })
	run := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: protocol.StatusWaitingApproval},
		check: workflows.ResolveCheck{OK: true}})
	body := `{"resumeValue":{"text":"` + strings.Repeat("x", 1000) + `"}}`
	rec := env.do("POST", "/v1/runs/r_1/interrupts/agent", fullKey, body)
	e := env.expectError(rec, http.StatusRequestEntityTooLarge, CodePayloadTooLarge)
	if e.Details["limit"] != "maxTurnBytes" || e.Details["maxBytes"] != float64(1000) || !strings.Contains(e.Message, "WOP_MAX_TURN_BYTES") {
		t.Errorf("the error names the limit: %+v", e)
	}
	if len(run.signals) != 0 {
		t.Fatalf("a refused turn was signalled: %+v", run.signals)
	}
	rec = env.do("POST", "/v1/runs/r_1/interrupts/agent", fullKey, `{"resumeValue":{"text":"short"}}`)
	if rec.Code != 200 || len(run.signals) != 1 {
		t.Fatalf("a turn within the limit: %d %s", rec.Code, rec.Body)
	}
}

// TestEventsArePagedByBytes: the JSON read answers one bounded page with hasMore, and
// a client walks the log with lastSequence (or afterSequence) until isComplete.
func TestEventsArePagedByBytes(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.EventsPageBytes = 2000 })
	var evs []workflows.Event
	evs = append(evs, ev("r_1", 0, "run.started", `{}`))
	for i := 1; i <= 40; i++ {
		evs = append(evs, ev("r_1", int64(i), "conversation.exchanged", `{"text":"`+strings.Repeat("m", 300)+`"}`))
	}
	evs = append(evs, ev("r_1", 41, "run.completed", `{}`))
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "completed"}, events: evs})
	var got []workflows.Event
	cursor, pages := "", 0
	for {
		rec := env.do("GET", "/v1/runs/r_1/events"+cursor, fullKey, "", "Accept", "application/json")
		if rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		if rec.Body.Len() > 3000 {
			t.Fatalf("a page of %d bytes; the bound is about 2000", rec.Body.Len())
		}
		page := decode[EventsResponse](t, rec.Body.Bytes())
		got = append(got, page.Events...)
		pages++
		if page.IsComplete {
			if page.HasMore {
				t.Fatal("a complete page has no more")
			}
			break
		}
		if !page.HasMore || len(page.Events) == 0 || pages > 50 {
			t.Fatalf("page %d: %d events, hasMore %v", pages, len(page.Events), page.HasMore)
		}
		cursor = fmt.Sprintf("?afterSequence=%d", page.Events[len(page.Events)-1].Sequence)
	}
	if len(got) != 42 || pages < 5 {
		t.Fatalf("read %d events in %d pages, want 42 in several", len(got), pages)
	}
	for i, e := range got {
		if e.Sequence != int64(i) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
	// The poll pages the same way.
	rec := env.do("GET", "/v1/runs/r_1/events/poll?lastSequence=0", fullKey, "")
	if p := decode[EventsResponse](t, rec.Body.Bytes()); !p.HasMore || p.IsComplete || len(p.Events) >= 42 {
		t.Fatalf("poll page: %d events, hasMore %v", len(p.Events), p.HasMore)
	}
	env.expectError(env.do("GET", "/v1/runs/r_1/events?afterSequence=x", fullKey, "", "Accept", "application/json"), 400, CodeValidation)
}

// TestCancelEndsARunWhoseWorkflowCannotAnswer: a run whose workflow task keeps failing
// answers no query; :cancel checks the tenant from the search attributes, terminates
// it in Temporal, and the run reads as cancelled afterwards.
func TestCancelEndsARunWhoseWorkflowCannotAnswer(t *testing.T) {
	env := newTestEnv(t)
	run := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_stuck", Status: protocol.StatusWaitingApproval}, stuck: true})
	rec := env.do("GET", "/v1/runs/r_stuck", fullKey, "")
	e := env.expectError(rec, http.StatusServiceUnavailable, CodeUnavailable)
	if !strings.Contains(e.Message, "cancel the run") {
		t.Errorf("the error says what to do: %q", e.Message)
	}
	env.expectError(env.do("POST", "/v1/runs/r_stuck:cancel", otherKey, `{}`), 404, CodeNotFound)
	if run.closed != nil {
		t.Fatal("another tenant's cancel terminated the run")
	}
	rec = env.do("POST", "/v1/runs/r_stuck:cancel", fullKey, `{"reason":"stuck"}`)
	if rec.Code != 200 || decode[map[string]string](t, rec.Body.Bytes())["status"] != protocol.StatusCancelled {
		t.Fatalf("cancel of a stuck run: %d %s", rec.Code, rec.Body)
	}
	reason := run.closed.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
	if !strings.HasPrefix(reason, terminateReasonPrefix) || !strings.Contains(reason, "stuck") {
		t.Fatalf("termination reason %q", reason)
	}
	rec = env.do("GET", "/v1/runs/r_stuck", fullKey, "")
	if rec.Code != 200 || decode[workflows.Snapshot](t, rec.Body.Bytes()).Status != protocol.StatusCancelled {
		t.Fatalf("after the cancel: %d %s", rec.Code, rec.Body)
	}
}

// TestOneFeedPerRun: many readers waiting on one run share one history long poll and
// one events query per wake, instead of one each.
func TestOneFeedPerRun(t *testing.T) {
	env := newTestEnv(t)
	run := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: protocol.StatusWaitingApproval},
		events: noopEvents("r_1")[:2], live: true})
	const readers = 60
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([][]workflows.Event, readers)
	errs := make([]error, readers)
	ready := make(chan struct{}, readers)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f := env.srv.follow(ctx, "r_1", 1)
			defer f.close()
			ready <- struct{}{}
			got[i], _, _, errs[i] = f.next(ctx, nil)
		}(i)
	}
	for i := 0; i < readers; i++ {
		<-ready
	}
	env.ft.mu.Lock()
	before := run.eventQueries
	env.ft.mu.Unlock()
	env.ft.bump("r_1", ev("r_1", 2, "node.completed", `{}`))
	wg.Wait()
	for i := range got {
		if errs[i] != nil || len(got[i]) != 1 || got[i][0].Sequence != 2 {
			t.Fatalf("reader %d: %v %+v", i, errs[i], got[i])
		}
	}
	env.ft.mu.Lock()
	after := run.eventQueries
	env.ft.mu.Unlock()
	if after-before > 3 || before > 3 {
		t.Fatalf("%d readers made %d events queries before the event and %d after it; one feed makes a few", readers, before, after-before)
	}
	// The feed outlives its last reader by feedLinger, then ends.
	require.Eventually(t, func() bool {
		env.srv.feedsMu.Lock()
		defer env.srv.feedsMu.Unlock()
		return len(env.srv.feeds) == 0
	}, 5*feedLinger, 10*time.Millisecond, "a feed left after the last reader's linger")
}

// A long poll's reader leaves with every answer and comes back: within feedLinger it
// finds the feed where it was, so its next poll costs no query of its own.
func TestAReaderBackWithinTheLingerKeepsItsFeed(t *testing.T) {
	old := feedLinger
	feedLinger = time.Hour
	t.Cleanup(func() { feedLinger = old })
	env := newTestEnv(t)
	run := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: protocol.StatusWaitingApproval},
		events: noopEvents("r_1")[:2], live: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := env.srv.follow(ctx, "r_1", 1)
	first := f.feed
	done := make(chan error, 1)
	go func() {
		evs, _, _, err := f.next(ctx, nil)
		if err == nil && (len(evs) != 1 || evs[0].Sequence != 2) {
			err = fmt.Errorf("first poll: %+v", evs)
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		env.ft.mu.Lock()
		defer env.ft.mu.Unlock()
		return run.eventQueries > 0
	}, 5*time.Second, time.Millisecond)
	env.ft.bump("r_1", ev("r_1", 2, "node.completed", `{}`))
	require.NoError(t, <-done)
	f.close()

	env.ft.mu.Lock()
	before := run.eventQueries
	env.ft.mu.Unlock()
	g := env.srv.follow(ctx, "r_1", 2)
	defer g.close()
	assert.Same(t, first, g.feed, "the reader back within the linger has the same feed")
	env.ft.bump("r_1", ev("r_1", 3, "node.completed", `{}`))
	evs, _, _, err := g.next(ctx, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, int64(3), evs[0].Sequence)
	env.ft.mu.Lock()
	after := run.eventQueries
	env.ft.mu.Unlock()
	assert.LessOrEqual(t, after-before, 1, "one query for the new event, none to start a feed again")
}

// TestOnlyCompletedWorkflowTasksWakeReaders: the history events that may come with
// new OpenWOP events are a completed workflow task and the execution's close; a signal
// or a scheduled task does not make the feed query the run.
func TestOnlyCompletedWorkflowTasksWakeReaders(t *testing.T) {
	for _, et := range []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW} {
		if !wakesReaders(et) {
			t.Errorf("%s does not wake readers", et)
		}
	}
	for _, et := range []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
		enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED} {
		if wakesReaders(et) {
			t.Errorf("%s wakes readers", et)
		}
	}
}

// TestEventsOfEarlierExecutions: a run that continued as new many times holds its
// older events in closed executions; the API reads them from there, also when the
// current execution names only the newest few (an older one names those before it).
func TestEventsOfEarlierExecutions(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.EventsPageBytes = 1000 })
	var evs []workflows.Event
	for i := 0; i < 60; i++ {
		typ := "node.started"
		if i == 59 {
			typ = "run.completed"
		}
		evs = append(evs, ev("r_1", int64(i), typ, `{"n":"`+strings.Repeat("x", 100)+`"}`))
	}
	var execs []fakeExec
	for i := 0; i < 6; i++ {
		execs = append(execs, fakeExec{runID: fmt.Sprintf("e%d", i), first: int64(10 * i)})
	}
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "completed"}, events: evs, execs: execs, links: 2})
	var got []workflows.Event
	after := int64(-1)
	for pages := 0; pages < 100; pages++ {
		rec := env.do("GET", fmt.Sprintf("/v1/runs/r_1/events?afterSequence=%d", after), fullKey, "", "Accept", "application/json")
		if rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		page := decode[EventsResponse](t, rec.Body.Bytes())
		got = append(got, page.Events...)
		if page.IsComplete {
			break
		}
		if !page.HasMore {
			t.Fatalf("page after %d: neither complete nor more", after)
		}
		after = page.Events[len(page.Events)-1].Sequence
	}
	if len(got) != 60 {
		t.Fatalf("read %d events, want 60", len(got))
	}
	for i, e := range got {
		if e.Sequence != int64(i) {
			t.Fatalf("event %d has sequence %d", i, e.Sequence)
		}
	}
}

// TestForkOfALogTooLargeForItsInput: a replay fork carries the source log in its
// workflow input; a log over maxForkSourceBytes is refused with a precise error
// instead of a start Temporal would reject.
func TestForkOfALogTooLargeForItsInput(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.EventsPageBytes = 64 << 10 })
	evs := noopEvents("r_big")
	big := strings.Repeat("y", 50<<10)
	for i := 0; i < 30; i++ {
		evs = append(evs[:len(evs)-1], ev("r_big", int64(len(evs)-1), "node.started", `{"blob":"`+big+`"}`), ev("r_big", int64(len(evs)), "run.completed", `{}`))
	}
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_big", WorkflowID: "conformance-noop", Status: "completed"}, events: evs})
	e := env.expectError(env.do("POST", "/v1/runs/r_big:fork", fullKey, `{"mode":"replay"}`), http.StatusUnprocessableEntity, CodePayloadTooLarge)
	if e.Details["limit"] != "forkSourceLogBytes" {
		t.Errorf("the error names the limit: %+v", e)
	}
	if env.ft.starts != 0 {
		t.Fatal("a fork was started")
	}
}

// A poll of a run whose feed is live in this process (another reader's, or a
// lingering one) takes its events from the feed: it makes no read of its own, and the
// feed's tenant answers the tenant check.
func TestAPollOnALiveFeedMakesNoQueryOfItsOwn(t *testing.T) {
	old := feedLinger
	feedLinger = time.Hour
	t.Cleanup(func() { feedLinger = old })
	env := newTestEnv(t)
	snap := workflows.Snapshot{RunID: "r_1", Status: protocol.StatusWaitingApproval}
	snap.Owner.Tenant = "default"
	run := env.ft.add(&fakeRun{snap: snap, events: noopEvents("r_1")[:2], live: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	queries := func() int {
		env.ft.mu.Lock()
		defer env.ft.mu.Unlock()
		return run.eventQueries
	}
	lingering := func() bool {
		env.srv.feedsMu.Lock()
		defer env.srv.feedsMu.Unlock()
		f := env.srv.feeds["r_1"]
		if f == nil {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.linger != nil && f.tenant == "default"
	}
	f := env.srv.follow(ctx, "r_1", 1)
	require.Eventually(t, func() bool { return queries() > 0 }, 5*time.Second, time.Millisecond)
	f.close()
	require.Eventually(t, lingering, 5*time.Second, time.Millisecond, "the feed lingers, having read the run")

	before := queries()
	env.expectError(env.do("GET", "/v1/runs/r_1/events/poll?lastSequence=1&timeout=1", otherKey, ""), 404, CodeNotFound)
	assert.Equal(t, before, queries(), "another tenant's poll is refused by the feed's tenant, with no query")

	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- env.do("GET", "/v1/runs/r_1/events/poll?lastSequence=1&timeout=5", fullKey, "") }()
	require.Eventually(t, func() bool { return !lingering() }, 5*time.Second, time.Millisecond, "the poll takes the feed over")
	env.ft.bump("r_1", ev("r_1", 2, "node.completed", `{}`))
	rec := <-done
	require.Equal(t, 200, rec.Code, rec.Body.String())
	got := decode[EventsResponse](t, rec.Body.Bytes())
	require.Len(t, got.Events, 1)
	assert.Equal(t, int64(2), got.Events[0].Sequence)
	assert.Equal(t, 1, queries()-before, "the feed's one query for the new event, none of the poll's own")
}
