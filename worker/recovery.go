package worker

import (
	"fmt"
	"time"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/workflows"
)

// DefaultStickyScheduleToStartTimeout is how long a workflow task waits on the sticky
// queue of the worker that holds its run in its cache before Temporal hands it to any
// worker on the shared task queue (WOP_WORKER_STICKY_TIMEOUT). The SDK's default is
// 5 s, which is how long the next turn of a conversation whose worker was killed
// waited. One second bounds that wait; the price is that a task queued longer than this
// behind a busy worker moves to another, which replays the run's history first.
const DefaultStickyScheduleToStartTimeout = time.Second

// RecoveryDispatch is what the recovery bound allows beyond the timeouts: the shared
// queue's dispatch to a live worker's waiting poll, that worker's replay of the run's
// history (kept short by continue-as-new) and the turn's own work. `wop bench --only
// recovery` measures the whole: 1.15 s p50 and 1.29 s at most from the kill to the
// reply with a 1 s sticky timeout (2 shared cores, load 4), so 250 ms was too little.
const RecoveryDispatch = 500 * time.Millisecond

// ActivityDispatch is what the bound of a lost model round allows beyond its timers:
// the dispatch of the next attempt to a live worker's waiting poll, which replays
// nothing (the attempt is an activity task). Measured on PostgreSQL (2 workers, 20
// kills in held rounds): the next attempt started 928 ms p50, 954 ms at most after the
// kill, against heartbeat timeout + timer shift + retry = 1.2 s.
const ActivityDispatch = 250 * time.Millisecond

// ServerTimerShift is the Temporal server's history.timerProcessorMaxTimeShift as the
// host runs it: the embedded server's (devserver.TimerShift; internal/stack tests
// that they agree) and deploy/dynamicconfig/wop.yaml's for a cluster. Temporal fires
// no timer sooner than this after setting it, so it is a term of every bound that
// waits on a timer set at the kill. A cluster left at Temporal's default (1 s) waits up
// to 1.8 s longer in a model round than the bound says.
const ServerTimerShift = 100 * time.Millisecond

// Recovery is how long, by the configured timeouts, a turn waits after the worker that
// holds its run dies without a word (SIGKILL, a lost machine) before another worker
// carries it on. A worker that stops cleanly hands its runs back at once (the SDK tells
// Temporal on shutdown), so only a kill waits. Where the worker died decides which
// timeout runs out:
type Recovery struct {
	// StickyScheduleToStart: the worker died while the conversation waited; the next
	// turn's workflow task is queued on the dead worker's sticky queue until this
	// passes, then on the shared queue. (Temporal stops using a sticky queue nobody
	// has polled for 10 s, so this is the wait in the first seconds after a kill.)
	StickyScheduleToStart time.Duration
	// WorkflowTaskTimeout: the worker died while running a turn's workflow task (a
	// scripted-mock model round is a local activity inside it); Temporal times the task
	// out after the run's workflow task timeout and schedules it on the shared queue.
	WorkflowTaskTimeout time.Duration
	// ModelRoundHeartbeat and ModelRoundRetry: the worker died while a model round ran
	// as an activity; Temporal notices the missing heartbeat after the heartbeat
	// timeout and schedules the next attempt after the retry policy's first interval.
	// These are a real provider's (activities.ModelRoundOptions).
	ModelRoundHeartbeat time.Duration
	ModelRoundRetry     time.Duration
	// TimerShift is ServerTimerShift: a heartbeat timeout re-armed after a heartbeat
	// fires up to this late, and a retry shorter than it waits this long.
	TimerShift time.Duration
	// HeldActivityHeartbeat and HeldActivityRetry: the worker died while it held the
	// conformance kill seam's staged work (activities.DurabilityHold); as for a model
	// round, the heartbeat timeout runs out and the retry policy's first interval
	// passes before the next attempt is scheduled (activities.DurabilityHoldOptions).
	HeldActivityHeartbeat time.Duration
	HeldActivityRetry     time.Duration
	// Dispatch is RecoveryDispatch; ActivityDispatch is ActivityDispatch.
	Dispatch         time.Duration
	ActivityDispatch time.Duration
}

// RecoveryOf is the recovery of a worker configured as cfg serving runs started with
// workflows.RunWorkflowTaskTimeout (as the API starts them).
func RecoveryOf(cfg Config) Recovery {
	sticky := cfg.StickyScheduleToStartTimeout
	if sticky <= 0 {
		sticky = sdkDefaultStickyScheduleToStartTimeout
	}
	round := activities.ModelRoundOptions(activities.ProviderOpenAI)
	hold := activities.DurabilityHoldOptions()
	return Recovery{
		StickyScheduleToStart: sticky,
		WorkflowTaskTimeout:   workflows.RunWorkflowTaskTimeout,
		ModelRoundHeartbeat:   round.HeartbeatTimeout,
		ModelRoundRetry:       round.RetryPolicy.InitialInterval,
		TimerShift:            ServerTimerShift,
		HeldActivityHeartbeat: hold.HeartbeatTimeout,
		HeldActivityRetry:     hold.RetryPolicy.InitialInterval,
		Dispatch:              RecoveryDispatch,
		ActivityDispatch:      ActivityDispatch,
	}
}

