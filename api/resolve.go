package api

// A resolve (an approval, an answer, a conversation exchange, a token resume) is
// answered with what the run did with it, whichever API process received it:
//
//  1. the run's validation query answers 4xx at once for a request it would refuse
//     (nothing is signalled), or with the outcome of a request it has already seen
//     (the same Idempotency-Key again);
//  2. the request is signalled; the run applies or refuses requests one at a time, in
//     arrival order, and records each outcome by request id;
//  3. the API follows the run's history and asks for that outcome: 200 when the run
//     applied it, the run's 409/410/4xx when it refused it (a concurrent resolve or a
//     cancel won), however many API processes sent requests at once.
//
// Where the run's worker has the resolve update, the three are one Temporal call: its
// validator is step 1, its handler steps 2 and 3 (resolve_update.go). The query, the
// signal and the outcome watch remain for workers without it and for what the update
// leaves open.
//
// If no outcome arrives within Guards.ResolveWait (10 s by default) — the run is busy,
// e.g. in a long model round, and takes requests in turn — the request is not lost:
// Temporal holds it. The answer is 202 {status: "queued", idempotencyKey}, and
// repeating the request with that Idempotency-Key (generated when the caller sent
// none) answers its outcome without applying it twice. The run's outcome window keeps
// the last 256 requests of an execution (64 across continue-as-new; see
// workflows/outcomes.go).

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// DefaultResolveWait bounds how long a resolve waits for the run's outcome.
const DefaultResolveWait = 10 * time.Second

// resolveCaller is who sends a resolve, from its credential.
type resolveCaller struct {
	p     *principal   // a bearer key, or nil
	token *tokenClaims // a signed token, or nil
}

// requestKey returns the request's Idempotency-Key, or a new one when the caller sent
// none (it is returned to the caller with 202/503, so a retry stays one request).
func requestKey(c echo.Context) (key string, given bool, err error) {
	if k := c.Request().Header.Get(HeaderIdempotencyKey); k != "" {
		if isV2(c) {
			if err := checkIdempotencyKeyV2(k); err != nil {
				return "", false, err
			}
		}
		if len(k) > maxIdempotencyKeyLength {
			return "", false, badRequest("Idempotency-Key is longer than %d characters", maxIdempotencyKeyLength)
		}
		return k, true, nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "auto-" + hex.EncodeToString(b[:]), false, nil
}

// resolveRequestID derives a resolve's RequestID from its Idempotency-Key, so every API
// process names the same request the same way.
func resolveRequestID(tenant, runID, nodeID, key string) string {
	sum := sha256.Sum256([]byte("openwop:resolve\x00" + tenant + "\x00" + runID + "\x00" + nodeID + "\x00" + key))
	return workflows.IdempotentRequestPrefix + hex.EncodeToString(sum[:16])
}

// resolveCall is one resolve on its way through the API: the HTTP exchange, the
// caller, the run, the request the run is sent and its Idempotency-Key (given: the
// client sent it, so a replayed answer says so). Every step of the resolve path, here,
// in resolve_update.go and in the outcome wait, reads it.
type resolveCall struct {
	c     echo.Context
	who   resolveCaller
	runID string
	req   workflows.ResolveRequest
	key   string
	given bool
}

// resolve sends a resolve as the run's update, or validates it with the run's own
// query and signals it, and answers with the outcome the run records (see the top of
// this file).
func (s *Server) resolve(c echo.Context, who resolveCaller, runID string, rb *resolveBody, via string) error {
	if len(rb.ResumeValue) == 0 {
		rb.ResumeValue = []byte("null")
	}
	if n := int64(len(rb.ResumeValue)); n > s.cfg.MaxTurnBytes {
		return codeErr(CodePayloadTooLarge,
			"the resume value is %d bytes; a turn holds at most %d bytes (maxTurnBytes, WOP_MAX_TURN_BYTES)", n, s.cfg.MaxTurnBytes).
			with("limit", "maxTurnBytes").with("maxBytes", s.cfg.MaxTurnBytes).with("bytes", n)
	}
	ctx := c.Request().Context()
	key, given, err := requestKey(c)
	if err != nil {
		return err
	}
	req := workflows.ResolveRequest{
		NodeID: rb.NodeID, InterruptID: rb.InterruptID, ResumeValue: rb.ResumeValue,
		ReceivedAtMs: s.cfg.Now().UnixMilli(), Via: via,
	}
	tenant := ""
	switch {
	case who.p != nil:
		tenant = who.p.Tenant
		req.ResolvedBy, req.Caller, req.Delegate = who.p.KeyID, who.p.KeyID, who.p.Scopes[ScopeApprovalsDelegate]
	case who.token != nil:
		// The token's issuer decides (tokenIssuer checked it still authenticates);
		// Via records that a token carried the decision.
		req.ResolvedBy, req.Caller, req.AtTurn = who.token.Sub, who.token.Sub, who.token.Turn
	}
	idKey := key
	if isV2(c) {
		// /v1/… and the unversioned resolve are two endpoints: one key names two
		// requests (idempotency.md, the record is per endpoint).
		idKey = "v2\x00" + key
	}
	req.RequestID = resolveRequestID(tenant, runID, rb.NodeID, idKey)
	rc := &resolveCall{c: c, who: who, runID: runID, req: req, key: key, given: given}
	if done, err := s.resolveByUpdate(rc); done {
		return err
	}
	// The run's worker predates the resolve update (resolve_update.go). One query answers everything before the signal: the run's own validation
	// (unknown node, bad value, closed conversation, already resolved, cancelled run),
	// the run's tenant, and what became of this request if the run has seen it.
	v, err := s.validateResolve(ctx, runID, req)
	if err != nil {
		return s.temporalErr(err, runID)
	}
	var check workflows.ResolveCheck
	if err := v.Get(&check); err != nil {
		return fmt.Errorf("decoding the resolve check of run %s: %w", runID, err)
	}
	if send, err := s.answerCheck(rc, &check); !send {
		return err
	}
	if err := s.tc.SignalWorkflow(ctx, runID, "", workflows.ResolveSignal, req); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return s.closedResolveError(ctx, runID)
		}
		return s.temporalErr(err, runID)
	}
	return s.awaitOutcome(rc)
}

