package activities

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// A lost attempt (its worker died) is retried after ModelRoundLostRetry; a provider's
// error waits the longer error backoff, doubling, within the policy's maximum; an
// outage's own policy keeps its pace.
func TestModelRoundBackoffs(t *testing.T) {
	quick := ModelRoundOptions(ProviderOpenAI).RetryPolicy
	require.Equal(t, ModelRoundLostRetry, quick.InitialInterval)
	assert.Equal(t, ModelRoundHeartbeatTimeout, ModelRoundOptions(ProviderAnthropic).HeartbeatTimeout)
	for attempt, want := range map[int32]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 4 * time.Second} {
		assert.Equal(t, want, errorBackoff(attempt, quick), "attempt %d", attempt)
	}
	mock := ModelRoundOptions(ProviderMock).RetryPolicy
	assert.Equal(t, 8*time.Second, errorBackoff(4, mock))
	assert.Equal(t, 10*time.Second, errorBackoff(5, mock))

	outage := OutageRetryOptions(ModelRoundOptions(ProviderOpenAI), DefaultModelOutage(ProviderOpenAI), time.Hour).RetryPolicy
	for attempt := int32(1); attempt < 10; attempt++ {
		assert.Zero(t, errorBackoff(attempt, outage), "attempt %d of an outage's policy", attempt)
	}
	assert.Zero(t, errorBackoff(1, nil))
	assert.Zero(t, errorBackoff(1, &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2}))
}

// Heartbeats come often enough that three may be lost before the heartbeat timeout,
// and the worker's throttle lets every one through.
func TestModelRoundHeartbeatFitsItsTimeout(t *testing.T) {
	assert.LessOrEqual(t, 4*ModelRoundHeartbeatInterval, ModelRoundHeartbeatTimeout)
	assert.LessOrEqual(t, MaxHeartbeatThrottle, ModelRoundHeartbeatInterval)
	assert.LessOrEqual(t, MaxHeartbeatThrottle, HeartbeatInterval)
}

// A provider's retryable error gets the error backoff of its attempt; one that names
// its delay (Retry-After), a permanent one and an untyped one are left as they are.
func TestModelRoundErrorCarriesItsBackoff(t *testing.T) {
	quick := ModelRoundOptions(ProviderOpenAI).RetryPolicy
	cause := errors.New("connection refused")
	unavailable := temporal.NewApplicationErrorWithOptions("openai is unavailable", ErrTypeUnavailable, temporal.ApplicationErrorOptions{Cause: cause})
	got := errorWithBackoff(unavailable, 2, quick)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, got, &appErr)
	assert.Equal(t, ErrTypeUnavailable, appErr.Type())
	assert.Equal(t, "openai is unavailable", appErr.Message())
	assert.Equal(t, 2*time.Second, appErr.NextRetryDelay())
	assert.ErrorIs(t, got, cause)

	limited := temporal.NewApplicationErrorWithOptions("429", ErrTypeRateLimited, temporal.ApplicationErrorOptions{NextRetryDelay: 7 * time.Second})
	assert.Same(t, limited, errorWithBackoff(limited, 1, quick))
	auth := nonRetryable(ErrTypeAuth, "bad key")
	assert.Same(t, auth, errorWithBackoff(auth, 1, quick))
	plain := fmt.Errorf("read transcript: %w", cause)
	assert.Same(t, plain, errorWithBackoff(plain, 1, quick))
	outage := OutageRetryOptions(ModelRoundOptions(ProviderOpenAI), DefaultModelOutage(ProviderOpenAI), time.Hour).RetryPolicy
	assert.Same(t, unavailable, errorWithBackoff(unavailable, 1, outage))
}