// sdkDefaultStickyScheduleToStartTimeout is the SDK's own (worker.Options).
const sdkDefaultStickyScheduleToStartTimeout = 5 * time.Second

// BetweenTurns bounds the wait of a turn sent after its worker died.
func (r Recovery) BetweenTurns() time.Duration { return r.StickyScheduleToStart + r.Dispatch }

// InWorkflowTask bounds the wait of a turn whose workflow task (and local model round)
// was running on the worker that died.
func (r Recovery) InWorkflowTask() time.Duration { return r.WorkflowTaskTimeout + r.Dispatch }

// InModelRound bounds the wait of a turn whose model round was running as an activity
// on the worker that died, until another worker starts its next attempt: the
// heartbeat timeout after the last heartbeat (its timer, re-armed at each check, fires
// up to one timer shift late), the retry's first interval (no shorter than the shift),
// and dispatch.
func (r Recovery) InModelRound() time.Duration {
	return r.ModelRoundHeartbeat + r.TimerShift + max(r.ModelRoundRetry, r.TimerShift) + r.ActivityDispatch
}

// InHeldActivity bounds the wait of the kill seam's staged work held on the worker
// that died until its run shows that it was carried on (workflow.restored): the next
// attempt of the hold is scheduled after the heartbeat timeout and the first retry
// interval, and the workflow task that records its result waits on the dead worker's
// sticky queue before it moves to the shared one.
func (r Recovery) InHeldActivity() time.Duration {
	return r.HeldActivityHeartbeat + r.HeldActivityRetry + r.StickyScheduleToStart + r.Dispatch
}

// Bound is the longest wait of a turn of a run whose model rounds are local (the
// scripted mock): the host's recovery bound for them, whatever the moment of the kill.
// BoundWithActivityRounds adds real providers' rounds.
func (r Recovery) Bound() time.Duration { return max(r.BetweenTurns(), r.InWorkflowTask()) }

// BoundWithActivityRounds is the longest wait of any turn, a model round running as an
// activity included.
func (r Recovery) BoundWithActivityRounds() time.Duration { return max(r.Bound(), r.InModelRound()) }

func (r Recovery) String() string {
	return fmt.Sprintf("recovery after a killed worker: between turns %s (sticky schedule-to-start %s), in a workflow task %s (workflow task timeout %s), in a model round activity %s (heartbeat %s + timer shift %s + retry %s + dispatch %s); %s allowed for dispatch and replay",
		r.BetweenTurns(), r.StickyScheduleToStart, r.InWorkflowTask(), r.WorkflowTaskTimeout, r.InModelRound(), r.ModelRoundHeartbeat, r.TimerShift, max(r.ModelRoundRetry, r.TimerShift), r.ActivityDispatch, r.Dispatch)
}

// Recovery classes: the kinds of work whose wait after a kill the recovery bound
// bounds, each the sum of its terms (the conformance suite's bound seam serves them,
// RFC 0158 §B.5, docs/api.md "Conformance seams").
const (
	// ClassAccepted: a run accepted while no worker polled; the first poll takes it.
	ClassAccepted = "accepted"
	// ClassBetweenTurns, ClassInWorkflowTask, ClassInModelRound: BetweenTurns,
	// InWorkflowTask and InModelRound.
	ClassBetweenTurns   = "between-turns"
	ClassInWorkflowTask = "in-workflow-task"
	ClassInModelRound   = "in-model-round"
	// ClassInHeldActivity: InHeldActivity, the work the kill seam's during-execution
	// mode stages.
	ClassInHeldActivity = "in-held-activity"
)

// RecoveryTerm is one named duration a recovery bound sums.
type RecoveryTerm struct {
	Name string
	D    time.Duration
}

// RecoveryClass is a class of work and the terms whose sum bounds its wait.
type RecoveryClass struct {
	Name  string
	Terms []RecoveryTerm
}

// Bound is the sum of the class's terms.
func (c RecoveryClass) Bound() time.Duration {
	var d time.Duration
	for _, t := range c.Terms {
		d += t.D
	}
	return d
}

// Classes are r's bounds per class of work, each spelled out as its terms.
func (r Recovery) Classes() []RecoveryClass {
	dispatch := RecoveryTerm{"dispatch", r.Dispatch}
	return []RecoveryClass{
		{ClassAccepted, []RecoveryTerm{dispatch}},
		{ClassBetweenTurns, []RecoveryTerm{{"stickyScheduleToStart", r.StickyScheduleToStart}, dispatch}},
		{ClassInWorkflowTask, []RecoveryTerm{{"workflowTaskTimeout", r.WorkflowTaskTimeout}, dispatch}},
		{ClassInModelRound, []RecoveryTerm{{"modelRoundHeartbeat", r.ModelRoundHeartbeat}, {"timerShift", r.TimerShift},
			{"modelRoundRetry", max(r.ModelRoundRetry, r.TimerShift)}, {"activityDispatch", r.ActivityDispatch}}},
		{ClassInHeldActivity, []RecoveryTerm{{"heldActivityHeartbeat", r.HeldActivityHeartbeat}, {"heldActivityRetry", r.HeldActivityRetry},
			{"stickyScheduleToStart", r.StickyScheduleToStart}, dispatch}},
	}
}
