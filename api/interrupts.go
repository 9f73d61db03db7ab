package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/workflows"
)

// consumeWait bounds how long a resolve waits for the workflow to apply its signal
// before answering (the answer is 200 either way; waiting makes a racing resolve see
// the first one's effect and lose with 409).
const consumeWait = 3 * time.Second

// resolveBody is what a resolve endpoint extracted from its body.
type resolveBody struct {
	NodeID      string
	InterruptID string
	ResumeValue json.RawMessage
}

// decodeResolveBody accepts the closed {resumeValue} body, and two bare shapes whose
// whole body is the resume value: RFC 0005's ConversationResolve {operation, turn,
// outcome} and a PromptPack event injection {event, context}. withNode adds the
// nodeId (and interruptId) fields of the :resolveInterrupt alias.
func decodeResolveBody(body []byte, withNode bool) (*resolveBody, error) {
	if body == nil {
		return nil, badRequest("request body is required: {\"resumeValue\": ...}")
	}
	var fields map[string]json.RawMessage
	if err := decodeStrict(body, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, badRequest("the body must be a JSON object")
	}
	var rb resolveBody
	if withNode {
		raw, ok := fields["nodeId"]
		if !ok {
			return nil, badRequest("nodeId is required").with("field", "nodeId")
		}
		if err := json.Unmarshal(raw, &rb.NodeID); err != nil {
			return nil, badRequest("nodeId must be a string").with("field", "nodeId")
		}
		if err := validateID("nodeId", rb.NodeID); err != nil {
			return nil, err
		}
		delete(fields, "nodeId")
		if raw, ok := fields["interruptId"]; ok {
			if err := json.Unmarshal(raw, &rb.InterruptID); err != nil {
				return nil, badRequest("interruptId must be a string").with("field", "interruptId")
			}
			delete(fields, "interruptId")
		}
	}
	if rv, ok := fields["resumeValue"]; ok {
		for k := range fields {
			if k != "resumeValue" {
				return nil, badRequest("unknown field %q: the body is {\"resumeValue\": ...}", k).with("field", k)
			}
		}
		rb.ResumeValue = rv
		return &rb, nil
	}
	if len(fields) == 0 {
		return nil, badRequest("resumeValue is required").with("field", "resumeValue")
	}
	shapes := [][]string{{"operation", "turn", "outcome"}, {"event", "context"}}
	for _, allowed := range shapes {
		if keysWithin(fields, allowed) && fields[allowed[0]] != nil {
			rest, _ := json.Marshal(fields)
			rb.ResumeValue = rest
			return &rb, nil
		}
	}
	for k := range fields {
		return nil, badRequest("unknown field %q: send {\"resumeValue\": ...}", k).with("field", k)
	}
	return nil, badRequest("resumeValue is required")
}

func keysWithin(m map[string]json.RawMessage, allowed []string) bool {
	for k := range m {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return false
		}
	}
	return true
}

func (s *Server) handleResolve(c echo.Context) error {
	id, body, err := s.runAndBody(c)
	if err != nil {
		return err
	}
	node := c.Param("nodeId")
	if err := validateID("nodeId", node); err != nil {
		return err
	}
	rb, err := decodeResolveBody(body, false)
	if err != nil {
		return err
	}
	rb.NodeID = node
	return s.resolve(c, principalOf(c), id, rb, "rest")
}

func (s *Server) handleResolveAlias(c echo.Context) error {
	id, body, err := s.runAndBody(c)
	if err != nil {
		return err
	}
	rb, err := decodeResolveBody(body, true)
	if err != nil {
		return err
	}
	return s.resolve(c, principalOf(c), id, rb, "rest")
}

// handleResolveLegacy serves POST /v1/runs/{runId}/approvals/{nodeId} with a bare
// ApprovalData body ({action, ...}), which becomes the resume value as a whole.
func (s *Server) handleResolveLegacy(c echo.Context) error {
	id, body, err := s.runAndBody(c)
	if err != nil {
		return err
	}
	node := c.Param("nodeId")
	if err := validateID("nodeId", node); err != nil {
		return err
	}
	if body == nil {
		return badRequest("request body is required: {\"action\": \"accept\"}")
	}
	var fields map[string]json.RawMessage
	if err := decodeStrict(body, &fields); err != nil {
		return err
	}
	if _, ok := fields["action"]; !ok {
		if _, ok := fields["decision"]; !ok {
			return badRequest("action is required").with("field", "action")
		}
	}
	rv, _ := json.Marshal(fields)
	return s.resolve(c, principalOf(c), id, &resolveBody{NodeID: node, ResumeValue: rv}, "rest")
}

// runLock serialises resolves of one run inside this process.
type runLock struct {
	ch   chan struct{}
	refs int
}

