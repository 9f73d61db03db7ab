package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOutageFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	pols, err := OutageFromEnv(env(nil))
	require.NoError(t, err)
	require.Nil(t, pols, "nothing set: the per-provider defaults")

	pols, err = OutageFromEnv(env(map[string]string{EnvModelRetryFor: "7d", EnvModelRetryMaxInterval: "5s", EnvStallReminder: "1m"}))
	require.NoError(t, err)
	require.Equal(t, OutagePolicy{RetryFor: 7 * 24 * time.Hour, InitialInterval: 2 * time.Second, MaxInterval: 5 * time.Second, RemindEvery: time.Minute}, pols[ProviderOpenAI])
	require.Equal(t, pols[ProviderOpenAI], pols[ProviderOpenAICompatible], "set for every provider")

	pols, err = OutageFromEnv(env(map[string]string{EnvModelRetryFor: "0"}))
	require.NoError(t, err)
	require.Zero(t, pols[ProviderAnthropic].RetryFor, "0: no wait")
	require.Equal(t, 30*time.Second, pols[ProviderOpenAICompatible].MaxInterval, "the rest keeps the provider's defaults")

	pols, err = OutageFromEnv(env(map[string]string{EnvModelRetryMaxInterval: "500ms"}))
	require.NoError(t, err)
	require.Equal(t, DefaultOutageRetryFor, pols[ProviderOpenAI].RetryFor)
	require.Equal(t, 500*time.Millisecond, pols[ProviderOpenAI].InitialInterval, "the first pause is never longer than the longest")

	for _, bad := range []map[string]string{{EnvModelRetryFor: "forever"}, {EnvModelRetryFor: "-1h"}, {EnvStallReminder: "3x"}, {EnvModelRetryFor: "400d"}} {
		_, err := OutageFromEnv(env(bad))
		require.Error(t, err, "%v", bad)
	}
}

func TestModelOutagePolicyByKeyThenProvider(t *testing.T) {
	acts, err := New(Config{Transcripts: &fakeTranscripts{}, Providers: map[string]Provider{
		DefaultProviderKey: NewOpenAICompatibleProvider("", "m", "http://127.0.0.1:1/v1"),
		"fast":             NewOpenAICompatibleProvider("", "m", "http://127.0.0.1:2/v1"),
	}, ModelOutage: map[string]OutagePolicy{
		"fast":                   {RetryFor: time.Minute},
		ProviderOpenAICompatible: {RetryFor: time.Hour, MaxInterval: 10 * time.Second},
	}})
	require.NoError(t, err)
	res, err := acts.ModelOutagePolicy(context.Background(), ModelOutageInput{ProviderKey: "fast"})
	require.NoError(t, err)
	require.Equal(t, ProviderOpenAICompatible, res.Provider)
	require.Equal(t, OutagePolicy{RetryFor: time.Minute, InitialInterval: DefaultOutageInitial, MaxInterval: 30 * time.Second, RemindEvery: DefaultStallReminder}, res.Policy)
	res, err = acts.ModelOutagePolicy(context.Background(), ModelOutageInput{ProviderKey: "default"})
	require.NoError(t, err)
	require.Equal(t, OutagePolicy{RetryFor: time.Hour, InitialInterval: DefaultOutageInitial, MaxInterval: 10 * time.Second, RemindEvery: DefaultStallReminder}, res.Policy)

	plain, err := New(Config{Transcripts: &fakeTranscripts{}, Providers: map[string]Provider{DefaultProviderKey: NewOpenAIProvider("sk-x", "", "")}})
	require.NoError(t, err)
	res, err = plain.ModelOutagePolicy(context.Background(), ModelOutageInput{ProviderKey: "anything"})
	require.NoError(t, err)
	require.Equal(t, DefaultModelOutage(ProviderOpenAI), res.Policy, "an unconfigured key runs on the default provider, with its defaults")

	_, err = New(Config{Transcripts: &fakeTranscripts{}, ModelOutage: map[string]OutagePolicy{"": {RetryFor: time.Hour, InitialInterval: time.Minute, MaxInterval: time.Second}}})
	require.ErrorContains(t, err, "initial interval")
}

func TestOutageRetryOptionsWaitWithinTheRest(t *testing.T) {
	base := ModelRoundOptions(ProviderOpenAICompatible)
	require.EqualValues(t, QuickAttempts, base.RetryPolicy.MaximumAttempts)
	o := OutageRetryOptions(base, OutagePolicy{RetryFor: time.Hour, InitialInterval: time.Second, MaxInterval: 20 * time.Second}, 10*time.Minute)
	require.Zero(t, o.RetryPolicy.MaximumAttempts, "attempts without a count")
	require.Equal(t, 20*time.Second, o.RetryPolicy.MaximumInterval)
	require.Equal(t, 10*time.Minute, o.ScheduleToCloseTimeout)
	require.Equal(t, 10*time.Minute, o.StartToCloseTimeout, "an attempt never outlasts the wait")
	require.Equal(t, base.HeartbeatTimeout, o.HeartbeatTimeout)
	require.Equal(t, NonRetryableErrorTypes, o.RetryPolicy.NonRetryableErrorTypes, "permanent errors still fail fast")
}
