package workflows

// Durable approval of a pack's tool calls. Before a batch of tool calls runs, each call
// that needs a person's decision (approvalNeeded, packagent/pack_approvals.go)
// suspends the run on an OpenWOP approval interrupt at the pack's node
// (awaitToolDecision), one call at a time, in call order; the batch's
// calls then run together (the accepted ones, and those that need no decision, whose
// results are no older than the decisions when the model reads them):
//
//	node.suspended → interrupt.requested (kind approval) → approval.requested
//	[workflow.stalled per reminder] [approval.requested again on escalation]
//	… interrupt.resolved → approval.received → node.resumed
//
// The interrupt's ApprovalData describes itself for any client: a title, a description,
// and artifactData with the tool, its arguments, its action_scope, why it needs
// approval, and the agent's state and text of that round. The actions are accept (the
// call runs once), reject (the model's next round reads a tool result naming who
// rejected it and why; the agent goes on) and edit-accept (editedArtifactData.arguments
// replace the arguments, checked against the tool's parameter schema first). Approver
// lists and quorum work as for core.approvalGate; the decider is the request's
// authenticated principal.
//
// Time runs on durable timers: the deadline (the binding's approval_timeout, else the
// host's default, 72h) rejects the call as "expired"; reminders at approval_reminder
// record workflow.stalled; escalate_after adds escalate_to to the approvers and records
// approval.requested again. Nothing of it lives in a worker's memory, so a restart or a
// week-long wait changes nothing. While a call waits, the conversation refuses new
// messages with 409 approval_pending (routeToolApproval).
//
// Runs whose tool batches ran before approvals existed run their calls at once
// (GetVersion GateToolApprovals, asked only for a batch with a call that needs
// approval, so other histories are unchanged).

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// CodeApprovalPending is the error code of a conversation message refused because a
// tool call of the conversation waits for approval.
const CodeApprovalPending = protocol.CodeApprovalPending

// SAApprovers, with the TagWaitingTool tag, is the search attribute of a run whose tool
// call waits for approval, so the Temporal UI can list what waits for whom (for example
// `WopApprovers = "finance"`): who may decide it now (unset: anyone).
var SAApprovers = temporal.NewSearchAttributeKeyKeywordList("WopApprovers")

func init() {
	SearchAttributes[SAApprovers.GetName()] = SAApprovers.GetValueType()
}

// ToolCallArtifact is the artifactData of a tool call's approval interrupt.
type ToolCallArtifact struct {
	Tool      string          `json:"tool"`
	CallID    string          `json:"callId"`
	Arguments json.RawMessage `json:"arguments"`
	// ActionScope is the tool's action_scope as the pack declares it (absent when
	// undeclared).
	ActionScope json.RawMessage `json:"actionScope,omitempty"`
	// Parameters is the tool's parameter schema, which edited arguments must match.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Reason says why the call needs approval.
	Reason string `json:"reason"`
	// Agent is who asks: the pack, its state and round, and the agent's text of that
	// round.
	Agent ToolCallAgent `json:"agent"`
	// Revision counts the edits that restarted the quorum on new arguments (absent:
	// the arguments are the agent's); EditedBy made the latest. A vote may name the
	// revision it approves (resumeValue.revision), and once the arguments were edited
	// an accept must.
	Revision int    `json:"revision,omitempty"`
	EditedBy string `json:"editedBy,omitempty"`
}

// ToolCallAgent is the agent side of a ToolCallArtifact.
type ToolCallAgent struct {
	PackID  string `json:"packId"`
	AgentID string `json:"agentId"`
	State   string `json:"state"`
	Round   int    `json:"round"`
	Text    string `json:"text,omitempty"`
}

