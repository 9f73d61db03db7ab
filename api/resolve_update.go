package api

// A resolve is one Temporal Workflow Update (workflows.ResolveUpdate, Update ID = the
// request id) where the run's worker has its handler: the update's validator runs the
// run's check (a request the run would refuse, or has already decided, is rejected with
// that check and leaves no history), its handler queues the request as the resolve
// signal does and returns the outcome the run records. One call does what the
// validation query, the signal and the wait on the outcome query did.
//
// What the update does not settle falls back to what answered before:
//   - a worker without the handler (a rolling deploy) rejects the update as unknown:
//     the validation query and the signal follow (resolve.go);
//   - an update accepted but cut short by the run's end or continue-as-new, or one that
//     Temporal could not deliver: the outcome watch (outcomewatch.go), or the query,
//     answer it from the run's recorded outcomes, so it is neither lost nor applied
//     twice (the run de-duplicates by request id);
//   - no outcome within Guards.ResolveWait: once Temporal has accepted the update (it is
//     in the run's history) the answer is 202 queued, as for a signalled request.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/workflows"
)

// acceptedUpdateClosed is the type of the failure Temporal gives an update accepted by
// an execution that closed (or continued as new) before the update completed.
const acceptedUpdateClosed = "AcceptedUpdateCompletedWorkflow"

// IsUnknownUpdate reports whether err is a worker's rejection of an update it has no
// handler for (a worker that predates the update).
func IsUnknownUpdate(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && strings.HasPrefix(ae.Message(), "unknown update ")
}

// resolveByUpdate answers the resolve req with one ResolveUpdate. done is false when the
// run's worker has no handler for it, or Temporal could not deliver it: the caller then
// validates and signals.
func (s *Server) resolveByUpdate(rc *resolveCall) (done bool, err error) {
	if !s.updates.enter(rc.runID) {
		return false, nil // another resolve of this run is in flight as an update: signal
	}
	defer s.updates.leave(rc.runID)
	ctx := rc.c.Request().Context()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	u := workflows.ResolveUpdateRequest{Request: rc.req, Attempt: hex.EncodeToString(nonce[:]), EventsMaxBytes: s.turnEventsBytes()}
	if rc.who.p != nil {
		u.Tenant, u.CheckTenant = rc.who.p.Tenant, true
	}
	opts := client.UpdateWorkflowOptions{
		WorkflowID: rc.runID, UpdateID: rc.req.RequestID, UpdateName: workflows.ResolveUpdate,
		Args: []any{u}, WaitForStage: client.WorkflowUpdateStageCompleted,
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Guards.ResolveWait)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	var res workflows.ResolveUpdateResult
	h, err := s.tc.UpdateWorkflow(wctx, opts)
	if err == nil {
		err = h.Get(wctx, &res)
	}
	if err != nil && wctx.Err() != nil && ctx.Err() == nil && s.ctx.Err() == nil {
		// No outcome in time: is the request at least in the run's history?
		return s.resolveNotDecided(rc, opts)
	}
	if err != nil {
		return s.resolveUpdateFailed(rc, err)
	}
	if res.Attempt != u.Attempt {
		res.Replayed = true // Temporal answered with an earlier update of this request
	}
	if res.Outcome == nil {
		return true, endedError(rc.runID, res.CurrentStatus)
	}
	s.keepTurnEvents(rc.runID, &res)
	_, err = s.answerCheck(rc, &res.ResolveCheck)
	return true, err
}

// resolveUpdateFailed answers a resolve update that ended in err: the validator's
// refusal, an accepted update cut short by the run's end (the outcome watch answers), or
// one not delivered (done false: the query and the signal answer).
func (s *Server) resolveUpdateFailed(rc *resolveCall, err error) (done bool, _ error) {
	var ae *temporal.ApplicationError
	switch {
	case errors.As(err, &ae) && ae.Type() == workflows.ErrTypeResolveRefused:
		var check workflows.ResolveCheck
		if derr := ae.Details(&check); derr != nil {
			return false, nil
		}
		send, aerr := s.answerCheck(rc, &check)
		if send {
			return false, nil // refused with a check that takes it: let the query decide
		}
		return true, aerr
	case errors.As(err, &ae) && ae.Type() == acceptedUpdateClosed:
		return true, s.awaitOutcome(rc)
	case rc.c.Request().Context().Err() != nil:
		return true, rc.c.Request().Context().Err()
	}
	var nf *serviceerror.NotFound
	if !IsUnknownUpdate(err) && !errors.As(err, &nf) { // a closed run is answered by the query
		s.log.Info("Resolve update not delivered; validating and signalling instead", "runId", rc.runID, "requestId", rc.req.RequestID, "error", err)
	}
	return false, nil
}

// resolveNotDecided answers a resolve update that did not complete within the wait: 202
// queued once Temporal has accepted it (asked again with the same Update ID, which
// attaches to the first), else as the failure says.
func (s *Server) resolveNotDecided(rc *resolveCall, opts client.UpdateWorkflowOptions) (done bool, err error) {
	ctx, cancel := context.WithTimeout(rc.c.Request().Context(), validateBudget)
	defer cancel()
	opts.WaitForStage = client.WorkflowUpdateStageAccepted
	if _, err = s.tc.UpdateWorkflow(ctx, opts); err == nil {
		return true, s.answerQueued(rc)
	}
	if ctx.Err() != nil && rc.c.Request().Context().Err() == nil {
		return true, s.temporalErr(err, rc.runID)
	}
	return s.resolveUpdateFailed(rc, err)
}
