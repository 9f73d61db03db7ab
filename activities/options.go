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

// QuickAttempts is how many attempts a real provider's model round makes, a second
// and then two apart, before the run reports it stalled and waits out the outage as
// the provider's OutagePolicy says (the workflow schedules the round again with
// OutageRetryOptions). A blip of a few seconds costs nothing visible.
const QuickAttempts = 3

// ModelRoundOptions returns the activity options of a ModelRound for a provider: a
// canonical provider id (mock, openai, anthropic, openai-compatible, gemini, vertex,
// bedrock, azure-openai; the Provider of
// the run's previous convo.ModelRoundResult) or, when it is not known yet, anything else
// such as the logical key, which gets options that suit every real provider.
//
//	provider                       StartToClose  Heartbeat  attempts        backoff
//	mock                           30s           10s        3               1s ×2, ≤ 10s
//	openai, anthropic              5m            30s        QuickAttempts   1s ×2, ≤ 4s
//	gemini, vertex                 5m            30s        QuickAttempts   1s ×2, ≤ 4s
//	bedrock, azure-openai          5m            30s        QuickAttempts   1s ×2, ≤ 4s
//	openai-compatible              15m           30s        QuickAttempts   1s ×2, ≤ 4s  (local models are slow)
//	other / unknown                15m           30s        QuickAttempts   1s ×2, ≤ 4s
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
			HeartbeatTimeout:    10 * time.Second,
			RetryPolicy:         retryPolicy(time.Second, 10*time.Second, 3),
		}
	case ProviderOpenAI, ProviderAnthropic, ProviderGemini, ProviderVertex, ProviderBedrock, ProviderAzureOpenAI:
		return workflow.ActivityOptions{
			StartToCloseTimeout: 5 * time.Minute,
			HeartbeatTimeout:    30 * time.Second,
			RetryPolicy:         retryPolicy(time.Second, 4*time.Second, QuickAttempts),
		}
	default:
		return workflow.ActivityOptions{
			StartToCloseTimeout: 15 * time.Minute,
			HeartbeatTimeout:    30 * time.Second,
			RetryPolicy:         retryPolicy(time.Second, 4*time.Second, QuickAttempts),
		}
	}
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
