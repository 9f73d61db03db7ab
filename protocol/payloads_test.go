package protocol

import (
	"encoding/json"
	"testing"
)

// The payload structs encode as the maps the host built before them did: every key in
// the maps' (sorted) order, absent keys absent, a present empty decidedBy present.
func TestApprovalReceivedEncodesAsItsMaps(t *testing.T) {
	empty, rev := "", 0
	for _, c := range []struct {
		name string
		v    ApprovalReceived
		m    map[string]any
	}{
		{"timeout", ApprovalReceived{NodeID: "n", Action: "timeout", DecidedAt: "2026-01-01T00:00:00.000Z"},
			map[string]any{"nodeId": "n", "action": "timeout", "decidedAt": "2026-01-01T00:00:00.000Z"}},
		{"decision without a decider", ApprovalReceived{NodeID: "n", Action: "accept", DecidedBy: &empty, DecidedAt: "t"},
			map[string]any{"nodeId": "n", "action": "accept", "decidedBy": "", "decidedAt": "t"}},
		{"every field", ApprovalReceived{
			Action: "edit-accept", Arguments: json.RawMessage(`{"a": 1}`), CallID: "c1", Caller: "relay", Comment: "ok <b>",
			DecidedAt: "t", DecidedBy: &empty, EditedArtifactData: json.RawMessage(`{"arguments":{"a":2}}`), Feedback: "f",
			NodeID: "n", Reason: "expired", RefineFeedback: json.RawMessage(`null`), Revision: &rev, Tool: "issue_refund", Voided: []string{"k1"},
		}, map[string]any{
			"action": "edit-accept", "arguments": json.RawMessage(`{"a": 1}`), "callId": "c1", "caller": "relay", "comment": "ok <b>",
			"decidedAt": "t", "decidedBy": "", "editedArtifactData": json.RawMessage(`{"arguments":{"a":2}}`), "feedback": "f",
			"nodeId": "n", "reason": "expired", "refineFeedback": json.RawMessage(`null`), "revision": 0, "tool": "issue_refund", "voided": []string{"k1"},
		}},
	} {
		encodesAs(t, c.name, &c.v, c.m)
	}
}

// The node lifecycle payloads and run.completed encode as the maps the run built before
// them did, nil outputs and an empty resume value included.
func TestNodePayloadsEncodeAsTheirMaps(t *testing.T) {
	no := false
	outs := map[string]json.RawMessage{"b": json.RawMessage(`2`), "a": json.RawMessage(`"<x>"`)}
	for _, c := range []struct {
		name string
		v, m any
	}{
		{"node.started", NodeStarted{NodeID: "n", TypeID: "core.noop", Attempt: 2},
			map[string]any{"nodeId": "n", "typeId": "core.noop", "attempt": 2}},
		{"node.completed", NodeCompleted{NodeID: "n", Outputs: outs, DurationMs: 7},
			map[string]any{"nodeId": "n", "outputs": outs, "durationMs": int64(7)}},
		{"node.completed without outputs", NodeCompleted{NodeID: "n"},
			map[string]any{"nodeId": "n", "outputs": map[string]json.RawMessage(nil), "durationMs": int64(0)}},
		{"node.failed", NodeFailed{NodeID: "n", Error: NodeError{Code: "c", Message: "m", Details: json.RawMessage(`{"f":1}`)}, Attempts: 1},
			map[string]any{"nodeId": "n", "error": RunError{Code: "c", Message: "m", Details: json.RawMessage(`{"f":1}`)}, "attempts": 1}},
		{"node.failed of a gate", NodeFailed{NodeID: "n", Error: NodeError{Code: "c", Message: "m", Retryable: &no}, Attempts: 1},
			map[string]any{"nodeId": "n", "error": map[string]any{"code": "c", "message": "m", "retryable": false}, "attempts": 1}},
		{"node.skipped", NodeSkipped{NodeID: "n", Reason: "r"}, map[string]any{"nodeId": "n", "reason": "r"}},
		{"node.cancelled", NodeCancelled{NodeID: "n"}, map[string]any{"nodeId": "n", "reason": ""}},
		{"node.resumed", NodeResumed{NodeID: "n", InterruptID: "i", ResumeValue: json.RawMessage(`null`)},
			map[string]any{"nodeId": "n", "interruptId": "i", "resumeValue": json.RawMessage(`null`)}},
		{"run.completed", RunCompleted{Outputs: outs, DurationMs: 9}, map[string]any{"outputs": outs, "durationMs": int64(9)}},
	} {
		encodesAs(t, c.name, c.v, c.m)
	}
}

