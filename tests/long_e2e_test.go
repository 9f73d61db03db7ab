package tests

// A conversation that outlives Temporal's limits: the embedded server's limits are
// lowered so the test runs in a minute or two, and the conversation goes far past the
// point where a run that carried its whole state across continue-as-new got stuck.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// longChatPack stays in one state and answers every message with one model round.
const longChatPack = `id: long-chat
name: Long chat
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  chat: { id: chat, name: Chat, version: 1.0.0, system_template: "Answer the user." }
workflow:
  version: 2
  entry: chat
  states:
    chat: { prompt_task: chat, on_event: { Done: done } }
    done: { prompt_task: chat, terminal: true }
`

// longChatMock answers every round the same reply.
const longChatMock = `mock:
  default: "Noted."
`

// Limits of the test's server and API. With a 512 KiB payload limit, a run that carried
// its whole state (about 2.2 KB a turn here) was stuck after about 240 turns, and ten
// turns of 60 KiB made its events and transcript unreadable.
const (
	longBlobLimit   = 512 << 10
	longTurnLimit   = 64 << 10
	longPageBytes   = 200 << 10
	longSmallTurns  = 1500
	longLargeTurns  = 10
	longLargeBytes  = 60 << 10
	longSignalBatch = 50
)

// TestLongConversationOutlivesTemporalLimits drives one pack conversation through
// thousands of turns and several near-limit messages, reads every event back by
// paging, sends one more exchange, and cancels the run.
func TestLongConversationOutlivesTemporalLimits(t *testing.T) {
	t.Parallel()
	packs := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(packs, "long-chat.yaml"), []byte(longChatPack), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(packs, "long-chat.mock.yaml"), []byte(longChatMock), 0o644))
	c := startPrivateStack(t, stackOptions{Tweak: func(o *stack.Options) {
		o.Worker.PacksDir = packs
		o.API.MaxTurnBytes = longTurnLimit
		o.API.EventsPageBytes = longPageBytes
		o.ServerDynamicConfig = map[string]any{
			"limit.blobSize.error":                    longBlobLimit,
			"limit.blobSize.warn":                     longBlobLimit / 4,
			"limit.historyCount.suggestContinueAsNew": 1000,
			"limit.historySize.suggestContinueAsNew":  1 << 20,
		}
	}})
	start := time.Now()
	id := createRun(t, c, "long-chat", map[string]any{})
	longWaitStatus(t, c, id, protocol.StatusWaitingApproval)
	var sent []string // the user messages, in order

	// A turn over the limit is refused before anything is signalled.
	status, _, body := c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"text": strings.Repeat("x", longTurnLimit)}})
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "%v", body)
	require.Equal(t, "payload_too_large", body["error"])
	require.Equal(t, "maxTurnBytes", body["details"].(map[string]any)["limit"])

	// Near-limit messages through the API, one exchange at a time.
	for i := 0; i < longLargeTurns; i++ {
		text := fmt.Sprintf("large %d %s", i, strings.Repeat(string(rune('a'+i)), longLargeBytes))
		sayTo(t, c, id, text)
		sent = append(sent, text)
		longWaitTurns(t, c, id, len(sent))
	}
	// Then thousands of short turns, signalled in batches the way the API signals a
	// resolve (the workflow validates each again).
	ctx := context.Background()
	for len(sent) < longLargeTurns+longSmallTurns {
		for j := 0; j < longSignalBatch; j++ {
			text := fmt.Sprintf("message %d", len(sent))
			req := workflows.ResolveRequest{RequestID: fmt.Sprintf("req-long-%d", len(sent)), NodeID: packNode,
				ResumeValue: json.RawMessage(fmt.Sprintf(`{"text":%q}`, text)), ResolvedBy: "test", ReceivedAtMs: time.Now().UnixMilli(), Via: "rest"}
			require.NoError(t, c.Stack.Client().SignalWorkflow(ctx, id, "", workflows.ResolveSignal, req))
			sent = append(sent, text)
		}
		longWaitTurns(t, c, id, len(sent))
	}
	t.Logf("%d turns in %s", len(sent), time.Since(start).Round(time.Second))

	// The run continued as new many times, carrying a bounded state.
	carried := longCarriedSizes(t, c, id)
	require.Greater(t, len(carried), 5, "the run continued as new")
	for i, n := range carried {
		require.Less(t, n, longBlobLimit*3/4, "execution %d carried %d bytes", i, n)
	}
	t.Logf("%d executions; carried bytes: first %d, last %d", len(carried)+1, carried[0], carried[len(carried)-1])

	// One more exchange over the API: the model still sees the conversation, reaching
	// back into the executions before the current one.
	last := fmt.Sprintf("one more after %d", len(sent))
	sayTo(t, c, id, last)
	sent = append(sent, last)
	longWaitTurns(t, c, id, len(sent))

	// Every event, read back page by page over the API.
	evs := longReadAll(t, c, id, -1)
	var users []string
	for _, e := range ofType(evs, protocol.EvConversationExchanged) {
		var p struct {
			Turn protocol.Turn `json:"turn"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		if p.Turn.Role == protocol.RoleUser {
			users = append(users, textOf(t, p.Turn))
		}
	}
	require.Equal(t, sent, users, "every user turn is in the log once, in order")
	longReadV2Matches(t, c, id, evs)
	usage := ofType(evs, "provider.usage")
	seen := longSeenChars(t, usage)
	want := longWindowChars(sent, "Noted.")
	require.InDelta(t, want, seen, 8, "the last round saw the newest %d characters of the conversation that fit its budget", want)
	held := longHeldChars(t, c, id)
	require.Greater(t, seen, held, "the last round saw messages of earlier executions (the current one holds %d characters)", held)

	// The snapshot stays small and says where the older turns are.
	snap := waitSnapshot(t, c, id, time.Minute, "read", func(workflows.Snapshot) bool { return true }) // a 503 is read again
	require.Len(t, snap.Conversations, 1)
	require.Equal(t, 1+2*len(sent), snap.Conversations[0].TurnCount)
	var newest []protocol.Turn
	require.NoError(t, json.Unmarshal(snap.Channels["conversation"], &newest))
	require.Equal(t, snap.Conversations[0].TurnCount-len(newest), snap.Conversations[0].FirstTurnIndex)
	require.Equal(t, last, textOf(t, newest[len(newest)-2]))

	// Cancel: the run ends cancelled, with its terminal event, and stays readable.
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+id+":cancel", map[string]any{"reason": "done"})
	require.Equal(t, http.StatusOK, status, "%v", body)
	longWaitStatus(t, c, id, protocol.StatusCancelled)
	tail := longReadAll(t, c, id, evs[len(evs)-1].Sequence)
	require.NotEmpty(t, tail)
	require.Equal(t, protocol.EvRunCancelled, tail[len(tail)-1].Type)
	evs = append(evs, tail...)
	desc, err := c.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.GetWorkflowExecutionInfo().GetStatus())
	t.Logf("%d turns, %d events, %d executions in %s", len(sent), len(evs), len(carried)+1, time.Since(start).Round(time.Second))
}

// longWaitTurns waits until the conversation has the replies to n user turns.
func longWaitTurns(t *testing.T, c *apiClient, id string, n int) {
	t.Helper()
	waitSnapshot(t, c, id, 3*time.Minute, fmt.Sprintf("with the replies to %d turns", n), func(s workflows.Snapshot) bool {
		return len(s.Conversations) == 1 && s.Conversations[0].TurnCount == 1+2*n
	})
}

// longWaitStatus waits until the run has the status.
func longWaitStatus(t *testing.T, c *apiClient, id, status string) {
	t.Helper()
	waitSnapshot(t, c, id, time.Minute, status, func(s workflows.Snapshot) bool { return s.Status == status })
}

// longGet sends a GET as a client that reads again after a 503 (Temporal answered
// late on a busy machine) would.
func longGet(t *testing.T, c *apiClient, path string, headers map[string]string) (int, []byte) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		status, _, raw := c.doRaw(http.MethodGet, path, nil, headers)
		if status != http.StatusServiceUnavailable || attempt == 5 {
			return status, raw
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
}

// longReadAll reads the log after the cursor through GET /events with Accept:
// application/json, one bounded page after the other.
func longReadAll(t *testing.T, c *apiClient, id string, after int64) []workflows.Event {
	t.Helper()
	var out []workflows.Event
	for pages := 0; ; pages++ {
		status, raw := longGet(t, c, fmt.Sprintf("/v1/runs/%s/events?afterSequence=%d", id, after),
			map[string]string{"Authorization": "Bearer " + c.Key, "Accept": "application/json"})
		require.Equal(t, http.StatusOK, status, "page %d: %s", pages, raw)
		require.Less(t, len(raw), 2*longPageBytes, "page %d is %d bytes", pages, len(raw))
		var page struct {
			Events  []workflows.Event `json:"events"`
			HasMore bool              `json:"hasMore"`
		}
		require.NoError(t, json.Unmarshal(raw, &page))
		for _, e := range page.Events {
			require.Equal(t, after+1, e.Sequence, "events follow each other without gaps")
			after = e.Sequence
		}
		out = append(out, page.Events...)
		if !page.HasMore {
			return out
		}
	}
}

// longReadV2Matches reads the log again at major 2, page by page (most of it from
// the closed executions' histories, which hold the era-3 run's events under their v2
// names), and checks that it is the v1 read's log in v2 vocabulary: the same events,
// the v1 read with no v2 name, the v2 read with each type's v2 name and the run's id
// bound. A v2 poll from a cursor in the first execution answers the events after it.
func longReadV2Matches(t *testing.T, c *apiClient, id string, v1 []workflows.Event) {
	t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + c.Key, "Accept": "application/json", "OpenWOP-Version": "2.0"}
	var v2 []map[string]any
	for after := int64(-1); ; {
		status, raw := longGet(t, c, fmt.Sprintf("/runs/%s/events?afterSequence=%d", id, after), hdr)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var page struct {
			Events  []map[string]any `json:"events"`
			HasMore bool             `json:"hasMore"`
		}
		require.NoError(t, json.Unmarshal(raw, &page))
		v2 = append(v2, page.Events...)
		if !page.HasMore || len(page.Events) == 0 {
			break
		}
		after = int64(page.Events[len(page.Events)-1]["sequence"].(float64))
	}
	require.Len(t, v2, len(v1), "the v2 read has the v1 read's events")
	renamed := 0
	for i, e := range v1 {
		v1Name, _ := protocol.EventTypeV1(e.Type)
		require.Equal(t, v1Name, e.Type, "event %d: a v1 reader is served the v1 name", e.Sequence)
		want, ok := protocol.EventTypeV2(e.Type)
		require.True(t, ok, "event %d: %s has a codemap row", e.Sequence, e.Type)
		if want != e.Type {
			renamed++
		}
		require.Equal(t, float64(e.Sequence), v2[i]["sequence"], "event %d", i)
		require.Equal(t, want, v2[i]["type"], "event %d: a v2 reader is served the v2 name", e.Sequence)
		require.Equal(t, "default/"+id, v2[i]["runId"], "event %d: the run id is bound", e.Sequence)
	}
	t.Logf("%d events read at both majors, %d of them under a renamed type", len(v1), renamed)
	status, raw := longGet(t, c, fmt.Sprintf("/runs/%s/events/poll?timeout=1&afterSequence=10", id), hdr)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var poll struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal(raw, &poll))
	require.NotEmpty(t, poll.Events, "a v2 poll reads a closed execution's events")
	require.Equal(t, float64(11), poll.Events[0]["sequence"])
}

// longCarriedSizes returns the size of the state each execution carried into the
// next (its continue-as-new input), oldest first.
func longCarriedSizes(t *testing.T, c *apiClient, id string) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := c.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	var sizes []int
	rid := desc.GetWorkflowExecutionInfo().GetFirstRunId()
	for rid != "" {
		it := c.Stack.Client().GetWorkflowHistory(ctx, id, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		rid = ""
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				sizes = append(sizes, a.GetInput().Size())
				rid = a.GetNewExecutionRunId()
			}
		}
	}
	return sizes
}

// longSeenChars is how many characters of messages the last model round saw: the mock
// counts a token per four characters of the system prompt, the tools and every
// message, so the first round (one user message) gives the fixed part.
func longSeenChars(t *testing.T, usage []workflows.Event) int {
	t.Helper()
	tokens := func(e workflows.Event) int {
		var p struct {
			InputTokens int `json:"inputTokens"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		return p.InputTokens
	}
	first := len(fmt.Sprintf("large 0 %s", strings.Repeat("a", longLargeBytes)))
	fixed := 4*tokens(usage[0]) - first
	return 4*tokens(usage[len(usage)-1]) - fixed
}

