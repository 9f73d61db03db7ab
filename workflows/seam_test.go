package workflows

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// fakeAgent exercises the conversation seam the way a pack does: it emits its own
// events, raises an external wait, takes injected events and closes with an error.
type fakeAgent struct {
	State   string `json:"state"`
	Replies int    `json:"replies"`
}

const fakeType = "vendor.test.agent"

func init() {
	RegisterAgent(fakeType, func(_ workflow.Context, _ *Conversation, _ *Node, saved json.RawMessage) (ConversationAgent, error) {
		a := &fakeAgent{State: "start"}
		if len(saved) > 0 {
			if err := json.Unmarshal(saved, a); err != nil {
				return nil, err
			}
		}
		return a, nil
	})
}

func (a *fakeAgent) Open(_ workflow.Context, c *Conversation) (Opening, error) {
	var in struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(c.Input().Inputs, &in)
	return Opening{AgentID: "host:fake", Title: "Fake", InitialText: "Fake agent, state start.", FirstUserText: in.Message}, nil
}

func (a *fakeAgent) Reply(_ workflow.Context, c *Conversation, user protocol.Turn) (AgentReply, error) {
	a.Replies++
	var body struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(user.Content, &body)
	c.Emit("agent.toolCalled", map[string]any{"agentId": "host:fake", "toolName": "lookup", "callId": fmt.Sprintf("call-%d", a.Replies)}, "")
	c.SetPackAttributes("fake", a.State)
	switch body.Text {
	case "wait":
		a.State = "awaiting"
		return AgentReply{Text: "Waiting for approval.", State: a.State, Raise: &AgentInterrupt{EventType: "ticket.approved", Correlation: json.RawMessage(`{"ticket":"T1"}`), TimeoutMs: 7 * 24 * 3600 * 1000}}, nil
	case "explode":
		return AgentReply{Text: "Out of budget.", State: a.State, Close: &CloseRequest{Error: &protocol.RunError{Code: "budget_exhausted", Message: "budget max_total_visits=1 exhausted"}}}, nil
	}
	return AgentReply{Text: "you said " + body.Text, State: a.State}, nil
}

func (a *fakeAgent) CheckInject(_ *Conversation, ev InjectedEvent) error {
	if ev.Event != "Approved" {
		return fmt.Errorf("unknown event %q; expected Approved", ev.Event)
	}
	return nil
}

func (a *fakeAgent) MisroutedEvent(*Conversation, json.RawMessage) *ResolveCheck { return nil }

func (a *fakeAgent) ApprovesToolCalls() bool { return false }

func (a *fakeAgent) Inject(_ workflow.Context, _ *Conversation, ev InjectedEvent) (AgentReply, error) {
	a.State = "done"
	return AgentReply{Text: "Approved: " + string(ev.Context), State: a.State, Close: &CloseRequest{Outcome: json.RawMessage(`{"approved":true}`), FinalText: "Goal reached."}}, nil
}

func (a *fakeAgent) TranscriptPage(req activities.TranscriptPageRequest) (activities.TranscriptPage, error) {
	return activities.TranscriptPage{Messages: []convo.Message{{Role: convo.RoleUser, Text: req.Key}}, Start: 0, Len: 1}, nil
}

func (a *fakeAgent) Status() *PackStatus {
	return &PackStatus{PackID: "fake", State: a.State, Visits: map[string]int{a.State: a.Replies}}
}

func (a *fakeAgent) Save() (json.RawMessage, error) { return json.Marshal(a) }

func fakeInput(inputs string) RunInput {
	def := &Definition{ID: "fake", Name: "Fake", Version: "1", Nodes: []Node{{ID: "agent", TypeID: fakeType}}}
	def.Normalize()
	return RunInput{RunID: "run-fake", Definition: def, Inputs: json.RawMessage(inputs)}
}

