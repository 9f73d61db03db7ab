package api

import (
	"cmp"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/activities"
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

// The kills the seam stages. KillModeAfterAccept: the run is accepted (its start is
// in Temporal's store) while no worker polls, then the process dies.
// KillModeDuringExecution: the run starts and its first node holds in
// activities.DurabilityHold, whose first attempt kills the process; the attempt that
// follows on the restarted process records workflow.restored (workflows/seam.go).
// KillModeDuplicateDelivery: the run's first node performs one outbound effect aimed
// at the request's effectUrl (activities.DurabilityEffect), whose first attempt
// records the outcome and kills the process, so the work is delivered again.
const (
	KillModeAfterAccept       = "after-accept"
	KillModeDuringExecution   = workflows.SeamDuringExecution
	KillModeDuplicateDelivery = workflows.SeamDuplicateDelivery
)

// killModes are the modes the probe lists.
var killModes = []string{KillModeAfterAccept, KillModeDuringExecution, KillModeDuplicateDelivery}

// seamEffectWorkflow is the work duplicate-delivery stages, which the suite leaves to
// the host (it sends no workflowId): the conformance-noop fixture, whose one node
// performs the effect.
const seamEffectWorkflow = "conformance-noop"

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
	// KillClass is the recovery class (of Recovery) of the run after-accept stages;
	// HeldClass that of the work during-execution stages.
	KillClass, HeldClass string

	// answering counts the seam's answers being written; KillHeld waits them out.
	answering atomic.Int32
}

// answerWait bounds how long KillHeld waits for the seam's answers to leave.
const answerWait = 5 * time.Second

// KillHeld is the kill of during-execution, which the held work calls in its first
// attempt (worker.Config.DurabilityKill): the run may reach its hold before the seam
// has answered the run's id, so it waits until no answer is being written (at most
// answerWait), then lets the answer leave the socket and calls Kill.
func (s *ConformanceSeams) KillHeld() {
	for deadline := time.Now().Add(answerWait); s.answering.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(killDelay)
	s.Kill()
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
// OpenAPI document and the path manifest do not list them): the durability seams and,
// when webhooks are served, the two-tenant surface seam (surfaceseam.go).
func (s *Server) mountSeams(e *echo.Echo) {
	seams := s.cfg.ConformanceSeams
	if seams == nil {
		return
	}
	e.GET(DurabilityBoundPath, s.handleDurabilityBound, s.authenticated(ScopeManifestRead))
	if s.webhooksEnabled() {
		e.POST(SurfaceSeamPath, s.handleSurfaceSeam, s.authenticated(ScopeWebhooksManage))
	}
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
	return c.JSON(http.StatusOK, map[string]any{"modes": killModes, "boundPath": DurabilityBoundPath})
}

// handleDurabilityKill stages a kill of the run of workflowId it starts for the caller
// and answers {runId, mode, recoveryClass, recoveryBoundMs}.
//
// after-accept stops the worker, starts the run (accepted: the start is in Temporal's
// store), answers, then kills the process; the restarted process's worker dispatches
// the run. Once the worker is stopped the process is killed whatever follows, so a
// failed start never leaves it serving without a worker.
//
// during-execution starts the run with RunInput.Seam set and answers; it kills
// nothing itself: the run's first node holds in DurabilityHold, whose first attempt
// kills the process (KillHeld, once this answer has left).
//
// duplicate-delivery starts a run of seamEffectWorkflow (or of workflowId, when the
// caller names one) whose first node POSTs once to effectUrl (a destination the
// webhook egress guard admits), records the outcome and kills the process; the
// attempt that follows on the restarted process returns the recorded outcome.
func (s *Server) handleDurabilityKill(c echo.Context) error {
	var req struct {
		Mode       string `json:"mode"`
		WorkflowID string `json:"workflowId"`
		// EffectURL is duplicate-delivery's destination of the staged effect.
		EffectURL string `json:"effectUrl"`
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	seams := s.cfg.ConformanceSeams
	className := ""
	switch req.Mode {
	case KillModeAfterAccept:
		className = seams.KillClass
	case KillModeDuringExecution:
		className = seams.HeldClass
	case KillModeDuplicateDelivery:
		className = seams.HeldClass
		if req.EffectURL == "" {
			return badRequest("mode %q needs effectUrl, the destination of the effect it stages", req.Mode).with("field", "effectUrl")
		}
		if err := activities.CheckWebhookURL(req.EffectURL, s.cfg.WebhookAllowPrivate); err != nil {
			return badRequest("effectUrl: %v", err).with("field", "effectUrl")
		}
		req.WorkflowID = cmp.Or(req.WorkflowID, seamEffectWorkflow)
	default:
		return badRequest("mode %q is not staged by this host; it stages %q, %q and %q", req.Mode,
			KillModeAfterAccept, KillModeDuringExecution, KillModeDuplicateDelivery).with("field", "mode")
	}
	if req.Mode != KillModeDuplicateDelivery && req.EffectURL != "" {
		return badRequest("effectUrl is duplicate-delivery's; mode %q performs no effect", req.Mode).with("field", "effectUrl")
	}
	class, ok := s.recoveryClass(className)
	if !ok {
		return codeErr(CodeInternal, "no recovery class %q is declared", className)
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
	if req.Mode == KillModeAfterAccept {
		seams.HoldDispatch()
		defer time.AfterFunc(killDelay, seams.Kill)
	} else {
		in.Seam, in.SeamEffectURL = req.Mode, req.EffectURL
		seams.answering.Add(1)
		defer seams.answering.Add(-1)
	}
	if _, err := s.startRun(c.Request().Context(), *in); err != nil {
		return fmt.Errorf("starting run %s of %s: %w", runID, def.ID, err)
	}
	switch req.Mode {
	case KillModeAfterAccept:
		s.log.Warn("Conformance seam: run accepted with dispatch held; killing the process", "runId", runID, "workflowId", def.ID)
	case KillModeDuplicateDelivery:
		s.log.Warn("Conformance seam: run started to perform one effect; the attempt that performs it kills the process", "runId", runID, "workflowId", def.ID)
	default:
		s.log.Warn("Conformance seam: run started to hold its first node; its hold kills the process", "runId", runID, "workflowId", def.ID)
	}
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