func (s *Server) lockRun(ctx context.Context, runID string) (func(), error) {
	s.locksMu.Lock()
	l := s.locks[runID]
	if l == nil {
		l = &runLock{ch: make(chan struct{}, 1)}
		s.locks[runID] = l
	}
	l.refs++
	s.locksMu.Unlock()
	release := func() {
		s.locksMu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(s.locks, runID)
		}
		s.locksMu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

func (s *Server) requestID(c echo.Context, tenant, runID, nodeID string) string {
	if k := c.Request().Header.Get(HeaderIdempotencyKey); k != "" {
		sum := sha256.Sum256([]byte("openwop:resolve\x00" + tenant + "\x00" + runID + "\x00" + nodeID + "\x00" + k))
		return workflows.IdempotentRequestPrefix + hex.EncodeToString(sum[:16])
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req-" + hex.EncodeToString(b[:])
}

// resolve validates a resolve with the workflow's own query, signals it, and waits
// briefly for the workflow to apply it. Racing resolves of one run are serialised in
// this process, so the loser's validation sees the interrupt resolved and gets 409;
// across API processes the workflow de-duplicates and the later signal is ignored.
func (s *Server) resolve(c echo.Context, p *principal, runID string, rb *resolveBody, via string) error {
	if len(bytes.TrimSpace(rb.ResumeValue)) == 0 {
		rb.ResumeValue = json.RawMessage("null")
	}
	if n := int64(len(rb.ResumeValue)); n > s.cfg.MaxTurnBytes {
		return apiErr(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			"the resume value is %d bytes; a turn holds at most %d bytes (maxTurnBytes, WOP_MAX_TURN_BYTES)", n, s.cfg.MaxTurnBytes).
			with("limit", "maxTurnBytes").with("maxBytes", s.cfg.MaxTurnBytes).with("bytes", n)
	}
	ctx := c.Request().Context()
	unlock, err := s.lockRun(ctx, runID)
	if err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "request cancelled while waiting for a concurrent resolve", Cause: err}
	}
	defer unlock()
	// One query answers everything before the signal: the workflow's own validation
	// (unknown node, bad value, closed conversation, already resolved, cancelled run),
	// the run's tenant, and the last event sequence the resolve's effect will follow.
	tenant, resolvedBy := "", "token"
	if p != nil {
		tenant, resolvedBy = p.Tenant, p.KeyID
	}
	req := workflows.ResolveRequest{
		RequestID: s.requestID(c, tenant, runID, rb.NodeID), NodeID: rb.NodeID, InterruptID: rb.InterruptID,
		ResumeValue: rb.ResumeValue, ResolvedBy: resolvedBy, ReceivedAtMs: s.cfg.Now().UnixMilli(), Via: via,
	}
	v, err := s.validateResolve(ctx, runID, req)
	if err != nil {
		return s.temporalErr(err, runID)
	}
	var check workflows.ResolveCheck
	if err := v.Get(&check); err != nil {
		return fmt.Errorf("decoding the resolve check of run %s: %w", runID, err)
	}
	if p != nil && check.Tenant != p.Tenant {
		return notFound("run %q not found", runID)
	}
	if check.Replayed {
		// The same Idempotency-Key again: the first request was accepted; answer as then.
		return c.JSON(http.StatusOK, map[string]string{"runId": runID, "nodeId": rb.NodeID, "status": orRunning(check.RunStatus)})
	}
	if check.CurrentStatus == workflows.StatusCancelled || check.CurrentStatus == workflows.StatusCancelling {
		return apiErr(http.StatusGone, CodeInterruptCancelled, "run %s was cancelled; its interrupts are void", runID)
	}
	if !check.OK {
		return checkError(&check)
	}
	if err := s.tc.SignalWorkflow(ctx, runID, "", workflows.ResolveSignal, req); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return s.closedResolveError(ctx, runID)
		}
		return s.temporalErr(err, runID)
	}
	s.awaitConsumed(ctx, runID, check.LastSequence)
	s.log.Info("Interrupt resolved", "runId", runID, "nodeId", rb.NodeID, "via", via, "requestId", req.RequestID)
	return c.JSON(http.StatusOK, map[string]string{"runId": runID, "nodeId": rb.NodeID, "status": orRunning(check.RunStatus)})
}

// orRunning is a resolve's answered run status, running when the check named none.
func orRunning(status string) string {
	if status == "" {
		return workflows.StatusRunning
	}
	return status
}