func TestSeamExternalWaitAndInject(t *testing.T) {
	tr := newTestRun(t, fakeInput(`{"message":"wait"}`))
	var waiting Snapshot
	checks := map[string]ResolveCheck{}
	var transcript []convo.Message
	tr.at(time.Hour, func() {
		waiting = tr.snapshot()
		checks["badEvent"] = tr.check(ResolveRequest{NodeID: "agent", ResumeValue: json.RawMessage(`{"event":"Nope","ticket":"T1"}`)})
		checks["badCorr"] = tr.check(ResolveRequest{NodeID: "agent", ResumeValue: json.RawMessage(`{"event":"Approved","ticket":"T2"}`)})
		checks["ok"] = tr.check(ResolveRequest{NodeID: "agent", ResumeValue: json.RawMessage(`{"event":"Approved","context":"by ops","ticket":"T1"}`)})
		v, err := tr.env.QueryWorkflow(TranscriptQuery, convo.TranscriptRef{RunID: "run-fake", Key: "agent/main", To: 1})
		require.NoError(t, err)
		require.NoError(t, v.Get(&transcript))
		tr.resolveReq(ResolveRequest{NodeID: "agent", ResumeValue: json.RawMessage(`{"text":"hello while waiting"}`), ReceivedAtMs: 1})
	})
	tr.at(6*24*time.Hour, func() {
		tr.resolveReq(ResolveRequest{NodeID: "agent", ResumeValue: json.RawMessage(`{"event":"Approved","context":"by ops","ticket":"T1"}`), ResolvedBy: "ops"})
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusWaitingExternal, waiting.Status)
	require.Equal(t, "external-event", waiting.Interrupt.Kind)
	require.Len(t, waiting.Interrupts, 2)
	require.Equal(t, "awaiting", waiting.Pack.State)
	require.Equal(t, refusal(protocol.CodeValidation, false), refusal(checks["badEvent"].Code, checks["badEvent"].Unprocessable))
	require.Equal(t, refusal(protocol.CodeValidation, true), refusal(checks["badCorr"].Code, checks["badCorr"].Unprocessable))
	require.True(t, checks["ok"].OK)
	require.Equal(t, []convo.Message{{Role: "user", Text: "agent/main"}}, transcript)
	require.Equal(t, protocol.StatusCompleted, s.Status)
	var turns []protocol.Turn
	require.NoError(t, json.Unmarshal(s.Channels["conversation"], &turns))
	var texts []string
	for _, tn := range turns {
		texts = append(texts, string(tn.Content))
	}
	require.Equal(t, []string{`{"text":"Fake agent, state start."}`, `{"text":"wait"}`, `{"state":"awaiting","text":"Waiting for approval."}`,
		`{"text":"hello while waiting"}`, `{"state":"awaiting","text":"you said hello while waiting"}`,
		`{"state":"done","text":"Approved: \"by ops\""}`, `{"text":"Goal reached."}`}, texts)
	require.Len(t, ofType(tr.events(), "agent.toolCalled"), 2)
	closed := ofType(tr.events(), protocol.EvConversationClosed)
	require.JSONEq(t, `{"approved":true}`, string(mustJSON(payload(t, closed[0])["outcome"])))
}

func TestSeamCloseWithError(t *testing.T) {
	tr := newTestRun(t, fakeInput(`{"message":"explode"}`))
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "budget_exhausted", s.Error.Code)
	closed := ofType(tr.events(), protocol.EvConversationClosed)
	require.Len(t, closed, 1)
	p := payload(t, closed[0])
	require.Nil(t, p["outcome"])
	require.Equal(t, "system", p["finalTurn"].(map[string]any)["role"])
	require.Equal(t, []string{protocol.EvConversationClosed, protocol.EvInterruptResolved, protocol.EvNodeResumed, protocol.EvNodeFailed, protocol.EvRunFailed}, types(tr.events()[len(tr.events())-5:]))
}

func TestSeamAgentWaitTimeout(t *testing.T) {
	tr := newTestRun(t, fakeInput(`{"message":"wait"}`))
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "interrupt_timeout", s.Error.Code)
}
