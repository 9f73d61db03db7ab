package workflows

// Pausing and resuming a run (OpenWOP runs.md §Pause and resume). A pause is the
// PauseUpdate, a resume the ResumeUpdate: their validators refuse what the 409 table
// refuses (ErrTypePauseRefused, a PauseRefusal in the details; nothing in history),
// their handlers record run.paused or run.resumed, both echoing the drain policy, and
// answer with the run's status and the time.
//
//   - While paused the run's status is paused (the snapshot, WopStatus, the current
//     details), and the run holds: before its next node, before it completes, and in
//     every interrupt wait, where a resolve is refused (409 run_state_conflict,
//     details.runStatus paused; the interrupt stays pending, nothing queued is lost)
//     and a deadline that passes is acted on once the run resumes.
//   - drain-current-node (the default): the node running, or the conversation turn
//     its agent is working on, goes on to its end; then the run holds.
//   - immediate: the running attempt is cut. A core.delay stops waiting; a pack's
//     turn stops between rounds and tool calls, and the model or tool activity in
//     flight is cancelled as a cancel cancels it (packagent/pack_cancel.go), the
//     pack's state rewound to where the turn began. The cut attempt gets no node event; once the
//     run resumes, a fresh node.started (the next attempt) opens the attempt again: the
//     delay waits anew, the turn is answered anew. Waits on a person (an interrupt, a
//     tool call's approval) are not cut: they hold as under drain-current-node.
//   - Only a resume or a cancel leaves paused; a cancel of a paused run cancels it.
//   - The pause is carried across continue-as-new (carriedState.Pause), so a paused
//     run stays paused in its next execution, and lives in the run's history, so it
//     survives any worker's restart.
//
// Runs recorded before GatePauseResume never took a pause (their workers had no
// handler); the gate is asked when a run takes its first pause.

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// PauseUpdate pauses a run (PauseRequest) -> PauseResult; ResumeUpdate resumes it
// (ResumeRequest) -> PauseResult.
const (
	PauseUpdate  = "openwop.pause"
	ResumeUpdate = "openwop.resume"
)

// ErrTypePauseRefused is the ApplicationError type of a pause or resume the validator
// rejects; its details are the PauseRefusal.
const ErrTypePauseRefused = "openwop.pause-refused"

// The drain policies of a pause.
const (
	DrainCurrentNode = "drain-current-node"
	DrainImmediate   = "immediate"
)

// PauseRequest is the argument of PauseUpdate.
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
	// DrainPolicy is DrainCurrentNode ("" reads so) or DrainImmediate.
	DrainPolicy string `json:"drainPolicy,omitempty"`
	// By is who pauses (the key id).
	By string `json:"by,omitempty"`
}

// ResumeRequest is the argument of ResumeUpdate.
type ResumeRequest struct {
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// PauseResult is what PauseUpdate and ResumeUpdate return: the run's status after,
// the time of the pause or resume, and the pause's drain policy.
type PauseResult struct {
	Status      string `json:"status"`
	At          string `json:"at"`
	DrainPolicy string `json:"drainPolicy"`
}

// PauseRefusal is why a pause or resume was refused: an OpenWOP code (run_terminal,
// run_state_conflict, validation_error) and the run's status.
type PauseRefusal struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RunStatus string `json:"runStatus"`
}

// pauseState is a run's pause while it holds (carried across continue-as-new).
type pauseState struct {
	Policy string `json:"policy"`
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	At     string `json:"at"`
}

// pausing is the run's pause and the attempts of the nodes a pause cut.
type pausing struct {
	paused   *pauseState
	attempts map[string]int // nodeId -> the node's latest attempt, when a cut reopened it
}

func (p *pausing) carryInto(st *carriedState) { st.Pause, st.Attempts = p.paused, p.attempts }

func (p *pausing) restoreFrom(st *carriedState) { p.paused, p.attempts = st.Pause, st.Attempts }

// errCut is what a node attempt returns when an immediate pause cut it.
var errCut = errors.New("the running attempt was cut by an immediate pause")

// cutPending reports whether an immediate pause wants the running attempt cut.
func (r *runner) cutPending() bool {
	return r.paused != nil && r.paused.Policy == DrainImmediate
}

// pauseRefusal is the validators' answer: nil when the pause (pause set) or the resume
// may be applied.
func (r *runner) pauseRefusal(pause bool, policy string) *PauseRefusal {
	status := r.status
	if r.closing != "" {
		status = r.closing
	}
	switch {
	case r.terminal || r.closing != "":
		return &PauseRefusal{Code: protocol.CodeRunTerminal, Message: "run " + r.in.RunID + " has ended (" + status + ")", RunStatus: status}
	case pause && policy != "" && policy != DrainCurrentNode && policy != DrainImmediate:
		return &PauseRefusal{Code: protocol.CodeValidation, Message: "drainPolicy must be " + DrainCurrentNode + " or " + DrainImmediate, RunStatus: status}
	case r.cancelReq != nil:
		return &PauseRefusal{Code: protocol.CodeRunStateConflict, Message: "run " + r.in.RunID + " is being cancelled", RunStatus: status}
	case pause && r.paused != nil:
		return &PauseRefusal{Code: protocol.CodeRunStateConflict, Message: "run " + r.in.RunID + " is already paused", RunStatus: status}
	case !pause && r.paused == nil:
		return &PauseRefusal{Code: protocol.CodeRunStateConflict, Message: "run " + r.in.RunID + " is not paused (" + status + ")", RunStatus: status}
	}
	return nil
}

