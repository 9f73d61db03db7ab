package activities

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/convo"
)

// NonRetryableErrorTypes lists the permanent failures of model rounds and tool calls:
// the RetryPolicy of both helpers refuses to retry them even if an activity forgot to
// mark one non-retryable.
var NonRetryableErrorTypes = []string{
	ErrTypeBadRequest,
	ErrTypeAuth,
	ErrTypeMockMismatch,
	ErrTypeMockExhausted,
	ErrTypeMockFailure,
	ErrTypeUnknownProvider,
	ErrTypeUnknownTool,
	ErrTypeBadResponse,
}

// QuickAttempts is how many attempts a real provider's model round makes (after an
// error a second and then two apart, ModelRoundErrorBackoff) before the run reports
// it stalled and waits out the outage as the provider's OutagePolicy says (the
// workflow schedules the round again with OutageRetryOptions). A blip of a few
// seconds costs nothing visible.
const QuickAttempts = 3

// ModelRoundHeartbeatTimeout is how long Temporal waits for a running model round's
// next heartbeat before it counts the attempt lost and schedules the next one, which
// any live worker takes: the wait of a round whose worker was killed (SIGKILL, a lost
// machine) before another worker calls the provider again (worker.Recovery). A round
// heartbeats every ModelRoundHeartbeatInterval whatever the provider does, so a live
// worker's round misses it only if its process stalls for most of a second.
const ModelRoundHeartbeatTimeout = time.Second

// ModelRoundHeartbeatInterval is how often a running model round heartbeats: four
// times a heartbeat timeout (an activity heartbeats every quarter of its own timeout
// when that is shorter than HeartbeatInterval), so three in a row may be late or lost
// before the attempt is. Each is a call to Temporal (docs/timeouts.md has what they
// cost).
const ModelRoundHeartbeatInterval = ModelRoundHeartbeatTimeout / 4

// ModelRoundLostRetry is the retry policy's first interval: the pause between an
// attempt Temporal counted lost (its heartbeat or start-to-close timed out) and the
// next. A provider's retryable error pauses longer (ModelRoundErrorBackoff).
const ModelRoundLostRetry = 100 * time.Millisecond

// ModelRoundErrorBackoff is the pause after a model round's first retryable provider
// error (a refused connection, a 5xx, a 429 without Retry-After); it doubles with each
// attempt up to the retry policy's MaximumInterval. The round's activity sets it as the
// error's NextRetryDelay, which Temporal prefers to the retry policy's interval.
const ModelRoundErrorBackoff = time.Second

// ModelRoundOptions returns the activity options of a ModelRound for a provider: a
// canonical provider id (mock, openai, anthropic, openai-compatible, gemini, vertex,
// bedrock, azure-openai; the Provider of
// the run's previous convo.ModelRoundResult) or, when it is not known yet, anything else
// such as the logical key, which gets options that suit every real provider.
//
//	provider                       StartToClose  Heartbeat  attempts        after a lost attempt   after an error
//	mock                           30s           1s         3               100ms ×2, ≤ 10s        1s ×2, ≤ 10s
//	openai, anthropic              5m            1s         QuickAttempts   100ms ×2, ≤ 4s         1s ×2, ≤ 4s
//	gemini, vertex                 5m            1s         QuickAttempts   100ms ×2, ≤ 4s         1s ×2, ≤ 4s
//	bedrock, azure-openai          5m            1s         QuickAttempts   100ms ×2, ≤ 4s         1s ×2, ≤ 4s
//	openai-compatible              15m           1s         QuickAttempts   100ms ×2, ≤ 4s         1s ×2, ≤ 4s  (local models are slow)
//	other / unknown                15m           1s         QuickAttempts   100ms ×2, ≤ 4s         1s ×2, ≤ 4s
//
// A 429 or 5xx carrying Retry-After waits that long instead of the backoff (capped
// at 10 minutes). A real provider's round that still fails with a retryable error
// waits out the outage (OutagePolicy). The workflow should set Summary (see
// ModelRoundSummary).
func ModelRoundOptions(provider string) workflow.ActivityOptions {
	switch provider {
	case ProviderMock:
		return workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second,
			HeartbeatTimeout:    ModelRoundHeartbeatTimeout,
			RetryPolicy:         retryPolicy(ModelRoundLostRetry, 10*time.Second, 3),
		}
	case ProviderOpenAI, ProviderAnthropic, ProviderGemini, ProviderVertex, ProviderBedrock, ProviderAzureOpenAI:
		return workflow.ActivityOptions{
			StartToCloseTimeout: 5 * time.Minute,
			HeartbeatTimeout:    ModelRoundHeartbeatTimeout,
			RetryPolicy:         retryPolicy(ModelRoundLostRetry, 4*time.Second, QuickAttempts),
		}
	default:
		return workflow.ActivityOptions{
			StartToCloseTimeout: 15 * time.Minute,
			HeartbeatTimeout:    ModelRoundHeartbeatTimeout,
			RetryPolicy:         retryPolicy(ModelRoundLostRetry, 4*time.Second, QuickAttempts),
		}
	}
}

// errorBackoff is the NextRetryDelay of a model round's retryable error in attempt
// (counting from 1) under the retry policy rp: ModelRoundErrorBackoff doubled per
// attempt, at most rp's MaximumInterval, or 0 when rp's own backoff for the attempt is
// as long (an outage's policy, OutageRetryOptions, paces its attempts itself).
func errorBackoff(attempt int32, rp *temporal.RetryPolicy) time.Duration {
	if rp == nil {
		return 0
	}
	coeff := max(rp.BackoffCoefficient, 1)
	d, own := ModelRoundErrorBackoff, rp.InitialInterval
	for i := int32(1); i < attempt; i++ {
		d, own = 2*d, time.Duration(float64(own)*coeff)
	}
	if rp.MaximumInterval > 0 {
		d, own = min(d, rp.MaximumInterval), min(own, rp.MaximumInterval)
	}
	if own >= d {
		return 0
	}
	return d
}

// ToolCallOptions returns the activity options of a ToolCall: 2 minutes per attempt,
// 5 attempts with backoff from 1s to 30s.
func ToolCallOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         retryPolicy(time.Second, 30*time.Second, 5),
	}
}

// ModelRoundSummary is a one-line summary of a model round for the Temporal UI
// (ActivityOptions.Summary): state, prompt, round and provider key. It holds no
// message text.
func ModelRoundSummary(in convo.ModelRoundInput) string {
	key := in.Provider
	if key == "" {
		key = DefaultProviderKey
	}
	return fmt.Sprintf("model round %d · state %s · prompt %s · provider %s", in.Round, in.State, in.Prompt, key)
}

// ToolCallSummary is a one-line summary of a tool call for the Temporal UI: tool,
// state and call id. It holds no arguments.
func ToolCallSummary(in convo.ToolCallInput) string {
	return fmt.Sprintf("tool %s · state %s · round %d · %s", in.Tool, in.State, in.Round, in.CallID)
}

func retryPolicy(initial, maxInterval time.Duration, attempts int32) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:        initial,
		BackoffCoefficient:     2,
		MaximumInterval:        maxInterval,
		MaximumAttempts:        attempts,
		NonRetryableErrorTypes: slices.Clone(NonRetryableErrorTypes),
	}
}