// answerCheck answers a resolve from the run's check of it (ValidateResolveQuery's
// answer, or the resolve update's refusal): 404 for another tenant's run, the outcome
// of a request the run has seen, the wait for one it has queued, the refusal of one it
// would refuse. send is true when the run would take the request and it is to be sent.
func (s *Server) answerCheck(rc *resolveCall, check *workflows.ResolveCheck) (send bool, err error) {
	if rc.who.p != nil && check.Tenant != rc.who.p.Tenant {
		return false, notFound("run %q not found", rc.runID)
	}
	if check.Replayed && rc.given {
		rc.c.Response().Header().Set(HeaderIdempotentReplay, "true")
	}
	if done, err := s.answerSeen(rc, check); done {
		return false, err
	}
	if check.Pending {
		return false, s.awaitOutcome(rc)
	}
	if check.CurrentStatus == protocol.StatusCancelled || check.CurrentStatus == protocol.StatusCancelling {
		return false, codeErr(CodeInterruptCancelled, "run %s was cancelled; its interrupts are void", rc.runID)
	}
	if !check.OK {
		return false, checkError(check)
	}
	return true, nil
}

// answerSeen answers a request the run has seen: with its outcome, or, on a worker
// that predates outcomes (Replayed without one, not pending), as accepted. done is
// false when the run has not decided yet.
func (s *Server) answerSeen(rc *resolveCall, check *workflows.ResolveCheck) (done bool, err error) {
	switch {
	case check.Outcome != nil && check.Outcome.Applied:
		s.log.Info("Interrupt resolved", "runId", rc.runID, "nodeId", rc.req.NodeID, "requestId", check.Outcome.RequestID)
		return true, rc.c.JSON(http.StatusOK, map[string]string{"runId": s.runWire(rc.c).id(rc.runID), "nodeId": rc.req.NodeID, "status": cmp.Or(check.Outcome.RunStatus, protocol.StatusRunning)})
	case check.Outcome != nil:
		o := check.Outcome
		return true, checkError(&workflows.ResolveCheck{Status: o.Status, Code: o.Code, Unprocessable: o.Unprocessable, Message: o.Message, Details: o.Details})
	case check.Replayed && !check.Pending:
		return true, rc.c.JSON(http.StatusOK, map[string]string{"runId": s.runWire(rc.c).id(rc.runID), "nodeId": rc.req.NodeID, "status": cmp.Or(check.RunStatus, protocol.StatusRunning)})
	}
	return false, nil
}

