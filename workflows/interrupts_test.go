package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
)

func TestApprovalAcceptEventSequence(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-approval", ""))
	var waiting Snapshot
	var badAction, unknownNode, ok ResolveCheck
	tr.at(time.Second, func() {
		waiting = tr.snapshot()
		badAction = tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"maybe"}`)})
		unknownNode = tr.check(ResolveRequest{NodeID: "no-such-node", ResumeValue: json.RawMessage(`{"action":"accept"}`)})
		ok = tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`)})
		// An invalid signal is ignored by the workflow; the valid one after it applies.
		tr.resolve("gate", `{"action":"maybe"}`)
		tr.resolve("gate", `{"action":"accept"}`)
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusWaitingApproval, waiting.Status)
	require.Equal(t, "gate", waiting.CurrentNodeID)
	require.NotNil(t, waiting.Interrupt)
	require.Equal(t, "run-conformance-approval:gate:0", waiting.Interrupt.Key)
	require.Equal(t, InterruptID("run-conformance-approval:gate:0"), waiting.Interrupt.InterruptID)
	require.Equal(t, ResolveCheck{Code: "validation_error"}, ResolveCheck{Status: badAction.Status, Code: badAction.Code, Unprocessable: badAction.Unprocessable})
	require.Equal(t, refusal(protocol.CodeInterruptNotFound, false), refusal(unknownNode.Code, unknownNode.Unprocessable))
	require.Equal(t, "interrupt_not_found", unknownNode.Code)
	require.True(t, ok.OK)
	require.Equal(t, protocol.StatusRunning, ok.RunStatus)
	require.Equal(t, protocol.StatusCompleted, s.Status)
	evs := tr.events()
	require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvNodeSuspended, protocol.EvInterruptRequested, protocol.EvApprovalRequested,
		protocol.EvInterruptResolved, protocol.EvApprovalReceived, protocol.EvNodeResumed, protocol.EvNodeCompleted, protocol.EvRunCompleted}, types(evs))
	require.Equal(t, evs[3].EventID, evs[5].CausationID, "interrupt.resolved is caused by interrupt.requested")
	require.Equal(t, evs[6].EventID, evs[7].CausationID)
	require.Equal(t, "key_test", payload(t, evs[6])["decidedBy"])
	// After the run: resolving again is a conflict, an unknown node is terminal.
	again := tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`)})
	require.Equal(t, refusal(protocol.CodeInterruptResolved, false), refusal(again.Code, again.Unprocessable))
	require.Equal(t, "interrupt_already_resolved", again.Code)
}

func TestApprovalRejectFailsRun(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-approval", ""))
	tr.at(time.Second, func() { tr.resolve("gate", `{"decision":"rejected"}`) })
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "approval_rejected", s.Error.Code)
	recv := ofType(tr.events(), protocol.EvApprovalReceived)
	require.Len(t, recv, 1)
	require.Equal(t, "reject", payload(t, recv[0])["action"])
	require.Len(t, ofType(tr.events(), protocol.EvNodeFailed), 1)
}

func TestApprovalTimeout(t *testing.T) {
	in := fixtureInput(t, "conformance-approval", "")
	def := *in.Definition
	def.Nodes = []Node{def.Nodes[0]}
	// RFC 0223: a timeout resolves the gate rejected, whatever onTimeout says.
	def.Nodes[0].Config = json.RawMessage(`{"actions":["accept","reject"],"timeoutMs":3600000,"onTimeout":"approve"}`)
	in.Definition = &def
	tr := newTestRun(t, in)
	var waiting Snapshot
	tr.at(time.Minute, func() { waiting = tr.snapshot() })
	s := tr.execute()
	require.NotEmpty(t, waiting.Interrupt.ExpiresAt)
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, protocol.CodeApprovalRejected, s.Error.Code)
	evs := tr.events()
	recv := ofType(evs, protocol.EvApprovalReceived)
	require.Equal(t, "timeout", payload(t, recv[0])["action"])
	resolved := payload(t, ofType(evs, protocol.EvInterruptResolved)[0])
	require.Equal(t, "timeout", resolved["action"])
	require.Equal(t, "rejected", resolved["decision"])
	require.Equal(t, "timeout", resolved["reason"])
	failed := payload(t, ofType(evs, protocol.EvNodeFailed)[0])
	require.Equal(t, map[string]any{"code": protocol.CodeApprovalRejected, "message": failed["error"].(map[string]any)["message"], "retryable": false}, failed["error"])
	require.Equal(t, "gate", payload(t, ofType(evs, protocol.EvRunFailed)[0])["failedNodeId"])
}

func TestQuorumAcceptsAfterThreeVoters(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-quorum", ""))
	var after2 Snapshot
	var dupVoter ResolveCheck
	tr.at(time.Second, func() {
		tr.resolve("gate", `{"action":"accept","voter":"approver-1"}`)
		tr.resolve("gate", `{"action":"accept","voter":"approver-2"}`)
	})
	tr.at(2*time.Second, func() {
		after2 = tr.snapshot()
		dupVoter = tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept","voter":"approver-2"}`)})
		tr.resolve("gate", `{"action":"accept","voter":"approver-2"}`) // ignored duplicate vote
		tr.resolve("gate", `{"action":"accept","voter":"approver-3"}`)
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusWaitingApproval, after2.Status)
	require.Equal(t, refusal(protocol.CodeInterruptResolved, false), refusal(dupVoter.Code, dupVoter.Unprocessable))
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.Len(t, ofType(tr.events(), protocol.EvApprovalReceived), 3)
	require.Len(t, ofType(tr.events(), protocol.EvInterruptResolved), 1)
}

