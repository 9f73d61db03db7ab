package activities

// DurabilityHold is the staged work of the conformance kill seam's during-execution
// mode (RFC 0158 §B.4, docs/api.md "Conformance seams"): a run started by the seam
// holds its first node in this activity while the process that runs it dies, and the
// attempt that follows on the restarted process tells the run it was carried over.
//
// Attempt 1 heartbeats the incarnation of its process, asks the process to die
// (Config.DurabilityKill) and holds until it does. Temporal notices the missing
// heartbeat after DurabilityHoldHeartbeat and schedules the next attempt after
// DurabilityHoldRetry; that attempt, on whichever worker takes it, reads the last
// heartbeat (the incarnation it replaces) and returns at once.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The hold's timing, which the recovery class of the work it stages sums
// (worker.ClassInHeldActivity): the server schedules the next attempt
// DurabilityHoldHeartbeat after the last heartbeat of a dead process, and it runs
// DurabilityHoldRetry later.
const (
	DurabilityHoldHeartbeat = 2 * time.Second
	DurabilityHoldRetry     = 200 * time.Millisecond
	// DurabilityHoldAttempts bounds the attempts: a seam that kills a process per
	// attempt never lets the run end otherwise.
	DurabilityHoldAttempts = 5
	// durabilityHoldStartToClose bounds an attempt whose process did not die.
	durabilityHoldStartToClose = 30 * time.Second
)

// durabilityBeat is how often attempt 1 heartbeats (a quarter of the timeout, so a
// live hold is never taken for a dead one); tests keep it.
var durabilityBeat = DurabilityHoldHeartbeat / 4

// ErrTypeSeamsOff fails a hold on a worker whose process serves no conformance seams:
// nothing may kill it, so the staged run fails closed instead of holding.
const ErrTypeSeamsOff = "ConformanceSeamsOff"

// DurabilityHoldOptions are the activity options of DurabilityHold.
func DurabilityHoldOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: durabilityHoldStartToClose,
		HeartbeatTimeout:    DurabilityHoldHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: DurabilityHoldRetry, BackoffCoefficient: 2, MaximumInterval: time.Second,
			MaximumAttempts: DurabilityHoldAttempts, NonRetryableErrorTypes: []string{ErrTypeSeamsOff},
		},
	}
}

// DurabilityHoldInput names the run and node the hold is staged in.
type DurabilityHoldInput struct {
	RunID  string `json:"runId"`
	NodeID string `json:"nodeId"`
}

// DurabilityHoldResult is what the attempt that returns knows: its number, the
// incarnation of the process it runs in, and the incarnation whose hold it replaces
// (empty when that one never heartbeated).
type DurabilityHoldResult struct {
	Attempt             int    `json:"attempt"`
	Incarnation         string `json:"incarnation"`
	ReplacedIncarnation string `json:"replacedIncarnation,omitempty"`
}

// DurabilityHeartbeat is the hold's heartbeat: the attempt that sent it and the
// incarnation of its process.
type DurabilityHeartbeat struct {
	Attempt     int    `json:"attempt"`
	Incarnation string `json:"incarnation"`
}

// NewIncarnation is an opaque per-boot token: 16 random bytes in hex. A process makes
// one when it starts and names itself by it (Config.Incarnation).
func NewIncarnation() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// DurabilityHold holds the seam's staged work across the death of its process.
func (a *Activities) DurabilityHold(ctx context.Context, in DurabilityHoldInput) (*DurabilityHoldResult, error) {
	info := activity.GetInfo(ctx)
	attempt := int(info.Attempt)
	if activity.HasHeartbeatDetails(ctx) {
		// An earlier attempt heartbeated: this one replaces it, whatever the attempt
		// counter of the test environment says.
		var last DurabilityHeartbeat
		if err := activity.GetHeartbeatDetails(ctx, &last); err == nil {
			res := &DurabilityHoldResult{Attempt: max(attempt, last.Attempt+1), Incarnation: a.incarnation, ReplacedIncarnation: last.Incarnation}
			a.logger.Warn("Conformance seam: the held work resumed", "runId", in.RunID, "nodeId", in.NodeID,
				"attempt", res.Attempt, "incarnation", res.Incarnation, "replacedIncarnation", res.ReplacedIncarnation)
			return res, nil
		}
	}
	if attempt > 1 {
		// The process before died before its heartbeat reached the server.
		a.logger.Warn("Conformance seam: the held work resumed", "runId", in.RunID, "nodeId", in.NodeID, "attempt", attempt, "incarnation", a.incarnation)
		return &DurabilityHoldResult{Attempt: attempt, Incarnation: a.incarnation}, nil
	}
	if a.durabilityKill == nil {
		return nil, temporal.NewApplicationErrorWithOptions("conformance seams are off: this worker's process may not be killed, so it holds no staged work",
			ErrTypeSeamsOff, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
	beat := DurabilityHeartbeat{Attempt: attempt, Incarnation: a.incarnation}
	// The SDK sends the first heartbeat before it returns: the next attempt learns
	// whose hold it replaces even when the kill follows at once.
	activity.RecordHeartbeat(ctx, beat)
	a.logger.Warn("Conformance seam: work held in its first attempt; killing the process", "runId", in.RunID, "nodeId", in.NodeID, "incarnation", a.incarnation)
	return nil, a.killAndHold(ctx, beat)
}

// killAndHold asks the process to die and holds the attempt, heartbeating beat, until
// it does (the attempt never returns then) or its worker stops cleanly, which hands the
// work back: the next attempt runs on the worker that polls next, and finds beat.
func (a *Activities) killAndHold(ctx context.Context, beat any) error {
	a.durabilityKill()
	tick := time.NewTicker(durabilityBeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-activity.GetWorkerStopChannel(ctx):
			return temporal.NewApplicationError("the worker holding the staged work stopped", "DurabilityHoldHandedBack")
		case <-tick.C:
			activity.RecordHeartbeat(ctx, beat)
		}
	}
}
