package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// refreshStatus derives the run status from what it waits on (its pending interrupts,
// but those of a conversation its agent is busy with) and its child runs.
func (r *runner) refreshStatus() {
	if r.terminal || r.closing != "" {
		return
	}
	if r.cancelReq != nil {
		r.setStatus(protocol.StatusCancelling)
		return
	}
	if r.paused != nil {
		r.setStatus(protocol.StatusPaused)
		return
	}
	if waiting := r.waiting(); len(waiting) > 0 {
		best := ""
		for _, it := range waiting {
			s := statusForKind(it.Kind)
			if best == "" || s == protocol.StatusWaitingExternal {
				best = s
			}
		}
		r.setStatus(best)
		return
	}
	for _, c := range r.childRuns {
		if strings.HasPrefix(c.Status, "waiting-") {
			r.setStatus(c.Status)
			return
		}
	}
	if r.status != protocol.StatusPending || r.nextSeq() > 0 {
		r.setStatus(protocol.StatusRunning)
	}
}

// statusForKind maps an interrupt kind to the run status while it is pending.
func statusForKind(kind string) string {
	switch {
	case kind == protocol.KindApproval, kind == protocol.KindLowConfidence, strings.HasPrefix(kind, "conversation"):
		return protocol.StatusWaitingApproval
	case kind == protocol.KindExternalEvent:
		return protocol.StatusWaitingExternal
	default:
		return protocol.StatusWaitingInput
	}
}

func (r *runner) setStatus(s string) {
	if r.busy != nil && s == protocol.StatusRunning && !r.busyShown {
		// The agent works within the workflow task: readers see running at once, the
		// search attributes and a parent when the turn waits outside it (showBusy).
		if !r.hold.on {
			r.hold = statusHold{on: true, shown: r.status}
		}
		r.status = s
		return
	}
	if r.hold.on {
		r.status, r.hold = r.hold.shown, statusHold{}
	}
	changed := r.status != s
	r.status = s
	waiting := r.waiting()
	waitingOn := ""
	if len(waiting) > 0 && !r.terminal {
		it := waiting[len(waiting)-1]
		waitingOn = it.Kind + ":" + it.NodeID
	}
	if s != r.lastSAStatus || waitingOn != r.lastWaitingOn {
		r.lastSAStatus, r.lastWaitingOn = s, waitingOn
		r.upsertAttributes(r.ctx, []temporal.SearchAttributeUpdate{SAStatus.ValueSet(s)}, statusTags(waiting, r.terminal)...)
	}
	if changed && r.in.ParentRunID != "" {
		r.statusSeq++
		cr := childStatus{RunID: r.in.RunID, Status: s, Seq: r.statusSeq}
		dctx, _ := workflow.NewDisconnectedContext(r.ctx)
		workflow.SignalExternalWorkflow(dctx, r.in.ParentRunID, "", childStatusSignal, cr)
	}
}

func (r *runner) initSearchAttributes() {
	upd := []temporal.SearchAttributeUpdate{SAWorkflowID.ValueSet(r.in.Definition.ID)}
	if r.in.Owner.Tenant != "" {
		upd = append(upd, SATenant.ValueSet(r.in.Owner.Tenant))
	}
	_ = workflow.UpsertTypedSearchAttributes(r.ctx, upd...)
}

// setDetails sets the workflow's current details (shown in the Temporal UI).
func (r *runner) setDetails(text string) {
	if text == r.details {
		return
	}
	r.details = text
	workflow.SetCurrentDetails(r.ctx, text)
}

// describePending renders in words, for current details, what the run waits on (its
// pending interrupts), then the turn its agent is working on, if any: the interrupts of
// a busy conversation do not invite a message while the agent answers one (and while
// an approval its turn raised waits). Current details are no command: changing their
// words changes no history.
func (r *runner) describePending() {
	waiting := r.waiting()
	var b strings.Builder
	if p := r.pausedDetails(); p != "" {
		b.WriteString(p)
		if len(waiting) > 0 || r.busy != nil {
			b.WriteString("\n\n")
		}
	}
	for i, it := range waiting {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "**Waiting on %s** at node `%s` (interrupt `%s`, key `%s`) since %s.", it.Kind, it.NodeID, it.InterruptID, it.Key, it.RequestedAt)
		if it.ExpiresAt != "" {
			fmt.Fprintf(&b, " Times out at %s.", it.ExpiresAt)
		}
		if it.describe != "" {
			b.WriteString(" ")
			b.WriteString(it.describe)
		}
	}
	if c := r.busy; c != nil {
		if len(waiting) > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "**Working on a turn** of conversation %q (%s) at node `%s`: its agent %s is answering", c.Title, c.ID, c.NodeID, c.AgentID)
		if len(waiting) > 0 {
			b.WriteString(", and waits for the above first")
		}
		b.WriteString(".")
	}
	if r.stallDetails != "" {
		r.baseDetails = b.String() // shown after the stalls (describeRun)
		r.describeRun()
		return
	}
	r.setDetails(b.String())
}
