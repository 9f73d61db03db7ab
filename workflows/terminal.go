package workflows

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// Cancellation, failure and Temporal status (a decision): the event log is the run's
// source of truth, and its last event is run.completed, run.failed or run.cancelled.
// Temporal's close status says the same, so operators can filter on it in the UI:
//   - a completed run returns its final Snapshot (Temporal: Completed);
//   - a failed run returns a non-retryable ApplicationError whose type is the OpenWOP
//     error code and whose details are the final Snapshot (Temporal: Failed);
//   - a cancelled run — by CancelSignal, or by Temporal cancellation (the UI's Cancel
//     button, a parent's cascade) — returns a CanceledError whose details are the final
//     Snapshot (Temporal: Canceled).
// SnapshotFromError reads the Snapshot back from either error. Runs that ended before
// this (without the GateCloseStatus marker) returned their Snapshot with a nil error
// and show Completed; WopStatus is the filter that works for both.

// close returns the workflow's result for the final snapshot: the snapshot itself, or,
// for a failed or cancelled run, the error that closes the execution with that status
// and carries the snapshot.
func (r *runner) close(snap *Snapshot) (*Snapshot, error) {
	if snap.Status != protocol.StatusFailed && snap.Status != protocol.StatusCancelled {
		return snap, nil
	}
	if !r.changed(GateCloseStatus) {
		return snap, nil
	}
	if snap.Status == protocol.StatusCancelled {
		return nil, temporal.NewCanceledError(snap)
	}
	code, msg := protocol.CodeRunFailed, "the run failed"
	if snap.Error != nil {
		code, msg = cmp.Or(snap.Error.Code, code), cmp.Or(snap.Error.Message, msg)
	}
	return nil, temporal.NewNonRetryableApplicationError(msg, code, nil, snap)
}

// SnapshotFromError returns the final Snapshot a failed or cancelled run closed with
// (see close), unwrapping a child workflow's error; ok is false for any other error.
func SnapshotFromError(err error) (snap *Snapshot, ok bool) {
	// Details decode into a *Snapshot: from payloads, and from the values the SDK's
	// test environment keeps as they were (a *Snapshot).
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.HasDetails() && ae.Details(&snap) == nil && snap != nil && snap.Status == protocol.StatusFailed {
		return snap, true
	}
	snap = nil
	var ce *temporal.CanceledError
	if errors.As(err, &ce) && ce.HasDetails() && ce.Details(&snap) == nil && snap != nil && snap.Status == protocol.StatusCancelled {
		return snap, true
	}
	return nil, false
}

func (r *runner) durationMs() int64 {
	d := workflow.Now(r.ctx).Sub(r.startedAt).Milliseconds()
	if d < 0 {
		return 0
	}
	return d
}

// complete ends the run successfully.
func (r *runner) complete() (*Snapshot, error) {
	outs := map[string]json.RawMessage{}
	// The run's outputs are the outputs of its sink nodes (no outgoing edge).
	hasOut := map[string]bool{}
	for _, e := range r.in.Definition.Edges {
		hasOut[e.SourceNodeID] = true
	}
	for _, rec := range r.nodes {
		if rec.State == "completed" && !hasOut[rec.NodeID] {
			for _, k := range slices.Sorted(maps.Keys(rec.Outputs)) {
				outs[k] = rec.Outputs[k]
			}
		}
	}
	r.emit(protocol.EvRunCompleted, "", protocol.RunCompleted{Outputs: outs, DurationMs: r.durationMs()}, r.lastEventIDAny())
	return r.finish(protocol.StatusCompleted)
}

// fail ends the run as failed.
func (r *runner) fail(nodeID string, e protocol.RunError) (*Snapshot, error) {
	r.err = &e
	r.failedNode = nodeID
	p := protocol.RunFailed{Error: e, DurationMs: r.durationMs(), FailedNodeID: nodeID}
	r.emit(protocol.EvRunFailed, "", p, r.lastEventIDAny())
	return r.finish(protocol.StatusFailed)
}

// cancelled ends the run as cancelled: pending interrupts are invalidated, the running
// node gets node.cancelled, and run.cancelled is the last event. It runs on a
// disconnected context so it completes after a Temporal cancellation too.
func (r *runner) cancelled(nodeID string) (*Snapshot, error) {
	dctx, _ := workflow.NewDisconnectedContext(r.ctx)
	r.ctx = dctx
	req := r.cancelReq
	if req == nil {
		req = &CancelRequest{Reason: "cancelled"}
		r.cancelReq = req
	}
	for _, it := range r.pending {
		it.cancelTimer()
	}
	r.pending = nil
	if nodeID != "" {
		if rec := r.record(nodeID); rec != nil && rec.State == "running" {
			rec.State = "cancelled"
			r.emit(protocol.EvNodeCancelled, nodeID, protocol.NodeCancelled{NodeID: nodeID, Reason: req.Reason}, "")
		}
	}
	p := protocol.RunCancelled{Reason: req.Reason, DurationMs: r.durationMs(), CancelledBy: req.CancelledBy}
	if req.Reason == "parent-cancelled" {
		p.ParentRunID = r.in.ParentRunID // absent on a run without a parent
	}
	r.emit(protocol.EvRunCancelled, "", p, r.lastEventIDAny())
	return r.finish(protocol.StatusCancelled)
}

func (r *runner) lastEventIDAny() string { return r.lastID }

func (r *runner) finish(status string) (*Snapshot, error) {
	// The terminal event is written; while Temporal takes the last webhook notices the
	// run already reads as ended (snapshot, events, resolve checks), and the commands
	// that close it follow.
	r.closing = status
	r.settleTurnOutcome(status)
	r.completedAt = formatTime(workflow.Now(r.ctx))
	r.flushNotices()
	r.terminal = true
	r.pending = nil
	r.currentNode = ""
	r.setStatus(status)
	r.setDetails("")
	r.refuseQueued()
	r.countRunEnded(status)
	return r.snapshot(), nil
}
