package workflows

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

type approvalVote struct {
	Voter  string `json:"voter"`
	Action string `json:"action"`
	// Caller is the credential that cast a delegated vote (a key with
	// approvals:delegate naming Voter); empty when the voter voted itself.
	Caller string `json:"caller,omitempty"`
}

// approvalData is the ApprovalData of an approval interrupt.
type approvalData struct {
	ArtifactID        string          `json:"artifactId"`
	ArtifactType      string          `json:"artifactType"`
	Title             string          `json:"title"`
	Description       string          `json:"description,omitempty"`
	ArtifactData      json.RawMessage `json:"artifactData,omitempty"`
	Actions           []string        `json:"actions"`
	RequiredApprovals int             `json:"requiredApprovals,omitempty"`
	ApproversList     []string        `json:"approversList,omitempty"`
	RejectionPolicy   string          `json:"rejectionPolicy,omitempty"`
}

// approvalResume is an ApprovalResume (plus the legacy decision and the suite's voter).
type approvalResume struct {
	Action             string          `json:"action"`
	Decision           string          `json:"decision,omitempty"`
	Feedback           string          `json:"feedback,omitempty"`
	RefineFeedback     json.RawMessage `json:"refineFeedback,omitempty"`
	EditedArtifactData json.RawMessage `json:"editedArtifactData,omitempty"`
	DecidedBy          string          `json:"decidedBy,omitempty"`
	DecidedAt          string          `json:"decidedAt,omitempty"`
	Comment            string          `json:"comment,omitempty"`
	Voter              string          `json:"voter,omitempty"`
	// Revision is the revision of a tool call's arguments the vote approves
	// (ToolCallArtifact.Revision); a vote naming another revision is refused.
	Revision *int `json:"revision,omitempty"`
}

// normalizeApproval parses a resume value, mapping the legacy `decision` field.
func normalizeApproval(raw json.RawMessage) (approvalResume, error) {
	var v approvalResume
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("resumeValue must be an object with an action: %w", err)
	}
	if v.Action == "" && v.Decision != "" {
		switch v.Decision {
		case "approved", "approve", "accept":
			v.Action = "accept"
		case "rejected", "reject":
			if v.Feedback != "" {
				v.Action = "refine"
				v.RefineFeedback = mustJSON(map[string]string{"scope": "whole", "text": v.Feedback})
			} else {
				v.Action = "reject"
			}
		default:
			return v, fmt.Errorf("unknown legacy decision %q", v.Decision)
		}
	}
	v.Decision = ""
	return v, nil
}

// voter is who a vote counts for, as the run read it before requests named their
// caller (ResolveRequest.Caller empty): the resume value's voter, else decidedBy, else
// the key id.
func (v approvalResume) voter(req ResolveRequest) string {
	switch {
	case v.Voter != "":
		return v.Voter
	case v.DecidedBy != "":
		return v.DecidedBy
	case req.ResolvedBy != "":
		return req.ResolvedBy
	default:
		return "anonymous"
	}
}

// received is the approval.received payload of the decision v at node nodeID; now
// stands for a decision that names no time.
func (v approvalResume) received(nodeID string, now time.Time) *protocol.ApprovalReceived {
	return &protocol.ApprovalReceived{NodeID: nodeID, Action: v.Action, DecidedBy: &v.DecidedBy, DecidedAt: cmp.Or(v.DecidedAt, formatTime(now)),
		Feedback: v.Feedback, Comment: v.Comment, EditedArtifactData: v.EditedArtifactData}
}

// castVote is the vote v of request req as the gate counts it. A delegated vote (the
// caller named someone else) records its caller, in the vote and in received, the
// approval.received payload.
func castVote(v approvalResume, req ResolveRequest, received *protocol.ApprovalReceived) approvalVote {
	vote := approvalVote{Voter: v.voter(req), Action: v.Action}
	if req.Caller != "" && req.Caller != vote.Voter {
		vote.Caller = req.Caller
		received.Caller = req.Caller
	}
	return vote
}

// approvalVoter is who a vote counts for. Identity comes from the credential: the
// caller (an API key, or the subject a token was issued to). A delegate caller (a key
// with approvals:delegate, e.g. a chat relay) votes for the voter it names; any other
// caller naming someone else in voter or decidedBy is refused 403.
func approvalVoter(v approvalResume, req ResolveRequest) (string, *ResolveCheck) {
	if req.Caller == "" {
		return v.voter(req), nil
	}
	if req.Delegate {
		return cmp.Or(v.Voter, cmp.Or(v.DecidedBy, req.Caller)), nil
	}
	for _, f := range [][2]string{{"resumeValue.voter", v.Voter}, {"resumeValue.decidedBy", v.DecidedBy}} {
		if field, named := f[0], f[1]; named != "" && named != req.Caller {
			return "", &ResolveCheck{Code: protocol.CodeForbidden,
				Message: fmt.Sprintf("%s names %q, but the caller is %q: a vote counts for its credential, and only keys with the approvals:delegate scope vote for others", field, named, req.Caller),
				Details: mustJSON(map[string]string{"field": field, "scopeRequired": "approvals:delegate"})}
		}
	}
	return req.Caller, nil
}

