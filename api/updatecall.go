package api

// A resolve update's call outlives the resolve's wait.
//
// The resolve sends its ResolveUpdate with WaitForStage Accepted from a goroutine of its
// own (one per run and process: the update gate), which then waits on the update's
// handle for its result. Temporal answers the call as soon as the run's worker has
// accepted the update, and with the result at once when the run decided it in the same
// workflow task (a scripted-mock turn, a request the run takes at once), so a turn costs
// one UpdateWorkflowExecution; an update the run accepts and decides later (queued behind
// a long model round) costs one PollWorkflowExecutionUpdate besides.
//
// The resolve waits Guards.ResolveWait for the result. Past it, the answer is 202 queued
// as soon as Temporal has accepted the update (at once when it had already): the
// request is in the run's history and the run applies or refuses it in turn. An update
// not accepted by then (the server or the worker is saturated) is waited for until it
// is accepted or decided, Guards.AcceptWait at most (then 503 with the Idempotency-Key:
// Temporal may still take the request, and a repeat with the key learns its outcome).
//
// The call carries on after a 202, updateCallBudget at most, cancelled by Shutdown,
// which waits for it. Its result's events are kept for the poll (turnevents.go), and a
// poll of the run from the caller's tenant that arrives while the call is in flight
// waits for it (its own timeout at most) instead of querying the run: the turn is
// answered from the events the update carried, once. A poll of another tenant is
// answered 404 without waiting once Temporal has accepted the update (its validator
// checked that the run is the caller's).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/workflows"
)

// updateCallBudget bounds a resolve update's call, the wait on its result included.
const updateCallBudget = 2 * time.Minute

// updateCall is one resolve update in flight from this process.
type updateCall struct {
	// tenant is the caller's, which the update's validator checks against the run's;
	// "" when the caller has no key (a signed token), whose run's tenant is learned
	// from the result only.
	tenant string
	// attempt is the nonce the call sent (ResolveUpdateRequest.Attempt).
	attempt string
	// accepted is closed once Temporal has accepted the update and not decided it yet
	// (never for an update it answered with its outcome or rejection at once); done once
	// the call has ended, after res and err are set (and res's events kept).
	accepted, done chan struct{}
	res            workflows.ResolveUpdateResult
	err            error
	// polls counts the polls waiting for the call.
	polls atomic.Int32
}

// isAccepted reports whether Temporal has accepted the call's update.
func (u *updateCall) isAccepted() bool {
	select {
	case <-u.accepted:
		return true
	default:
		return false
	}
}

// startUpdateCall sends rc's resolve as a ResolveUpdate from a goroutine of its own; it
// returns nil when another resolve update of the run is in flight from this process.
func (s *Server) startUpdateCall(rc *resolveCall) *updateCall {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	call := &updateCall{attempt: hex.EncodeToString(nonce[:]), accepted: make(chan struct{}), done: make(chan struct{})}
	u := workflows.ResolveUpdateRequest{Request: rc.req, Attempt: call.attempt, EventsMaxBytes: s.turnEventsBytes()}
	if rc.who.p != nil {
		u.Tenant, u.CheckTenant = rc.who.p.Tenant, true
		call.tenant = rc.who.p.Tenant
	}
	if !s.updates.enter(rc.runID, call) {
		return nil
	}
	opts := client.UpdateWorkflowOptions{
		WorkflowID: rc.runID, UpdateID: rc.req.RequestID, UpdateName: workflows.ResolveUpdate,
		Args: []any{u}, WaitForStage: client.WorkflowUpdateStageAccepted,
	}
	// The call outlives the request but keeps its values (the trace it belongs to); it
	// ends with Shutdown.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rc.c.Request().Context()),
		max(updateCallBudget, s.cfg.Guards.ResolveWait+s.cfg.Guards.AcceptWait))
	stop := context.AfterFunc(s.ctx, cancel)
	runID := rc.runID // the goroutine keeps nothing else of the request
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer stop()
		defer s.updates.leave(runID)
		h, err := s.sendUpdate(ctx, opts)
		if err == nil {
			var decided bool
			if decided, err = outcomeOf(h, &call.res); !decided {
				close(call.accepted)
				err = h.Get(ctx, &call.res)
			}
		}
		call.err = err
		if err == nil {
			s.keepTurnEvents(runID, &call.res)
		}
		close(call.done)
	}()
	return call
}

