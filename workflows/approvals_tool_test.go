package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
)

const payMock = `rounds:
  - expect_state: desk
    text: I'll look up INV-7 and pay it.
    tool_calls:
      - { name: lookup, args: { invoice: INV-7 } }
      - { name: pay, args: { invoice: INV-7, amount: "120.00" } }
  - expect_state: desk
    text: Done.
  - expect_state: desk
    text: Second answer.
tool_results:
  lookup: { invoice: INV-7, amount: "120.00" }
  pay: { paid: true }
`

// approvalRun is packRun with the host's approval defaults (what RouteTools answers)
// and, for some tools, bindings-file approval settings.
func approvalRun(t *testing.T, defaults activities.ToolApproval, perTool map[string]activities.ToolApproval) (*testRun, *scriptedModel) {
	t.Helper()
	p, diags, err := packs.Parse("pay.yaml", readPayPack(t))
	require.NoError(t, err, "%s", diags)
	script, diags, err := packs.ParseMock("pay.mock.yaml", []byte(payMock))
	require.NoError(t, err, "%s", diags)
	cat, err := NewCatalog(CatalogOptions{Packs: []ServedPack{ServePack(p)}})
	require.NoError(t, err)
	in, err := cat.NewRunInput(RunRequest{RunID: "run-pay", WorkflowID: p.ID, Inputs: json.RawMessage(`{"message":"Please pay INV-7."}`), Owner: Owner{Tenant: "t1", Principal: "key_test"}})
	require.NoError(t, err)
	tr := newTestRun(t, *in)
	sm := &scriptedModel{scripts: map[string]*packs.MockScript{p.ID: script}, t: t}
	tr.env.RegisterActivityWithOptions(sm.model, activity.RegisterOptions{Name: "ModelRound"})
	tr.env.RegisterActivityWithOptions(sm.modelLocal, activity.RegisterOptions{Name: "ModelRoundLocal"})
	tr.env.RegisterActivityWithOptions(sm.tool, activity.RegisterOptions{Name: "ToolCall"})
	router, err := activities.New(activities.Config{Transcripts: noTranscripts{}, MockScripts: sm.scripts,
		ApprovalDefaults: defaults, Bindings: approvalsOnly(perTool)})
	require.NoError(t, err)
	tr.env.RegisterActivityWithOptions(router.RouteTools, activity.RegisterOptions{Name: "RouteTools"})
	return tr, sm
}

// approvalsOnly is tool bindings that bind nothing and carry approval settings.
type approvalsOnly map[string]activities.ToolApproval

func (approvalsOnly) Route(activities.ToolRouteCall) (activities.ToolRoute, bool) {
	return activities.ToolRoute{}, false
}
func (approvalsOnly) Execute(context.Context, convo.ToolCallInput) (*convo.ToolCallResult, bool, error) {
	return nil, false, nil
}
func (a approvalsOnly) ApprovalOf(tool string) (activities.ToolApproval, bool) {
	t, ok := a[tool]
	return t, ok
}

func (tr *testRun) approve(value string, by string) {
	tr.resolveReq(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(value), ResolvedBy: by})
}

func toolNames(in []convo.ToolCallInput) []string {
	var out []string
	for _, c := range in {
		out = append(out, c.Tool)
	}
	return out
}

// toolReturnedOf is the outcome of the agent.toolReturned event of a tool.
func toolReturnedOf(t *testing.T, evs []Event, tool string) (outcome map[string]any, status string) {
	t.Helper()
	for _, e := range ofType(evs, "agent.toolReturned") {
		p := payload(t, e)
		if p["toolName"] == tool {
			o, _ := p["outcome"].(map[string]any)
			return o, p["status"].(string)
		}
	}
	t.Fatalf("no agent.toolReturned for %s", tool)
	return nil, ""
}

