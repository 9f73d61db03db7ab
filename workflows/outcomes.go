package workflows

// Request outcomes: the run records what it did with each resolve request it received
// (applied, or refused with an OpenWOP error code), so that the API
// process that sent the signal — whichever one it was — answers with what the run did,
// not with what a query saw before the signal. The record is a window of the most
// recent outcomes (outcomeWindow), the newest of them carried across continue-as-new;
// a request older than the window is answered from `applied` when it was applied.

import (
	"cmp"
	"encoding/json"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// outcomeWindow is how many request outcomes an execution keeps (the newest ones);
// carriedOutcomes of them travel across continue-as-new, which happens only when no
// request is queued, so an API process still waiting there asks for a recent one.
const (
	outcomeWindow   = 256
	carriedOutcomes = 64
)

// maxOutcomeMessage and maxOutcomeDetails bound what is kept of a refused request's
// error (its message, its details object).
const (
	maxOutcomeMessage = 300
	maxOutcomeDetails = 300
)

// ResolveOutcome is what the run did with one ResolveRequest.
type ResolveOutcome struct {
	RequestID string `json:"requestId"`
	// Applied is true when the run applied the request (an interrupt resolved, a vote
	// counted, a turn recorded), or found it to repeat a vote already counted.
	Applied bool `json:"applied"`
	// RunStatus is the run status an applied request is answered with.
	RunStatus string `json:"runStatus,omitempty"`
	// Status, Code and Message say why a request was refused. Code is the OpenWOP code
	// (Unprocessable as in ResolveCheck); the API maps it to HTTP. Status is the HTTP
	// status that outcomes recorded before the API mapped codes carry: runs still read
	// it (and the API answers with it), this code no longer writes it.
	Status        int             `json:"status,omitempty"`
	Code          string          `json:"code,omitempty"`
	Unprocessable bool            `json:"unprocessable,omitempty"`
	Message       string          `json:"message,omitempty"`
	Details       json.RawMessage `json:"details,omitempty"` // at most maxOutcomeDetails bytes
}

// outcomeLog is the bounded record of outcomes, oldest first.
type outcomeLog struct{ list []ResolveOutcome }

// find returns the outcome of requestID, if it is still in the window.
func (l *outcomeLog) find(requestID string) *ResolveOutcome {
	if requestID == "" {
		return nil
	}
	for i := len(l.list) - 1; i >= 0; i-- {
		if l.list[i].RequestID == requestID {
			return &l.list[i]
		}
	}
	return nil
}

// add records o unless the request already has an outcome (a signal delivered twice
// keeps its first outcome), dropping the oldest beyond the window.
func (l *outcomeLog) add(o ResolveOutcome) {
	if o.RequestID == "" || l.find(o.RequestID) != nil {
		return
	}
	if len(o.Message) > maxOutcomeMessage {
		o.Message = strings.ToValidUTF8(o.Message[:maxOutcomeMessage], "") + "…"
	}
	if len(o.Details) > maxOutcomeDetails {
		o.Details = nil
	}
	l.list = append(l.list, o)
	if n := len(l.list) - outcomeWindow; n > 0 {
		l.list = append([]ResolveOutcome(nil), l.list[n:]...)
	}
}

// newest returns the newest n outcomes, oldest first.
func (l *outcomeLog) newest(n int) []ResolveOutcome {
	if len(l.list) <= n {
		return l.list
	}
	return l.list[len(l.list)-n:]
}

// recordApplied notes that req was applied; the API answers it with status.
func (r *runner) recordApplied(req ResolveRequest, status string) {
	if req.Via == "fork" {
		return
	}
	r.outcomes.add(ResolveOutcome{RequestID: req.RequestID, Applied: true, RunStatus: cmp.Or(status, protocol.StatusRunning)})
}

// repeated reports whether req repeats a request the run has already answered (the
// same request signalled again keeps its first outcome).
func (r *runner) repeated(req ResolveRequest) bool {
	return req.Via != "fork" && r.outcomes.find(req.RequestID) != nil
}

// answered records what the run does with a request it will not apply: one its check
// refused (logged as what) or one that repeats a vote already counted. It reports
// whether the request is thus done with.
func (r *runner) answered(req ResolveRequest, check ResolveCheck, res *resolution, what string) bool {
	if !check.OK {
		workflow.GetLogger(r.ctx).Info(what, "nodeId", req.NodeID, "requestId", req.RequestID, "code", check.Code, "message", check.Message)
		r.recordRefused(req, check)
		return true
	}
	if res.noop {
		r.recordApplied(req, check.RunStatus) // a repeated vote: counted once already
		return true
	}
	return false
}

// markApplied remembers req's RequestID among those applied and records its outcome.
func (r *runner) markApplied(req ResolveRequest, status string) {
	if req.RequestID != "" {
		r.applied.add(req.RequestID)
	}
	r.recordApplied(req, status)
	if r.busy != nil && req.RequestID != "" {
		// A request applied in the middle of a turn (a tool call's approval) is
		// answered, like the one that started it, with where the turn leaves the run.
		r.turnReqs = append(r.turnReqs, req.RequestID)
	}
}

// recordRefused notes that req was refused for the reason check gives.
func (r *runner) recordRefused(req ResolveRequest, check ResolveCheck) {
	if req.Via == "fork" {
		return
	}
	r.outcomes.add(ResolveOutcome{RequestID: req.RequestID, Code: check.Code, Unprocessable: check.Unprocessable, Message: check.Message, Details: check.Details})
}

// refuseQueued refuses every request still waiting in the inbox of a run that has
// ended (or is ending): each gets the answer the run's validation gives now
// (interrupt_cancelled for a cancelled run, interrupt_already_resolved for an interrupt
// resolved meanwhile).
// Signals that arrived since the last drain are taken in first.
func (r *runner) refuseQueued() {
	r.drainSignals()
	for _, req := range r.inbox {
		check, _ := r.checkResolve(req, false)
		if check.OK {
			check = ResolveCheck{Code: protocol.CodeInterruptCancelled, Message: "the run ended before this request was applied"}
		}
		r.recordRefused(req, check)
	}
	r.inbox = nil
}

// queued reports whether a request with this id waits in the inbox.
func (r *runner) queued(requestID string) bool {
	if requestID == "" {
		return false
	}
	for _, q := range r.inbox {
		if q.RequestID == requestID {
			return true
		}
	}
	return false
}

// requestState answers ValidateResolveQuery for a request the run has seen: its
// outcome, or that it is queued. ok is false for a request the run has not seen.
func (r *runner) requestState(requestID string) (check ResolveCheck, ok bool) {
	if o := r.outcomes.find(requestID); o != nil {
		check = ResolveCheck{OK: o.Applied, Replayed: true, Outcome: o, RunStatus: o.RunStatus, Status: o.Status, Code: o.Code, Unprocessable: o.Unprocessable, Message: o.Message, Details: o.Details}
		return check, true
	}
	if r.queued(requestID) {
		return ResolveCheck{OK: true, Replayed: true, Pending: true, RunStatus: r.status}, true
	}
	if requestID != "" && r.applied.has(requestID) {
		// Applied, and older than the outcome window.
		o := &ResolveOutcome{RequestID: requestID, Applied: true, RunStatus: r.status}
		return ResolveCheck{OK: true, Replayed: true, Outcome: o, RunStatus: r.status}, true
	}
	return ResolveCheck{}, false
}

// maxOutcomesAsked bounds the ids one OutcomesQuery answers.
const maxOutcomesAsked = 1000

// outcomesPage answers OutcomesQuery.
func (r *runner) outcomesPage(req OutcomesRequest) OutcomesPage {
	page := OutcomesPage{Outcomes: []ResolveOutcome{}, Terminal: r.terminal, Status: r.status}
	for i, id := range req.RequestIDs {
		if i == maxOutcomesAsked {
			break
		}
		check, seen := r.requestState(id)
		switch {
		case check.Outcome != nil:
			page.Outcomes = append(page.Outcomes, *check.Outcome)
		case seen && check.Pending:
			page.Queued = append(page.Queued, id)
		}
	}
	return page
}
