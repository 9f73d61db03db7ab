package workflows

// The resolve update: one Temporal Workflow Update that does what ValidateResolveQuery,
// ResolveSignal and the API's wait on OutcomesQuery do together, in one call.
//
//   - Its validator runs the same check as ValidateResolveQuery (resolveCheck). A request
//     the API would not signal — another tenant's run, a request the run has already
//     decided, a cancelled run, a request the run refuses — is rejected there with the
//     check as the rejection's details (ErrTypeResolveRefused). A rejected update leaves
//     nothing in the run's history.
//   - Its handler queues the request in the run's inbox, exactly as a ResolveSignal is
//     queued, so the run applies or refuses it in arrival order, de-duplicated by request
//     id, and records its outcome in the outcomes window. The handler then waits for that
//     outcome (or the run's end) and returns it (ResolveUpdateResult).
//
// The Update ID is the request id, so Temporal itself answers a repeated update of a
// running execution with the first one's result; an update that reaches a later
// execution (after continue-as-new) is decided by the validator from the carried
// outcomes. ResolveSignal stays: runs in flight and API processes that predate the
// update use it, and a worker without this handler rejects the update as unknown, upon
// which the API falls back to the query and the signal.

import (
	"cmp"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// ResolveUpdate is the update that validates, applies and answers one ResolveRequest
// (ResolveUpdateRequest) -> ResolveUpdateResult.
const ResolveUpdate = "openwop.resolve-update"

// ErrTypeResolveRefused is the ApplicationError type of a resolve update the validator
// rejects; its details are the ResolveCheck, as ValidateResolveQuery would answer it.
const ErrTypeResolveRefused = "openwop.resolve-refused"

// ResolveUpdateRequest is the argument of ResolveUpdate.
type ResolveUpdateRequest struct {
	Request ResolveRequest `json:"request"`
	// Tenant, when CheckTenant is set, is the caller's tenant: the update of another
	// tenant's run is rejected with a check that names only the run's tenant.
	Tenant      string `json:"tenant,omitempty"`
	CheckTenant bool   `json:"checkTenant,omitempty"`
	// Attempt names the API's call; the result names the call that queued the request,
	// so a caller answered with an earlier call's result (Temporal de-duplicates updates
	// by Update ID) knows its request is a repeat.
	Attempt string `json:"attempt,omitempty"`
	// EventsMaxBytes, when positive, asks for the run's events after the request's
	// position with the outcome, at most this many bytes of them (resolve_events.go).
	EventsMaxBytes int `json:"eventsMaxBytes,omitempty"`
}

// ResolveUpdateResult is what ResolveUpdate returns: the run's check of the request
// once it has decided it (Outcome set) or has ended without applying it (Terminal, no
// Outcome), and the Attempt of the update that queued it.
type ResolveUpdateResult struct {
	ResolveCheck
	Attempt string `json:"attempt,omitempty"`
	// Events are the run's events after the request's position, when the update asked
	// for them and they fit (resolve_events.go).
	Events *ResolveEvents `json:"events,omitempty"`
}

// resolveCheck is ValidateResolveQuery's answer for req: what the run did with it if
// it has seen it, else the run's own validation; with the run's tenant and state.
func (r *runner) resolveCheck(req ResolveRequest) ResolveCheck {
	check, seen := r.requestState(req.RequestID)
	if !seen {
		check, _ = r.checkResolve(req, false)
	}
	check.Tenant, check.CurrentStatus, check.LastSequence = r.in.Owner.Tenant, cmp.Or(r.closing, r.status), r.nextSeq()-1
	check.Terminal = r.terminal || r.closing != ""
	return check
}

// validateResolveUpdate accepts u only when the API, given resolveCheck's answer, would
// signal it, or when it is already queued (the handler then waits for its outcome).
func (r *runner) validateResolveUpdate(u ResolveUpdateRequest) error {
	if u.Request.RequestID == "" {
		return refuseResolve(ResolveCheck{Code: protocol.CodeValidation, Message: "a resolve update needs a requestId"})
	}
	check := r.resolveCheck(u.Request)
	switch {
	case u.CheckTenant && check.Tenant != u.Tenant:
		return refuseResolve(ResolveCheck{Tenant: check.Tenant})
	case check.Pending:
		return nil
	case check.Replayed, !check.OK,
		check.CurrentStatus == protocol.StatusCancelled, check.CurrentStatus == protocol.StatusCancelling:
		return refuseResolve(check)
	}
	return nil
}

// refuseResolve is the validator's rejection carrying check.
func refuseResolve(check ResolveCheck) error {
	return temporal.NewNonRetryableApplicationError("resolve refused", ErrTypeResolveRefused, nil, check)
}

// applyResolveUpdate queues u's request as ResolveSignal would, waits until the run has
// recorded its outcome or has ended, and returns resolveCheck's answer then (Outcome
// set, or Terminal without one: the run ended before applying it).
func (r *runner) applyResolveUpdate(ctx workflow.Context, u ResolveUpdateRequest) (ResolveUpdateResult, error) {
	req := u.Request
	after, carry := r.nextSeq()-1, r.carriesEvents(u)
	_, seen := r.requestState(req.RequestID)
	if !seen && !r.terminal && r.closing == "" {
		r.inbox = append(r.inbox, req)
	}
	r.resolveUpdates++
	defer func() { r.resolveUpdates-- }()
	// A disconnected context: a Temporal cancellation of the run does not end the wait;
	// the run's end refuses what is queued (refuseQueued), which answers it.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool {
		check, _ := r.requestState(req.RequestID)
		return check.Outcome != nil || r.terminal
	})
	res := ResolveUpdateResult{ResolveCheck: r.resolveCheck(req), Attempt: u.Attempt}
	res.Replayed = seen // queued before this update (a signal with the same request id)
	// The check is as at the outcome; the events go as far as this task takes the turn.
	if carry {
		r.awaitSettled(dctx)
		if r.liveStatus {
			// The answer says where the turn took the run (turnstatus.go): its outcome
			// once the turn is over, running while it goes on outside the task.
			res.ResolveCheck = r.resolveCheck(req)
			res.Replayed = seen
			if o := res.Outcome; o != nil && o.Applied && r.inTurn(req.RequestID) {
				busy := *o
				busy.RunStatus = r.status
				res.Outcome, res.RunStatus = &busy, r.status
			}
		}
		res.Events = r.resolveEvents(after, u.EventsMaxBytes)
	}
	return res, nil
}

// registerResolveUpdate registers ResolveUpdate.
func (r *runner) registerResolveUpdate() error {
	return workflow.SetUpdateHandlerWithOptions(r.ctx, ResolveUpdate, r.applyResolveUpdate,
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, u ResolveUpdateRequest) error {
			return r.validateResolveUpdate(u)
		}})
}