// awaitOutcome waits (Guards.ResolveWait at most) until the run records req's outcome
// or ends, and answers with it. The request was signalled, so Temporal holds it: past
// the wait the answer is 202 queued, with the Idempotency-Key that learns its outcome.
func (s *Server) awaitOutcome(rc *resolveCall) error {
	ctx := rc.c.Request().Context()
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Guards.ResolveWait)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	res, ok := s.awaitRequest(wctx, rc.runID, rc.req.RequestID)
	switch {
	case ok && res.outcome != nil:
		check := workflows.ResolveCheck{Outcome: res.outcome}
		_, err := s.answerSeen(rc, &check)
		return err
	case ok:
		return endedError(rc.runID, res.status)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return s.answerQueued(rc)
}

// endedError is the 410 of a resolve the run ended without applying; status is the
// run's, empty when Temporal closed the workflow without the run's terminal event.
func endedError(runID, status string) error {
	if status == protocol.StatusCancelled || status == protocol.StatusCancelling {
		return codeErr(CodeInterruptCancelled, "run %s was cancelled before the resolve was applied; its interrupts are void", runID)
	}
	if status == "" {
		return codeErr(CodeInterruptCancelled, "run %s was closed by Temporal before the resolve was applied; its interrupts are void", runID)
	}
	return codeErr(CodeInterruptCancelled, "run %s ended (%s) before the resolve was applied", runID, status)
}

// answerQueued is the 202 of a request Temporal holds for the run but the run has not
// decided within the wait.
func (s *Server) answerQueued(rc *resolveCall) error {
	return rc.c.JSON(http.StatusAccepted, map[string]any{
		"runId": s.runWire(rc.c).id(rc.runID), "nodeId": rc.req.NodeID, "status": "queued", "requestId": rc.req.RequestID, "idempotencyKey": rc.key,
		"message": fmt.Sprintf("the run has the request queued behind its current work and will apply or refuse it in turn; repeat it with Idempotency-Key %q to learn its outcome without applying it twice", rc.key),
	})
}

// validateResolve asks the workflow to check req. A query Temporal could not deliver in
// time is asked again while Guards.AcceptWait lasts: it has no effect, and the usual cause
// is passing — a worker that just stopped still holds the run in its sticky queue until
// the server falls back to the run's task queue, and a query handed to a poll the
// stopping worker cancels comes back Canceled. The client waits rather than gets an error.
func (s *Server) validateResolve(ctx context.Context, runID string, req workflows.ResolveRequest) (converter.EncodedValue, error) {
	deadline := time.Now().Add(s.cfg.Guards.AcceptWait)
	for {
		v, err := s.tc.QueryWorkflow(ctx, runID, "", workflows.ValidateResolveQuery, req)
		var cancelled *serviceerror.Canceled
		retry := isTransient(err) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &cancelled)
		if err == nil || !retry || ctx.Err() != nil || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// runTenantKey is where a handler records the tenant of the run it acts on, when the
// request carries no key (a signed-token resolve): the run's ids are bound to it.
const runTenantKey = "wop.runTenant"

// runWire is the wire of a response about the request's run: its ids bound to the
// caller's tenant, or to the run's when the caller is a token.
func (s *Server) runWire(c echo.Context) wire {
	if p := principalOf(c); p != nil {
		return s.wireOf(c, p.Tenant)
	}
	t, _ := c.Get(runTenantKey).(string)
	return s.wireOf(c, t)
}