// toolApproval is the state of one tool call's pending approval.
type toolApproval struct {
	call      *convo.ToolCallInput
	settings  activities.ToolApproval
	params    json.RawMessage // the tool's parameter schema
	requested time.Time
	reminders int  // reminders recorded so far
	escalated bool // escalate_to was added to the approvers
	// What the interrupt shows of the call, kept to show it again after an edit
	// restarted the quorum (restartQuorum).
	art          ToolCallArtifact
	describeCall func(call *convo.ToolCallInput) string
}

// ToolDecisionRequest is a tool call an agent asks a person to decide on before the
// call runs (awaitToolDecision). The agent says what the call is; the run owns the
// interrupt, its quorum, its timers and its events.
type ToolDecisionRequest struct {
	// Call is the call; an edit-accept replaces its arguments.
	Call *convo.ToolCallInput
	// Route is the call's recorded route; its Approval holds the binding's settings.
	Route activities.ToolRoute
	// Artifact is what the interrupt shows of the call (its artifactData); its
	// Parameters are the schema edited arguments must match.
	Artifact ToolCallArtifact
	// Describe says in words what the call does and why it needs approval (the
	// ApprovalData description), asked again once an edit replaced the arguments.
	Describe func(call *convo.ToolCallInput) string
}

// awaitToolDecision raises the approval interrupt of one call of node nodeID and waits
// for its decision: nil when the call runs (with edited arguments after edit-accept),
// else the tool result the model reads instead. An error means the run is being
// cancelled.
func (r *runner) awaitToolDecision(ctx workflow.Context, nodeID string, tr ToolDecisionRequest) (*convo.ToolCallResult, error) {
	call, route := tr.Call, tr.Route
	settings := activities.ToolApproval{Timeout: activities.DefaultApprovalTimeout}
	if route.Approval != nil {
		settings = *route.Approval
		if settings.Timeout <= 0 {
			settings.Timeout = activities.DefaultApprovalTimeout
		}
	}
	art := tr.Artifact
	d := approvalData{
		ArtifactID:        "tool-call:" + call.CallID,
		ArtifactType:      protocol.ArtifactTypeToolCall,
		Title:             fmt.Sprintf("Approve %s", call.Tool),
		Description:       tr.Describe(call),
		ArtifactData:      mustJSON(art),
		Actions:           []string{"accept", "reject", "edit-accept"},
		RequiredApprovals: settings.RequiredApprovals,
		ApproversList:     slices.Clone(settings.Approvers),
	}
	ta := &toolApproval{call: call, settings: settings, params: art.Parameters, requested: workflow.Now(ctx), art: art, describeCall: tr.Describe}
	if d.required() > 1 {
		r.changed(GateToolQuorum)
	}
	it := r.raise(nodeID, interruptSpec{Kind: protocol.KindApproval, Data: d, TimeoutMs: settings.Timeout.Milliseconds(), Describe: ta.describe(&d)})
	it.approval = &d
	it.tool = ta
	r.emit(protocol.EvApprovalRequested, it.NodeID, approvalRequestedPayload(it, &d), it.requestedEvent)
	r.upsertToolWait(it)
	for {
		req, value, timedOut, err := r.nextToolRequest(it)
		if err != nil {
			// The run is being cancelled: the turn stops, and the run's cancel voids
			// the interrupt.
			r.upsertToolWait(nil)
			return nil, err
		}
		if timedOut {
			// Reminders and an escalation due before the deadline are recorded even
			// when a slow worker sees their timers and the deadline's together.
			r.toolApprovalTick(it)
			return r.expireToolApproval(it), nil
		}
		if req == nil {
			r.toolApprovalTick(it)
			continue
		}
		res, decided := r.applyToolVote(it, *req, value)
		if decided {
			return res, nil
		}
	}
}

