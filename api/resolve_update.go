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
//     in the run's history) the answer is 202 queued, as for a signalled request, and
//     the update's call goes on in the background for the poll that follows
//     (updatecall.go).

import (
	"errors"
	"strings"

	"go.temporal.io/api/serviceerror"
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

// resolveByUpdate answers the resolve req with one ResolveUpdate, whose call goes on
// past the wait (updatecall.go). done is false when the run's worker has no handler for
// it, or Temporal could not deliver it: the caller then validates and signals.
func (s *Server) resolveByUpdate(rc *resolveCall) (done bool, err error) {
	call := s.startUpdateCall(rc)
	if call == nil {
		return false, nil // another resolve of this run is in flight as an update: signal
	}
	decided, err := s.awaitUpdateCall(rc, call)
	switch {
	case err != nil:
		return true, err
	case !decided:
		return true, s.answerQueued(rc) // Temporal has accepted it: the run takes it in turn
	case call.err != nil:
		return s.resolveUpdateFailed(rc, call.err)
	}
	res := call.res
	if res.Attempt != call.attempt {
		res.Replayed = true // Temporal answered with an earlier update of this request
	}
	if res.Outcome == nil {
		return true, endedError(rc.runID, res.CurrentStatus)
	}
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
