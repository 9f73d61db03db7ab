package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/convo"
)

// ErrTypeNotLocal is the failure of ModelRoundLocal when the round's provider is not the
// scripted mock: the workflow then runs the round as the ModelRound activity.
const ErrTypeNotLocal = "ModelRoundNotLocal"

// LocalModelRoundInput is the input of ModelRoundLocal: the round and the messages of its
// transcript from the first, [0, Round.Transcript.To), which the scripted mock reads
// whole (Request.Earlier). A local activity's input is
// never written to the workflow's history (only its result is), so the transcript
// travels whole instead of being read back from the workflow, which could not answer a
// query while the workflow task that runs the local activity is in flight.
type LocalModelRoundInput struct {
	Round    convo.ModelRoundInput `json:"round"`
	Messages []convo.Message       `json:"messages"`
}

// ModelRoundLocal runs a model round answered by the scripted mock as a local activity:
// inside the workflow task that asks for it, on the worker that runs the workflow,
// without the activity task's round trips through Temporal (scheduled, started,
// completed, and a workflow task to read the result). Any other provider gets the
// non-retryable ErrTypeNotLocal: a real model call is always an activity of its own,
// with its own timeouts, retries and heartbeats.
func (a *Activities) ModelRoundLocal(ctx context.Context, in LocalModelRoundInput) (*convo.ModelRoundResult, error) {
	p, key, err := a.provider(in.Round.PackID, in.Round.Provider)
	if err != nil {
		return nil, err
	}
	if m, ok := p.(*MockProvider); !ok {
		return nil, nonRetryable(ErrTypeNotLocal, "provider %q (key %q) is not the scripted mock: model round %d of run %s runs as an activity",
			p.Name(), key, in.Round.Round, in.Round.RunID)
	} else if m.RoundDelay > 0 {
		// A held round stands in for a provider that takes its time, and such a
		// round is an activity, which heartbeats and which another worker takes
		// over when this one dies in it (the multi-instance witness kills workers
		// in such rounds).
		return nil, nonRetryable(ErrTypeNotLocal, "the scripted mock holds each round %s (WOP_MOCK_ROUND_DELAY): model round %d of run %s runs as an activity",
			m.RoundDelay, in.Round.Round, in.Round.RunID)
	}
	ref := in.Round.Transcript
	if len(in.Messages) != ref.To || ref.From < 0 || ref.From > ref.To {
		return nil, nonRetryable(ErrTypeBadRequest, "model round %d of run %s: %d transcript messages for [0, %d) (from %d)",
			in.Round.Round, in.Round.RunID, len(in.Messages), ref.To, ref.From)
	}
	return a.modelRound(ctx, in.Round, inlineTranscript(in.Messages))
}

// inlineTranscript is the transcript a LocalModelRoundInput carries, from its first
// message.
type inlineTranscript []convo.Message

// Transcript implements TranscriptSource: messages [From, To) of the carried ones,
// within ref's budget when it has one (as a TranscriptSource answers an activity).
func (t inlineTranscript) Transcript(_ context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
	if ref.From < 0 || ref.From > ref.To || ref.To > len(t) {
		return nil, fmt.Errorf("transcript range [%d, %d) is outside the %d messages carried", ref.From, ref.To, len(t))
	}
	msgs := t[:ref.To]
	if start, ok := windowStart(msgs, 0, ref.From, ref.MaxBytes, ref.MaxMessages); ok {
		return msgs[start:], nil
	}
	return msgs[ref.From:], nil
}

// LocalModelRoundOptions are the local activity options of ModelRoundLocal: the scripted
// mock's timeout and attempts (ModelRoundOptions(ProviderMock)) without a heartbeat,
// which local activities do not have. An attempt of a local activity is never lost
// apart from its workflow task, so every retry follows an error and waits the error
// backoff.
func LocalModelRoundOptions(summary string) workflow.LocalActivityOptions {
	o := ModelRoundOptions(ProviderMock)
	rp := *o.RetryPolicy
	rp.InitialInterval = ModelRoundErrorBackoff
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: o.StartToCloseTimeout,
		RetryPolicy:         &rp,
		Summary:             summary,
	}
}

// Yield does nothing: a turn that has run local rounds for a while schedules it to end
// its workflow task, so that Temporal answers the queries and delivers the signals that
// came meanwhile (packagent/localround.go) before the turn goes on.
func (a *Activities) Yield(context.Context) error { return nil }

// YieldOptions are the activity options of Yield: it ends at once, and it is retried
// while a worker that does not know it yet (a rolling deploy) refuses it.
func YieldOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second},
		Summary:             "yield the workflow task between local model rounds",
	}
}
