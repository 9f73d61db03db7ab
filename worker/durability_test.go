package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/wop-dev/wop/activities"
)

// hold runs the first attempt of DurabilityHold on the activities of a worker whose
// kill hook is kill (nil: none); a hook that is called stops the worker, so the hold
// hands itself back instead of holding.
func hold(t *testing.T, kill func()) error {
	t.Helper()
	stop := make(chan struct{})
	cfg := Config{}
	if kill != nil {
		cfg.DurabilityKill = func() { kill(); close(stop) }
	}
	acts, err := NewActivities(nil, cfg, nil, nil)
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	env.SetWorkerStopChannel(stop)
	_, err = env.ExecuteActivity(acts.DurabilityHold, activities.DurabilityHoldInput{RunID: "r1", NodeID: "n1"})
	return err
}

// The worker's activities carry its kill hook: the held work's first attempt calls
// Config.DurabilityKill, and without a hook it fails closed.
func TestNewActivitiesCarriesTheKillHook(t *testing.T) {
	kills := 0
	var app *temporal.ApplicationError
	require.ErrorAs(t, hold(t, func() { kills++ }), &app)
	assert.Equal(t, "DurabilityHoldHandedBack", app.Type())
	assert.Equal(t, 1, kills)

	require.ErrorAs(t, hold(t, nil), &app)
	assert.Equal(t, activities.ErrTypeSeamsOff, app.Type())
	assert.True(t, app.NonRetryable())
}
