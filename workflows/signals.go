package workflows

import "go.temporal.io/sdk/workflow"

// childStatusSignal carries a ChildRun from a child run to its parent whenever the
// child's status changes, so the parent can report its child's waiting status.
const childStatusSignal = "openwop.child-status"

// IdempotentRequestPrefix starts the RequestID of a resolve sent with an
// Idempotency-Key (the API derives the rest from the key).
const IdempotentRequestPrefix = "idem-"

// drainSignals moves every buffered signal into the run's state without blocking
// (before continue-as-new, so nothing is lost).
func (r *runner) drainSignals() {
	receiveAll(workflow.GetSignalChannel(r.ctx, ResolveSignal), func(req ResolveRequest) { r.inbox = append(r.inbox, req) })
	receiveAll(workflow.GetSignalChannel(r.ctx, CancelSignal), r.requestCancel)
	receiveAll(workflow.GetSignalChannel(r.ctx, childStatusSignal), r.updateChild)
}

// receiveAll hands every signal buffered on ch to take, in arrival order, without
// blocking.
func receiveAll[T any](ch workflow.ReceiveChannel, take func(T)) {
	for {
		var v T
		if !ch.ReceiveAsync(&v) {
			return
		}
		take(v)
	}
}

// childStatus is the payload of childStatusSignal. Signals from one child may arrive
// out of order, so each carries the child's status sequence; stale ones are dropped.
type childStatus struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
	Seq    int64  `json:"seq"`
}

func (r *runner) updateChild(cs childStatus) {
	if cs.Seq <= r.childSeq[cs.RunID] {
		return
	}
	r.childSeq[cs.RunID] = cs.Seq
	cr := ChildRun{RunID: cs.RunID, Status: cs.Status}
	if r.terminal {
		for i := range r.childRuns {
			if r.childRuns[i].RunID == cr.RunID {
				r.childRuns[i].Status = cr.Status
			}
		}
		return
	}
	r.addChild(cr)
}

// receiveSignals starts the coroutine that moves signals into the run's state (setup).
func (r *runner) receiveSignals() {
	ctx := r.ctx
	// One coroutine receives every signal, on a disconnected context so it keeps
	// queueing while the run winds down after a Temporal cancellation. It wakes when any
	// of the three channels holds a signal and drains them in a fixed order (resolves,
	// cancels, child statuses), so a waiting run costs one coroutine besides its main one.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	resolveCh := workflow.GetSignalChannel(ctx, ResolveSignal)
	cancelCh := workflow.GetSignalChannel(ctx, CancelSignal)
	childCh := workflow.GetSignalChannel(ctx, childStatusSignal)
	workflow.Go(dctx, func(gctx workflow.Context) {
		for {
			_ = workflow.Await(gctx, func() bool {
				return resolveCh.Len() > 0 || cancelCh.Len() > 0 || childCh.Len() > 0
			})
			r.drainSignals()
		}
	})
}
