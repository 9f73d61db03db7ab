package workflows

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// interrupt is one pending interrupt of the run.
type interrupt struct {
	PendingInterrupt
	requestedEvent string // eventId of interrupt.requested
	suspendedEvent string // eventId of node.suspended
	agent          bool   // raised by a conversation agent next to its conversation
	conv           *Conversation
	approval       *approvalData
	tool           *toolApproval // a pack tool call's approval (approvals_tool.go)
	votes          []approvalVote
	describe       string
	timedOut       bool
	stopTimer      func()
}

func (it *interrupt) cancelTimer() {
	if it.stopTimer != nil {
		it.stopTimer()
		it.stopTimer = nil
	}
}

// interruptSpec describes an interrupt to raise.
type interruptSpec struct {
	Kind         string
	Data         any
	ResumeSchema json.RawMessage
	TimeoutMs    int64
	Reason       string // node.suspended reason, e.g. "conversation-input"
	Describe     string // words for the Temporal UI's current details
	Agent        bool
	BearerOnly   bool // resumes only with an authenticated call (no signed token)
}

// legacyKinds are the kinds node.suspended / interrupt.resolved may name.
var legacyKinds = map[string]bool{protocol.KindApproval: true, protocol.KindClarification: true, protocol.KindExternalEvent: true, protocol.KindCustom: true}

// InterruptID returns the deterministic interrupt id for an interrupt key.
func InterruptID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "int_" + hex.EncodeToString(sum[:])[:24]
}

// raise suspends node nodeID on a new interrupt: node.suspended, then
// interrupt.requested (the InterruptPayload), with a durable timer when TimeoutMs > 0.
func (r *runner) raise(nodeID string, spec interruptSpec) *interrupt {
	count := r.counts[nodeID]
	r.counts[nodeID] = count + 1
	key := fmt.Sprintf("%s:%s:%d", r.in.RunID, nodeID, count)
	now := workflow.Now(r.ctx)
	it := &interrupt{PendingInterrupt: PendingInterrupt{
		NodeID:       nodeID,
		InterruptID:  InterruptID(key),
		Kind:         spec.Kind,
		Key:          key,
		Data:         mustJSON(spec.Data),
		ResumeSchema: spec.ResumeSchema,
		TimeoutMs:    spec.TimeoutMs,
		RequestedAt:  formatTime(now),
		BearerOnly:   spec.BearerOnly,
	}, agent: spec.Agent, describe: spec.Describe}
	if spec.TimeoutMs > 0 {
		it.ExpiresAt = formatTime(now.Add(time.Duration(spec.TimeoutMs) * time.Millisecond))
	}
	susp := protocol.NodeSuspended{NodeID: nodeID, InterruptID: it.InterruptID, Key: key, Reason: spec.Reason}
	if legacyKinds[spec.Kind] {
		susp.Kind = spec.Kind
	}
	it.suspendedEvent = r.emit(protocol.EvNodeSuspended, nodeID, susp, "")
	req := protocol.InterruptRequested{Kind: spec.Kind, Key: key, Data: it.Data, ResumeSchema: spec.ResumeSchema}
	if spec.TimeoutMs > 0 {
		req.TimeoutMs = spec.TimeoutMs
	}
	it.requestedEvent = r.emit(protocol.EvInterruptRequested, nodeID, req, it.suspendedEvent)
	r.pending = append(r.pending, it)
	r.currentNode = nodeID
	r.startTimer(it)
	r.refreshStatus()
	r.describePending()
	return it
}

// startTimer arms the interrupt's durable timeout timer (from its ExpiresAt, so a
// continued run re-arms the remaining time only).
func (r *runner) startTimer(it *interrupt) {
	if it.ExpiresAt == "" {
		return
	}
	exp, err := time.Parse(time.RFC3339Nano, it.ExpiresAt)
	if err != nil {
		return
	}
	d := exp.Sub(workflow.Now(r.ctx))
	if d <= 0 {
		it.timedOut = true
		return
	}
	tctx, cancel := workflow.WithCancel(r.ctx)
	it.stopTimer = cancel
	f := workflow.NewTimer(tctx, d)
	workflow.Go(tctx, func(g workflow.Context) {
		if f.Get(g, nil) == nil {
			it.timedOut = true
		}
	})
}

// settle removes a resolved (or timed-out) interrupt from the pending list.
func (r *runner) settle(it *interrupt) {
	it.cancelTimer()
	for i, p := range r.pending {
		if p == it {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			break
		}
	}
	r.resolvedIDs.add(it.InterruptID)
	if !it.agent && it.conv == nil {
		r.resolvedNodes[it.NodeID] = true
	}
	r.refreshStatus()
	r.describePending()
}

// emitResolved appends interrupt.resolved for it.
func (r *runner) emitResolved(it *interrupt, req ResolveRequest, value json.RawMessage) string {
	return r.emitResolvedWith(it, req, value, nil)
}