// longWindowChars is what the last round is entitled to: the newest messages of the
// conversation (each user message and the reply to it) within the model's default
// context budget (bytes and messages), from a user message on.
func longWindowChars(sent []string, reply string) int {
	var msgs []convo.Message
	for _, s := range sent[:len(sent)-1] {
		msgs = append(msgs, convo.Message{Role: convo.RoleUser, Text: s, State: "chat"},
			convo.Message{Role: convo.RoleAssistant, Text: reply, State: "chat"})
	}
	msgs = append(msgs, convo.Message{Role: convo.RoleUser, Text: sent[len(sent)-1], State: "chat"})
	start, size := len(msgs), 0
	for start > 0 {
		size += convo.MessageBytes(&msgs[start-1])
		if size > activities.DefaultContextBytes || len(msgs)-start+1 > activities.DefaultContextMessages {
			break
		}
		start--
	}
	for start < len(msgs) && msgs[start].Role != convo.RoleUser {
		start++
	}
	chars := 0
	for _, m := range msgs[start:] {
		chars += len(m.Text)
	}
	return chars
}

// longHeldChars is how many characters of transcript the run's current execution
// holds.
func longHeldChars(t *testing.T, c *apiClient, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := c.Stack.Client().QueryWorkflow(ctx, id, "", workflows.TranscriptPageQuery,
		activities.TranscriptPageRequest{Key: packNode, From: 0, To: 0, MaxBytes: 1})
	require.NoError(t, err)
	var probe activities.TranscriptPage
	require.NoError(t, v.Get(&probe))
	chars := 0
	for to := probe.Len; to > probe.Base; {
		v, err := c.Stack.Client().QueryWorkflow(ctx, id, "", workflows.TranscriptPageQuery,
			activities.TranscriptPageRequest{Key: packNode, From: probe.Base, To: to, MaxBytes: longPageBytes})
		require.NoError(t, err)
		var page activities.TranscriptPage
		require.NoError(t, v.Get(&page))
		for _, m := range page.Messages {
			chars += len(m.Text)
		}
		to = page.Start
	}
	return chars
}

