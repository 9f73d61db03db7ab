package tests

// Reads of a long run beside reads of a short one: a conversation of 800 turns that
// continued as new dozens of times (every twenty turns, by the run's test knob) is read
// whole, page by page, through the JSON read, the long poll and SSE, next to a
// conversation of 10 turns in one execution, and every read gives every event once, in
// order, with hasMore and isComplete right. The long run's older events come from the
// event records in its closed executions' histories: no closed execution is queried
// (which would make a worker replay it). The runs are conversations of the council
// fixture, whose host agent echoes each turn in workflow code, so 800 turns cost a few
// seconds. How long the reads take is measured by `wop bench` (longread), not here.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// Sizes of the side-by-side test: the API's page is small so a read of the long run
// takes hundreds of pages, many of them crossing from one execution into the next.
const (
	sideShortTurns = 10
	sideLongTurns  = 800
	sidePageBytes  = 8 << 10
	sideTextBytes  = 200
	// sideEventsPerExecution makes the long run continue as new after twenty turns
	// (the council logs two events a turn).
	sideEventsPerExecution = 40
	// sideBatch turns are signalled at once: the run carries the queued ones across
	// continue-as-new (within its 64 KiB bound for them).
	sideBatch = 100
	sideNode  = "convo"
	// Turns sideLargeFrom on are large: the events of the first three (each turn and
	// its echo), which one execution takes (it cannot carry two of them queued), pass
	// the 256 KiB at which an execution records its events before it continues.
	sideLargeFrom  = 400
	sideLargeTurns = 4
	sideLargeBytes = 60 << 10
)

