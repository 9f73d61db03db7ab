package activities

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// destination is an effect destination that counts its arrivals and their keys.
type destination struct {
	mu     sync.Mutex
	keys   []string
	status int
}

func (d *destination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keys = append(d.keys, r.Header.Get("Idempotency-Key"))
	w.WriteHeader(d.status)
}

func (d *destination) arrivals() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.keys...)
}

func newDestination(t *testing.T, status int) (*destination, string) {
	d := &destination{status: status}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return d, srv.URL + "/effect/n1"
}

// The first attempt POSTs once with the effect's key, records the outcome before it
// asks its process to die, and holds until its worker stops.
func TestDurabilityEffectFirstAttemptRecordsThenKills(t *testing.T) {
	old := durabilityBeat
	durabilityBeat = 10 * time.Millisecond
	t.Cleanup(func() { durabilityBeat = old })
	dest, url := newDestination(t, http.StatusNoContent)

	var mu sync.Mutex
	var records []DurabilityEffectRecord
	recordsAtKill := -1
	stop := make(chan struct{})
	a, err := New(Config{Transcripts: &fakeTranscripts{}, Incarnation: "inc-a", WebhookAllowPrivate: true, DurabilityKill: func() {
		mu.Lock()
		defer mu.Unlock()
		recordsAtKill = len(records)
		close(stop) // the process would die here; the test's worker stops instead
	}})
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&heartbeats{effect: func(r DurabilityEffectRecord) {
		mu.Lock()
		defer mu.Unlock()
		records = append(records, r)
	}}}})
	env.RegisterActivity(a)
	env.SetWorkerStopChannel(stop)

	key := DurabilityEffectKey("acme", "r1", "n1")
	_, err = env.ExecuteActivity(a.DurabilityEffect, DurabilityEffectInput{RunID: "r1", NodeID: "n1", URL: url, Key: key})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, "DurabilityHoldHandedBack", app.Type(), "a stopped worker hands the work back, retryable")
	assert.Equal(t, []string{key}, dest.arrivals(), "one POST, with the effect's key")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, recordsAtKill, "the outcome is recorded before the kill")
	require.NotEmpty(t, records)
	assert.Equal(t, DurabilityEffectRecord{Attempt: 1, Incarnation: "inc-a", Status: http.StatusNoContent}, records[0])
}

// The second delivery of the work finds the recorded outcome and returns it: no POST,
// no kill.
func TestDurabilityEffectSecondDeliveryReturnsTheRecordedOutcome(t *testing.T) {
	dest, url := newDestination(t, http.StatusNoContent)
	kills := 0
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, Incarnation: "inc-b", WebhookAllowPrivate: true,
		DurabilityKill: func() { kills++ }})
	env.SetHeartbeatDetails(DurabilityEffectRecord{Attempt: 1, Incarnation: "inc-a", Status: http.StatusNoContent})
	v, err := env.ExecuteActivity(a.DurabilityEffect, DurabilityEffectInput{RunID: "r1", NodeID: "n1", URL: url, Key: "k"})
	require.NoError(t, err)
	var res DurabilityEffectResult
	require.NoError(t, v.Get(&res))
	assert.Equal(t, DurabilityEffectResult{Attempt: 2, Incarnation: "inc-b", ReplacedIncarnation: "inc-a", PerformedAttempt: 1, Status: http.StatusNoContent}, res)
	assert.Empty(t, dest.arrivals(), "the effect is not performed again")
	assert.Zero(t, kills)
}

// Without the seams the work fails closed before it calls out; a destination that
// refuses (4xx) or that the egress guard refuses fails it for good, one that fails
// (5xx) is retried; none of them records an outcome or kills.
func TestDurabilityEffectFailures(t *testing.T) {
	dest, url := newDestination(t, http.StatusNoContent)
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, WebhookAllowPrivate: true})
	_, err := env.ExecuteActivity(a.DurabilityEffect, DurabilityEffectInput{RunID: "r1", NodeID: "n1", URL: url, Key: "k"})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, ErrTypeSeamsOff, app.Type())
	assert.Empty(t, dest.arrivals())

	kills := 0
	for _, tc := range []struct {
		status       int
		allowPrivate bool
		errType      string
		nonRetryable bool
	}{
		{http.StatusBadRequest, true, ErrTypeSeamEffectRefused, true},
		{http.StatusServiceUnavailable, true, "", false},
		{http.StatusNoContent, false, ErrTypeSeamEffectRefused, true},
	} {
		dest, url := newDestination(t, tc.status)
		a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, WebhookAllowPrivate: tc.allowPrivate, DurabilityKill: func() { kills++ }})
		_, err := env.ExecuteActivity(a.DurabilityEffect, DurabilityEffectInput{RunID: "r1", NodeID: "n1", URL: url, Key: "k"})
		require.Error(t, err, "%d", tc.status)
		var app *temporal.ApplicationError
		require.ErrorAs(t, err, &app)
		if tc.errType != "" {
			assert.Equal(t, tc.errType, app.Type(), "%d", tc.status)
		}
		assert.Equal(t, tc.nonRetryable, app.NonRetryable(), "%d: %v", tc.status, err)
		if tc.allowPrivate {
			assert.Len(t, dest.arrivals(), 1, "%d", tc.status)
		} else {
			assert.Empty(t, dest.arrivals(), "the guard refuses loopback before any call")
		}
	}
	assert.Zero(t, kills)
}

// The key is the same for every attempt of one effect and differs between effects.
func TestDurabilityEffectKey(t *testing.T) {
	k := DurabilityEffectKey("acme", "r1", "n1")
	assert.Equal(t, k, DurabilityEffectKey("acme", "r1", "n1"))
	assert.Len(t, k, 43)
	for _, other := range []string{DurabilityEffectKey("acme", "r2", "n1"), DurabilityEffectKey("acme", "r1", "n2"), DurabilityEffectKey("beta", "r1", "n1")} {
		assert.NotEqual(t, k, other)
	}
	o := DurabilityEffectOptions()
	assert.Equal(t, DurabilityHoldHeartbeat, o.HeartbeatTimeout)
	assert.Contains(t, o.RetryPolicy.NonRetryableErrorTypes, ErrTypeSeamEffectRefused)
	assert.NotContains(t, DurabilityHoldOptions().RetryPolicy.NonRetryableErrorTypes, ErrTypeSeamEffectRefused)
}