func refusePause(rf *PauseRefusal) error {
	return temporal.NewNonRetryableApplicationError(rf.Message, ErrTypePauseRefused, nil, *rf)
}

// registerPause registers PauseUpdate and ResumeUpdate.
func (r *runner) registerPause() error {
	if err := workflow.SetUpdateHandlerWithOptions(r.ctx, PauseUpdate, r.pause,
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, req PauseRequest) error {
			if rf := r.pauseRefusal(true, req.DrainPolicy); rf != nil {
				return refusePause(rf)
			}
			return nil
		}}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(r.ctx, ResumeUpdate, r.resume,
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, _ ResumeRequest) error {
			if rf := r.pauseRefusal(false, ""); rf != nil {
				return refusePause(rf)
			}
			return nil
		}})
}

// pause applies an accepted PauseUpdate.
func (r *runner) pause(_ workflow.Context, req PauseRequest) (PauseResult, error) {
	if rf := r.pauseRefusal(true, req.DrainPolicy); rf != nil {
		return PauseResult{}, refusePause(rf) // changed between the validator and here
	}
	if !r.changed(GatePauseResume) {
		return PauseResult{}, refusePause(&PauseRefusal{Code: protocol.CodeRunStateConflict, Message: "this run cannot be paused", RunStatus: r.status})
	}
	policy := req.DrainPolicy
	if policy == "" {
		policy = DrainCurrentNode
	}
	at := formatTime(workflow.Now(r.ctx))
	r.paused = &pauseState{Policy: policy, Reason: req.Reason, By: req.By, At: at}
	p := protocol.RunPaused{DrainPolicy: policy, PausedAt: at, Reason: req.Reason, PausedBy: req.By}
	if policy == DrainImmediate {
		p.InterruptedNodeID = r.currentNode // absent when no node is running
	}
	r.emit(protocol.EvRunPaused, "", p, "")
	r.refreshStatus()
	r.describePending()
	return PauseResult{Status: r.status, At: at, DrainPolicy: policy}, nil
}

// resume applies an accepted ResumeUpdate.
func (r *runner) resume(_ workflow.Context, req ResumeRequest) (PauseResult, error) {
	if rf := r.pauseRefusal(false, ""); rf != nil {
		return PauseResult{}, refusePause(rf)
	}
	policy := r.paused.Policy
	at := formatTime(workflow.Now(r.ctx))
	r.paused = nil
	p := protocol.RunResumed{DrainPolicy: policy, ResumedAt: at, Reason: req.Reason, ResumedBy: req.By}
	r.emit(protocol.EvRunResumed, "", p, "")
	r.refreshStatus()
	r.describePending()
	return PauseResult{Status: r.status, At: at, DrainPolicy: policy}, nil
}

// holdPaused holds the run while it is paused (errCancelled when it is cancelled).
func (r *runner) holdPaused() error {
	if r.paused == nil {
		return nil
	}
	_, err := r.await(0, func() bool { return r.paused == nil })
	return err
}

// reopenCut holds a run whose immediate pause cut node n's attempt, and once it is
// resumed opens the node's next attempt with a fresh node.started.
func (r *runner) reopenCut(n *Node) error {
	if err := r.holdPaused(); err != nil {
		return err
	}
	if r.attempts == nil {
		r.attempts = map[string]int{}
	}
	r.attempts[n.ID]++
	r.currentNode = n.ID
	r.emit(protocol.EvNodeStarted, n.ID, protocol.NodeStarted{NodeID: n.ID, TypeID: n.TypeID, Attempt: r.attempts[n.ID]}, "")
	r.refreshStatus()
	return nil
}

// pausedCheck is checkResolve's refusal of a resolve sent while the run is paused.
func (r *runner) pausedCheck() (ResolveCheck, *resolution) {
	check, res := reject(protocol.CodeRunStateConflict, "run %s is paused; resume it to resolve its interrupts", r.in.RunID)
	check.Details = mustJSON(map[string]string{"runStatus": protocol.StatusPaused})
	return check, res
}

// pausedDetails is the current details' words for a paused run.
func (r *runner) pausedDetails() string {
	if r.paused == nil {
		return ""
	}
	s := "**Paused** (" + r.paused.Policy + ") since " + r.paused.At
	if r.paused.Reason != "" {
		s += ": " + r.paused.Reason
	}
	if r.paused.By != "" {
		s += ", by " + r.paused.By
	}
	return s + ". Resume or cancel the run to go on."
}