// workflow.restored encodes its fields in the order of their JSON names, every one
// present, and a v2 reader gets its engineVersion as the integer, as run.started's.
func TestWorkflowRestoredEncodesInNameOrder(t *testing.T) {
	got, err := json.Marshal(WorkflowRestored{Attempt: 2, EngineVersion: "wop/1", Incarnation: "b", NodeID: "n"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"attempt":2,"engineVersion":"wop/1","incarnation":"b","nodeId":"n","replacedIncarnation":""}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	v2, err := PayloadV2("acme", EvWorkflowRestored, got)
	if err != nil {
		t.Fatal(err)
	}
	const wantV2 = `{"attempt":2,"engineVersion":1,"incarnation":"b","nodeId":"n","replacedIncarnation":""}`
	if string(v2) != wantV2 {
		t.Errorf("at v2 got %s\nwant %s", v2, wantV2)
	}
}

// run.started, the clarification and conversation payloads and replay.diverged encode
// as the maps the run built before them did: a key the map always wrote is written
// when empty too, and a key it added on a condition is absent where the map left it
// out.
func TestRunAndConversationPayloadsEncodeAsTheirMaps(t *testing.T) {
	subj := &Subject{Issuer: IssuerAPIKey, SubjectID: "k1", Tenant: "acme", Lane: "api-key", Kind: "key"}
	turn := Turn{MessageID: "m-1", From: "u", Content: json.RawMessage(`{"text":"<hi> & bye"}`), Ts: 5, Role: RoleUser, TurnIndex: 1}
	emptyID, node := "", "n"
	evt := "evt-src-0"
	for _, c := range []struct {
		name string
		v, m any
	}{
		{"run.started without a definition", RunStarted{WorkflowID: "unknown"}, map[string]any{"workflowId": "unknown"}},
		{"run.started, bare", RunStarted{WorkflowID: "", Transport: "rest", EngineVersion: "wop/1"},
			map[string]any{"workflowId": "", "transport": "rest", "engineVersion": "wop/1"}},
		{"run.started, empty tags", RunStarted{WorkflowID: "w", Transport: "rest", EngineVersion: "wop/1", Tags: []string{}},
			map[string]any{"workflowId": "w", "transport": "rest", "engineVersion": "wop/1"}},
		{"run.started, tenant only", RunStarted{WorkflowID: "w", Transport: "rest", EngineVersion: "wop/1", Owner: &RunOwner{Tenant: "acme"}},
			map[string]any{"workflowId": "w", "transport": "rest", "engineVersion": "wop/1", "owner": map[string]any{"tenant": "acme"}}},
		{"run.started, every field", RunStarted{
			WorkflowID: "w", Transport: "rest", EngineVersion: "wop/1", Inputs: json.RawMessage(`{"q": "<a>"}`),
			Owner: &RunOwner{Tenant: "acme", Principal: "p", Subject: subj}, Tags: []string{"b", "a"}, Metadata: json.RawMessage(`{"m":1}`),
		}, map[string]any{
			"workflowId": "w", "transport": "rest", "engineVersion": "wop/1", "inputs": json.RawMessage(`{"q": "<a>"}`),
			"owner": map[string]any{"tenant": "acme", "principal": "p", "subject": subj}, "tags": []string{"b", "a"}, "metadata": json.RawMessage(`{"m":1}`),
		}},
		{"clarification.requested", ClarificationRequested{NodeID: "n", InterruptID: "i", Questions: []ClarificationQuestion{
			{ID: "q1", Question: "Why <now>?"}, {ID: "q2", Question: "", Schema: json.RawMessage(`{"type":"string"}`)}}},
			map[string]any{"nodeId": "n", "interruptId": "i", "questions": []ClarificationQuestion{
				{ID: "q1", Question: "Why <now>?"}, {ID: "q2", Question: "", Schema: json.RawMessage(`{"type":"string"}`)}}}},
		{"clarification.requested without questions", ClarificationRequested{},
			map[string]any{"nodeId": "", "interruptId": "", "questions": []ClarificationQuestion(nil)}},
		{"conversation.exchanged", ConversationExchanged{ConversationID: "c", TurnIndex: 1, Turn: turn},
			map[string]any{"conversationId": "c", "turnIndex": 1, "turn": turn}},
		{"conversation.exchanged, zero turn", ConversationExchanged{},
			map[string]any{"conversationId": "", "turnIndex": 0, "turn": Turn{}}},
		{"conversation.closed", ConversationClosed{ConversationID: "c", TurnIndex: 1, FinalTurn: turn, Outcome: json.RawMessage(`{"ok":true}`)},
			map[string]any{"conversationId": "c", "turnIndex": 1, "finalTurn": turn, "outcome": json.RawMessage(`{"ok":true}`)}},
		{"conversation.closed without an outcome", ConversationClosed{ConversationID: "c", Outcome: json.RawMessage(`null`)},
			map[string]any{"conversationId": "c", "turnIndex": 0, "finalTurn": Turn{}, "outcome": json.RawMessage(`null`)}},
		{"replay.diverged of the inputs", ReplayDiverged{
			SourceRunID: "src", AtSequence: 0, OriginalEventID: &evt, ReplayEventID: "evt-fork-0",
			DivergenceKind: "input", DivergencePoint: EvRunStarted, Reason: "other <inputs>",
		}, map[string]any{
			"sourceRunId": "src", "atSequence": int64(0), "originalEventId": evt, "replayEventId": "evt-fork-0",
			"divergenceKind": "input", "divergencePoint": EvRunStarted, "reason": "other <inputs>",
		}},
		{"replay.diverged of the inputs, empty ids", ReplayDiverged{SourceRunID: "", AtSequence: 3, OriginalEventID: &emptyID, DivergenceKind: "input", DivergencePoint: EvRunStarted},
			map[string]any{"sourceRunId": "", "atSequence": int64(3), "originalEventId": "", "divergenceKind": "input", "divergencePoint": EvRunStarted, "reason": ""}},
		{"replay.diverged of a node", ReplayDiverged{SourceRunID: "src", AtSequence: 4, DivergenceKind: "output", DivergencePoint: EvConversationClosed, NodeID: &node, Reason: "r"},
			map[string]any{"sourceRunId": "src", "atSequence": int64(4), "divergenceKind": "output", "divergencePoint": EvConversationClosed, "nodeId": "n", "reason": "r"}},
		{"replay.diverged of a node without an id", ReplayDiverged{SourceRunID: "src", AtSequence: 0, DivergenceKind: "extra", DivergencePoint: EvAgentDecided, NodeID: &emptyID, OriginalEventID: &evt, Reason: ""},
			map[string]any{"sourceRunId": "src", "atSequence": int64(0), "divergenceKind": "extra", "divergencePoint": EvAgentDecided, "nodeId": "", "originalEventId": evt, "reason": ""}},
	} {
		encodesAs(t, c.name, c.v, c.m)
	}
}

// The interrupt lifecycle, approval.requested, clarification.resolved,
// conversation.opened, the pause and the run's failure and cancellation encode as the
// maps the run built before them did, with and without each key the maps added on a
// condition.
func TestInterruptAndRunPayloadsEncodeAsTheirMaps(t *testing.T) {
	action, empty := "reject", ""
	turn := Turn{MessageID: "c:0", From: "system", Content: json.RawMessage(`{"text":"Hello & <welcome>"}`), Role: RoleSystem}
	roster := []Participant{{AgentID: "a1", Name: "A"}, {AgentID: "a2"}}
	rerr := RunError{Code: CodeInternal, Message: "boom", Details: json.RawMessage(`{"x":1}`)}
	for _, c := range []struct {
		name string
		v, m any
	}{
		{"node.suspended", NodeSuspended{NodeID: "n", InterruptID: "i", Key: "r:n:0"},
			map[string]any{"nodeId": "n", "interruptId": "i", "key": "r:n:0"}},
		{"node.suspended with kind and reason", NodeSuspended{NodeID: "n", InterruptID: "i", Key: "k", Kind: KindApproval, Reason: "conversation-input"},
			map[string]any{"nodeId": "n", "interruptId": "i", "key": "k", "kind": KindApproval, "reason": "conversation-input"}},
		{"interrupt.requested", InterruptRequested{Kind: KindConversationStart, Key: "k", Data: json.RawMessage(`{"title":"<t>"}`)},
			map[string]any{"kind": KindConversationStart, "key": "k", "data": json.RawMessage(`{"title":"<t>"}`)}},
		{"interrupt.requested with schema and timeout", InterruptRequested{Kind: "", Key: "", Data: json.RawMessage(`null`), ResumeSchema: json.RawMessage(`{"type":"object"}`), TimeoutMs: 1500},
			map[string]any{"kind": "", "key": "", "data": json.RawMessage(`null`), "resumeSchema": json.RawMessage(`{"type":"object"}`), "timeoutMs": int64(1500)}},
		{"interrupt.resolved", InterruptResolved{NodeID: "n", InterruptID: "i", ResumeValue: json.RawMessage(`null`), ResolvedAt: "t"},
			map[string]any{"nodeId": "n", "interruptId": "i", "resumeValue": json.RawMessage(`null`), "resolvedAt": "t"}},
		{"interrupt.resolved by token", InterruptResolved{NodeID: "n", InterruptID: "i", ResumeValue: json.RawMessage(`{"a":"<b>"}`), ResolvedAt: "t", Kind: KindCustom, ResolvedBy: "key-1", Via: "token"},
			map[string]any{"nodeId": "n", "interruptId": "i", "resumeValue": json.RawMessage(`{"a":"<b>"}`), "resolvedAt": "t", "kind": KindCustom, "resolvedBy": "key-1", "via": "token"}},
		{"interrupt.resolved of a rejection", InterruptResolved{NodeID: "n", InterruptID: "i", ResumeValue: json.RawMessage(`{}`), ResolvedAt: "t", Action: &action, Decision: "rejected"},
			map[string]any{"nodeId": "n", "interruptId": "i", "resumeValue": json.RawMessage(`{}`), "resolvedAt": "t", "action": action, "decision": "rejected"}},
		{"interrupt.resolved of a timeout", InterruptResolved{NodeID: "n", InterruptID: "i", ResumeValue: json.RawMessage(`{}`), ResolvedAt: "t", ResolvedBy: "system", Action: &empty, Decision: "rejected", Reason: "timeout"},
			map[string]any{"nodeId": "n", "interruptId": "i", "resumeValue": json.RawMessage(`{}`), "resolvedAt": "t", "resolvedBy": "system", "action": "", "decision": "rejected", "reason": "timeout"}},
		{"approval.requested", ApprovalRequested{NodeID: "n", InterruptID: "i", ArtifactID: "n", ArtifactType: "workflow-node", Title: "Approve <n>", Actions: []string{}},
			map[string]any{"nodeId": "n", "interruptId": "i", "artifactId": "n", "artifactType": "workflow-node", "title": "Approve <n>", "actions": []string{}}},
		{"approval.requested with a quorum", ApprovalRequested{NodeID: "n", InterruptID: "i", Title: "t", Actions: []string{"accept", "edit"}, RequiredApprovals: 2, ApproversList: []string{"k1", "k2"}},
			map[string]any{"nodeId": "n", "interruptId": "i", "artifactId": "", "artifactType": "", "title": "t", "actions": []string{"accept", "edit"}, "requiredApprovals": 2, "approversList": []string{"k1", "k2"}}},
		{"approval.requested with an empty list of approvers", ApprovalRequested{Actions: []string{"accept"}, ApproversList: []string{}},
			map[string]any{"nodeId": "", "interruptId": "", "artifactId": "", "artifactType": "", "title": "", "actions": []string{"accept"}}},
		{"clarification.resolved", ClarificationResolved{NodeID: "n", Answers: json.RawMessage(`{"q1":"<a>"}`)},
			map[string]any{"nodeId": "n", "answers": json.RawMessage(`{"q1":"<a>"}`)}},
		{"clarification.resolved without answers", ClarificationResolved{NodeID: "n", AnsweredBy: "u"},
			map[string]any{"nodeId": "n", "answers": json.RawMessage(nil), "answeredBy": "u"}},
		{"conversation.opened", ConversationOpened{ConversationID: "c", AgentID: "host:n", InitialTurn: turn},
			map[string]any{"conversationId": "c", "agentId": "host:n", "initialTurn": turn}},
		{"conversation.opened with schema and roster", ConversationOpened{ConversationID: "c", AgentID: "a", InitialTurn: turn, Schema: json.RawMessage(`{"type":"string"}`), Participants: roster},
			map[string]any{"conversationId": "c", "agentId": "a", "initialTurn": turn, "schema": json.RawMessage(`{"type":"string"}`), "participants": roster}},
		{"run.paused", RunPaused{DrainPolicy: "current-node", PausedAt: "t"},
			map[string]any{"drainPolicy": "current-node", "pausedAt": "t"}},
		{"run.paused, immediate", RunPaused{DrainPolicy: "immediate", PausedAt: "t", Reason: "r", PausedBy: "k", InterruptedNodeID: "n"},
			map[string]any{"drainPolicy": "immediate", "pausedAt": "t", "reason": "r", "pausedBy": "k", "interruptedNodeId": "n"}},
		{"run.resumed", RunResumed{DrainPolicy: "", ResumedAt: "t"}, map[string]any{"drainPolicy": "", "resumedAt": "t"}},
		{"run.resumed with reason and resumer", RunResumed{DrainPolicy: "immediate", ResumedAt: "t", Reason: "r", ResumedBy: "k"},
			map[string]any{"drainPolicy": "immediate", "resumedAt": "t", "reason": "r", "resumedBy": "k"}},
		{"run.failed", RunFailed{Error: RunError{Code: CodeValidation, Message: "m"}, DurationMs: 0},
			map[string]any{"error": RunError{Code: CodeValidation, Message: "m"}, "durationMs": int64(0)}},
		{"run.failed at a node", RunFailed{Error: rerr, DurationMs: 12, FailedNodeID: "n"},
			map[string]any{"error": rerr, "durationMs": int64(12), "failedNodeId": "n"}},
		{"run.cancelled", RunCancelled{Reason: "", DurationMs: 0}, map[string]any{"reason": "", "durationMs": int64(0)}},
		{"run.cancelled by its parent", RunCancelled{Reason: "parent-cancelled", DurationMs: 3, CancelledBy: "k", ParentRunID: "p"},
			map[string]any{"reason": "parent-cancelled", "durationMs": int64(3), "cancelledBy": "k", "parentRunId": "p"}},
	} {
		encodesAs(t, c.name, c.v, c.m)
	}
}

// The pack agent's payloads encode as the maps it built before them did: the keys it
// always wrote are written when zero or false too, and the keys it added on a
// condition (replayed, redirected with originalTarget, hostExtras, budget against
// hostLimit and scope) are present exactly where the maps added them.
func TestPackAgentPayloadsEncodeAsTheirMaps(t *testing.T) {
	type record struct {
		Kind  string `json:"kind"`
		Round int    `json:"round"`
		Text  string `json:"text,omitempty"`
	}
	dec := record{Kind: "model_round", Round: 0, Text: "<ok> & done"}
	extras := map[string]any{"b": 1, "a": "<x>"}
	for _, c := range []struct {
		name string
		v, m any
	}{
		{"agent.decided", AgentDecided{AgentID: "pack:s", Decision: dec},
			map[string]any{"agentId": "pack:s", "decision": dec}},
		{"agent.decided, replayed", AgentDecided{AgentID: "", Decision: dec, Replayed: true},
			map[string]any{"agentId": "", "decision": dec, "replayed": true}},
		{"agent.handoff", AgentHandoff{FromAgentID: "p:a", ToAgentID: "p:b", Reason: "go", Event: "go", Origin: "agent", FromState: "a", ToState: "b", Visits: 1, TotalVisits: 2, ToolCalls: 3, Transitions: 1},
			map[string]any{"fromAgentId": "p:a", "toAgentId": "p:b", "reason": "go", "event": "go", "context": "", "origin": "agent", "fromState": "a", "toState": "b",
				"visits": 1, "totalVisits": 2, "toolCalls": 3, "transitions": 1}},
		{"agent.handoff, zero", AgentHandoff{HostExtras: map[string]any{}},
			map[string]any{"fromAgentId": "", "toAgentId": "", "reason": "", "event": "", "context": "", "origin": "", "fromState": "", "toState": "",
				"visits": 0, "totalVisits": 0, "toolCalls": 0, "transitions": 0}},
		{"agent.handoff, redirected with extras", AgentHandoff{FromAgentID: "p:a", ToAgentID: "p:c", Reason: "go", Event: "go", Context: "why <now>", Origin: "external", FromState: "a", ToState: "c",
			Visits: 1, TotalVisits: 4, Transitions: 3, Redirected: true, OriginalTarget: "b", HostExtras: extras},
			map[string]any{"fromAgentId": "p:a", "toAgentId": "p:c", "reason": "go", "event": "go", "context": "why <now>", "origin": "external", "fromState": "a", "toState": "c",
				"visits": 1, "totalVisits": 4, "toolCalls": 0, "transitions": 3, "redirected": true, "originalTarget": "b", "hostExtras": extras}},
		{"provider.usage", ProviderUsage{Provider: "mock", Model: "m", InputTokens: 3, OutputTokens: 4, TotalTokens: 7, NodeID: "n"},
			map[string]any{"provider": "mock", "model": "m", "inputTokens": 3, "outputTokens": 4, "totalTokens": 7, "nodeId": "n"}},
		{"provider.usage, zero", ProviderUsage{}, map[string]any{"provider": "", "model": "", "inputTokens": 0, "outputTokens": 0, "totalTokens": 0, "nodeId": ""}},
		{"agent.toolCalled", AgentToolCalled{AgentID: "p:s", ToolName: "lookup", CallID: "c1", Inputs: json.RawMessage(`{"q": "<a>"}`), Round: 2, System: true},
			map[string]any{"agentId": "p:s", "toolName": "lookup", "callId": "c1", "inputs": json.RawMessage(`{"q": "<a>"}`), "round": 2, "system": true}},
		{"agent.toolCalled, zero", AgentToolCalled{},
			map[string]any{"agentId": "", "toolName": "", "callId": "", "inputs": json.RawMessage(nil), "round": 0, "system": false}},
		{"agent.toolReturned", AgentToolReturned{AgentID: "p:s", ToolName: "lookup", CallID: "c1", Outcome: json.RawMessage(`{"r":"<b>"}`), Status: "error", Round: 2},
			map[string]any{"agentId": "p:s", "toolName": "lookup", "callId": "c1", "outcome": json.RawMessage(`{"r":"<b>"}`), "status": "error", "round": 2}},
		{"agent.toolReturned, zero", AgentToolReturned{},
			map[string]any{"agentId": "", "toolName": "", "callId": "", "outcome": json.RawMessage(nil), "status": "", "round": 0}},
		{"workflow.loopback-limit", LoopbackLimit{NodeID: "n", Iterations: 3, Limit: 2, State: "b", FromState: "a", Event: "again", RedirectedTo: "c"},
			map[string]any{"nodeId": "n", "iterations": 3, "limit": 2, "state": "b", "fromState": "a", "event": "again", "redirectedTo": "c", "terminated": false}},
		{"workflow.loopback-limit, terminated", LoopbackLimit{NodeID: "n", Iterations: 1, State: "b", Terminated: true},
			map[string]any{"nodeId": "n", "iterations": 1, "limit": 0, "state": "b", "fromState": "", "event": "", "redirectedTo": "", "terminated": true}},
		{"cap.breached of a budget", CapBreached{Kind: "loop-iterations", Limit: 5, Observed: 6, NodeID: "n", Budget: "max_total_visits", State: "s", Transitions: 4},
			map[string]any{"kind": "loop-iterations", "limit": 5, "observed": 6, "nodeId": "n", "budget": "max_total_visits", "state": "s", "transitions": 4}},
		{"cap.breached of a budget, zero", CapBreached{Kind: "run-duration", Budget: "max_wall_time_sec"},
			map[string]any{"kind": "run-duration", "limit": 0, "observed": 0, "nodeId": "", "budget": "max_wall_time_sec", "state": "", "transitions": 0}},
		{"cap.breached of a host limit", CapBreached{Kind: "loop-iterations", Limit: 2, Observed: 3, NodeID: "n", HostLimit: "max_rounds_per_turn", Scope: "turn", State: "s", Transitions: 0},
			map[string]any{"kind": "loop-iterations", "limit": 2, "observed": 3, "nodeId": "n", "hostLimit": "max_rounds_per_turn", "scope": "turn", "state": "s", "transitions": 0}},
	} {
		encodesAs(t, c.name, c.v, c.m)
	}
}

// approval.requested of a tool approval, its escalation and its restart, and both
// workflow.stalled payloads, encode as the maps the run built before them did: the keys
// the maps always wrote are written when zero or empty too, and each key they added on
// a condition is present exactly where they added it.
func TestToolApprovalAndStallPayloadsEncodeAsTheirMaps(t *testing.T) {
	after, zero := int64(60000), int64(0)
	actions := []string{"accept", "reject", "edit"}
	yes := true
	for _, c := range []struct {
		name string
		v, m any
	}{
		{"approval.requested of a tool", ApprovalRequested{NodeID: "n", InterruptID: "i", ArtifactID: "tool-call:c1", ArtifactType: "tool-call", Title: "Approve <refund>", Actions: actions,
			Tool: "refund", CallID: "c1", ExpiresAt: "t"},
			map[string]any{"nodeId": "n", "interruptId": "i", "artifactId": "tool-call:c1", "artifactType": "tool-call", "title": "Approve <refund>", "actions": actions,
				"tool": "refund", "callId": "c1", "expiresAt": "t"}},
		{"approval.requested of a tool without a deadline", ApprovalRequested{NodeID: "n", InterruptID: "i", Actions: actions, Tool: "refund", CallID: "c1", RequiredApprovals: 2, ApproversList: []string{"k1", "k2"}},
			map[string]any{"nodeId": "n", "interruptId": "i", "artifactId": "", "artifactType": "", "title": "", "actions": actions, "tool": "refund", "callId": "c1",
				"requiredApprovals": 2, "approversList": []string{"k1", "k2"}}},
		{"approval.requested escalated", ApprovalRequested{NodeID: "n", InterruptID: "i", Actions: actions, Tool: "refund", CallID: "c1", ExpiresAt: "t", ApproversList: []string{"k1", "boss"},
			Escalated: true, EscalatedTo: []string{"boss"}, EscalatedAfterMs: &after},
			map[string]any{"nodeId": "n", "interruptId": "i", "artifactId": "", "artifactType": "", "title": "", "actions": actions, "tool": "refund", "callId": "c1", "expiresAt": "t",
				"approversList": []string{"k1", "boss"}, "escalated": true, "escalatedTo": []string{"boss"}, "escalatedAfterMs": after}},
		{"approval.requested escalated within a millisecond", ApprovalRequested{Actions: actions, Tool: "refund", CallID: "c1", Escalated: true, EscalatedTo: []string{"boss"}, EscalatedAfterMs: &zero},
			map[string]any{"nodeId": "", "interruptId": "", "artifactId": "", "artifactType": "", "title": "", "actions": actions, "tool": "refund", "callId": "c1",
				"escalated": true, "escalatedTo": []string{"boss"}, "escalatedAfterMs": zero}},
		{"approval.requested after an edit", ApprovalRequested{NodeID: "n", InterruptID: "i", Actions: actions, Tool: "refund", CallID: "c1", RequiredApprovals: 2,
			Revision: 1, EditedBy: "k1", Arguments: json.RawMessage(`{"amount": "<5>"}`), Reason: "arguments-edited", Voided: []string{"k2"}},
			map[string]any{"nodeId": "n", "interruptId": "i", "artifactId": "", "artifactType": "", "title": "", "actions": actions, "tool": "refund", "callId": "c1", "requiredApprovals": 2,
				"revision": 1, "editedBy": "k1", "arguments": json.RawMessage(`{"amount": "<5>"}`), "reason": "arguments-edited", "voided": []string{"k2"}}},
		{"approval.requested after an edit that voided nobody", ApprovalRequested{Actions: actions, Tool: "refund", CallID: "c1", Revision: 2, EditedBy: "anonymous",
			Arguments: json.RawMessage(`{}`), Reason: "arguments-edited", Voided: []string{}},
			map[string]any{"nodeId": "", "interruptId": "", "artifactId": "", "artifactType": "", "title": "", "actions": actions, "tool": "refund", "callId": "c1",
				"revision": 2, "editedBy": "anonymous", "arguments": json.RawMessage(`{}`), "reason": "arguments-edited"}},
		{"workflow.stalled of a model", WorkflowStalled{StalledForMs: 0, LastNodeID: "n", Reason: "model-unavailable", Kind: "model", Round: 0, State: "", Since: "s", RetryUntil: "u",
			Error: NodeError{Code: "model_unavailable", Message: "down <503>", Retryable: &yes}, Provider: "mock"},
			map[string]any{"stalledForMs": int64(0), "lastNodeId": "n", "reason": "model-unavailable", "kind": "model", "round": 0, "state": "", "since": "s", "retryUntil": "u",
				"error": map[string]any{"code": "model_unavailable", "message": "down <503>", "retryable": true}, "provider": "mock"}},
		{"workflow.stalled of a tool, reminded", WorkflowStalled{StalledForMs: 1500, LastNodeID: "n", Reason: "tool-unavailable", Kind: "tool", Round: 2, State: "s1", Since: "s", RetryUntil: "u",
			Error: NodeError{Code: "", Message: "", Retryable: &yes}, Tool: "lookup", CallID: "c1", Reminder: 2},
			map[string]any{"stalledForMs": int64(1500), "lastNodeId": "n", "reason": "tool-unavailable", "kind": "tool", "round": 2, "state": "s1", "since": "s", "retryUntil": "u",
				"error": map[string]any{"code": "", "message": "", "retryable": true}, "tool": "lookup", "callId": "c1", "reminder": 2}},
		{"workflow.stalled reminding of an approval", ApprovalReminder{StalledForMs: 60000, LastNodeID: "n", Reason: "approval-reminder", InterruptID: "i", Kind: "approval",
			Tool: "refund", CallID: "c1", Reminder: 1, ExpiresAt: "t", ApproversList: []string{"k1"}},
			map[string]any{"stalledForMs": int64(60000), "lastNodeId": "n", "reason": "approval-reminder", "interruptId": "i", "kind": "approval",
				"tool": "refund", "callId": "c1", "reminder": 1, "expiresAt": "t", "approversList": []string{"k1"}}},
		{"workflow.stalled reminding of an approval anyone may decide", ApprovalReminder{Reason: "approval-reminder", Kind: "approval", ApproversList: []string{}},
			map[string]any{"stalledForMs": int64(0), "lastNodeId": "", "reason": "approval-reminder", "interruptId": "", "kind": "approval",
				"tool": "", "callId": "", "reminder": 0, "expiresAt": ""}},
	} {
		encodesAs(t, c.name, c.v, c.m)
	}
}

// The data of the conversation.start and external-event interrupts encode as the maps
// the run built before them did, empty values included.
func TestInterruptDataEncodesAsItsMaps(t *testing.T) {
	for _, c := range []struct {
		name string
		v, m any
	}{
		{"conversation.start", ConversationStartData{ConversationID: "conv-1", Title: "Replay of <conv-0>"},
			map[string]any{"conversationId": "conv-1", "title": "Replay of <conv-0>"}},
		{"conversation.start, empty", ConversationStartData{}, map[string]any{"conversationId": "", "title": ""}},
		{"external-event", ExternalEventData{EventType: EventTypeAgentEvent, Correlation: json.RawMessage(`{"z": 1, "a": "<b>"}`)},
			map[string]any{"eventType": EventTypeAgentEvent, "correlation": json.RawMessage(`{"z": 1, "a": "<b>"}`)}},
		{"external-event without correlation", ExternalEventData{EventType: "", Correlation: json.RawMessage(`{}`)},
			map[string]any{"eventType": "", "correlation": map[string]any{}}},
	} {
		encodesAs(t, c.name, c.v, c.m)
	}
}

// encodesAs checks that v encodes to the same bytes as m, the map the run built
// before v's type existed.
func encodesAs(t *testing.T, name string, v, m any) {
	t.Helper()
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
}