// outcomeOf reads the outcome Temporal answered an update call with, without waiting:
// decided is false when Temporal's answer carried none, the update being accepted and
// not decided yet (the call waited for WaitForStage Accepted, so it was answered at
// the acceptance or later).
//
// The handle the SDK makes of an answer holds its outcome when the answer carried one
// (stage Completed: the task that took the update also decided it, or the validator
// rejected it), and Get returns it without a call; otherwise Get polls Temporal for the
// outcome. A Get with a context already ended tells the two apart with no call to the
// server and no timing: it ends with the context's error only when it had to poll.
func outcomeOf(h client.WorkflowUpdateHandle, res *workflows.ResolveUpdateResult) (decided bool, err error) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	err = h.Get(ended, res)
	var waited *client.WorkflowUpdateServiceTimeoutOrCanceledError
	if err != nil && (errors.Is(err, context.Canceled) || errors.As(err, &waited)) {
		return false, nil
	}
	return true, err
}

// sendUpdate sends the update opts until Temporal answers it, each attempt
// Guards.ResolveWait at most. A waiter whose workflow's context the server cleared
// (its update registry with it) is answered only at the server's long-poll interval
// (20 s), and an attempt that outlasts the wait is sent again with the same Update ID,
// which attaches to the update or has the server deliver it anew.
func (s *Server) sendUpdate(ctx context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, s.cfg.Guards.ResolveWait)
		h, err := s.tc.UpdateWorkflow(actx, opts)
		late := actx.Err() != nil
		cancel()
		if err == nil || !late || ctx.Err() != nil {
			return h, err
		}
	}
}

// awaitUpdateCall waits for what answers rc from its call: the result (decided true),
// or, past Guards.ResolveWait, Temporal's acceptance (decided false: 202 queued). err is
// the request's end, or the 503 of an update Temporal neither accepted nor decided
// within Guards.AcceptWait after the wait.
func (s *Server) awaitUpdateCall(rc *resolveCall, call *updateCall) (decided bool, err error) {
	ctx := rc.c.Request().Context()
	wait := time.NewTimer(s.cfg.Guards.ResolveWait)
	defer wait.Stop()
	select {
	case <-call.done:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-wait.C:
	}
	if call.isAccepted() {
		return false, nil
	}
	budget := time.NewTimer(s.cfg.Guards.AcceptWait)
	defer budget.Stop()
	select {
	case <-call.done:
		return true, nil
	case <-call.accepted:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-budget.C:
		return false, (&Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Cause: context.DeadlineExceeded,
			Message: fmt.Sprintf("Temporal did not answer in time: it has not taken the request yet and may still; repeat it with Idempotency-Key %q to learn its outcome without applying it twice", rc.key)}).
			with("idempotencyKey", rc.key)
	}
}

// awaitPollCall lets a poll of runID wait (wait at most) for a resolve update of the
// run in flight from this process, so that it is answered from the events the update
// carries. It waits only for a call of the poll's tenant: a poll of another tenant goes
// its own way at once (the run's own check answers it, 404 when the run is not its
// tenant's), since a call's tenant is the caller's claim until the run has decided it.
func (s *Server) awaitPollCall(c echo.Context, runID string, wait time.Duration) {
	call := s.updates.call(runID)
	p := principalOf(c)
	if call == nil || p == nil || call.tenant == "" || p.Tenant != call.tenant {
		return
	}
	call.polls.Add(1)
	defer call.polls.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-call.done:
	case <-t.C:
	case <-c.Request().Context().Done():
	case <-s.ctx.Done():
	}
}