// TestToolApprovalAccept: the external tool waits on an approval interrupt that says
// what it is; the conversation refuses messages meanwhile; accepting runs it once.
func TestToolApprovalAccept(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{}, nil)
	var waiting Snapshot
	var chat, wrongAction, accept ResolveCheck
	var toolsWhileWaiting []string
	tr.at(time.Hour, func() {
		waiting = tr.snapshot()
		toolsWhileWaiting = toolNames(sm.tools)
		chat = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"text":"hello?"}`)})
		wrongAction = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"refine","refineFeedback":{"scope":"whole"}}`)})
		accept = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "alice"})
		tr.approve(`{"action":"accept","comment":"ok"}`, "alice")
	})
	tr.at(2*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)

	require.Equal(t, protocol.StatusWaitingApproval, waiting.Status)
	require.Empty(t, toolsWhileWaiting, "no call of the batch runs before its decisions")
	require.NotNil(t, waiting.Interrupt)
	require.Equal(t, "approval", waiting.Interrupt.Kind)
	var d approvalData
	require.NoError(t, json.Unmarshal(waiting.Interrupt.Data, &d))
	require.Equal(t, "Approve pay", d.Title)
	require.Equal(t, protocol.ArtifactTypeToolCall, d.ArtifactType)
	require.Equal(t, []string{"accept", "reject", "edit-accept"}, d.Actions)
	require.Contains(t, d.Description, "wants to call pay")
	require.Contains(t, d.Description, "acts_with_approval")
	var art ToolCallArtifact
	require.NoError(t, json.Unmarshal(d.ArtifactData, &art))
	require.Equal(t, "pay", art.Tool)
	require.JSONEq(t, `{"invoice":"INV-7","amount":"120.00"}`, string(art.Arguments))
	require.JSONEq(t, `{"effect":"external","reversibility":"irreversible"}`, string(art.ActionScope))
	require.Equal(t, "desk", art.Agent.State)
	require.Equal(t, "I'll look up INV-7 and pay it.", art.Agent.Text)
	require.Equal(t, (72 * time.Hour).Milliseconds(), waiting.Interrupt.TimeoutMs)

	require.False(t, chat.OK)
	require.Equal(t, refusal(CodeApprovalPending, false), refusal(chat.Code, chat.Unprocessable))
	require.Equal(t, CodeApprovalPending, chat.Code)
	require.False(t, wrongAction.OK)
	require.Equal(t, refusal(protocol.CodeValidation, false), refusal(wrongAction.Code, wrongAction.Unprocessable))
	require.True(t, accept.OK, "%+v", accept)

	require.ElementsMatch(t, []string{"lookup", "pay"}, toolNames(sm.tools), "pay ran exactly once, after the decision")
	evs := tr.events()
	out, status := toolReturnedOf(t, evs, "pay")
	require.Equal(t, "ok", status)
	require.Equal(t, true, out["paid"])
	rec := ofType(evs, protocol.EvApprovalReceived)
	require.Len(t, rec, 1)
	require.Equal(t, "accept", payload(t, rec[0])["action"])
	require.Equal(t, "alice", payload(t, rec[0])["decidedBy"])
	require.Equal(t, "pay", payload(t, rec[0])["tool"])
	require.Len(t, ofType(evs, protocol.EvApprovalRequested), 1)
	require.Len(t, ofType(evs, protocol.EvInterruptResolved), 2, "the approval and the conversation's close")
}