// checkApproval validates an approval resolve. noop is true for a vote that repeats
// the same voter's counted vote (idempotent: answered like the first, changes nothing).
func (r *runner) checkApproval(it *interrupt, req ResolveRequest) (value json.RawMessage, status string, check ResolveCheck, noop bool) {
	bad := func(format string, args ...any) (json.RawMessage, string, ResolveCheck, bool) {
		return nil, "", ResolveCheck{Code: protocol.CodeValidation, Message: fmt.Sprintf(format, args...)}, false
	}
	v, err := normalizeApproval(req.ResumeValue)
	if err != nil {
		return bad("%v", err)
	}
	allowed := false
	for _, a := range it.approval.Actions {
		if a == v.Action {
			allowed = true
		}
	}
	if !allowed {
		return bad("action %q is not allowed here; allowed actions: %s", v.Action, strings.Join(it.approval.Actions, ", "))
	}
	if v.Action == "refine" && len(v.RefineFeedback) == 0 {
		return bad("action refine needs refineFeedback")
	}
	if v.Action == "edit-accept" && len(v.EditedArtifactData) == 0 {
		return bad("action edit-accept needs editedArtifactData")
	}
	voter, deny := approvalVoter(v, req)
	if deny != nil {
		return nil, "", *deny, false
	}
	if stale := r.checkToolRevision(it, v); stale != nil {
		return nil, "", *stale, false
	}
	if len(it.approval.ApproversList) > 0 && v.Action != "ask" {
		listed := false
		for _, a := range it.approval.ApproversList {
			listed = listed || a == voter
		}
		if !listed {
			return nil, "", ResolveCheck{Code: protocol.CodeForbidden, Message: fmt.Sprintf("%q is not in the approvers list of node %q", voter, it.NodeID)}, false
		}
	}
	for _, vote := range it.votes {
		if vote.Voter != voter {
			continue
		}
		if vote.Action == v.Action && req.Caller != "" {
			return nil, protocol.StatusWaitingApproval, ResolveCheck{OK: true}, true
		}
		return nil, "", ResolveCheck{Code: protocol.CodeInterruptResolved, Message: fmt.Sprintf("%q has already voted %s at node %q", voter, vote.Action, it.NodeID)}, false
	}
	status = protocol.StatusRunning
	if v.Action == "ask" || r.restartsQuorum(it, v) {
		// An edit that restarts a quorum is the first approval of the new arguments,
		// and a quorum needs more than one.
		status = protocol.StatusWaitingApproval
	} else if accepts, rejects := tally(it, v.Action); !quorumDecided(it.approval, accepts, rejects) {
		status = protocol.StatusWaitingApproval
	}
	if v.DecidedBy == "" && v.Action != "ask" {
		v.DecidedBy = voter
	}
	if req.Caller != "" && v.Action != "ask" {
		v.Voter = voter
	}
	return mustJSON(v), status, ResolveCheck{OK: true}, false
}

// tally counts accepting and rejecting votes including a prospective one.
func tally(it *interrupt, next string) (accepts, rejects int) {
	count := func(a string) {
		switch a {
		case "accept", "edit-accept", "refine":
			accepts++
		case "reject":
			rejects++
		}
	}
	for _, v := range it.votes {
		count(v.Action)
	}
	count(next)
	return
}

// quorumDecided reports whether the gate is decided (granted or rejected).
func quorumDecided(d *approvalData, accepts, rejects int) bool {
	return accepts >= d.required() || rejected(d, rejects)
}

func rejected(d *approvalData, rejects int) bool {
	if d.RejectionPolicy == "majority" {
		return rejects*2 > d.required()
	}
	return rejects > 0
}

func (d *approvalData) required() int {
	if d.RequiredApprovals < 1 {
		return 1
	}
	return d.RequiredApprovals
}

// approvalConfig is core.approvalGate's config (also core.interrupt data for kind
// approval).
type approvalConfig struct {
	approvalData
	TimeoutMs    int64           `json:"timeoutMs,omitempty"`
	ResumeSchema json.RawMessage `json:"resumeSchema,omitempty"`
	// BearerOnly: the approval resumes only with an authenticated call, never a token.
	BearerOnly bool `json:"bearerOnly,omitempty"`
}