// TestManyStreamsShareOneReader opens 150 SSE streams on one conversation (more than
// the API could serve when each stream queried the run on its own), sends an exchange,
// and requires every stream to receive its events and the resolve to succeed.
func TestManyStreamsShareOneReader(t *testing.T) {
	t.Parallel()
	// The per-key rate limit would refuse streams past its burst; lift it.
	c := startPrivateStack(t, stackOptions{Tweak: func(o *stack.Options) { o.API.RateLimitPerSecond, o.API.RateLimitBurst = 1e6, 1e6 }})
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	s := waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	const streams = 150
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		status int
		got    bool
		err    error
	}
	results := make(chan result, streams)
	opened := make(chan struct{}, streams)
	for i := 0; i < streams; i++ {
		go func() {
			// Like an EventSource, a stream that Temporal answered too late to open (503
			// on a busy machine) is opened again.
			var resp *http.Response
			for attempt := 0; ; attempt++ {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/runs/"+id+"/events?streamMode=debug", nil)
				if err == nil {
					req.Header.Set("Authorization", "Bearer "+c.Key)
					req.Header.Set("Accept", "text/event-stream")
					req.Header.Set("Last-Event-ID", fmt.Sprint(s.LastSequence))
					resp, err = http.DefaultClient.Do(req)
				}
				if err != nil {
					opened <- struct{}{}
					results <- result{err: err}
					return
				}
				if resp.StatusCode != http.StatusServiceUnavailable || attempt == 10 {
					break
				}
				resp.Body.Close()
				time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
			}
			opened <- struct{}{}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				results <- result{status: resp.StatusCode}
				return
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if line := sc.Text(); strings.HasPrefix(line, "data: ") && strings.Contains(line, `"role":"agent"`) && strings.Contains(line, "$42.00") {
					results <- result{status: http.StatusOK, got: true}
					return
				}
			}
			results <- result{status: http.StatusOK, err: fmt.Errorf("the stream ended without the reply: %v", sc.Err())}
		}()
	}
	for i := 0; i < streams; i++ {
		<-opened
	}
	status, _, body := c.do(http.MethodPost, "/v1/runs/"+id+"/interrupts/"+packNode, map[string]any{"resumeValue": map[string]any{"text": "It's ACC-12345. What's my balance?"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	for i := 0; i < streams; i++ {
		r := <-results
		require.NoError(t, r.err)
		require.Equal(t, http.StatusOK, r.status)
		require.True(t, r.got)
	}
}