// approvalRequestedPayload is approval.requested for it (the legacy event of approval
// interrupts; an escalation records it again with the new approvers).
func approvalRequestedPayload(it *interrupt, d *approvalData) protocol.ApprovalRequested {
	p := protocol.ApprovalRequested{NodeID: it.NodeID, InterruptID: it.InterruptID, ArtifactID: d.ArtifactID, ArtifactType: d.ArtifactType, Title: d.Title,
		Actions: legacyActions(d.Actions), ApproversList: d.ApproversList}
	if d.RequiredApprovals > 0 {
		p.RequiredApprovals = d.RequiredApprovals
	}
	if it.tool != nil {
		p.Tool, p.CallID, p.ExpiresAt = it.tool.call.Tool, it.tool.call.CallID, it.ExpiresAt
	}
	return p
}

// describe is the Temporal UI's current details of the call's wait.
func (ta *toolApproval) describe(d *approvalData) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool call **%s** (call `%s`, state %s) waits for approval", ta.call.Tool, ta.call.CallID, ta.call.State)
	if len(d.ApproversList) > 0 {
		fmt.Fprintf(&b, " by %s", strings.Join(d.ApproversList, ", "))
	} else {
		b.WriteString(" by anyone who may resolve interrupts")
	}
	if d.RequiredApprovals > 1 {
		fmt.Fprintf(&b, " (%d approvals needed)", d.RequiredApprovals)
	}
	b.WriteString(".")
	if ta.art.Revision > 0 {
		fmt.Fprintf(&b, " %s edited the arguments (revision %d): earlier approvals no longer count.", ta.art.EditedBy, ta.art.Revision)
	}
	if ta.settings.RemindEvery > 0 {
		fmt.Fprintf(&b, " Reminders every %s (%d so far).", ta.settings.RemindEvery, ta.reminders)
	}
	if ta.settings.EscalateAfter > 0 {
		if ta.escalated {
			fmt.Fprintf(&b, " Escalated to %s.", strings.Join(ta.settings.EscalateTo, ", "))
		} else {
			fmt.Fprintf(&b, " Escalates to %s at %s.", strings.Join(ta.settings.EscalateTo, ", "), formatTime(ta.requested.Add(ta.settings.EscalateAfter)))
		}
	}
	fmt.Fprintf(&b, " Arguments: `%s`.", activities.Truncate(string(orJSON(ta.call.Args, "{}")), 200))
	return b.String()
}

// upsertToolWait sets (or, for nil, clears) the search attributes of a waiting call.
func (r *runner) upsertToolWait(it *interrupt) {
	if it == nil {
		dctx, _ := workflow.NewDisconnectedContext(r.ctx) // also while the run is being cancelled
		r.upsertAttributes(dctx, []temporal.SearchAttributeUpdate{SAApprovers.ValueUnset()}, tagSet{TagWaitingTool, ""})
		return
	}
	approvers := SAApprovers.ValueUnset()
	if len(it.approval.ApproversList) > 0 {
		approvers = SAApprovers.ValueSet(slices.Clone(it.approval.ApproversList))
	}
	r.upsertAttributes(r.ctx, []temporal.SearchAttributeUpdate{approvers}, tagSet{TagWaitingTool, it.tool.call.Tool})
}

// nextTick is when the call's next reminder or escalation is due (zero for none).
// Neither is due at or after the deadline.
func (ta *toolApproval) nextTick() time.Time {
	deadline := ta.requested.Add(ta.settings.Timeout)
	var next time.Time
	if e := ta.settings.EscalateAfter; e > 0 && !ta.escalated {
		next = ta.requested.Add(e)
	}
	if every := ta.settings.RemindEvery; every > 0 {
		rem := ta.requested.Add(time.Duration(ta.reminders+1) * every)
		if next.IsZero() || rem.Before(next) {
			next = rem
		}
	}
	if !next.IsZero() && !next.Before(deadline) {
		return time.Time{}
	}
	return next
}

// isToolRequest reports whether req is addressed to the tool approval it: it names the
// interrupt, or carries an approval decision ({"action": …} or the legacy
// {"decision": …}) to its node.
func isToolRequest(it *interrupt, req ResolveRequest) bool {
	if req.NodeID != it.NodeID {
		return false
	}
	if req.InterruptID != "" {
		return req.InterruptID == it.InterruptID
	}
	return approvalShaped(req.ResumeValue)
}