// TestToolApprovalReject: a rejected call never runs; the model's next round reads who
// rejected it and why, and the conversation goes on.
func TestToolApprovalReject(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{}, nil)
	tr.at(time.Hour, func() { tr.approve(`{"action":"reject","feedback":"INV-7 was paid last week"}`, "bob") })
	var after Snapshot
	var chat ResolveCheck
	tr.at(2*time.Hour, func() {
		after = tr.snapshot()
		chat = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"text":"thanks"}`)})
		tr.say("thanks")
	})
	tr.at(3*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, []string{"lookup"}, toolNames(sm.tools), "the rejected call never ran")
	out, status := toolReturnedOf(t, tr.events(), "pay")
	require.Equal(t, "error", status)
	require.Equal(t, "rejected", out["status"])
	require.Equal(t, "bob", out["rejectedBy"])
	require.Equal(t, "INV-7 was paid last week", out["reason"])
	require.Contains(t, out["error"], "pay was not run: bob rejected the call: INV-7 was paid last week")
	require.Len(t, sm.rounds, 3, "the agent continued after the rejection and answered the next message")
	require.Equal(t, protocol.StatusWaitingApproval, after.Status)
	require.Equal(t, "conversation.exchange", after.Interrupt.Kind, "back to the conversation")
	require.True(t, chat.OK, "%+v", chat)
}

// TestToolApprovalEditAccept: edited arguments that do not match the tool's parameters
// are refused (400) and the call still waits; valid ones replace the arguments.
func TestToolApprovalEditAccept(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{}, nil)
	var bad, noArgs, good ResolveCheck
	var still Snapshot
	tr.at(time.Hour, func() {
		bad = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"edit-accept","editedArtifactData":{"arguments":{"invoice":"INV-7","amount":"a lot"}}}`)})
		noArgs = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"edit-accept","editedArtifactData":{"amount":"1.00"}}`)})
		// The workflow refuses it too when it arrives anyway.
		tr.approve(`{"action":"edit-accept","editedArtifactData":{"arguments":{"invoice":"INV-7","amount":"a lot"}}}`, "carol")
	})
	tr.at(2*time.Hour, func() {
		still = tr.snapshot()
		good = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"edit-accept","editedArtifactData":{"arguments":{"invoice":"INV-7","amount":"100.00"}}}`)})
		tr.approve(`{"action":"edit-accept","editedArtifactData":{"arguments":{"invoice":"INV-7","amount":"100.00"}}}`, "carol")
	})
	tr.at(3*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.False(t, bad.OK)
	require.Equal(t, refusal(protocol.CodeValidation, false), refusal(bad.Code, bad.Unprocessable))
	require.Contains(t, bad.Message, "do not match the parameters of pay")
	require.False(t, noArgs.OK)
	require.Contains(t, noArgs.Message, "editedArtifactData.arguments")
	require.Equal(t, protocol.StatusWaitingApproval, still.Status)
	require.Equal(t, "approval", still.Interrupt.Kind, "still waiting after the invalid edit")
	require.True(t, good.OK, "%+v", good)
	require.ElementsMatch(t, []string{"lookup", "pay"}, toolNames(sm.tools))
	for _, c := range sm.tools {
		if c.Tool == "pay" {
			require.JSONEq(t, `{"invoice":"INV-7","amount":"100.00"}`, string(c.Args))
		}
	}
	rec := ofType(tr.events(), protocol.EvApprovalReceived)
	require.Len(t, rec, 1)
	require.Equal(t, "edit-accept", payload(t, rec[0])["action"])
}

// TestToolApprovalExpiresWithRemindersAndEscalation: on the test clock, reminders every
// 24h, an escalation after 48h, and the deadline after 72h reject the call "expired".
func TestToolApprovalExpiresWithRemindersAndEscalation(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{Timeout: 72 * time.Hour, RemindEvery: 24 * time.Hour},
		map[string]activities.ToolApproval{"pay": {Approvers: []string{"finance"}, EscalateAfter: 48 * time.Hour, EscalateTo: []string{"cfo"}}})
	var before, escalated Snapshot
	var notListed ResolveCheck
	tr.at(time.Hour, func() {
		before = tr.snapshot()
		notListed = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "cfo"})
	})
	tr.at(50*time.Hour, func() { escalated = tr.snapshot() })
	tr.at(80*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, []string{"lookup"}, toolNames(sm.tools))

	require.False(t, notListed.OK)
	require.Equal(t, refusal(protocol.CodeForbidden, false), refusal(notListed.Code, notListed.Unprocessable), "cfo may decide only after the escalation")
	var d approvalData
	require.NoError(t, json.Unmarshal(before.Interrupt.Data, &d))
	require.Equal(t, []string{"finance"}, d.ApproversList)
	require.NoError(t, json.Unmarshal(escalated.Interrupt.Data, &d))
	require.Equal(t, []string{"finance", "cfo"}, d.ApproversList)

	evs := tr.events()
	reminders := ofType(evs, protocol.EvWorkflowStalled)
	require.Len(t, reminders, 2, "at 24h and 48h; none at the 72h deadline")
	require.Equal(t, "approval-reminder", payload(t, reminders[0])["reason"])
	require.EqualValues(t, (24 * time.Hour).Milliseconds(), payload(t, reminders[0])["stalledForMs"])
	req := ofType(evs, protocol.EvApprovalRequested)
	require.Len(t, req, 2)
	require.Equal(t, true, payload(t, req[1])["escalated"])
	require.Equal(t, []any{"finance", "cfo"}, payload(t, req[1])["approversList"])
	rec := ofType(evs, protocol.EvApprovalReceived)
	require.Len(t, rec, 1)
	require.Equal(t, "timeout", payload(t, rec[0])["action"])
	require.Equal(t, "expired", payload(t, rec[0])["reason"])
	out, _ := toolReturnedOf(t, evs, "pay")
	require.Equal(t, "expired", out["reason"])
	require.True(t, strings.Contains(out["error"].(string), "expired"))
	// The wait's events come in the order of the clock.
	var order []string
	for _, e := range evs {
		switch e.Type {
		case protocol.EvWorkflowStalled, protocol.EvApprovalRequested, protocol.EvApprovalReceived:
			order = append(order, e.Type)
		}
	}
	require.Equal(t, []string{protocol.EvApprovalRequested, protocol.EvWorkflowStalled, protocol.EvApprovalRequested, protocol.EvWorkflowStalled, protocol.EvApprovalReceived}, order)
}