// emitResolvedWith is emitResolved with an approval's decision fields in the payload
// (its action, decision and reason; rejection.go), when d is not nil.
func (r *runner) emitResolvedWith(it *interrupt, req ResolveRequest, value json.RawMessage, d *approvalDecision) string {
	if kind := WaitingKind(it.Kind); kind != WaitingConversation {
		if at, err := time.Parse(time.RFC3339Nano, it.RequestedAt); err == nil {
			r.recordHumanWait(kind, workflow.Now(r.ctx).Sub(at))
		}
	}
	p := protocol.InterruptResolved{
		NodeID: it.NodeID, InterruptID: it.InterruptID, ResumeValue: mustJSON(value),
		ResolvedAt: formatTime(workflow.Now(r.ctx)), ResolvedBy: req.ResolvedBy,
	}
	if legacyKinds[it.Kind] {
		p.Kind = it.Kind
	}
	if req.Via == "token" {
		p.Via = req.Via // resolvedBy is the key the token was issued to
	}
	if d != nil {
		p.Action, p.Decision, p.Reason = &d.action, d.decision, d.reason
	}
	return r.emit(protocol.EvInterruptResolved, it.NodeID, p, it.requestedEvent)
}

// emitResumed appends node.resumed, caused by cause.
func (r *runner) emitResumed(it *interrupt, value json.RawMessage, cause string) string {
	return r.emit(protocol.EvNodeResumed, it.NodeID, protocol.NodeResumed{NodeID: it.NodeID, InterruptID: it.InterruptID, ResumeValue: mustJSON(value)}, cause)
}

// nextResolve waits for the next valid resolve addressed to one of node's pending
// interrupts, in arrival order. Invalid and duplicate signals are dropped (the API has
// already answered them from ValidateResolveQuery). It returns the request, its target
// interrupt and the normalized value, or the interrupt that timed out.
func (r *runner) nextResolve(nodeID string) (req ResolveRequest, target *interrupt, value json.RawMessage, timedOut *interrupt, err error) {
	for {
		if err := r.checkHistory(); err != nil {
			return req, nil, nil, nil, err
		}
		if r.forkIdx != nil {
			if freq, ok := r.forkIdx.next(r, nodeID); ok {
				r.inbox = append([]ResolveRequest{freq}, r.inbox...)
			}
		}
		_, err = r.await(0, func() bool {
			if len(r.inbox) > 0 {
				return true
			}
			if r.paused != nil {
				return false // a deadline passed while paused is acted on at resume (pause.go)
			}
			for _, it := range r.pending {
				if it.NodeID == nodeID && it.timedOut {
					return true
				}
			}
			return false
		})
		if err != nil {
			return req, nil, nil, nil, err
		}
		if len(r.inbox) == 0 {
			if r.paused != nil {
				continue
			}
			for _, it := range r.pending {
				if it.NodeID == nodeID && it.timedOut {
					return req, nil, nil, it, nil
				}
			}
			continue
		}
		req = r.inbox[0]
		r.inbox = r.inbox[1:]
		if r.repeated(req) {
			continue
		}
		check, res := r.checkSignalled(req)
		if r.answered(req, check, res, "Refusing a resolve") {
			continue
		}
		if res.target.NodeID != nodeID {
			r.recordRefused(req, ResolveCheck{Code: protocol.CodeInterruptNotFound,
				Message: fmt.Sprintf("no interrupt is pending at node %q of run %s", req.NodeID, r.in.RunID)})
			continue
		}
		r.markApplied(req, check.RunStatus)
		return req, res.target, res.value, nil, nil
	}
}

// resolution is what checkResolve found for an acceptable request.
type resolution struct {
	target *interrupt
	value  json.RawMessage // normalized resume value
	// noop: the request repeats a quorum vote already counted; it changes nothing.
	noop bool
}

// checkSignalled is checkResolve for a request the run received as a signal: one the
// integrity rules refuse but the earlier rules accept is applied by runs that started
// before the rules (their history has no GateRequestIntegrity marker at that point).
func (r *runner) checkSignalled(req ResolveRequest) (ResolveCheck, *resolution) {
	check, res := r.checkResolve(req, false)
	if !check.OK && check.misrouted && !r.changed(GateEventRouting) {
		r.legacyEventRouting = true
		check, res = r.checkResolve(req, false)
	}
	if check.OK {
		return check, res
	}
	if lc, lres := r.checkResolve(req, true); lc.OK && !r.changed(GateRequestIntegrity) {
		return lc, lres
	}
	return check, res
}

// reject refuses a resolve with an OpenWOP error code (the API picks the HTTP status).
func reject(code, format string, args ...any) (ResolveCheck, *resolution) {
	return ResolveCheck{OK: false, Code: code, Message: fmt.Sprintf(format, args...)}, nil
}