// approvalShaped reports whether a resume value is an approval decision.
func approvalShaped(raw json.RawMessage) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	_, action := probe["action"]
	_, decision := probe["decision"]
	return action || decision
}

// nextToolRequest waits for the next request addressed to the tool approval it (other
// requests stay queued for the conversation), its deadline (timedOut), or its next
// reminder or escalation (req nil). Requests the workflow refuses are dropped, as
// nextResolve drops them.
func (r *runner) nextToolRequest(it *interrupt) (req *ResolveRequest, value json.RawMessage, timedOut bool, err error) {
	find := func() int {
		for i, q := range r.inbox {
			if isToolRequest(it, q) {
				return i
			}
		}
		return -1
	}
	for {
		var wait time.Duration
		if next := it.tool.nextTick(); !next.IsZero() {
			if wait = next.Sub(workflow.Now(r.ctx)); wait <= 0 {
				return nil, nil, false, nil
			}
		}
		tick, err := r.await(wait, func() bool { return it.timedOut || find() >= 0 })
		if err != nil {
			return nil, nil, false, err
		}
		if i := find(); i >= 0 {
			q := r.inbox[i]
			r.inbox = append(r.inbox[:i:i], r.inbox[i+1:]...)
			if r.repeated(q) {
				continue
			}
			check, res := r.checkResolve(q, false)
			if check.OK && res.target != it {
				check = ResolveCheck{Code: CodeApprovalPending,
					Message: fmt.Sprintf("the node waits for a decision on its %s call (interrupt %s)", it.tool.call.Tool, it.InterruptID)}
			}
			if r.answered(q, check, res, "Refusing a tool approval") {
				continue
			}
			r.markApplied(q, check.RunStatus)
			return &q, res.value, false, nil
		}
		if it.timedOut {
			return nil, nil, true, nil
		}
		if tick {
			return nil, nil, false, nil
		}
	}
}

// toolApprovalTick records the reminders and the escalation that are due.
func (r *runner) toolApprovalTick(it *interrupt) {
	ta := it.tool
	now := workflow.Now(r.ctx)
	deadline := ta.requested.Add(ta.settings.Timeout)
	if e := ta.settings.EscalateAfter; e > 0 && !ta.escalated && !now.Before(ta.requested.Add(e)) && ta.requested.Add(e).Before(deadline) {
		ta.escalated = true
		// An empty list means anyone may decide; the escalation then only notifies.
		if len(it.approval.ApproversList) > 0 {
			for _, a := range ta.settings.EscalateTo {
				if !slices.Contains(it.approval.ApproversList, a) {
					it.approval.ApproversList = append(it.approval.ApproversList, a)
				}
			}
		}
		it.Data = mustJSON(it.approval)
		p := approvalRequestedPayload(it, it.approval)
		after := e.Milliseconds()
		p.Escalated, p.EscalatedTo, p.EscalatedAfterMs = true, ta.settings.EscalateTo, &after
		r.emit(protocol.EvApprovalRequested, it.NodeID, p, it.requestedEvent)
		r.upsertToolWait(it)
	}
	for every := ta.settings.RemindEvery; every > 0; {
		due := ta.requested.Add(time.Duration(ta.reminders+1) * every)
		if now.Before(due) || !due.Before(deadline) {
			break
		}
		ta.reminders++
		p := protocol.ApprovalReminder{
			StalledForMs: now.Sub(ta.requested).Milliseconds(), LastNodeID: it.NodeID, Reason: "approval-reminder",
			InterruptID: it.InterruptID, Kind: protocol.KindApproval, Tool: ta.call.Tool, CallID: ta.call.CallID, Reminder: ta.reminders,
			ExpiresAt: it.ExpiresAt, ApproversList: it.approval.ApproversList,
		}
		r.emit(protocol.EvWorkflowStalled, it.NodeID, p, it.requestedEvent)
	}
	it.describe = ta.describe(it.approval)
	r.describePending()
}

