package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// errCancelled is returned by node executors when the run is being cancelled.
var errCancelled = errors.New("run cancelled")

func (r *runner) requestCancel(req CancelRequest) {
	if r.cancelReq != nil || r.terminal || r.closing != "" {
		return
	}
	if req.Reason == "" {
		req.Reason = "cancelled"
	}
	r.cancelReq = &req
	r.paused = nil // only a resume or a cancel leaves paused (pause.go)
	r.setStatus(protocol.StatusCancelling)
}

// checkCancelled reports a pending cancellation (signal or Temporal).
func (r *runner) checkCancelled() error {
	if r.cancelReq != nil {
		return errCancelled
	}
	if r.ctx.Err() != nil {
		r.cancelReq = r.temporalCancel()
		return errCancelled
	}
	return nil
}

// await blocks until cond holds, the run is cancelled (errCancelled) or timeout (>0)
// elapses (timedOut). The timer is durable.
func (r *runner) await(timeout time.Duration, cond func() bool) (timedOut bool, err error) {
	r.settleTurnOutcome("") // the turn, if one ran, is over: its answer says where it left the run
	full := func() bool { return r.cancelReq != nil || cond() }
	if timeout > 0 {
		ok, werr := workflow.AwaitWithTimeout(r.ctx, timeout, full)
		if werr != nil {
			return false, r.cancelErr(werr)
		}
		if r.cancelReq != nil {
			return false, errCancelled
		}
		return !ok, nil
	}
	if werr := workflow.Await(r.ctx, full); werr != nil {
		return false, r.cancelErr(werr)
	}
	if r.cancelReq != nil {
		return false, errCancelled
	}
	return false, nil
}

func (r *runner) cancelErr(err error) error {
	var ce *temporal.CanceledError
	if errors.As(err, &ce) || r.ctx.Err() != nil {
		if r.cancelReq == nil {
			r.cancelReq = r.temporalCancel()
		}
		return errCancelled
	}
	return err
}

// temporalCancel is the cancel request a Temporal cancellation stands for: a child
// run is cancelled by its parent's cascade.
func (r *runner) temporalCancel() *CancelRequest {
	if r.in.ParentRunID != "" {
		return &CancelRequest{Reason: "parent-cancelled", CancelledBy: "temporal"}
	}
	return &CancelRequest{Reason: "cancelled", CancelledBy: "temporal"}
}
