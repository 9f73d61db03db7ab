package activities

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// TestModelRoundLocalUsesTheInlineTranscript: the scripted mock answers a local round
// from the messages in its input, without reading the transcript source (the workflow
// could not answer that query while its task runs the local activity).
func TestModelRoundLocalUsesTheInlineTranscript(t *testing.T) {
	src := &fakeTranscripts{}
	scripts := map[string]*packs.MockScript{"bank": {Rounds: []packs.MockRound{
		{}, {ExpectState: "verifying", ExpectUser: []string{"close"}, Text: "Closing."},
	}}}
	a, env := newTestActivities(t, Config{Transcripts: src, MockScripts: scripts})
	in := LocalModelRoundInput{
		Round: convo.ModelRoundInput{RunID: "run-1", PackID: "bank", State: "verifying", Round: 1,
			Transcript: convo.TranscriptRef{RunID: "run-1", Key: "conv", From: 1, To: 3}},
		Messages: []convo.Message{{Role: convo.RoleUser, Text: "hello"}, {Role: convo.RoleAssistant, Text: "hi"}, {Role: convo.RoleUser, Text: "close my account"}},
	}
	val, err := env.ExecuteActivity(a.ModelRoundLocal, in)
	require.NoError(t, err)
	var res convo.ModelRoundResult
	require.NoError(t, val.Get(&res))
	assert.Equal(t, "Closing.", res.Text)
	assert.Equal(t, ProviderMock, res.Provider)
	assert.Empty(t, src.refs, "a local round never reads the transcript source")

	// Messages that do not cover [0, To) are a bad request, not a guess.
	in.Messages = in.Messages[1:]
	_, err = env.ExecuteActivity(a.ModelRoundLocal, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%T %v", err, err)
	assert.Equal(t, ErrTypeBadRequest, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}

// TestModelRoundLocalRefusesRealProviders: only the scripted mock runs locally; any
// other provider (even one that calls itself "mock") is refused, non-retryably, and
// never called.
func TestModelRoundLocalRefusesRealProviders(t *testing.T) {
	p := &recordingProvider{name: ProviderMock}
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, Providers: map[string]Provider{DefaultProviderKey: p}})
	_, err := env.ExecuteActivity(a.ModelRoundLocal, LocalModelRoundInput{Round: convo.ModelRoundInput{RunID: "r", PackID: "p", Round: 2}})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%T %v", err, err)
	assert.Equal(t, ErrTypeNotLocal, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Empty(t, p.reqs, "the provider was not called")
}

// A held scripted mock (WOP_MOCK_ROUND_DELAY) stands in for a provider that takes its
// time: its rounds are refused locally too, so they run as activities that heartbeat.
func TestModelRoundLocalRefusesAHeldMock(t *testing.T) {
	scripts := map[string]*packs.MockScript{"p": {Default: "OK."}}
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, MockScripts: scripts, MockRoundDelay: time.Hour})
	_, err := env.ExecuteActivity(a.ModelRoundLocal, LocalModelRoundInput{Round: convo.ModelRoundInput{RunID: "r", PackID: "p", Round: 1}})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%T %v", err, err)
	assert.Equal(t, ErrTypeNotLocal, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Error(), "WOP_MOCK_ROUND_DELAY")
}
