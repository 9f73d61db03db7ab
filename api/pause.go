package api

// Pause and resume (runs.md §Pause and resume; openwop-host.md's optional
// POST /v1/runs/{runId}:pause and :resume): each is one Temporal Workflow Update
// (workflows.PauseUpdate, ResumeUpdate) whose validator refuses what the 409 table
// refuses, so the answer is the run's own, decided in order with its signals. A run
// that has ended is 409 run_terminal; a pause of a paused or cancelling run, a resume
// of a run that is not paused, 409 run_state_conflict; both with details.runStatus.

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// PauseRequestBody is the closed body of :pause.
type PauseRequestBody struct {
	Reason      string `json:"reason,omitempty"`
	DrainPolicy string `json:"drainPolicy,omitempty"`
}

// ResumeRequestBody is the closed body of :resume.
type ResumeRequestBody struct {
	Reason string `json:"reason,omitempty"`
}

func (s *Server) handlePause(c echo.Context) error {
	var req PauseRequestBody
	id, err := s.controlBody(c, &req)
	if err != nil {
		return err
	}
	switch req.DrainPolicy {
	case "", workflows.DrainCurrentNode, workflows.DrainImmediate:
	default:
		return badRequest("drainPolicy must be %q or %q", workflows.DrainCurrentNode, workflows.DrainImmediate).with("field", "drainPolicy")
	}
	p := principalOf(c)
	u := workflows.PauseRequest{Reason: req.Reason, DrainPolicy: req.DrainPolicy, By: p.KeyID}
	return s.runControl(c, id, workflows.PauseUpdate, u, "pausedAt")
}

func (s *Server) handleResume(c echo.Context) error {
	var req ResumeRequestBody
	id, err := s.controlBody(c, &req)
	if err != nil {
		return err
	}
	u := workflows.ResumeRequest{Reason: req.Reason, By: principalOf(c).KeyID}
	return s.runControl(c, id, workflows.ResumeUpdate, u, "resumedAt")
}

// controlBody reads the run of the path and decodes the request's closed body into v.
func (s *Server) controlBody(c echo.Context, v any) (string, error) {
	id, body, err := s.runAndBody(c)
	if err != nil {
		return "", err
	}
	if body != nil {
		if err := decodeStrict(body, v); err != nil {
			return "", err
		}
	}
	return id, nil
}

// runControl sends the update name (arg) to run id after checking the caller's tenant
// and answers 202 {runId, status, <atKey>}. An Idempotency-Key names the update, so a
// repeated request is answered with the first one's result.
func (s *Server) runControl(c echo.Context, id, name string, arg any, atKey string) error {
	p := principalOf(c)
	ctx := c.Request().Context()
	snap, err := s.snapshot(ctx, p, id)
	if err != nil {
		return err
	}
	wireID := s.wireOf(c, p.Tenant).id(id)
	if isTerminal(snap.Status) {
		return codeErr(protocol.CodeRunTerminal, "run %s has ended (%s)", wireID, snap.Status).with("runStatus", snap.Status)
	}
	opts := client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted}
	if key := c.Request().Header.Get("Idempotency-Key"); key != "" {
		opts.UpdateID = name + ":" + key
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.Guards.ResolveWait)
	defer cancel()
	var res workflows.PauseResult
	h, err := s.tc.UpdateWorkflow(wctx, opts)
	if err == nil {
		err = h.Get(wctx, &res)
	}
	if err != nil {
		return s.controlErr(ctx, p, id, wireID, err)
	}
	s.log.Info("Run control applied", "update", name, "runId", id, "keyId", p.KeyID, "status", res.Status)
	return c.JSON(http.StatusAccepted, map[string]string{"runId": wireID, "status": res.Status, atKey: res.At})
}

// controlErr maps a failed pause or resume update: the run's refusal, a run that
// ended meanwhile, or a worker without the handler (a run this host cannot pause).
func (s *Server) controlErr(ctx context.Context, p *principal, id, wireID string, err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == workflows.ErrTypePauseRefused {
		var rf workflows.PauseRefusal
		if derr := ae.Details(&rf); derr == nil && rf.Code != "" {
			return codeErr(rf.Code, "%s", rf.Message).with("runStatus", rf.RunStatus)
		}
	}
	if snap, serr := s.snapshot(ctx, p, id); serr == nil && isTerminal(snap.Status) {
		return codeErr(protocol.CodeRunTerminal, "run %s has ended (%s)", wireID, snap.Status).with("runStatus", snap.Status)
	} else if serr == nil && IsUnknownUpdate(err) {
		return codeErr(protocol.CodeRunStateConflict, "run %s is served by a worker that cannot pause it", wireID).with("runStatus", snap.Status)
	}
	return s.temporalErr(err, id)
}