// applyToolVote applies one accepted request: a vote that does not decide yet is
// recorded; a deciding one settles the interrupt. decided says the wait is over; res
// is then nil when the call runs.
func (r *runner) applyToolVote(it *interrupt, req ResolveRequest, value json.RawMessage) (res *convo.ToolCallResult, decided bool) {
	var v approvalResume
	_ = json.Unmarshal(value, &v) // checkApproval encoded value from an approvalResume: it decodes
	received := v.received(it.NodeID, workflow.Now(r.ctx))
	received.Tool, received.CallID = it.tool.call.Tool, it.tool.call.CallID
	var voided []string
	restarted := r.restartsQuorum(it, v)
	if restarted {
		if voided = r.restartQuorum(it, v, v.voter(req)); len(voided) > 0 {
			received.Voided = voided
		}
	}
	if r.quorumOnArguments(it) {
		revision := it.tool.art.Revision
		received.Arguments, received.Revision = orJSON(it.tool.call.Args, "{}"), &revision
	}
	accepts, rejects := tally(it, v.Action)
	it.votes = append(it.votes, castVote(v, req, received))
	if !quorumDecided(it.approval, accepts, rejects) {
		recv := r.emit(protocol.EvApprovalReceived, it.NodeID, received, it.requestedEvent)
		if restarted {
			p := approvalRequestedPayload(it, it.approval)
			p.Revision, p.EditedBy, p.Arguments, p.Reason, p.Voided = it.tool.art.Revision, it.tool.art.EditedBy, it.tool.art.Arguments, "arguments-edited", voided
			r.emit(protocol.EvApprovalRequested, it.NodeID, p, recv)
		}
		r.describePending()
		return nil, false
	}
	r.settle(it)
	r.upsertToolWait(nil)
	resolved := r.emitResolved(it, req, value)
	recv := r.emit(protocol.EvApprovalReceived, it.NodeID, received, resolved)
	r.emitResumed(it, value, recv)
	call := it.tool.call
	if rejected(it.approval, rejects) {
		return rejectedToolResult(call.Tool, v.DecidedBy, cmp.Or(v.Feedback, v.Comment)), true
	}
	if v.Action == "edit-accept" {
		if args, ok := editedArguments(v.EditedArtifactData); ok {
			call.Args = args
		}
	}
	return nil, true
}

// quorumOnArguments reports whether the tool approval it counts approvals of the same
// arguments (GateToolQuorum, asked when the approval was raised): a call that needs
// more than one approval.
func (r *runner) quorumOnArguments(it *interrupt) bool {
	return it.tool != nil && it.approval.required() > 1 && r.tookNew(GateToolQuorum)
}

// restartsQuorum reports whether the vote v restarts the quorum of it: an edit-accept
// whose arguments differ from those the approval shows.
func (r *runner) restartsQuorum(it *interrupt, v approvalResume) bool {
	if v.Action != "edit-accept" || !r.quorumOnArguments(it) {
		return false
	}
	args, ok := editedArguments(v.EditedArtifactData)
	return ok && !sameJSON(args, orJSON(it.tool.call.Args, "{}"))
}

// restartQuorum makes the edited arguments of v the call's: the approval shows them
// under the next revision, and the votes counted so far, which approved (or rejected)
// other arguments, no longer count; their voters may vote again. It returns those
// voters. voter is who edited.
func (r *runner) restartQuorum(it *interrupt, v approvalResume, voter string) []string {
	ta := it.tool
	args, _ := editedArguments(v.EditedArtifactData)
	voided := make([]string, 0, len(it.votes))
	for _, vote := range it.votes {
		voided = append(voided, vote.Voter)
	}
	it.votes = nil
	ta.call.Args = args
	ta.art.Arguments = args
	ta.art.Revision++
	ta.art.EditedBy = voter
	it.approval.ArtifactData = mustJSON(ta.art)
	it.approval.Description = ta.describeCall(ta.call) +
		fmt.Sprintf(" %s edited the arguments (revision %d); approvals of earlier arguments no longer count.", ta.art.EditedBy, ta.art.Revision)
	it.Data = mustJSON(it.approval)
	it.describe = ta.describe(it.approval)
	return voided
}

