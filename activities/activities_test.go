package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// fakeTranscripts serves transcripts from memory and records the references asked for.
type fakeTranscripts struct {
	mu   sync.Mutex
	msgs map[string][]convo.Message // by transcript key
	refs []convo.TranscriptRef
	err  error
}

func (f *fakeTranscripts) Transcript(_ context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refs = append(f.refs, ref)
	if f.err != nil {
		return nil, f.err
	}
	all := f.msgs[ref.Key]
	to := min(ref.To, len(all))
	from := min(ref.From, to)
	return all[from:to], nil
}

func newTestActivities(t *testing.T, cfg Config) (*Activities, *testsuite.TestActivityEnvironment) {
	t.Helper()
	a, err := New(cfg)
	require.NoError(t, err)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return a, env
}

func TestNewRequiresTranscripts(t *testing.T) {
	_, err := New(Config{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Transcripts")

	_, err = New(Config{Transcripts: &fakeTranscripts{}, Providers: map[string]Provider{"fast": &MockProvider{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"default"`)
}

// TestNewDefaultsUnsetLimits: a MaxResultBytes of zero or below and a zero
// StallReminder take the defaults; a negative StallReminder is refused.
func TestNewDefaultsUnsetLimits(t *testing.T) {
	for _, n := range []int{0, -1} {
		a, err := New(Config{Transcripts: &fakeTranscripts{}, MaxResultBytes: n})
		require.NoError(t, err)
		assert.Equal(t, DefaultMaxResultBytes, a.maxResult, "MaxResultBytes %d", n)
		assert.Equal(t, DefaultStallReminder, a.stallReminder)
	}
	a, err := New(Config{Transcripts: &fakeTranscripts{}, MaxResultBytes: 7, StallReminder: time.Second})
	require.NoError(t, err)
	assert.Equal(t, 7, a.maxResult)
	assert.Equal(t, time.Second, a.stallReminder)
	_, err = New(Config{Transcripts: &fakeTranscripts{}, StallReminder: -time.Second})
	require.Error(t, err)
}

// TestModelRoundAsksForTheContextBudget: a provider that does not replay the whole
// transcript (here a mock without rounds) reads only the round's window, within the
// worker's context budget.
func TestModelRoundAsksForTheContextBudget(t *testing.T) {
	src := &fakeTranscripts{msgs: map[string][]convo.Message{"conv": {
		{Role: convo.RoleUser, Text: "hello"}, {Role: convo.RoleAssistant, Text: "hi"}, {Role: convo.RoleUser, Text: "again"},
	}}}
	scripts := map[string]*packs.MockScript{"bank": {Default: "Noted."}}
	a, env := newTestActivities(t, Config{Transcripts: src, MockScripts: scripts})
	in := convo.ModelRoundInput{RunID: "run-1", PackID: "bank", State: "s", Round: 1,
		Transcript: convo.TranscriptRef{RunID: "run-1", Key: "conv", From: 1, To: 3}}
	_, err := env.ExecuteActivity(a.ModelRound, in)
	require.NoError(t, err)
	want := in.Transcript
	want.MaxBytes, want.MaxMessages = DefaultContextBytes, DefaultContextMessages // the round's budget
	assert.Equal(t, []convo.TranscriptRef{want}, src.refs)
}

func TestModelRoundActivityReadsTranscriptByReference(t *testing.T) {
	src := &fakeTranscripts{msgs: map[string][]convo.Message{
		"conv": {
			{Role: convo.RoleUser, Text: "hello, I want my balance"}, // outside [From, To): must not be seen
			{Role: convo.RoleAssistant, Text: "hi"},
			{Role: convo.RoleUser, Text: "close my account"},
		},
	}}
	scripts := map[string]*packs.MockScript{"bank": {Rounds: []packs.MockRound{
		{ExpectState: "verifying", ExpectUser: []string{"close"}, Text: "Closing.",
			ToolCalls: []packs.MockToolCall{{Name: "close_account", Args: json.RawMessage(`{"id":"A1"}`)}}},
	}}}
	a, env := newTestActivities(t, Config{Transcripts: src, MockScripts: scripts, MockStrict: true})

	in := convo.ModelRoundInput{RunID: "run-1", PackID: "bank", State: "verifying", Round: 1,
		Transcript: convo.TranscriptRef{RunID: "run-1", Key: "conv", From: 1, To: 3}}
	val, err := env.ExecuteActivity(a.ModelRound, in)
	require.NoError(t, err)
	var res convo.ModelRoundResult
	require.NoError(t, val.Get(&res))
	assert.Equal(t, "Closing.", res.Text)
	require.Len(t, res.ToolCalls, 1)
	assert.Equal(t, "call_1_0_close_account", res.ToolCalls[0].ID)
	assert.Equal(t, ProviderMock, res.Provider)
	// The mock reads the transcript from its start, without the context budget: where
	// its script stands depends on every earlier round ("hi" was round 0, off script, so
	// the script still waits).
	whole := in.Transcript
	whole.From = 0
	assert.Equal(t, []convo.TranscriptRef{whole}, src.refs)

	// The same script with a window that ends before "close my account" fails the expectation.
	in.Transcript = convo.TranscriptRef{RunID: "run-1", Key: "conv", From: 0, To: 2}
	in.Round = 1
	_, err = env.ExecuteActivity(a.ModelRound, in)
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%T %v", err, err)
	assert.Equal(t, ErrTypeMockMismatch, appErr.Type())
	assert.True(t, appErr.NonRetryable())
}

func TestModelRoundActivityTranscriptFailureIsRetryable(t *testing.T) {
	src := &fakeTranscripts{err: errors.New("query timed out")}
	a, env := newTestActivities(t, Config{Transcripts: src})
	_, err := env.ExecuteActivity(a.ModelRound, convo.ModelRoundInput{RunID: "r", PackID: "p", Round: 4})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "query timed out")
	assert.Contains(t, err.Error(), "read transcript")
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		assert.False(t, appErr.NonRetryable())
	}
}

// recordingProvider answers a fixed result and records the requests it saw.
type recordingProvider struct {
	name string
	mu   sync.Mutex
	reqs []*Request
}

func (p *recordingProvider) Name() string { return p.name }
func (p *recordingProvider) Complete(_ context.Context, req *Request) (*convo.ModelRoundResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	return &convo.ModelRoundResult{Text: "from " + p.name, Model: "m"}, nil
}

func TestModelRoundActivityProviderSelection(t *testing.T) {
	def := &recordingProvider{name: "openai"}
	fast := &recordingProvider{name: "anthropic"}
	src := &fakeTranscripts{msgs: map[string][]convo.Message{"k": {{Role: convo.RoleUser, Text: "hi"}}}}
	a, env := newTestActivities(t, Config{Transcripts: src, Providers: map[string]Provider{DefaultProviderKey: def, "fast": fast}})

	for key, want := range map[string]string{"": "from openai", "default": "from openai", "fast": "from anthropic", "unknown": "from openai"} {
		val, err := env.ExecuteActivity(a.ModelRound, convo.ModelRoundInput{Provider: key, Transcript: convo.TranscriptRef{Key: "k", To: 1}})
		require.NoError(t, err, key)
		var res convo.ModelRoundResult
		require.NoError(t, val.Get(&res))
		assert.Equal(t, want, res.Text, key)
		assert.NotEmpty(t, res.Provider, "the provider's canonical name is filled in")
	}
	require.Len(t, fast.reqs, 1)
	assert.Equal(t, []convo.Message{{Role: convo.RoleUser, Text: "hi"}}, fast.reqs[0].Messages)
}

func TestToolCallActivityExecutors(t *testing.T) {
	var got convo.ToolCallInput
	tools := map[string]ToolFunc{
		"lookup": func(_ context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, error) {
			got = in
			return &convo.ToolCallResult{Content: json.RawMessage(`{"found":true}`)}, nil
		},
		"plain": func(context.Context, convo.ToolCallInput) (*convo.ToolCallResult, error) {
			return &convo.ToolCallResult{Content: json.RawMessage(`not json`), IsError: true}, nil
		},
		"broken": func(context.Context, convo.ToolCallInput) (*convo.ToolCallResult, error) {
			return nil, errors.New("database down")
		},
	}
	scripts := map[string]*packs.MockScript{"bank": {ToolResults: map[string]json.RawMessage{
		"verify_account": json.RawMessage(`{"ok":true}`),
		"lookup":         json.RawMessage(`{"from":"mock"}`), // a registered executor wins
	}}}
	var logs bytes.Buffer
	a, env := newTestActivities(t, Config{Transcripts: &fakeTranscripts{}, Tools: tools, MockScripts: scripts,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	run := func(pack, tool string) (*convo.ToolCallResult, error) {
		val, err := env.ExecuteActivity(a.ToolCall, convo.ToolCallInput{RunID: "r", PackID: pack, Tool: tool, CallID: "call_0_0_" + tool,
			Args: json.RawMessage(`{"secret_arg":"s3cr3t"}`)})
		if err != nil {
			return nil, err
		}
		var res convo.ToolCallResult
		require.NoError(t, val.Get(&res))
		return &res, nil
	}

	res, err := run("bank", "lookup")
	require.NoError(t, err)
	assert.JSONEq(t, `{"found":true}`, string(res.Content))
	assert.False(t, res.IsError)
	assert.Equal(t, "call_0_0_lookup", got.CallID)

	res, err = run("bank", "plain")
	require.NoError(t, err)
	assert.JSONEq(t, `"not json"`, string(res.Content), "non-JSON content becomes a JSON string")
	assert.True(t, res.IsError)

	res, err = run("bank", "verify_account")
	require.NoError(t, err)
	assert.JSONEq(t, `{"ok":true}`, string(res.Content))
	assert.False(t, res.IsError)

	res, err = run("other-pack", "verify_account")
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, string(res.Content), `tool \"verify_account\" has no binding on this host`)

	_, err = run("bank", "broken")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database down")

	assert.NotContains(t, logs.String(), "s3cr3t", "tool arguments are not logged")
	assert.Contains(t, logs.String(), `"executor":"mock"`)
}

// slowProvider answers after a delay, so a round lasts several heartbeat periods.
type slowProvider struct{ delay time.Duration }

func (p slowProvider) Name() string { return "slow" }
func (p slowProvider) Complete(ctx context.Context, _ *Request) (*convo.ModelRoundResult, error) {
	select {
	case <-time.After(p.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &convo.ModelRoundResult{Text: "done", Provider: "slow", Model: "slow-1"}, nil
}

func TestModelRoundHeartbeats(t *testing.T) {
	old := heartbeatEvery
	heartbeatEvery = 10 * time.Millisecond
	t.Cleanup(func() { heartbeatEvery = old })
	src := &fakeTranscripts{}
	a, env := newTestActivities(t, Config{Transcripts: src, Providers: map[string]Provider{DefaultProviderKey: slowProvider{delay: 80 * time.Millisecond}}})
	var mu sync.Mutex
	var beats []string
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var d string
		_ = details.Get(&d)
		mu.Lock()
		beats = append(beats, d)
		mu.Unlock()
	})
	_, err := env.ExecuteActivity(a.ModelRound, convo.ModelRoundInput{PackID: "p", State: "triage", Round: 3})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, beats)
	assert.Equal(t, "model round 3 in state triage", beats[0])
}

// slowTranscripts answers after a pause, as a query to a run whose worker died waits
// out that worker's sticky queue.
type slowTranscripts struct {
	fakeTranscripts
	pause time.Duration
}

func (s *slowTranscripts) Transcript(ctx context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
	time.Sleep(s.pause)
	return s.fakeTranscripts.Transcript(ctx, ref)
}

// A round heartbeats from its start, while it reads its transcript too: an attempt
// that sends none for its heartbeat timeout is counted lost, whatever it waits on.
func TestModelRoundHeartbeatsWhileItReadsItsTranscript(t *testing.T) {
	old := heartbeatEvery
	heartbeatEvery = 10 * time.Millisecond
	t.Cleanup(func() { heartbeatEvery = old })
	p := &recordingProvider{name: "quick"}
	a, env := newTestActivities(t, Config{Transcripts: &slowTranscripts{pause: 80 * time.Millisecond}, Providers: map[string]Provider{DefaultProviderKey: p}})
	var mu sync.Mutex
	beats := 0
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		beats++
		mu.Unlock()
	})
	_, err := env.ExecuteActivity(a.ModelRound, convo.ModelRoundInput{PackID: "p", State: "triage", Round: 1})
	require.NoError(t, err)
	require.Len(t, p.reqs, 1, "the provider answered at once, after the transcript")
	mu.Lock()
	defer mu.Unlock()
	assert.Greater(t, beats, 0, "heartbeats while the transcript was read")
}

// namedModelProvider is a recordingProvider that names its model.
type namedModelProvider struct {
	recordingProvider
	model string
}

func (p *namedModelProvider) ModelName() string { return p.model }

func TestModelRoundAppliesTheOverrideOfItsModel(t *testing.T) {
	src := &fakeTranscripts{msgs: map[string][]convo.Message{"k": {{Role: convo.RoleUser, Text: "hi"}}}}
	in := convo.ModelRoundInput{
		System: "BASE", Parameters: json.RawMessage(`{"temperature":0.2,"max_tokens":100}`),
		Transcript: convo.TranscriptRef{Key: "k", To: 1},
		ModelOverrides: map[string]convo.ModelOverride{
			"gpt-wrap":    {Prefix: "P|", Suffix: "|S", Parameters: json.RawMessage(`{"temperature":0.9}`)},
			"gpt-replace": {System: "FULL", Prefix: "ignored"},
		},
	}
	for model, want := range map[string]struct{ system, params string }{
		"gpt-wrap":    {"P|BASE|S", `{"max_tokens":100,"temperature":0.9}`},
		"gpt-replace": {"FULL", `{"temperature":0.2,"max_tokens":100}`},
		"other-model": {"BASE", `{"temperature":0.2,"max_tokens":100}`},
	} {
		p := &namedModelProvider{recordingProvider: recordingProvider{name: "openai"}, model: model}
		a, env := newTestActivities(t, Config{Transcripts: src, Providers: map[string]Provider{DefaultProviderKey: p}})
		if _, err := env.ExecuteActivity(a.ModelRound, in); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		got := p.reqs[0].Input
		if got.System != want.system || string(got.Parameters) != want.params {
			t.Errorf("%s: system %q parameters %s; want %q %s", model, got.System, got.Parameters, want.system, want.params)
		}
	}
	// A provider that does not name its model gets the prompt as written.
	plain := &recordingProvider{name: "mock"}
	a, env := newTestActivities(t, Config{Transcripts: src, Providers: map[string]Provider{DefaultProviderKey: plain}})
	if _, err := env.ExecuteActivity(a.ModelRound, in); err != nil {
		t.Fatal(err)
	}
	if plain.reqs[0].Input.System != "BASE" {
		t.Errorf("system %q, want the base", plain.reqs[0].Input.System)
	}
}