// TestLongRunReadsSideBySide reads a turn-10 and a turn-800 conversation side by side.
func TestLongRunReadsSideBySide(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := startPrivateStack(t, stackOptions{Tweak: func(o *stack.Options) {
		o.API.EventsPageBytes = sidePageBytes
		o.API.Metrics = reg
		o.API.RateLimitPerSecond, o.API.RateLimitBurst = 1e6, 1e6
		// Temporal holds back the first workflow task of an execution that continued
		// as new less than this after it started (1 s by default, against tight loops);
		// here executions live twenty turns.
		o.ServerDynamicConfig = map[string]any{"history.workflowIdReuseMinimalInterval": time.Millisecond}
	}})
	start := time.Now()
	short, long := "side-short-"+randomHex(4), "side-long-"+randomHex(4)
	sideStart(t, c, short, 0)
	sideStart(t, c, long, sideEventsPerExecution)
	text := func(i int) string {
		head, size := fmt.Sprintf("message %d ", i), sideTextBytes
		if i >= sideLargeFrom && i < sideLargeFrom+sideLargeTurns {
			size = sideLargeBytes
		}
		return head + strings.Repeat("w", size-len(head))
	}
	var shortSent, longSent []string
	for i := 0; i < sideShortTurns; i++ {
		shortSent = append(shortSent, text(i))
		status, _, body := c.do(http.MethodPost, "/v1/runs/"+short+"/interrupts/"+sideNode, map[string]any{"resumeValue": map[string]any{"text": shortSent[i]}})
		require.Equal(t, http.StatusOK, status, "%v", body)
	}
	// The long run's turns are signalled in batches, as the API signals a resolve,
	// several at a time: the order they arrive in is the order the run takes them.
	for len(longSent) < sideLongTurns {
		batch := make([]string, 0, sideBatch)
		for len(batch) < sideBatch && len(longSent)+len(batch) < sideLongTurns {
			if n := len(longSent) + len(batch); len(batch) > 0 && (n == sideLargeFrom || n == sideLargeFrom+sideLargeTurns) {
				break // the large turns are a batch of their own
			}
			batch = append(batch, text(len(longSent)+len(batch)))
		}
		sideSignal(t, c, long, len(longSent), batch)
		longSent = append(longSent, batch...)
		sideWaitTurns(t, c, long, len(longSent))
	}
	sideWaitTurns(t, c, short, len(shortSent))
	t.Logf("%d and %d turns in %s", len(shortSent), len(longSent), time.Since(start).Round(time.Millisecond))

	// The long run continued as new dozens of times, more than the newest executions
	// a run names, and every execution before the current one recorded its events.
	links := sideCarriedLinks(t, c, long)
	require.Greater(t, len(links), workflows.MaxSegmentLinks+4, "the run continued as new more than %d times", workflows.MaxSegmentLinks+4)
	for _, l := range links {
		require.True(t, l.Recorded, "execution %s (events %d to %d) recorded its events", l.RunID, l.FirstSequence, l.LastSequence)
	}
	desc, err := c.Stack.Client().DescribeWorkflowExecution(context.Background(), short, "")
	require.NoError(t, err)
	require.Equal(t, desc.GetWorkflowExecutionInfo().GetFirstRunId(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the short run has one execution")
	t.Logf("%d executions", len(links)+1)

	logs := map[string][]event{}
	for _, run := range []struct {
		id   string
		sent []string
	}{{short, shortSent}, {long, longSent}} {
		snap := snapshot(t, c, run.id)
		all := sideReadJSON(t, c, run.id, -1)
		sideRequireLog(t, all, snap.LastSequence, run.sent)
		require.Equal(t, all, sideReadPolls(t, c, run.id), "the long poll reads the same log")
		require.Equal(t, all, sideReadSSE(t, c, run.id, snap.LastSequence), "SSE reads the same log")
		logs[run.id] = all

		// A poll from the start answers at once with the first page, whatever the
		// timeout, and says whether more follow.
		status, _, raw := c.doRaw(http.MethodGet, "/v1/runs/"+run.id+"/events/poll?lastSequence=0&timeout=1", nil,
			map[string]string{"Authorization": "Bearer " + c.Key})
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var page sidePage
		require.NoError(t, json.Unmarshal(raw, &page))
		require.NotEmpty(t, page.Events, "a poll whose cursor lies in earlier events answers them")
		require.Equal(t, all[:len(page.Events)], page.Events)
		require.Equal(t, len(page.Events) < len(all), page.HasMore)
	}

	// The execution that took the first large turns recorded its events more than
	// once.
	large := -1
	for _, e := range logs[long] {
		if e.Type == protocol.EvConversationExchanged && strings.Contains(string(e.Payload), fmt.Sprintf(`"message %d w`, sideLargeFrom)) {
			large = int(e.Sequence)
			break
		}
	}
	require.Positive(t, large, "the first large turn is in the log")
	for _, l := range links {
		if l.FirstSequence <= int64(large) && int64(large) <= l.LastSequence {
			require.GreaterOrEqual(t, sideRecords(t, c, long, l.RunID), 2, "records of execution %s, which took the large turns", l.RunID)
		}
	}

	// Pages that start anywhere in the long run: at the first event of an execution,
	// in its middle and at its last, for the oldest executions (found through the
	// sparse index) and every fifth after them.
	all := logs[long]
	for i, l := range links {
		if i >= 4 && i%5 != 0 {
			continue
		}
		for _, after := range []int64{l.FirstSequence - 1, (l.FirstSequence + l.LastSequence) / 2, l.LastSequence - 1} {
			if after < -1 || after >= l.LastSequence {
				continue
			}
			raw := getJSON(t, c, fmt.Sprintf("/v1/runs/%s/events?afterSequence=%d", long, after))
			var page sidePage
			require.NoError(t, json.Unmarshal(raw, &page))
			require.NotEmpty(t, page.Events, "after %d", after)
			require.Equal(t, all[after+1:after+1+int64(len(page.Events))], page.Events, "the page after %d", after)
			require.True(t, page.HasMore)
		}
	}

	// No closed execution was queried: their events came from their histories, and
	// finding the one that holds an event took at most two reads of start events.
	reads := sideEarlierReads(t, reg)
	require.Zero(t, reads["query"], "closed executions queried: %v", reads)
	require.Positive(t, reads["records"], "reads: %v", reads)
	require.LessOrEqual(t, reads["links"], 2*reads["records"], "start events read per page of earlier events: %v", reads)
	t.Logf("reads of closed executions: %v", reads)

	// Closed, both runs answer their first page as before, and the events that close
	// them in pages up to the one that says the log is complete.
	for _, id := range []string{short, long} {
		status, _, body := c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+sideNode, map[string]any{"resumeValue": map[string]any{"operation": "close"}})
		require.Equal(t, http.StatusOK, status, "%v", body)
		snap := waitSnapshot(t, c, id, time.Minute, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
		open := logs[id]
		var first sidePage
		require.NoError(t, json.Unmarshal(getJSON(t, c, "/v1/runs/"+id+"/events?afterSequence=-1"), &first))
		require.Equal(t, open[:len(first.Events)], first.Events)
		tail, complete := sideReadJSONComplete(t, c, id, open[len(open)-1].Sequence)
		require.True(t, complete, "the last page of a completed run is complete")
		sideRequireLog(t, append(append([]event(nil), open...), tail...), snap.LastSequence, nil)
		require.Equal(t, protocol.EvRunCompleted, tail[len(tail)-1].Type)
	}
}

// sideStart starts a council conversation as the API would, for the default tenant,
// continuing as new after eventsPerExecution events when that is positive.
func sideStart(t *testing.T, c *apiClient, id string, eventsPerExecution int) {
	t.Helper()
	in, err := c.Stack.Catalog().NewRunInput(workflows.RunRequest{RunID: id, WorkflowID: "conformance-conversation-council", Owner: workflows.Owner{Tenant: "default", Principal: "test"}})
	require.NoError(t, err)
	in.ContinueAsNewAfterEvents = eventsPerExecution
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Stack.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue, StaticSummary: workflows.RunSummary(in)}, workflows.RunWorkflowName, in)
	require.NoError(t, err)
	waitSnapshot(t, c, id, 30*time.Second, "waiting", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusWaitingApproval })
}