// checkToolRevision refuses a vote on a tool approval that names a revision of the
// arguments other than the one the approval shows, and an accept that names none
// once the arguments were edited: such a vote may approve arguments its voter never
// saw. An edit-accept names its arguments and a reject approves nothing, so they need
// no revision.
func (r *runner) checkToolRevision(it *interrupt, v approvalResume) *ResolveCheck {
	if it.tool == nil {
		return nil
	}
	ta := it.tool
	var msg string
	switch {
	case v.Revision != nil && *v.Revision != ta.art.Revision:
		msg = fmt.Sprintf("this vote approves revision %d of the arguments of the %s call, but they are at revision %d", *v.Revision, ta.call.Tool, ta.art.Revision)
	case v.Revision == nil && ta.art.Revision > 0 && v.Action == "accept":
		msg = fmt.Sprintf("%s edited the arguments of the %s call (revision %d); an accept must name the revision it approves (resumeValue.revision)", ta.art.EditedBy, ta.call.Tool, ta.art.Revision)
	default:
		return nil
	}
	return &ResolveCheck{Code: protocol.CodeRunStateConflict,
		Message: msg + "; read the interrupt again and vote on the arguments it shows",
		Details: mustJSON(map[string]any{"field": "resumeValue.revision", "revision": ta.art.Revision, "arguments": orJSON(ta.call.Args, "{}"), "editedBy": ta.art.EditedBy})}
}

// sameJSON reports whether two JSON values are equal (objects compare by key, numbers
// by their text).
func sameJSON(a, b json.RawMessage) bool {
	return bytes.Equal(canonicalJSON(a), canonicalJSON(b))
}

func canonicalJSON(raw json.RawMessage) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	out, err := json.Marshal(v) // map keys in sorted order
	if err != nil {
		return raw
	}
	return out
}

// expireToolApproval settles an approval nobody decided before its deadline: the call
// is rejected with reason "expired".
func (r *runner) expireToolApproval(it *interrupt) *convo.ToolCallResult {
	r.settle(it)
	r.upsertToolWait(nil)
	value := mustJSON(map[string]string{"action": "timeout", "reason": "expired"})
	resolved := r.emitResolved(it, ResolveRequest{ResolvedBy: "system"}, value)
	recv := r.emit(protocol.EvApprovalReceived, it.NodeID, &protocol.ApprovalReceived{
		NodeID: it.NodeID, Action: "timeout", Reason: "expired", DecidedAt: formatTime(workflow.Now(r.ctx)),
		Tool: it.tool.call.Tool, CallID: it.tool.call.CallID,
	}, resolved)
	r.emitResumed(it, value, recv)
	call := it.tool.call
	b, _ := json.Marshal(map[string]any{
		"error":  fmt.Sprintf("%s was not run: nobody decided on it within %s, so the call expired", call.Tool, it.tool.settings.Timeout),
		"status": "rejected", "reason": "expired",
	})
	return &convo.ToolCallResult{Content: b, IsError: true}
}

// rejectedToolResult is the tool result of a rejected call.
func rejectedToolResult(tool, by, reason string) *convo.ToolCallResult {
	by = cmp.Or(by, "an approver")
	msg := fmt.Sprintf("%s was not run: %s rejected the call", tool, by)
	if reason != "" {
		msg += ": " + reason
	} else {
		reason = "no reason given"
	}
	b, _ := json.Marshal(map[string]any{"error": msg, "status": "rejected", "rejectedBy": by, "reason": reason})
	return &convo.ToolCallResult{Content: b, IsError: true}
}

