package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/convo"
)

// testPageQuery stands for the run workflow's transcript page query.
const testPageQuery = "test.transcript-page"

// chainClient answers testPageQuery as the executions of one run that continued
// as new do: each holds the messages [base, end) it appended (the current one last),
// names the executions before it, and fills a page from its newest message back.
type chainClient struct {
	client.Client
	msgs  []convo.Message
	execs []fakeExecution // oldest first; the last one is the current execution
	asked []string        // run ids queried, "" for the current execution
	gone  map[string]bool // executions past the namespace's retention
}

type fakeExecution struct {
	runID     string
	base, end int
}

type jsonValue struct{ raw []byte }

func (v jsonValue) HasValue() bool    { return v.raw != nil }
func (v jsonValue) Get(ptr any) error { return json.Unmarshal(v.raw, ptr) }

func (c *chainClient) QueryWorkflow(_ context.Context, workflowID, runID, query string, args ...any) (converter.EncodedValue, error) {
	c.asked = append(c.asked, runID)
	if query != testPageQuery || workflowID != "run-1" {
		return nil, fmt.Errorf("unexpected query %s on %s", query, workflowID)
	}
	if c.gone[runID] {
		return nil, serviceerror.NewNotFound("workflow execution not found")
	}
	req := args[0].(TranscriptPageRequest)
	idx := len(c.execs) - 1
	if runID != "" {
		idx = -1
		for i, e := range c.execs {
			if e.runID == runID {
				idx = i
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("no execution %s", runID)
		}
	}
	e := c.execs[idx]
	page := TranscriptPage{Base: e.base, Len: e.end, Messages: []convo.Message{}}
	for i := idx - 1; i >= 0; i-- {
		page.Earlier = append(page.Earlier, Segment{RunID: c.execs[i].runID})
	}
	from, to := max(req.From, e.base), min(req.To, e.end)
	start, size := to, 0
	for start > from {
		b := convo.MessageBytes(&c.msgs[start-1])
		if start < to && size+b > req.MaxBytes {
			break
		}
		size += b
		start--
	}
	page.Start = start
	page.Messages = append(page.Messages, c.msgs[start:to]...)
	raw, err := json.Marshal(page)
	return jsonValue{raw}, err
}

func TestClientTranscriptsWalksBackThroughExecutions(t *testing.T) {
	msgs := conversation(30, 2000) // 60 messages of about 2 KB
	// Three executions; each carried the previous round's last message into the next.
	cl := &chainClient{msgs: msgs, execs: []fakeExecution{{"e1", 0, 20}, {"e2", 19, 40}, {"e3", 39, 60}}}
	src := ClientTranscripts{Client: cl, Query: testPageQuery}
	ctx := context.Background()

	// A persistent context without a budget: every message, from all three executions.
	got, err := src.Transcript(ctx, convo.TranscriptRef{RunID: "run-1", Key: "agent", From: 0, To: 60})
	if err != nil || len(got) != 60 || got[0].Text != msgs[0].Text || got[59].Text != msgs[59].Text {
		t.Fatalf("whole transcript: %d messages, %v", len(got), err)
	}
	if asked := strings.Join(cl.asked, ","); !strings.HasPrefix(asked, ",") || !strings.Contains(asked, "e2,") || !strings.HasSuffix(asked, "e1") {
		t.Fatalf("asked %q, want the current execution, then e2, then e1", asked)
	}
	// Within a budget of 25 messages' bytes: the newest messages, from a user message,
	// read from the two newest executions only.
	cl.asked = nil
	budget := 25 * convo.MessageBytes(&msgs[0])
	got, err = src.Transcript(ctx, convo.TranscriptRef{RunID: "run-1", Key: "agent", From: 0, To: 60, MaxBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 24 || got[0].Role != convo.RoleUser || got[23].Text != msgs[59].Text {
		t.Fatalf("budgeted: %d messages starting with a %s message", len(got), got[0].Role)
	}
	for _, id := range cl.asked {
		if id == "e1" {
			t.Fatalf("a budget met within e2 must not reach e1: asked %v", cl.asked)
		}
	}
	// A transient context that starts in e3 never leaves it.
	cl.asked = nil
	got, err = src.Transcript(ctx, convo.TranscriptRef{RunID: "run-1", Key: "agent", From: 50, To: 60})
	if err != nil || len(got) != 10 || strings.Join(cl.asked, ",") != "" {
		t.Fatalf("context in e3: %d messages, %v, asked %q", len(got), err, cl.asked)
	}
}

// An earlier execution deleted by the namespace's retention ends the walk: the reader
// answers the messages the newer executions hold, and any other error still fails.
func TestClientTranscriptsEndAtAnExecutionPastRetention(t *testing.T) {
	msgs := conversation(30, 2000)
	cl := &chainClient{msgs: msgs, execs: []fakeExecution{{"e1", 0, 20}, {"e2", 19, 40}, {"e3", 39, 60}}, gone: map[string]bool{"e1": true}}
	src := ClientTranscripts{Client: cl, Query: testPageQuery}
	got, err := src.Transcript(context.Background(), convo.TranscriptRef{RunID: "run-1", Key: "agent", From: 0, To: 60})
	if err != nil {
		t.Fatalf("Transcript: %v", err)
	}
	if len(got) != 41 || got[0].Text != msgs[19].Text || got[40].Text != msgs[59].Text {
		t.Fatalf("got %d messages from %q, want the 41 of e2 and e3 (from %q)", len(got), got[0].Text, msgs[19].Text)
	}
	if n := len(cl.asked); n == 0 || cl.asked[n-1] != "e1" || slices.Index(cl.asked, "e1") != n-1 {
		t.Errorf("asked %q: the walk should end at e1, asked once", cl.asked)
	}

	// The current execution not found is the run gone: an error, not an empty window.
	cl = &chainClient{msgs: msgs, execs: []fakeExecution{{"e1", 0, 60}}, gone: map[string]bool{"": true}}
	if _, err := (ClientTranscripts{Client: cl, Query: testPageQuery}).Transcript(context.Background(), convo.TranscriptRef{RunID: "run-1", Key: "agent", From: 0, To: 60}); err == nil {
		t.Error("a run that does not answer gave no error")
	}
}
