package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

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
	return s.resolve(c, resolveCaller{p: principalOf(c)}, id, rb, "rest")
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
	return s.resolve(c, resolveCaller{p: principalOf(c)}, id, rb, "rest")
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
	return s.resolve(c, resolveCaller{p: principalOf(c)}, id, &resolveBody{NodeID: node, ResumeValue: rv}, "rest")
}

// checkError maps a failed ResolveCheck to the envelope.
func checkError(ch *workflows.ResolveCheck) *Error {
	status := refusalStatus(ch.Status, ch.Code, ch.Unprocessable)
	code := ch.Code
	if c := lostToCancel(code); c != code {
		code, status = c, statusOf[c]
	}
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

// tokenErrorOf is tokenError under the request's major. At v2 a token that is
// malformed, unknown, or signed with a key the host does not hold is 401
// interrupt_token_invalid (identity.md §4), an expired one 410 interrupt_expired.
func tokenErrorOf(c echo.Context, err error) *Error {
	if isV2(c) && !errors.Is(err, errTokenExpired) {
		return codeErr(protocol.CodeInterruptTokenInvalid, "the interrupt token is not one this host issued, or it was not issued for an interrupt that exists")
	}
	return tokenError(err)
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

// tokenTarget verifies a token and its issuer (tokenIssuer) and finds its pending
// interrupt.
func (s *Server) tokenTarget(c echo.Context) (*tokenClaims, *workflows.Snapshot, *workflows.PendingInterrupt, error) {
	cl, err := s.tokens.verify(c.Param("token"), s.cfg.Now())
	if err != nil {
		return nil, nil, nil, tokenErrorOf(c, err)
	}
	if validateID("runId", cl.RunID) != nil || validateID("nodeId", cl.NodeID) != nil {
		return nil, nil, nil, tokenErrorOf(c, errTokenUnknown)
	}
	issuer, err := s.tokenIssuer(cl)
	if err != nil {
		return nil, nil, nil, err
	}
	snap, err := s.snapshot(c.Request().Context(), issuer, cl.RunID)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, nil, nil, tokenErrorOf(c, errTokenUnknown)
		}
		return nil, nil, nil, err
	}
	c.Set(runTenantKey, snap.Owner.Tenant)
	pi := findInterrupt(snap, cl)
	noteSpanRun(c.Request().Context(), func(n *spanRun) {
		n.runID, n.nodeID = cl.RunID, cl.NodeID
		if pi != nil {
			n.interruptKind, n.interruptID = pi.Kind, pi.InterruptID
		}
	})
	if pi != nil && pi.BearerOnly {
		return nil, nil, nil, unauthenticated("the interrupt at node %q resumes only with an authenticated call: POST /v1/runs/%s/interrupts/%s with Authorization: Bearer <api-key>", pi.NodeID, cl.RunID, pi.NodeID)
	}
	if pi == nil {
		if snap.Status == protocol.StatusCancelled || snap.Status == protocol.StatusCancelling {
			return nil, nil, nil, codeErr(CodeInterruptCancelled, "the run was cancelled; this interrupt is void")
		}
		return nil, nil, nil, codeErr(CodeInterruptResolved, "this interrupt was already resolved; tokens are single-use")
	}
	return cl, snap, pi, nil
}

func (s *Server) handleTokenGet(c echo.Context) error {
	cl, snap, pi, err := s.tokenTarget(c)
	if err != nil {
		return err
	}
	if isV2(c) {
		// v2's inspectInterruptByToken answers the InterruptPayload (closed).
		out := map[string]any{"kind": pi.Kind, "key": pi.Key, "data": objectOr(pi.Data, json.RawMessage(`{}`))}
		if len(pi.ResumeSchema) > 0 {
			out["resumeSchema"] = pi.ResumeSchema
		}
		if pi.TimeoutMs > 0 {
			out["timeoutMs"] = pi.TimeoutMs
		}
		return c.JSON(http.StatusOK, out)
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
		return tokenErrorOf(c, err)
	}
	if cl.Intent != IntentResolve {
		return codeErr(CodeForbidden, "this token only allows inspecting the interrupt")
	}
	if _, _, _, err := s.tokenTarget(c); err != nil {
		return err
	}
	if issuer, _ := s.tokenIssuer(cl); issuer == nil || !issuer.Scopes[ScopeApprovalsRespond] {
		return codeErr(CodeForbidden, "the API key this token was issued to (%s) no longer holds the %q scope", cl.Sub, ScopeApprovalsRespond).with("scopeRequired", ScopeApprovalsRespond)
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
	return s.resolve(c, resolveCaller{token: cl}, cl.RunID, rb, "token")
}