// checkResolve is the one validation of a ResolveRequest, used by ValidateResolveQuery
// (the API's synchronous answer) and by the workflow before it applies a signal. It
// changes nothing. legacy checks by the rules before GateRequestIntegrity.
func (r *runner) checkResolve(req ResolveRequest, legacy bool) (ResolveCheck, *resolution) {
	if req.NodeID == "" {
		return reject(protocol.CodeValidation, "nodeId is required")
	}
	if r.terminal || r.closing != "" || r.cancelReq != nil {
		if r.status == protocol.StatusCancelled || r.closing == protocol.StatusCancelled || r.cancelReq != nil {
			return reject(protocol.CodeInterruptCancelled, "run %s was cancelled; its interrupts are no longer pending", r.in.RunID)
		}
		if c := r.convOf(req.NodeID); c != nil && c.Closed {
			return reject(protocol.CodeValidation, "conversation %s is closed", c.ID)
		}
		if r.resolvedNodes[req.NodeID] {
			return reject(protocol.CodeInterruptResolved, "the interrupt at node %q was already resolved", req.NodeID)
		}
		return reject(protocol.CodeInterruptCancelled, "run %s is %s; nothing is pending", r.in.RunID, cmp.Or(r.closing, r.status))
	}
	if req.RequestID != "" && r.applied.has(req.RequestID) {
		return reject(protocol.CodeInterruptResolved, "request %q was already applied", req.RequestID)
	}
	if r.paused != nil {
		return r.pausedCheck()
	}
	var cands []*interrupt
	for _, it := range r.pending {
		if it.NodeID == req.NodeID {
			cands = append(cands, it)
		}
	}
	if req.InterruptID != "" {
		var found *interrupt
		for _, it := range cands {
			if it.InterruptID == req.InterruptID {
				found = it
			}
		}
		if found == nil {
			if r.resolvedIDs.has(req.InterruptID) {
				return reject(protocol.CodeInterruptResolved, "interrupt %s was already resolved", req.InterruptID)
			}
			return reject(protocol.CodeInterruptNotFound, "interrupt %s is not pending at node %q", req.InterruptID, req.NodeID)
		}
		cands = []*interrupt{found}
	}
	if len(cands) == 0 {
		for _, c := range r.convs {
			if c.NodeID == req.NodeID && c.Closed {
				return reject(protocol.CodeValidation, "conversation %s is closed", c.ID)
			}
		}
		if r.resolvedNodes[req.NodeID] {
			return reject(protocol.CodeInterruptResolved, "the interrupt at node %q was already resolved", req.NodeID)
		}
		return reject(protocol.CodeInterruptNotFound, "no interrupt is pending at node %q of run %s", req.NodeID, r.in.RunID)
	}
	if t, refused, ok := r.routeToolApproval(cands, req); ok {
		if refused != nil {
			return *refused, nil
		}
		cands = []*interrupt{t}
	}
	target := cands[0]
	if len(cands) > 1 {
		// An agent's own wait and its conversation share the node: a value carrying an
		// "event" field goes to the agent's wait, anything else to the conversation.
		var probe map[string]json.RawMessage
		_ = json.Unmarshal(req.ResumeValue, &probe) // a value that is not an object names no event
		for _, it := range cands {
			if it.agent == (probe["event"] != nil) {
				target = it
			}
		}
	}
	if target.BearerOnly && req.Via == "token" {
		return reject(protocol.CodeUnauthenticated, "the interrupt at node %q resumes only with an authenticated call (Authorization: Bearer), not a signed token", req.NodeID)
	}
	var (
		value  json.RawMessage
		check  ResolveCheck
		status = protocol.StatusRunning
		noop   bool
	)
	switch {
	case target.conv != nil:
		if refused := r.misroutedEvent(target, req); refused != nil {
			return *refused, nil
		}
		value, status, check = r.checkConversationResolve(target, req, legacy)
	case target.agent:
		value, check = r.checkAgentResolve(target, req)
		status = protocol.StatusWaitingApproval
	case target.Kind == protocol.KindApproval:
		value, status, check, noop = r.checkApproval(target, req)
		if check.OK && !noop && target.tool != nil {
			check = r.checkToolEdit(target, value)
		}
	case target.Kind == protocol.KindClarification:
		value, check = r.checkClarification(target, req)
	case target.Kind == protocol.KindExternalEvent:
		value, check = r.checkExternal(target, req)
	default:
		value, check = req.ResumeValue, ResolveCheck{OK: true}
	}
	if !check.OK {
		return check, nil
	}
	if len(target.ResumeSchema) > 0 && target.conv == nil {
		if err := r.validateAgainst(target.ResumeSchema, req.ResumeValue); err != nil {
			return reject(protocol.CodeValidation, "resumeValue does not match the interrupt's resumeSchema: %v", err)
		}
	}
	return ResolveCheck{OK: true, RunStatus: status}, &resolution{target: target, value: value, noop: noop}
}

// orJSON is protocol.OrJSON.
func orJSON(raw json.RawMessage, def string) json.RawMessage { return protocol.OrJSON(raw, def) }
