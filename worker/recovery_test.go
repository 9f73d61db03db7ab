package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/workflows"
)

// The recovery bound is what the timeouts in force add up to: the defaults give 1.5 s for
// a turn sent after its worker died and 10.5 s for one whose workflow task it held, and a
// different configuration a different bound.
func TestRecoveryBoundIsWhatTheTimeoutsImply(t *testing.T) {
	r := RecoveryOf(DefaultConfig())
	assert.Equal(t, time.Second, r.StickyScheduleToStart, "the worker's default sticky schedule-to-start")
	assert.Equal(t, workflows.RunWorkflowTaskTimeout, r.WorkflowTaskTimeout, "the runs' workflow task timeout")
	round := activities.ModelRoundOptions(activities.ProviderAnthropic)
	assert.Equal(t, round.HeartbeatTimeout, r.ModelRoundHeartbeat)
	assert.Equal(t, round.RetryPolicy.InitialInterval, r.ModelRoundRetry)
	assert.Equal(t, time.Second+RecoveryDispatch, r.BetweenTurns())
	assert.Equal(t, workflows.RunWorkflowTaskTimeout+RecoveryDispatch, r.InWorkflowTask())
	assert.Equal(t, 1500*time.Millisecond, r.BetweenTurns(), "the bound the recovery workload measures")
	assert.Equal(t, 10*time.Second+RecoveryDispatch, r.InWorkflowTask(), "Temporal's default workflow task timeout")
	assert.Equal(t, r.InWorkflowTask(), r.Bound())
	// A real provider's round is bounded by its heartbeat: 1 s + the server's 100 ms
	// timer shift + the 100 ms retry + dispatch, less than a workflow task's.
	assert.Equal(t, ServerTimerShift, r.TimerShift)
	assert.Equal(t, 1450*time.Millisecond, r.InModelRound(), "within the 1.5 s a killed worker's turn is to resume in")
	r.TimerShift = time.Second // Temporal's default
	assert.Equal(t, 3*time.Second+ActivityDispatch, r.InModelRound())
	r.TimerShift = ServerTimerShift
	assert.Equal(t, r.Bound(), r.BoundWithActivityRounds())

	// The sticky timeout set by WOP_WORKER_STICKY_TIMEOUT moves the bound with it; 0
	// is the SDK's 5 s.
	cfg, err := ConfigFromEnv(env(map[string]string{"WOP_WORKER_STICKY_TIMEOUT": "3s", "WOP_MODEL_PROVIDER": "mock"}))
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second+RecoveryDispatch, RecoveryOf(cfg).BetweenTurns())
	cfg.StickyScheduleToStartTimeout = 0
	assert.Equal(t, 5*time.Second+RecoveryDispatch, RecoveryOf(cfg).BetweenTurns())
	assert.Contains(t, RecoveryOf(DefaultConfig()).String(), "between turns 1.5s (sticky schedule-to-start 1s)")

	_, err = ConfigFromEnv(env(map[string]string{"WOP_WORKER_STICKY_TIMEOUT": "soon"}))
	assert.ErrorContains(t, err, `WOP_WORKER_STICKY_TIMEOUT="soon"`)
}

// Each recovery class the bound seam serves sums to the bound the same timeouts give,
// so the seam's arithmetic is the recovery workload's.
func TestRecoveryClassesSumToTheBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.StickyScheduleToStartTimeout = 2 * time.Second
	r := RecoveryOf(cfg)
	want := map[string]time.Duration{
		ClassAccepted:       r.Dispatch,
		ClassBetweenTurns:   r.BetweenTurns(),
		ClassInWorkflowTask: r.InWorkflowTask(),
		ClassInModelRound:   r.InModelRound(),
		ClassInHeldActivity: r.InHeldActivity(),
	}
	classes := r.Classes()
	require.Len(t, classes, len(want))
	for _, c := range classes {
		assert.Equal(t, want[c.Name], c.Bound(), c.Name)
	}
	assert.Equal(t, 2500*time.Millisecond, classes[1].Bound(), "the configured sticky timeout moves its class")
}

// The held work's class is the hold's own timing (the options it is scheduled with),
// the sticky wait of the task that records its result, and dispatch: 3.7 s by default.
func TestHeldActivityClassIsTheHoldsTiming(t *testing.T) {
	r := RecoveryOf(DefaultConfig())
	hold := activities.DurabilityHoldOptions()
	assert.Equal(t, hold.HeartbeatTimeout, r.HeldActivityHeartbeat)
	assert.Equal(t, hold.RetryPolicy.InitialInterval, r.HeldActivityRetry)
	assert.Equal(t, 3700*time.Millisecond, r.InHeldActivity())
	var held *RecoveryClass
	for _, c := range r.Classes() {
		if c.Name == ClassInHeldActivity {
			held = &c
		}
	}
	require.NotNil(t, held, "the bound seam lists the held work")
	var names []string
	for _, term := range held.Terms {
		names = append(names, term.Name)
	}
	assert.Equal(t, []string{"heldActivityHeartbeat", "heldActivityRetry", "stickyScheduleToStart", "dispatch"}, names)
}
