package workflows

// The run while an agent works on a turn. From the moment a conversation applies a
// user message (or an injected event) until the agent's reply is applied, the run is
// busy with that conversation (runner.busy):
//
//   - Readers see status running: the conversation's own interrupts (the exchange and
//     the agent's event wait) do not count as what the run waits on, so the snapshot,
//     WopStatus and the waitingOn tag say running rather than waiting-approval. An approval
//     a tool call raises meanwhile is what the run waits on, and says so.
//   - The search attributes (and a parent run's status signal) learn of it only when
//     the turn waits outside the workflow task: before a model round or tool call that
//     is an activity, a yield of local rounds, a stall. A scripted mock turn that ends
//     in the task it began in adds no command; a turn on a real model adds two upserts
//     (running, and back), and the packState tag follows the pack's state at those points
//     too, so a run that waits mid-turn (an approval, a stalled provider) shows the
//     state it waits in.
//   - The resolve that started the turn is answered with the status the run has when
//     its turn is over (the run waits again, or has ended): the outcome recorded when
//     the request was applied says what the check predicted, and is corrected then.
//
// Runs recorded before this (GateTurnStatus, asked at the first turn of an
// execution) read waiting-approval through their turns, as they did.

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"
)

// statusHold is the status the search attributes last showed while the snapshot shows
// running for a busy turn that has not waited outside its workflow task yet.
type statusHold struct {
	on    bool
	shown string
}

// agentTurn runs fn, one turn of c's agent, with the run busy on c (when the run takes
// the path of GateTurnStatus). The caller applies the reply and then calls endTurn. A
// turn an immediate pause cut (errCut) is taken anew, as the node's next attempt, once
// the run resumes (pause.go).
func (r *runner) agentTurn(c *Conversation, fn func() (AgentReply, error)) (AgentReply, error) {
	for {
		rep, err := r.busyTurn(c, fn)
		if !errors.Is(err, errCut) {
			return rep, err
		}
		r.refreshStatus()
		r.describePending()
		if err := r.reopenCut(c.node); err != nil {
			return AgentReply{}, err
		}
	}
}

// busyTurn runs fn with the run busy on c.
func (r *runner) busyTurn(c *Conversation, fn func() (AgentReply, error)) (AgentReply, error) {
	if !r.changed(GateTurnStatus) {
		return fn()
	}
	r.liveStatus = true
	r.busy, r.busyShown = c, false
	r.taskMark = workflow.Now(r.ctx)
	r.refreshStatus()
	rep, err := fn()
	r.busy, r.busyShown = nil, false
	return rep, err
}

// endTurn refreshes the status once the turn's reply is applied (the run waits on its
// conversation again, or goes on past it).
func (r *runner) endTurn() {
	if r.liveStatus {
		r.refreshStatus()
		r.describePending()
	}
}

// showBusy publishes the busy turn's status (running, and what else the run waits on)
// before the turn waits outside the workflow task.
func (r *runner) showBusy() {
	if r.busy == nil || r.busyShown {
		return
	}
	r.busyShown = true
	if r.hold.on {
		r.setStatus(r.status)
	}
	r.describePending()
}

// waiting is what the run waits on: its pending interrupts but those of the
// conversation its agent is busy with.
func (r *runner) waiting() []*interrupt {
	if r.busy == nil {
		return r.pending
	}
	var out []*interrupt
	for _, it := range r.pending {
		if it != r.busy.it && it != r.busy.agentIt {
			out = append(out, it)
		}
	}
	return out
}

// startTurnRequest notes the request whose turn the run is about to take.
func (r *runner) startTurnRequest(req ResolveRequest) {
	if r.liveStatus || r.changed(GateTurnStatus) {
		r.liveStatus = true
		r.turnReqs = append(r.turnReqs[:0], req.RequestID)
	}
}

// inTurn reports whether the request with id started the turn the run is busy with,
// or was applied during it.
func (r *runner) inTurn(id string) bool {
	return r.busy != nil && id != "" && slices.Contains(r.turnReqs, id)
}

// settleTurnOutcome records, in the outcomes of the requests of the turn that has
// ended, the status the run has now (status, when the run is ending with it).
func (r *runner) settleTurnOutcome(status string) {
	if len(r.turnReqs) == 0 || r.busy != nil {
		return
	}
	for _, id := range r.turnReqs {
		if o := r.outcomes.find(id); o != nil && o.Applied {
			o.RunStatus = cmp.Or(status, r.status)
		}
	}
	r.turnReqs = r.turnReqs[:0]
}

// localYieldAfter is how long a turn's local rounds (the scripted mock's) run in one
// workflow task before the turn yields it (packagent/localround.go, through
// Conversation.YieldDue): queries and signals that came meanwhile are answered then.
const localYieldAfter = 100 * time.Millisecond