// execApprovalGate suspends on an approval interrupt until quorum, rejection or timeout.
func execApprovalGate(r *runner, n *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	var cfg approvalConfig
	if len(n.Config) > 0 {
		if err := json.Unmarshal(n.Config, &cfg); err != nil {
			return nil, failNode(protocol.CodeValidation, "core.approvalGate config: %v", err)
		}
	}
	return runApproval(r, n, cfg.approvalData, cfg.TimeoutMs, cfg.ResumeSchema, cfg.BearerOnly)
}

func runApproval(r *runner, n *Node, d approvalData, timeoutMs int64, resumeSchema json.RawMessage, bearerOnly bool) (map[string]json.RawMessage, error) {
	if d.ArtifactID == "" {
		d.ArtifactID = n.ID
	}
	if d.ArtifactType == "" {
		d.ArtifactType = "workflow-node"
	}
	if d.Title == "" {
		d.Title = "Approve " + n.ID
		if n.Name != "" {
			d.Title = n.Name
		}
	}
	if len(d.Actions) == 0 {
		d.Actions = []string{"accept", "reject"}
	}
	words := fmt.Sprintf("Approval %q: actions %s", d.Title, strings.Join(d.Actions, "/"))
	if d.required() > 1 {
		words += fmt.Sprintf(", %d approvals needed (%s)", d.required(), cmp.Or(d.RejectionPolicy, "single-veto"))
	}
	it := r.raise(n.ID, interruptSpec{Kind: protocol.KindApproval, Data: d, TimeoutMs: timeoutMs, ResumeSchema: resumeSchema, Describe: words + ".", BearerOnly: bearerOnly})
	it.approval = &d
	legacy := protocol.ApprovalRequested{NodeID: n.ID, InterruptID: it.InterruptID, ArtifactID: d.ArtifactID, ArtifactType: d.ArtifactType, Title: d.Title, Actions: legacyActions(d.Actions), ApproversList: d.ApproversList}
	if d.RequiredApprovals > 0 {
		legacy.RequiredApprovals = d.RequiredApprovals
	}
	r.emit(protocol.EvApprovalRequested, n.ID, legacy, it.requestedEvent)
	for {
		req, _, value, timedOut, err := r.nextResolve(n.ID)
		if err != nil {
			return nil, err
		}
		if timedOut != nil && r.changed(GateApprovalRejection) {
			return r.timedOutRejected(n, it, votesOf(it))
		}
		if timedOut != nil {
			r.settle(it)
			r.emit(protocol.EvApprovalReceived, n.ID, &protocol.ApprovalReceived{NodeID: n.ID, Action: "timeout", DecidedAt: formatTime(workflow.Now(r.ctx))}, it.requestedEvent)
			return nil, failNode(protocol.CodeInterruptTimeout, "approval at node %q timed out after %d ms", n.ID, timeoutMs)
		}
		var v approvalResume
		_ = json.Unmarshal(value, &v) // checkApproval encoded value from an approvalResume: it decodes
		if v.Action == "ask" {
			continue // Q&A does not end the suspension
		}
		received := v.received(n.ID, workflow.Now(r.ctx))
		received.RefineFeedback = v.RefineFeedback
		accepts, rejects := tally(it, v.Action)
		it.votes = append(it.votes, castVote(v, req, received))
		if !quorumDecided(&d, accepts, rejects) {
			r.emit(protocol.EvApprovalReceived, n.ID, received, it.requestedEvent)
			r.describePending()
			continue
		}
		r.settle(it)
		// The gate is asked at a rejection only: a granted gate is decided as before.
		decided := rejected(&d, rejects)
		rfc0223 := decided && r.changed(GateApprovalRejection)
		var resolved string
		if rfc0223 {
			resolved = r.emitResolvedWith(it, req, value, decisionFields(v.Action, decided))
		} else {
			resolved = r.emitResolved(it, req, value)
		}
		recv := r.emit(protocol.EvApprovalReceived, n.ID, received, resolved)
		r.emitResumed(it, value, recv)
		out := map[string]json.RawMessage{"action": mustJSON(v.Action), "decision": value, "votes": mustJSON(votesOf(it))}
		if rfc0223 {
			return rejectedGate(n, out, "approval at node %q was rejected", n.ID)
		}
		if decided {
			return nil, failNode(protocol.CodeApprovalRejected, "approval at node %q was rejected", n.ID)
		}
		return out, nil
	}
}

// votesOf is a copy of the gate's votes.
func votesOf(it *interrupt) []approvalVote {
	votes := make([]approvalVote, len(it.votes))
	copy(votes, it.votes)
	return votes
}

// legacyActions maps actions to approval.requested's enum (edit-accept → edit).
func legacyActions(actions []string) []string {
	out := make([]string, 0, len(actions))
	for _, a := range actions {
		if a == "edit-accept" {
			a = "edit"
		}
		out = append(out, a)
	}
	return out
}
