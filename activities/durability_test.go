package activities

import (
	"context"
	"errors"
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

// The first attempt of a hold heartbeats its incarnation, asks the process to die once
// and holds until its worker stops; it sends no result of its own.
func TestDurabilityHoldFirstAttemptHeartbeatsAndKills(t *testing.T) {
	old := durabilityBeat
	durabilityBeat = 10 * time.Millisecond
	t.Cleanup(func() { durabilityBeat = old })

	var mu sync.Mutex
	var beats []DurabilityHeartbeat
	kills := 0
	stop := make(chan struct{})
	a, err := New(Config{Transcripts: &fakeTranscripts{}, Incarnation: "inc-a", DurabilityKill: func() {
		mu.Lock()
		defer mu.Unlock()
		kills++
	}})
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	// Every heartbeat the hold records, not only those the SDK's throttle lets through.
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&heartbeats{record: func(b DurabilityHeartbeat) {
		mu.Lock()
		defer mu.Unlock()
		if beats = append(beats, b); len(beats) == 3 {
			close(stop) // the hold is not killed here: its worker stops instead
		}
	}}}})
	env.RegisterActivity(a)
	env.SetWorkerStopChannel(stop)

	_, err = env.ExecuteActivity(a.DurabilityHold, DurabilityHoldInput{RunID: "r1", NodeID: "n1"})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, "DurabilityHoldHandedBack", app.Type(), "a stopped worker hands the hold back, retryable")
	assert.False(t, app.NonRetryable())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, kills, "the kill hook is called once")
	require.GreaterOrEqual(t, len(beats), 3)
	for _, b := range beats {
		assert.Equal(t, DurabilityHeartbeat{Attempt: 1, Incarnation: "inc-a"}, b)
	}
}

// An attempt that finds an earlier attempt's heartbeat replaces it: it returns at once
// with its own incarnation and the one it replaces, and kills nothing.
func TestDurabilityHoldLaterAttemptReportsTheReplacedIncarnation(t *testing.T) {
	kills := 0
	stop := make(chan struct{})
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, Incarnation: "inc-b", DurabilityKill: func() {
		kills++
		close(stop) // a hold taken for a first attempt ends here instead of holding
	}})
	env.SetWorkerStopChannel(stop)
	env.SetHeartbeatDetails(DurabilityHeartbeat{Attempt: 1, Incarnation: "inc-a"})
	v, err := env.ExecuteActivity(a.DurabilityHold, DurabilityHoldInput{RunID: "r1", NodeID: "n1"})
	require.NoError(t, err)
	var res DurabilityHoldResult
	require.NoError(t, v.Get(&res))
	assert.Equal(t, DurabilityHoldResult{Attempt: 2, Incarnation: "inc-b", ReplacedIncarnation: "inc-a"}, res)
	assert.Zero(t, kills)
}

// A process without the seams holds nothing: the hold fails closed, not retried.
func TestDurabilityHoldFailsClosedWithoutTheSeams(t *testing.T) {
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}})
	_, err := env.ExecuteActivity(a.DurabilityHold, DurabilityHoldInput{RunID: "r1", NodeID: "n1"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	assert.Equal(t, ErrTypeSeamsOff, app.Type())
	assert.True(t, app.NonRetryable())
	assert.Contains(t, app.Error(), "conformance seams are off")
	assert.Len(t, a.incarnation, 32, "New makes an incarnation when none is given")
}

// The options are the timing the hold's recovery class sums.
func TestDurabilityHoldOptions(t *testing.T) {
	o := DurabilityHoldOptions()
	assert.Equal(t, DurabilityHoldHeartbeat, o.HeartbeatTimeout)
	assert.Equal(t, DurabilityHoldRetry, o.RetryPolicy.InitialInterval)
	assert.Equal(t, int32(DurabilityHoldAttempts), o.RetryPolicy.MaximumAttempts)
	assert.Contains(t, o.RetryPolicy.NonRetryableErrorTypes, ErrTypeSeamsOff)
	assert.Less(t, durabilityBeat, o.HeartbeatTimeout/2)
}

// heartbeats records each heartbeat of a hold.
type heartbeats struct {
	interceptor.WorkerInterceptorBase
	record func(DurabilityHeartbeat)
	effect func(DurabilityEffectRecord)
}

func (h *heartbeats) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &heartbeatsIn{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, h: h}
}

type heartbeatsIn struct {
	interceptor.ActivityInboundInterceptorBase
	h *heartbeats
}

func (i *heartbeatsIn) Init(out interceptor.ActivityOutboundInterceptor) error {
	return i.Next.Init(&heartbeatsOut{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: out}, h: i.h})
}

type heartbeatsOut struct {
	interceptor.ActivityOutboundInterceptorBase
	h *heartbeats
}

func (o *heartbeatsOut) RecordHeartbeat(ctx context.Context, details ...any) {
	for _, d := range details {
		if b, ok := d.(DurabilityHeartbeat); ok && o.h.record != nil {
			o.h.record(b)
		}
		if r, ok := d.(DurabilityEffectRecord); ok && o.h.effect != nil {
			o.h.effect(r)
		}
	}
	o.Next.RecordHeartbeat(ctx, details...)
}
