package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// continued runs one execution of a council conversation that receives the turns
// texts (one after the other) and, when close is set, closes it. It returns the
// execution and, when the run continued as new, the next execution's input and the
// size of that input.
func continued(t *testing.T, in RunInput, prev *testRun, texts []string, closeIt bool) (*testRun, *RunInput, int) {
	t.Helper()
	tr := newTestRun(t, in)
	tr.prev = prev
	for i, text := range texts {
		req := councilResolve(tr, fmt.Sprintf("req-%s", text), fmt.Sprintf(`{"text":%q}`, text))
		tr.at(time.Duration(i+1)*time.Minute, func() { tr.resolveReq(req) })
	}
	if closeIt {
		tr.at(time.Duration(len(texts)+1)*time.Minute, func() { tr.resolveReq(councilResolve(tr, "close", `{"operation":"close"}`)) })
	}
	tr.env.ExecuteWorkflow(RunWorkflowName, tr.in)
	require.True(t, tr.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	if !errors.As(tr.env.GetWorkflowError(), &can) {
		return tr, nil, 0
	}
	var next RunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return tr, &next, can.Input.Size()
}

// TestCarriedStateStaysBoundedAcrossManyTurns continues a conversation as new every 30
// turns for 240 turns: what each execution carries does not grow, the log reads back
// whole across the executions, and turn indexes continue.
func TestCarriedStateStaysBoundedAcrossManyTurns(t *testing.T) {
	in := fixtureInput(t, "conformance-conversation-council", "")
	const perExecution, executions = 30, 8
	var (
		prev  *testRun
		sizes []int
		texts []string
	)
	for e := 0; e < executions; e++ {
		var batch []string
		for i := 0; i < perExecution; i++ {
			batch = append(batch, fmt.Sprintf("turn %d %s", len(texts)+len(batch), strings.Repeat("w", 200)))
		}
		// The opening logs 5 events, each turn 2 (the user turn and the echo).
		in.ContinueAsNewAfterEvents = 2 * perExecution
		if e == 0 {
			in.ContinueAsNewAfterEvents += 5
		}
		tr, next, size := continued(t, in, prev, batch, false)
		require.NotNil(t, next, "execution %d continued as new", e)
		texts = append(texts, batch...)
		sizes, prev, in = append(sizes, size), tr, *next
	}
	for i, n := range sizes[1:] {
		require.InDelta(t, sizes[1], n, float64(sizes[1])/10, "execution %d carried %d bytes, execution 1 carried %d", i+2, n, sizes[1])
	}
	in.ContinueAsNewAfterEvents = 0
	last, next, _ := continued(t, in, prev, []string{"the end"}, true)
	require.Nil(t, next)
	s := finalSnapshot(t, last.env)
	require.Equal(t, protocol.StatusCompleted, s.Status)

	evs := last.events()
	checkEventLog(t, in.RunID, evs)
	var users []string
	for _, e := range ofType(evs, protocol.EvConversationExchanged) {
		var p struct {
			Turn protocol.Turn `json:"turn"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		if p.Turn.Role == protocol.RoleUser {
			require.Equal(t, 2*len(users)+1, p.Turn.TurnIndex)
		} else {
			require.Equal(t, 2*len(users), p.Turn.TurnIndex)
		}
		if p.Turn.Role == protocol.RoleUser {
			var body struct {
				Text string `json:"text"`
			}
			require.NoError(t, json.Unmarshal(p.Turn.Content, &body))
			users = append(users, body.Text)
		}
	}
	require.Equal(t, append(texts, "the end"), users)
	// The snapshot holds the newest turns and says how many there are.
	require.Len(t, s.Conversations, 1)
	info := s.Conversations[0]
	require.Equal(t, 1+2*(len(texts)+1)+1, info.TurnCount)
	var tail []protocol.Turn
	require.NoError(t, json.Unmarshal(s.Channels["conversation"], &tail))
	require.Len(t, tail, recentTurns)
	require.Equal(t, info.TurnCount-recentTurns, info.FirstTurnIndex)
	require.Equal(t, info.TurnCount-1, tail[len(tail)-1].TurnIndex)
	require.Equal(t, json.RawMessage(fmt.Sprint(info.TurnCount)), s.Variables["turnCount"])
}

// TestRestoresTheEarlierCarriedShape: an execution started with the state runs carried
// before the bounded shape (the whole log, every turn) holds that log from sequence 0
// and goes on numbering events and turns where it left off.
func TestRestoresTheEarlierCarriedShape(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "earlier", "conformance-conversation-council.1.history.json"))
	require.NoError(t, err)
	var h historypb.History
	require.NoError(t, protojson.Unmarshal(raw, &h))
	var in RunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput(), &in))
	var old struct {
		Shape  int     `json:"shape"`
		Events []Event `json:"events"`
		Convs  []struct {
			Turns []protocol.Turn `json:"turns"`
		} `json:"convs"`
	}
	require.NoError(t, json.Unmarshal(in.Carried, &old))
	require.Zero(t, old.Shape)
	require.NotEmpty(t, old.Events)
	turns := len(old.Convs[0].Turns)
	in.ContinueAsNewAfterEvents = 0

	tr := newTestRun(t, in)
	var dup ResolveCheck
	tr.at(time.Minute, func() {
		dup = tr.check(ResolveRequest{RequestID: "x", NodeID: "convo", ResumeValue: json.RawMessage(
			fmt.Sprintf(`{"operation":"exchange","turn":{"messageId":"%s:convo:0:1:user","content":{"text":"again"}}}`, in.RunID))})
		tr.resolveReq(councilResolve(tr, "next", `{"text":"next"}`))
		tr.resolveReq(councilResolve(tr, "close", `{"operation":"close"}`))
	})
	s := tr.execute() // checks the log from sequence 0: this execution holds it all
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.Equal(t, refusal(protocol.CodeInterruptResolved, false), refusal(dup.Code, dup.Unprocessable), "a host messageId of a recorded turn is a duplicate")
	evs := tr.events()
	require.Equal(t, old.Events, evs[:len(old.Events)], "the carried log is kept as it was")
	require.Equal(t, turns+3, s.Conversations[0].TurnCount, "turns go on from the carried ones")
}

// TestHistoryLimitFailsARunThatCannotContinue: an approval gate cannot continue as
// new; when its history grows far past Temporal's suggestion, the run fails with
// history_limit_exceeded and its terminal event instead of running into Temporal's
// hard limit.
func TestHistoryLimitFailsARunThatCannotContinue(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-quorum", ""))
	tr.env.SetContinueAsNewSuggested(true)
	tr.env.SetCurrentHistoryLength(100)
	tr.at(time.Minute, func() { tr.resolve("gate", `{"action":"accept","voter":"v1"}`) })
	tr.at(2*time.Minute, func() {
		tr.env.SetCurrentHistoryLength(100 * historyFailFactor)
		tr.resolve("gate", `{"action":"accept","voter":"v2"}`)
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "history_limit_exceeded", s.Error.Code)
	evs := tr.events()
	require.Equal(t, protocol.EvRunFailed, evs[len(evs)-1].Type)
	require.Contains(t, string(evs[len(evs)-1].Payload), "history_limit_exceeded")
}

// TestTranscriptPagesNameTheExecutionBefore: after continue-as-new, the pack's
// transcript query answers for the messages of this execution (from the carried tail
// on) and names the execution that holds the earlier ones.
func TestTranscriptPagesNameTheExecutionBefore(t *testing.T) {
	tr, _ := packRun(t, "support", "", "", `{"message":"Hi, I have a question about my account."}`)
	tr.in.ContinueAsNewAfterEvents = 1
	tr.env.ExecuteWorkflow(RunWorkflowName, tr.in)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, tr.env.GetWorkflowError(), &can)
	page := func(x *testRun, req activities.TranscriptPageRequest) activities.TranscriptPage {
		v, err := x.env.QueryWorkflow(TranscriptPageQuery, req)
		require.NoError(t, err)
		var p activities.TranscriptPage
		require.NoError(t, v.Get(&p))
		return p
	}
	first := page(tr, activities.TranscriptPageRequest{Key: ServedPackNodeID, From: 0, To: 2})
	require.Equal(t, 0, first.Base)
	require.Equal(t, 2, first.Len, "the first turn: the user message and the reply")
	require.Len(t, first.Messages, 2)

	var next RunInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	next.ContinueAsNewAfterEvents = 0
	tr2, _ := packRun(t, "support", "", "", "")
	tr2.in = next
	tr2.prev = tr
	var held activities.TranscriptPage
	tr2.at(time.Minute, func() {
		held = page(tr2, activities.TranscriptPageRequest{Key: ServedPackNodeID, From: 0, To: 2, MaxBytes: 1 << 20})
	})
	tr2.at(2*time.Minute, func() { tr2.say("It's ACC-12345. What's my balance?") })
	tr2.finish()
	require.Equal(t, 1, held.Base, "the carried tail starts at the reply of the latest round")
	require.Equal(t, 1, held.Start)
	require.Len(t, held.Earlier, 1, "the execution before this one")
	require.Equal(t, int64(0), held.Earlier[0].FirstSequence)
}

func TestIDWindowKeepsTheNewest(t *testing.T) {
	w := newIDWindow(3)
	for _, id := range []string{"a", "b", "a", "c", "d"} {
		w.add(id)
	}
	require.Equal(t, []string{"b", "c", "d"}, w.list())
	require.False(t, w.has("a"))
	require.True(t, w.has("d"))
}