// validateResolve asks the workflow to check req. A query Temporal could not deliver in
// time is asked again while validateBudget lasts: it has no effect, and the usual cause
// is passing — a worker that just stopped still holds the run in its sticky queue until
// the server falls back to the run's task queue. The client waits rather than gets 503.
func (s *Server) validateResolve(ctx context.Context, runID string, req workflows.ResolveRequest) (converter.EncodedValue, error) {
	deadline := time.Now().Add(validateBudget)
	for {
		v, err := s.tc.QueryWorkflow(ctx, runID, "", workflows.ValidateResolveQuery, req)
		if err == nil || !isTransient(err) && !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// validateBudget bounds how long a resolve keeps asking a workflow that does not answer.
const validateBudget = 30 * time.Second

// awaitConsumed waits (bounded) until the run's log grows past lastSeq, which is how
// the workflow acknowledges a resolve it applied.
func (s *Server) awaitConsumed(ctx context.Context, runID string, lastSeq int64) {
	wctx, cancel := context.WithTimeout(ctx, consumeWait)
	defer cancel()
	f := s.follow(wctx, runID, lastSeq)
	defer f.close()
	_, _, _, _ = f.next(wctx, nil)
}

// checkError maps a failed ResolveCheck to the envelope.
func checkError(ch *workflows.ResolveCheck) *Error {
	status := ch.Status
	if status < 400 || status > 599 {
		status = http.StatusBadRequest
	}
	code := ch.Code
	if code == "" {
		code = codeForStatus(status)
	}
	msg := ch.Message
	if msg == "" {
		msg = "the resolve was rejected by the run"
	}
	e := apiErr(status, code, "%s", msg)
	if len(ch.Details) > 0 {
		var d map[string]any
		if json.Unmarshal(ch.Details, &d) == nil && d != nil {
			e.Details = d
		}
	}
	return e
}

// findInterrupt returns the pending interrupt a token names, if still pending.
func findInterrupt(snap *workflows.Snapshot, cl *tokenClaims) *workflows.PendingInterrupt {
	for i := range snap.Interrupts {
		pi := &snap.Interrupts[i]
		if pi.NodeID == cl.NodeID && pi.InterruptID == cl.InterruptID {
			return pi
		}
	}
	if pi := snap.Interrupt; pi != nil && pi.NodeID == cl.NodeID && pi.InterruptID == cl.InterruptID {
		return pi
	}
	return nil
}

// tokenTarget verifies a token and finds its pending interrupt.
func (s *Server) tokenTarget(c echo.Context) (*tokenClaims, *workflows.Snapshot, *workflows.PendingInterrupt, error) {
	cl, err := s.tokens.verify(c.Param("token"), s.cfg.Now())
	if err != nil {
		return nil, nil, nil, tokenError(err)
	}
	if validateID("runId", cl.RunID) != nil || validateID("nodeId", cl.NodeID) != nil {
		return nil, nil, nil, apiErr(http.StatusNotFound, CodeInterruptNotFound, "unknown interrupt token")
	}
	snap, err := s.snapshot(c.Request().Context(), nil, cl.RunID)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, nil, nil, apiErr(http.StatusNotFound, CodeInterruptNotFound, "unknown interrupt token")
		}
		return nil, nil, nil, err
	}
	pi := findInterrupt(snap, cl)
	if pi == nil {
		if snap.Status == workflows.StatusCancelled || snap.Status == workflows.StatusCancelling {
			return nil, nil, nil, apiErr(http.StatusGone, CodeInterruptCancelled, "the run was cancelled; this interrupt is void")
		}
		return nil, nil, nil, apiErr(http.StatusConflict, CodeInterruptResolved, "this interrupt was already resolved; tokens are single-use")
	}
	return cl, snap, pi, nil
}

func (s *Server) handleTokenGet(c echo.Context) error {
	cl, snap, pi, err := s.tokenTarget(c)
	if err != nil {
		return err
	}
	out := map[string]any{
		"runId": snap.RunID, "workflowId": snap.WorkflowID, "status": snap.Status,
		"nodeId": pi.NodeID, "interruptId": pi.InterruptID, "kind": pi.Kind, "key": pi.Key,
		"requestedAt": pi.RequestedAt, "intent": cl.Intent,
		"expiresAt": time.Unix(cl.Exp, 0).UTC().Format(time.RFC3339),
	}
	if len(pi.Data) > 0 {
		out["data"] = pi.Data
	}
	if len(pi.ResumeSchema) > 0 {
		out["resumeSchema"] = pi.ResumeSchema
	}
	if pi.TimeoutMs > 0 {
		out["timeoutMs"] = pi.TimeoutMs
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) handleTokenPost(c echo.Context) error {
	cl, err := s.tokens.verify(c.Param("token"), s.cfg.Now())
	if err != nil {
		return tokenError(err)
	}
	if cl.Intent != IntentResolve {
		return apiErr(http.StatusForbidden, CodeForbidden, "this token only allows inspecting the interrupt")
	}
	if _, _, _, err := s.tokenTarget(c); err != nil {
		return err
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	rb, err := decodeResolveBody(body, false)
	if err != nil {
		return err
	}
	rb.NodeID, rb.InterruptID = cl.NodeID, cl.InterruptID
	return s.resolve(c, nil, cl.RunID, rb, "token")
}