// editedArguments reads the arguments of an edit-accept: editedArtifactData is the
// edited artifactData, whose "arguments" replace the call's.
func editedArguments(raw json.RawMessage) (json.RawMessage, bool) {
	var d struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(raw, &d) != nil || len(d.Arguments) == 0 {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(d.Arguments, &obj) != nil || obj == nil {
		return nil, false
	}
	return d.Arguments, true
}

// checkToolEdit checks an accepted decision on a tool approval: the arguments of an
// edit-accept must be an object that matches the tool's parameter schema.
func (r *runner) checkToolEdit(it *interrupt, value json.RawMessage) ResolveCheck {
	var v approvalResume
	if json.Unmarshal(value, &v) != nil || v.Action != "edit-accept" {
		return ResolveCheck{OK: true}
	}
	args, ok := editedArguments(v.EditedArtifactData)
	if !ok {
		return ResolveCheck{Code: protocol.CodeValidation,
			Message: fmt.Sprintf("edit-accept needs editedArtifactData.arguments: the edited arguments object of the %s call", it.tool.call.Tool),
			Details: mustJSON(map[string]string{"field": "resumeValue.editedArtifactData.arguments"})}
	}
	if err := r.validateAgainst(it.tool.params, args); err != nil {
		return ResolveCheck{Code: protocol.CodeValidation,
			Message: fmt.Sprintf("the edited arguments do not match the parameters of %s: %v", it.tool.call.Tool, err),
			Details: mustJSON(map[string]string{"field": "resumeValue.editedArtifactData.arguments"})}
	}
	return ResolveCheck{OK: true}
}

// routeToolApproval picks the target of a request to a pack node among its pending
// interrupts when one of them is a tool approval: a decision (or a request naming the
// interrupt) goes to the approval, an injected event to the agent's own wait, and
// anything else, a conversation message, is refused 409 approval_pending while the
// call waits. A decision to a pack node with no approval pending is refused 409 as
// well, so a late click never becomes a chat message. ok is false when none of this
// applies.
func (r *runner) routeToolApproval(cands []*interrupt, req ResolveRequest) (target *interrupt, refusal *ResolveCheck, ok bool) {
	// The node's pending tool approval, also when the request names another of the
	// node's interrupts (a signed token of the conversation).
	var tool *interrupt
	for _, it := range r.pending {
		if it.NodeID == req.NodeID && it.tool != nil {
			tool = it
		}
	}
	if tool == nil {
		if a := r.agents[req.NodeID]; a != nil && a.ApprovesToolCalls() && req.InterruptID == "" && approvalShaped(req.ResumeValue) {
			return nil, &ResolveCheck{Code: protocol.CodeInterruptResolved,
				Message: fmt.Sprintf("no tool call waits for approval at node %q of run %s", req.NodeID, r.in.RunID)}, true
		}
		return nil, nil, false
	}
	if isToolRequest(tool, req) {
		return tool, nil, true
	}
	for _, it := range cands {
		if it.agent && (req.InterruptID == it.InterruptID || req.InterruptID == "") {
			var probe map[string]json.RawMessage
			_ = json.Unmarshal(req.ResumeValue, &probe) // a value that is not an object names no event
			if req.InterruptID != "" || probe["event"] != nil {
				return nil, nil, false // the agent's own wait (an injected event)
			}
		}
	}
	return nil, &ResolveCheck{Code: CodeApprovalPending,
		Message: fmt.Sprintf("the conversation waits for a decision on its %s call (interrupt %s); messages are accepted again once it is decided",
			tool.tool.call.Tool, tool.InterruptID),
		Details: mustJSON(map[string]string{"interruptId": tool.InterruptID, "tool": tool.tool.call.Tool, "nodeId": tool.NodeID})}, true
}
