package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// The RFC 0158 durability seams (v2 digest §10.3): conformance test infrastructure, not
// protocol surface. They are mounted only when Config.ConformanceSeams is set (the boot
// flag --conformance-seams), advertise nothing and are absent from the OpenAPI
// document; a host without them answers 404, which the suite reads as "no durability
// rung claimed".
const (
	DurabilityKillPath  = "/host/durability/kill"
	DurabilityBoundPath = "/host/durability/bound"
)

// KillModeAfterAccept is the one kill the seam stages: the run is accepted (its start
// is in Temporal's store) while no worker polls, then the process dies.
const KillModeAfterAccept = "after-accept"

// ConformanceSeams are the seams a process with --conformance-seams serves.
type ConformanceSeams struct {
	// Recovery is the declared recovery bound, per class: what GET
	// /host/durability/bound serves. Each class's bound is the sum of its terms.
	Recovery []RecoveryClass
	// HoldDispatch stops this process's worker, so that a run started next is accepted
	// and not dispatched. Nil with Kill nil.
	HoldDispatch func()
	// Kill ends the process the way a lost machine does (SIGKILL: no cleanup, no
	// shutdown call to Temporal); a supervisor starts it again. Nil: the process runs
	// no worker to kill (wop api) and POST /host/durability/kill is not served.
	Kill func()
	// KillClass is the recovery class (of Recovery) of the run the kill seam stages.
	KillClass string
}

// RecoveryClass is one class of work and the terms its recovery bound sums.
type RecoveryClass struct {
	Class string         `json:"class"`
	Bound int64          `json:"bound"` // milliseconds, the sum of Terms
	Terms []RecoveryTerm `json:"terms"`
}

// RecoveryTerm is one named duration of a recovery bound, in milliseconds.
type RecoveryTerm struct {
	Name string `json:"name"`
	Ms   int64  `json:"ms"`
}

// NewRecoveryClass is the class named name whose bound is the sum of terms.
func NewRecoveryClass(name string, terms ...RecoveryTerm) RecoveryClass {
	c := RecoveryClass{Class: name, Terms: terms}
	for _, t := range terms {
		c.Bound += t.Ms
	}
	return c
}

// Term is a RecoveryTerm of d, rounded up to the millisecond.
func Term(name string, d time.Duration) RecoveryTerm {
	return RecoveryTerm{Name: name, Ms: int64((d + time.Millisecond - 1) / time.Millisecond)}
}

// killDelay lets the seam's answer leave the socket before the process dies.
const killDelay = 50 * time.Millisecond

// mountSeams adds the seams' routes (authenticated, never in the route table, so the
// OpenAPI document and the path manifest do not list them).
func (s *Server) mountSeams(e *echo.Echo) {
	seams := s.cfg.ConformanceSeams
	if seams == nil {
		return
	}
	e.GET(DurabilityBoundPath, s.handleDurabilityBound, s.authenticated(ScopeManifestRead))
	if seams.Kill == nil {
		return
	}
	e.GET(DurabilityKillPath, s.handleDurabilityProbe, s.authenticated(ScopeRunsCreate))
	e.POST(DurabilityKillPath, s.handleDurabilityKill, s.authenticated(ScopeRunsCreate))
}

func (s *Server) handleDurabilityBound(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"classes": s.cfg.ConformanceSeams.Recovery})
}

// handleDurabilityProbe is the seam's probe: it says what POST stages and fires nothing.
func (s *Server) handleDurabilityProbe(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"modes": []string{KillModeAfterAccept}, "boundPath": DurabilityBoundPath})
}

// handleDurabilityKill stages mode after-accept: it stops the worker, starts a run of
// workflowId for the caller (accepted: the start is in Temporal's store), answers its
// runId, class and bound, then kills the process. The restarted process's worker
// dispatches the run. Once the worker is stopped the process is killed whatever
// follows, so a failed start never leaves it serving without a worker. The other modes
// are refused by name: during-execution needs a resumption marker the run workflow does
// not emit, duplicate-delivery an effectful staged run aimed at the suite's receiver
// (docs/api.md, "Conformance seams").
func (s *Server) handleDurabilityKill(c echo.Context) error {
	var req struct {
		Mode       string `json:"mode"`
		WorkflowID string `json:"workflowId"`
		// EffectURL is duplicate-delivery's receiver; that mode is not staged.
		EffectURL string `json:"effectUrl"`
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Mode != KillModeAfterAccept {
		return badRequest("mode %q is not staged by this host; it stages %q", req.Mode, KillModeAfterAccept).with("field", "mode")
	}
	class, ok := s.recoveryClass(s.cfg.ConformanceSeams.KillClass)
	if !ok {
		return codeErr(CodeInternal, "no recovery class %q is declared", s.cfg.ConformanceSeams.KillClass)
	}
	p := principalOf(c)
	def, ok := s.cat.Definition(req.WorkflowID)
	if !ok {
		return badRequest("unknown workflowId %q", req.WorkflowID).with("field", "workflowId")
	}
	runID := newRunID(s.cfg.Now())
	in, err := s.cat.NewRunInput(workflows.RunRequest{RunID: runID, WorkflowID: def.ID, Owner: ownerOf(p), Era: protocol.EraV2})
	if err != nil {
		return runInputError(err)
	}
	seams := s.cfg.ConformanceSeams
	seams.HoldDispatch()
	defer time.AfterFunc(killDelay, seams.Kill)
	if _, err := s.startRun(c.Request().Context(), *in); err != nil {
		return fmt.Errorf("starting run %s of %s: %w", runID, def.ID, err)
	}
	s.log.Warn("Conformance seam: run accepted with dispatch held; killing the process", "runId", runID, "workflowId", def.ID)
	if err := c.JSON(http.StatusOK, map[string]any{
		"runId": runID, "mode": req.Mode, "recoveryClass": class.Class, "recoveryBoundMs": class.Bound,
	}); err != nil {
		return err
	}
	c.Response().Flush()
	return nil
}

func (s *Server) recoveryClass(name string) (RecoveryClass, bool) {
	for _, c := range s.cfg.ConformanceSeams.Recovery {
		if c.Class == name {
			return c, true
		}
	}
	return RecoveryClass{}, false
}