// TestToolApprovalNothingAtTheDeadline: a reminder or an escalation that would fall at
// the deadline is not recorded; the call expires.
func TestToolApprovalNothingAtTheDeadline(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{}, map[string]activities.ToolApproval{"pay": {
		Timeout: time.Hour, RemindEvery: 30 * time.Minute, Approvers: []string{"finance"}, EscalateAfter: time.Hour, EscalateTo: []string{"cfo"}}})
	tr.at(2*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, []string{"lookup"}, toolNames(sm.tools))
	evs := tr.events()
	require.Len(t, ofType(evs, protocol.EvWorkflowStalled), 1, "at 30m; none at the 1h deadline")
	require.Len(t, ofType(evs, protocol.EvApprovalRequested), 1, "no escalation at the deadline")
	rec := ofType(evs, protocol.EvApprovalReceived)
	require.Len(t, rec, 1)
	require.Equal(t, "expired", payload(t, rec[0])["reason"])
}

// TestToolApprovalQuorum: two approvers must accept; a vote by someone else is refused.
func TestToolApprovalQuorum(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{}, map[string]activities.ToolApproval{"pay": {Approvers: []string{"ann", "ben"}, RequiredApprovals: 2}})
	var afterOne Snapshot
	var stranger, impostor, again ResolveCheck
	tr.at(time.Hour, func() { tr.approve(`{"action":"accept"}`, "ann") })
	tr.at(90*time.Minute, func() {
		stranger = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "carl"})
		impostor = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"accept","decidedBy":"ben"}`), ResolvedBy: "carl", Caller: "carl"})
		again = tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "ann"})
	})
	tr.at(2*time.Hour, func() {
		afterOne = tr.snapshot()
		tr.approve(`{"action":"accept"}`, "ben")
	})
	tr.at(3*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	final := tr.finish()
	require.Equal(t, protocol.StatusCompleted, final.Status)
	require.Equal(t, "approval", afterOne.Interrupt.Kind, "one vote of two")
	require.Equal(t, refusal(protocol.CodeForbidden, false), refusal(stranger.Code, stranger.Unprocessable), "not an approver: %+v", stranger)
	require.Equal(t, refusal(protocol.CodeForbidden, false), refusal(impostor.Code, impostor.Unprocessable), "a name in the body decides nothing: %+v", impostor)
	require.Contains(t, impostor.Message, `names "ben", but the caller is "carl"`)
	require.Equal(t, refusal(protocol.CodeInterruptResolved, false), refusal(again.Code, again.Unprocessable), "one vote each: %+v", again)
	require.ElementsMatch(t, []string{"lookup", "pay"}, toolNames(sm.tools))
	require.Len(t, ofType(tr.events(), protocol.EvApprovalReceived), 2)
}

// callerVote is a vote as the API sends it: for the caller's own credential.
func callerVote(value, by string) ResolveRequest {
	return ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(value), ResolvedBy: by, Caller: by}
}

// artifactOf reads the tool call artifact an approval interrupt shows.
func artifactOf(t *testing.T, s Snapshot) ToolCallArtifact {
	t.Helper()
	require.NotNil(t, s.Interrupt)
	var d struct {
		ArtifactData ToolCallArtifact `json:"artifactData"`
	}
	require.NoError(t, json.Unmarshal(s.Interrupt.Data, &d))
	return d.ArtifactData
}

// TestToolApprovalQuorumOnEditedArguments: in a quorum of two, an edit restarts the
// quorum on the edited arguments whichever approver edits: the call runs with the
// arguments both approved, the approval shows them, and a vote that names no revision
// (or an old one) after the edit is refused.
func TestToolApprovalQuorumOnEditedArguments(t *testing.T) {
	const edit = `{"action":"edit-accept","editedArtifactData":{"arguments":{"invoice":"INV-7","amount":"99999.00"}}}`
	for _, order := range []string{"accept-then-edit", "edit-then-accept"} {
		t.Run(order, func(t *testing.T) {
			tr, sm := approvalRun(t, activities.ToolApproval{}, map[string]activities.ToolApproval{"pay": {Approvers: []string{"ann", "ben"}, RequiredApprovals: 2}})
			var before, edited, after Snapshot
			var unnamed, old, sameArgs ResolveCheck
			tr.at(time.Hour, func() {
				before = tr.snapshot()
				if order == "accept-then-edit" {
					tr.resolveReq(callerVote(`{"action":"accept"}`, "ann"))
				} else {
					tr.resolveReq(callerVote(edit, "ann"))
				}
			})
			tr.at(2*time.Hour, func() {
				if order == "accept-then-edit" {
					tr.resolveReq(callerVote(edit, "ben"))
				}
			})
			tr.at(3*time.Hour, func() {
				edited = tr.snapshot()
				// The other approver: ann after ben's edit, ben after ann's.
				other := map[string]string{"accept-then-edit": "ann", "edit-then-accept": "ben"}[order]
				unnamed = tr.check(callerVote(`{"action":"accept"}`, other))
				old = tr.check(callerVote(`{"action":"accept","revision":0}`, other))
				sameArgs = tr.check(callerVote(edit, other))
				tr.resolveReq(callerVote(`{"action":"accept","revision":1}`, other))
			})
			tr.at(4*time.Hour, func() {
				after = tr.snapshot()
				tr.resolve(ServedPackNodeID, `{"operation":"close"}`)
			})
			final := tr.finish()
			require.Equal(t, protocol.StatusCompleted, final.Status)

			require.Equal(t, 0, artifactOf(t, before).Revision)
			require.JSONEq(t, `{"invoice":"INV-7","amount":"120.00"}`, string(artifactOf(t, before).Arguments))
			art := artifactOf(t, edited)
			require.Equal(t, protocol.StatusWaitingApproval, edited.Status, "the edit restarted the quorum: one approval of two")
			require.JSONEq(t, `{"invoice":"INV-7","amount":"99999.00"}`, string(art.Arguments), "the approval shows the arguments that will run")
			require.Equal(t, 1, art.Revision)
			require.Contains(t, string(edited.Interrupt.Data), "edited the arguments (revision 1)", "the description says so")
			require.Equal(t, refusal(protocol.CodeRunStateConflict, false), refusal(unnamed.Code, unnamed.Unprocessable), "%+v", unnamed)
			require.Contains(t, unnamed.Message, "must name the revision")
			require.Equal(t, refusal(protocol.CodeRunStateConflict, false), refusal(old.Code, old.Unprocessable), "%+v", old)
			require.True(t, sameArgs.OK, "an edit to the arguments shown approves them: %+v", sameArgs)
			require.NotEqual(t, "approval", kindOf(after.Interrupt))

			var paid []string
			for _, c := range sm.tools {
				if c.Tool == "pay" {
					paid = append(paid, string(c.Args))
				}
			}
			require.Len(t, paid, 1)
			require.JSONEq(t, `{"invoice":"INV-7","amount":"99999.00"}`, paid[0], "the tool gets the arguments both approved")

			evs := tr.events()
			rec := ofType(evs, protocol.EvApprovalReceived)
			var voters []string
			for _, e := range rec {
				p := payload(t, e)
				voters = append(voters, fmt.Sprintf("%s:%s@%v", p["decidedBy"], p["action"], p["revision"]))
			}
			if order == "accept-then-edit" {
				require.Equal(t, []string{"ann:accept@0", "ben:edit-accept@1", "ann:accept@1"}, voters)
				require.Equal(t, []any{"ann"}, payload(t, rec[1])["voided"], "ann's approval of 120.00 no longer counts")
			} else {
				require.Equal(t, []string{"ann:edit-accept@1", "ben:accept@1"}, voters)
			}
			req := ofType(evs, protocol.EvApprovalRequested)
			require.Len(t, req, 2, "the request, then the edited arguments")
			require.Equal(t, "arguments-edited", payload(t, req[1])["reason"])
			require.Equal(t, float64(1), payload(t, req[1])["revision"])
		})
	}
}

// TestToolApprovalQuorumBeforeArgumentQuorums: an approval raised before
// GateToolQuorum counts an edit as a vote and runs the deciding vote's arguments, as
// it did.
func TestToolApprovalQuorumBeforeArgumentQuorums(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{}, map[string]activities.ToolApproval{"pay": {Approvers: []string{"ann", "ben"}, RequiredApprovals: 2}})
	tr.env.OnGetVersion(GateToolQuorum, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	var edited Snapshot
	tr.at(time.Hour, func() {
		tr.resolveReq(callerVote(`{"action":"edit-accept","editedArtifactData":{"arguments":{"invoice":"INV-7","amount":"99999.00"}}}`, "ann"))
	})
	tr.at(2*time.Hour, func() {
		edited = tr.snapshot()
		tr.resolveReq(callerVote(`{"action":"accept"}`, "ben"))
	})
	tr.at(3*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	require.Equal(t, protocol.StatusCompleted, tr.finish().Status)
	require.JSONEq(t, `{"invoice":"INV-7","amount":"120.00"}`, string(artifactOf(t, edited).Arguments))
	for _, c := range sm.tools {
		if c.Tool == "pay" {
			require.JSONEq(t, `{"invoice":"INV-7","amount":"120.00"}`, string(c.Args))
		}
	}
}

// kindOf is the kind of a pending interrupt ("" for none).
func kindOf(pi *PendingInterrupt) string {
	if pi == nil {
		return ""
	}
	return pi.Kind
}

// TestToolApprovalCancelled: cancelling the run while a call waits ends the run
// cancelled; the call never runs and its decision is refused afterwards.
func TestToolApprovalCancelled(t *testing.T) {
	tr, sm := approvalRun(t, activities.ToolApproval{}, nil)
	tr.at(time.Hour, func() {
		tr.env.SignalWorkflow(CancelSignal, CancelRequest{Reason: "changed my mind", CancelledBy: "key_test"})
	})
	final := tr.finish()
	late := tr.check(ResolveRequest{NodeID: ServedPackNodeID, ResumeValue: json.RawMessage(`{"action":"accept"}`)})
	require.Equal(t, protocol.StatusCancelled, final.Status)
	require.Empty(t, sm.tools, "nothing of the batch ran")
	require.Empty(t, final.Interrupts)
	require.False(t, late.OK)
	require.Equal(t, refusal(protocol.CodeInterruptCancelled, false), refusal(late.Code, late.Unprocessable))
	evs := tr.events()
	require.Equal(t, protocol.EvRunCancelled, evs[len(evs)-1].Type)
}

// TestToolApprovalRefusesTokenMessages: a message sent with the conversation's own
// interrupt id (a signed token) is refused like any other while a call waits.
func TestToolApprovalRefusesTokenMessages(t *testing.T) {
	tr, _ := approvalRun(t, activities.ToolApproval{}, nil)
	var byToken, byApprovalToken ResolveCheck
	tr.at(time.Hour, func() {
		s := tr.snapshot()
		var conv, tool string
		for _, it := range s.Interrupts {
			if it.Kind == "approval" {
				tool = it.InterruptID
			} else {
				conv = it.InterruptID
			}
		}
		byToken = tr.check(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: conv, Via: "token", ResumeValue: json.RawMessage(`{"text":"hi"}`)})
		byApprovalToken = tr.check(ResolveRequest{NodeID: ServedPackNodeID, InterruptID: tool, Via: "token", ResumeValue: json.RawMessage(`{"action":"reject","feedback":"no"}`)})
		tr.approve(`{"action":"accept"}`, "alice")
	})
	tr.at(2*time.Hour, func() { tr.resolve(ServedPackNodeID, `{"operation":"close"}`) })
	require.Equal(t, protocol.StatusCompleted, tr.finish().Status)
	require.False(t, byToken.OK)
	require.Equal(t, CodeApprovalPending, byToken.Code)
	require.True(t, byApprovalToken.OK, "%+v", byApprovalToken)
}

// readPayPack is the pay desk (testdata/pay.pack.yaml): it acts with approval, its pay
// tool (external) waits for a decision, its lookup tool (read) does not.
func readPayPack(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/pay.pack.yaml")
	require.NoError(t, err)
	return raw
}