// sideSignal signals the turns to the run, sixteen at a time; first is the number of
// the first of them (their request ids are unique in the run).
func sideSignal(t *testing.T, c *apiClient, id string, first int, texts []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(texts))
	slots := make(chan struct{}, 16)
	for i, msg := range texts {
		req := workflows.ResolveRequest{RequestID: fmt.Sprintf("req-side-%d", first+i), NodeID: sideNode,
			ResumeValue: json.RawMessage(fmt.Sprintf(`{"text":%q}`, msg)), ResolvedBy: "test", ReceivedAtMs: time.Now().UnixMilli(), Via: "rest"}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			errs[i] = c.Stack.Client().SignalWorkflow(context.Background(), id, "", workflows.ResolveSignal, req)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// sideWaitTurns waits until the conversation has the replies to n user turns.
func sideWaitTurns(t *testing.T, c *apiClient, id string, n int) {
	t.Helper()
	waitSnapshot(t, c, id, 2*time.Minute, fmt.Sprintf("with the replies to %d turns", n), func(s workflows.Snapshot) bool {
		return len(s.Conversations) == 1 && s.Conversations[0].TurnCount >= 1+2*n
	})
}

// sidePage is one page of the JSON read or the poll.
type sidePage struct {
	Events     []event `json:"events"`
	HasMore    bool    `json:"hasMore"`
	IsComplete bool    `json:"isComplete"`
}

// sideReadJSON reads the log after the cursor with GET /events (Accept:
// application/json), page after page, requiring hasMore on every page but the last.
func sideReadJSON(t *testing.T, c *apiClient, id string, after int64) []event {
	t.Helper()
	var out []event
	for {
		raw := getJSON(t, c, fmt.Sprintf("/v1/runs/%s/events?afterSequence=%d", id, after))
		var page sidePage
		require.NoError(t, json.Unmarshal(raw, &page))
		require.True(t, len(raw) < 3*sidePageBytes || len(page.Events) == 1, "a page of %d bytes and %d events", len(raw), len(page.Events))
		if len(page.Events) == 0 {
			require.False(t, page.HasMore, "an empty page after %d has no more", after)
			return out
		}
		out = append(out, page.Events...)
		after = page.Events[len(page.Events)-1].Sequence
		if !page.HasMore {
			return out
		}
	}
}

// sideReadJSONComplete reads the log after the cursor as sideReadJSON does and reports
// whether its last page said isComplete.
func sideReadJSONComplete(t *testing.T, c *apiClient, id string, after int64) ([]event, bool) {
	t.Helper()
	var out []event
	for {
		raw := getJSON(t, c, fmt.Sprintf("/v1/runs/%s/events?afterSequence=%d", id, after))
		var page sidePage
		require.NoError(t, json.Unmarshal(raw, &page))
		out = append(out, page.Events...)
		if !page.HasMore {
			return out, page.IsComplete
		}
		require.False(t, page.IsComplete, "a page with more after it is not complete")
		after = page.Events[len(page.Events)-1].Sequence
	}
}

// sideReadPolls reads the log with the long poll, page after page (lastSequence of the
// last event read), until a page comes back empty after its timeout.
func sideReadPolls(t *testing.T, c *apiClient, id string) []event {
	t.Helper()
	var out []event
	path := "/v1/runs/" + id + "/events/poll?timeout=1"
	for {
		status, _, raw := c.doRaw(http.MethodGet, path, nil, map[string]string{"Authorization": "Bearer " + c.Key})
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var page sidePage
		require.NoError(t, json.Unmarshal(raw, &page))
		if len(page.Events) == 0 {
			require.False(t, page.HasMore)
			return out
		}
		out = append(out, page.Events...)
		last := page.Events[len(page.Events)-1].Sequence
		path = "/v1/runs/" + id + "/events/poll?timeout=1&lastSequence=" + strconv.FormatInt(last, 10)
	}
}

// sideReadSSE reads the log from the start as an SSE stream of every event (debug)
// until the event at last.
func sideReadSSE(t *testing.T, c *apiClient, id string, last int64) []event {
	t.Helper()
	s := openStream(t, c, "/v1/runs/"+id+"/events?streamMode=debug", nil)
	defer s.Close()
	require.Equal(t, http.StatusOK, s.Status, "%s", s.Body)
	var out []event
	frames := s.until(t, 2*time.Minute, fmt.Sprintf("the event at %d", last), func(f sseEvent) bool { return f.ID == strconv.FormatInt(last, 10) })
	for _, f := range frames {
		var e event
		require.NoError(t, json.Unmarshal([]byte(f.Data), &e), "frame %s", f.ID)
		out = append(out, e)
	}
	return out
}

// sideRequireLog checks a log read whole: sequences 0 to last without a gap or a
// repeat, and (unless sent is nil) the user's turns, each once.
func sideRequireLog(t *testing.T, evs []event, last int64, sent []string) {
	t.Helper()
	require.Len(t, evs, int(last+1))
	for i, e := range evs {
		require.Equal(t, int64(i), e.Sequence, "event %d", i)
		require.Equal(t, workflows.EventID(e.RunID, e.Sequence), e.EventID)
	}
	if sent == nil {
		return
	}
	var users []string
	for _, tn := range turnsIn(t, evs) {
		if tn.Role == protocol.RoleUser {
			users = append(users, textOf(t, tn))
		}
	}
	// Turns signalled together may arrive in any order; each is in the log once.
	require.ElementsMatch(t, sent, users, "every user turn is in the log once")
}

// sideCarriedLinks returns the links to the run's closed executions, oldest first, as
// each execution wrote its own when it continued as new: the first link its next
// execution started with (read from each start event, back from the current one).
func sideCarriedLinks(t *testing.T, c *apiClient, id string) []activities.Segment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := c.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	var out []activities.Segment
	for rid := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(); ; {
		resp, err := c.Stack.Client().WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: c.Stack.Namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: rid}, MaximumPageSize: 1})
		require.NoError(t, err)
		started := resp.GetHistory().GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
		require.NotNil(t, started)
		if started.GetContinuedExecutionRunId() == "" {
			slices.Reverse(out)
			return out
		}
		var in workflows.RunInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(started.GetInput(), &in))
		earlier, _, err := workflows.CarriedLinks(in.Carried)
		require.NoError(t, err)
		require.NotEmpty(t, earlier)
		require.Equal(t, started.GetContinuedExecutionRunId(), earlier[0].RunID, "an execution names the one it continued first")
		out = append(out, earlier[0])
		rid = earlier[0].RunID
	}
}

// sideRecords counts the event records in the history of one execution of the run.
func sideRecords(t *testing.T, c *apiClient, id, runID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	it := c.Stack.Client().GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "SideEffect" {
			_, ok, err := workflows.EventsRecordFrom(m.GetDetails()["data"])
			require.NoError(t, err)
			if ok {
				n++
			}
		}
	}
	return n
}

// sideEarlierReads is wop_events_earlier_reads_total by kind.
func sideEarlierReads(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "wop_events_earlier_reads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "read" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