func TestQuorumMajorityRejects(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-quorum", ""))
	tr.at(time.Second, func() {
		tr.resolve("gate", `{"action":"reject","voter":"approver-1"}`)
		tr.resolve("gate", `{"action":"reject","voter":"approver-2"}`)
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "approval_rejected", s.Error.Code)
}

func TestClarificationObjectAndArrayAnswers(t *testing.T) {
	for name, answers := range map[string]string{"object": `{"answers":{"q1":"blue"}}`, "array": `{"answers":[{"id":"q1","answer":"blue"}]}`} {
		t.Run(name, func(t *testing.T) {
			tr := newTestRun(t, fixtureInput(t, "conformance-clarification", ""))
			var waiting Snapshot
			var missing ResolveCheck
			tr.at(time.Second, func() {
				waiting = tr.snapshot()
				missing = tr.check(ResolveRequest{NodeID: "ask", ResumeValue: json.RawMessage(`{"answers":{"q2":"x"}}`)})
				tr.resolve("ask", answers)
			})
			s := tr.execute()
			require.Equal(t, protocol.StatusWaitingInput, waiting.Status)
			require.Equal(t, "ask", waiting.CurrentNodeID)
			require.Equal(t, refusal(protocol.CodeValidation, false), refusal(missing.Code, missing.Unprocessable))
			require.Equal(t, protocol.StatusCompleted, s.Status)
			evs := tr.events()
			require.Equal(t, []string{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvNodeSuspended, protocol.EvInterruptRequested, protocol.EvClarificationRequested,
				protocol.EvInterruptResolved, protocol.EvClarificationResolved, protocol.EvNodeResumed, protocol.EvNodeCompleted, protocol.EvRunCompleted}, types(evs))
			require.Equal(t, map[string]any{"q1": "blue"}, payload(t, evs[6])["answers"])
		})
	}
}

func TestExternalEventMatchAndMismatch(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-external-event", ""))
	var waiting, afterBad Snapshot
	var mismatch, missing ResolveCheck
	tr.at(time.Second, func() {
		waiting = tr.snapshot()
		mismatch = tr.check(ResolveRequest{NodeID: "wait", ResumeValue: json.RawMessage(`{"orderId":"different-order","status":"completed"}`)})
		missing = tr.check(ResolveRequest{NodeID: "wait", ResumeValue: json.RawMessage(`{"orderId":"fixture-order-1"}`)})
		tr.resolve("wait", `{"orderId":"different-order","status":"completed"}`)
		tr.resolveReq(ResolveRequest{RequestID: "bad", NodeID: "wait", ResumeValue: json.RawMessage(`{"orderId":"different-order","status":"completed"}`)})
	})
	var recorded ResolveCheck
	tr.at(2*time.Second, func() {
		afterBad = tr.snapshot()
		recorded = tr.check(ResolveRequest{RequestID: "bad", NodeID: "wait"})
		tr.resolve("wait", `{"orderId":"fixture-order-1","status":"completed","externalReference":"conformance-test-123"}`)
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusWaitingExternal, waiting.Status)
	require.Equal(t, "external-event", waiting.Interrupt.Kind)
	require.Equal(t, refusal(protocol.CodeValidation, true), refusal(mismatch.Code, mismatch.Unprocessable))
	require.Equal(t, "validation_error", mismatch.Code)
	require.Equal(t, refusal(protocol.CodeValidation, true), refusal(missing.Code, missing.Unprocessable))
	require.Equal(t, protocol.StatusWaitingExternal, afterBad.Status)
	require.True(t, recorded.Replayed && recorded.Outcome != nil && !recorded.OK, "the refusal is recorded: %+v", recorded)
	require.Equal(t, refusal(protocol.CodeValidation, true), refusal(recorded.Code, recorded.Unprocessable), "a recorded refusal keeps its 422")
	require.Equal(t, refusal(protocol.CodeValidation, true), refusal(recorded.Outcome.Code, recorded.Outcome.Unprocessable))
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.Len(t, ofType(tr.events(), protocol.EvInterruptResolved), 1)
}

func TestExternalEventTimeout(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-external-event", ""))
	s := tr.execute()
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, "interrupt_timeout", s.Error.Code)
	require.Equal(t, "wait", payload(t, tr.events()[len(tr.events())-1])["failedNodeId"])
}

func TestCancelInvalidatesPendingInterrupt(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-approval", ""))
	tr.at(time.Second, func() { tr.env.SignalWorkflow(CancelSignal, CancelRequest{Reason: "conformance-cleanup"}) })
	s := tr.execute()
	require.Equal(t, protocol.StatusCancelled, s.Status)
	require.Nil(t, s.Interrupt)
	c := tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`)})
	require.Equal(t, refusal(protocol.CodeInterruptCancelled, false), refusal(c.Code, c.Unprocessable))
	require.Equal(t, "interrupt_cancelled", c.Code)
}

func TestCustomInterruptResumeSchema(t *testing.T) {
	def := &Definition{ID: "custom", Name: "c", Version: "1", Nodes: []Node{{ID: "n", TypeID: "core.interrupt", Config: json.RawMessage(
		`{"kind":"custom","data":{"customKind":"pick"},"resumeSchema":{"type":"object","required":["choice"],"properties":{"choice":{"enum":["a","b"]}}}}`)}}}
	def.Normalize()
	tr := newTestRun(t, RunInput{RunID: "run-custom", Definition: def})
	var bad ResolveCheck
	var waiting Snapshot
	tr.at(time.Second, func() {
		waiting = tr.snapshot()
		bad = tr.check(ResolveRequest{NodeID: "n", ResumeValue: json.RawMessage(`{"choice":"z"}`)})
		tr.resolve("n", `{"choice":"z"}`)
		tr.resolve("n", `{"choice":"b"}`)
	})
	s := tr.execute()
	require.Equal(t, protocol.StatusWaitingInput, waiting.Status)
	require.Equal(t, refusal(protocol.CodeValidation, false), refusal(bad.Code, bad.Unprocessable))
	require.Equal(t, protocol.StatusCompleted, s.Status)
	require.JSONEq(t, `{"choice":"b"}`, string(s.Variables["resumeValue"]))
}

// vote is a quorum vote as the API sends it: the caller named by the credential.
func vote(id, caller string, delegate bool, value string) ResolveRequest {
	return ResolveRequest{RequestID: id, NodeID: "gate", ResumeValue: json.RawMessage(value), ResolvedBy: caller, Caller: caller, Delegate: delegate}
}

// A vote counts for its caller's credential: a body voter naming someone else is
// refused unless the caller is a delegate, and a repeated vote is idempotent.
func TestQuorumVotersComeFromTheCredential(t *testing.T) {
	tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-quorum", ""))
	checks := map[string]ResolveCheck{}
	var after Snapshot
	tr.at(time.Second, func() {
		checks["impersonate"] = tr.check(vote("x1", "key-a", false, `{"action":"accept","voter":"approver-9"}`))
		checks["decidedBy"] = tr.check(vote("x2", "key-a", false, `{"action":"accept","decidedBy":"cfo"}`))
		checks["self"] = tr.check(vote("x3", "key-a", false, `{"action":"accept","voter":"key-a"}`))
		tr.resolveReq(vote("v1", "key-a", false, `{"action":"accept","voter":"approver-9"}`)) // refused by the run too
		tr.resolveReq(vote("v2", "key-a", false, `{"action":"accept"}`))
		tr.resolveReq(vote("v3", "key-a", false, `{"action":"accept"}`)) // the same voter again
		tr.resolveReq(vote("v4", "relay", true, `{"action":"accept","voter":"approver-1"}`))
	})
	tr.at(2*time.Second, func() {
		after = tr.snapshot()
		checks["repeat"] = tr.check(vote("x4", "key-a", false, `{"action":"accept"}`))
		checks["changeMind"] = tr.check(vote("x5", "key-a", false, `{"action":"reject"}`))
		tr.resolveReq(vote("v5", "key-b", false, `{"action":"accept"}`))
	})
	s := tr.execute()
	require.Equal(t, refusal(protocol.CodeForbidden, false), refusal(checks["impersonate"].Code, checks["impersonate"].Unprocessable))
	require.JSONEq(t, `{"field":"resumeValue.voter","scopeRequired":"approvals:delegate"}`, string(checks["impersonate"].Details))
	require.Equal(t, refusal(protocol.CodeForbidden, false), refusal(checks["decidedBy"].Code, checks["decidedBy"].Unprocessable))
	require.True(t, checks["self"].OK)
	require.Equal(t, protocol.StatusWaitingApproval, after.Status, "key-a and the relay's approver-1: two of three")
	require.True(t, checks["repeat"].OK, "a repeated vote is idempotent: %+v", checks["repeat"])
	require.Equal(t, protocol.StatusWaitingApproval, checks["repeat"].RunStatus)
	require.Equal(t, refusal(protocol.CodeInterruptResolved, false), refusal(checks["changeMind"].Code, checks["changeMind"].Unprocessable))
	require.Equal(t, protocol.StatusCompleted, s.Status)
	recv := ofType(tr.events(), protocol.EvApprovalReceived)
	require.Len(t, recv, 3)
	var by []any
	for _, e := range recv {
		by = append(by, payload(t, e)["decidedBy"])
	}
	require.Equal(t, []any{"key-a", "approver-1", "key-b"}, by)
	outcome := func(id string) ResolveOutcome {
		c := tr.check(vote(id, "key-a", false, `{"action":"accept"}`))
		require.NotNil(t, c.Outcome, id)
		return *c.Outcome
	}
	require.Equal(t, refusal(protocol.CodeForbidden, false), refusal(outcome("v1").Code, outcome("v1").Unprocessable))
	require.Equal(t, ResolveOutcome{RequestID: "v3", Applied: true, RunStatus: protocol.StatusWaitingApproval}, outcome("v3"))
	require.Equal(t, ResolveOutcome{RequestID: "v5", Applied: true, RunStatus: protocol.StatusRunning}, outcome("v5"))
}

// A resolve queued in the run when a cancel arrives is refused 410
// interrupt_cancelled and recorded so; it is never applied. (The run is busy in a delay
// node, so the resolve waits in its queue as it would behind a model round.)
func TestResolveLosingToCancelIsRefused(t *testing.T) {
	def := &Definition{ID: "busy-then-gate", Name: "b", Version: "1", Nodes: []Node{
		{ID: "wait", TypeID: "core.delay", Config: json.RawMessage(`{"delayMs":60000}`)},
		{ID: "gate", TypeID: "core.approvalGate", Config: json.RawMessage(`{"actions":["accept","reject"]}`)},
	}, Edges: []Edge{{ID: "e", SourceNodeID: "wait", TargetNodeID: "gate"}}}
	def.Normalize()
	tr := newTestRun(t, RunInput{RunID: "run-busy", Definition: def})
	var queued ResolveCheck
	tr.at(time.Second, func() {
		tr.resolveReq(ResolveRequest{RequestID: "late", NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), Caller: "k"})
	})
	tr.at(2*time.Second, func() {
		queued = tr.check(ResolveRequest{RequestID: "late", NodeID: "gate"})
		tr.env.SignalWorkflow(CancelSignal, CancelRequest{Reason: "race"})
	})
	s := tr.execute()
	require.True(t, queued.Replayed && queued.Pending, "queued behind the busy node: %+v", queued)
	require.Equal(t, protocol.StatusCancelled, s.Status)
	require.Empty(t, ofType(tr.events(), protocol.EvInterruptResolved))
	c := tr.check(ResolveRequest{RequestID: "late", NodeID: "gate"})
	require.NotNil(t, c.Outcome)
	require.Equal(t, ResolveOutcome{RequestID: "late", Code: "interrupt_cancelled", Message: c.Outcome.Message}, *c.Outcome)
	require.True(t, c.Terminal)
}

// A bearer-only approval refuses token resumes; a token issued for one turn of a
// conversation carries that exchange only.
func TestBearerOnlyAndTurnBoundRequests(t *testing.T) {
	t.Run("bearer only", func(t *testing.T) {
		tr := newTestRun(t, fixtureInput(t, "conformance-interrupt-auth-required", ""))
		var waiting Snapshot
		var byToken, byKey ResolveCheck
		tr.at(time.Second, func() {
			waiting = tr.snapshot()
			byToken = tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), Via: "token", Caller: "k"})
			byKey = tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), Via: "rest", Caller: "k"})
			tr.resolveReq(ResolveRequest{RequestID: "t", NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), Via: "token", Caller: "k"})
			tr.resolveReq(ResolveRequest{RequestID: "b", NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"reject"}`), Via: "rest", Caller: "k"})
		})
		s := tr.execute()
		require.True(t, waiting.Interrupt.BearerOnly)
		require.Equal(t, refusal(protocol.CodeUnauthenticated, false), refusal(byToken.Code, byToken.Unprocessable))
		require.True(t, byKey.OK)
		require.Equal(t, protocol.StatusFailed, s.Status, "the token resume was refused, the bearer reject applied")
	})
	t.Run("turn bound", func(t *testing.T) {
		tr := newTestRun(t, fixtureInput(t, "conformance-conversation-council", ""))
		at := func(n int) *int { return &n }
		var stale, fresh ResolveCheck
		tr.at(time.Second, func() {
			tr.resolveReq(ResolveRequest{RequestID: "a", NodeID: "convo", ResumeValue: json.RawMessage(`{"text":"one"}`), AtTurn: at(1)})
			tr.resolveReq(ResolveRequest{RequestID: "b", NodeID: "convo", ResumeValue: json.RawMessage(`{"text":"two"}`), AtTurn: at(1)})
		})
		tr.at(2*time.Second, func() {
			stale = tr.check(ResolveRequest{NodeID: "convo", ResumeValue: json.RawMessage(`{"text":"three"}`), AtTurn: at(1)})
			fresh = tr.check(ResolveRequest{NodeID: "convo", ResumeValue: json.RawMessage(`{"text":"three"}`), AtTurn: at(3)})
			tr.resolveReq(ResolveRequest{RequestID: "c", NodeID: "convo", ResumeValue: json.RawMessage(`{"operation":"close"}`)})
		})
		tr.execute()
		require.Equal(t, refusal(protocol.CodeInterruptResolved, false), refusal(stale.Code, stale.Unprocessable))
		require.True(t, fresh.OK)
		b := tr.check(ResolveRequest{RequestID: "b", NodeID: "convo"})
		require.NotNil(t, b.Outcome)
		require.Equal(t, refusal(protocol.CodeInterruptResolved, false), refusal(b.Outcome.Code, b.Outcome.Unprocessable), "the second use of a one-exchange token")
		require.Len(t, ofType(tr.events(), protocol.EvConversationExchanged), 2, "one user turn and the chair's echo")
	})
}
