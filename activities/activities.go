package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// HeartbeatInterval is how often a running tool call heartbeats (a model round does
// every ModelRoundHeartbeatInterval). A heartbeat is also how an activity learns that
// the workflow cancelled it (the server answers it with the cancellation, and the SDK
// then cancels the activity's context), so a cancelled run stops the call in flight
// within about this long. Workers must let heartbeats through this often: the SDK
// holds them back for 80% of the HeartbeatTimeout unless
// worker.Options.MaxHeartbeatThrottleInterval is lower (the host's worker sets it to
// MaxHeartbeatThrottle). A call that ends sooner sends no heartbeat at all.
const HeartbeatInterval = time.Second

// MaxHeartbeatThrottle is the worker's MaxHeartbeatThrottleInterval: the shortest of
// the activities' heartbeat intervals, so that the SDK sends each heartbeat as it
// comes.
const MaxHeartbeatThrottle = min(HeartbeatInterval, ModelRoundHeartbeatInterval)

// heartbeatEvery is HeartbeatInterval; tests shorten it.
var heartbeatEvery = HeartbeatInterval

// TranscriptSource reads the messages a convo.TranscriptRef points at: messages [From, To),
// or, when the ref names a budget (MaxBytes, MaxMessages), the newest of them within it
// (see ContextBudget).
type TranscriptSource interface {
	Transcript(ctx context.Context, ref convo.TranscriptRef) ([]convo.Message, error)
}

// ToolFunc executes one tool call. A failure the model should see (bad arguments, a
// business error) is a result with IsError; a returned error fails the activity
// attempt and is retried by Temporal.
type ToolFunc func(ctx context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, error)

// Config holds the dependencies of the activities.
type Config struct {
	// Providers maps a logical provider key to its provider; DefaultProviderKey is the
	// primary. Nil or empty means a single scripted mock as the default. A
	// *MockProvider without Scripts receives MockScripts.
	Providers map[string]Provider
	// PackProviders maps a pack id to key → provider key: a round of that pack whose
	// key is mapped is served by the provider of the mapped key (ProviderConfig.Packs).
	PackProviders map[string]map[string]string
	// MockScripts maps a pack id to its mock script (<pack>.mock.yaml). They drive the
	// mock provider and serve as the fallback tool executor (tool_results).
	MockScripts map[string]*packs.MockScript
	// MockStrict makes the mock fail rounds that are off script instead of answering
	// the script's default (tests set it; see MockProvider).
	MockStrict bool
	// MockChunkDelay is the pause of the default mock before each piece of its reply
	// (MockProvider.ChunkDelay); 0 streams a scripted reply at once.
	MockChunkDelay time.Duration
	// MockRoundDelay is the mock's pause before each round answers
	// (MockProvider.RoundDelay).
	MockRoundDelay time.Duration
	// Chunks receives the reply of every model round while the provider streams it
	// (package chunks); nil publishes nothing. Chunks never enter the workflow's history.
	Chunks *chunks.Hub
	// Transcripts reads a round's messages; required. Use ClientTranscripts in a worker.
	Transcripts TranscriptSource
	// Tools maps a tool name to its executor. Optional.
	Tools map[string]ToolFunc
	// Bindings are the deployment's tool bindings (package tools): HTTP endpoints, MCP
	// servers, Temporal activities and registered Go functions. Optional.
	Bindings ToolBindings
	// ApprovalDefaults are the host's approval settings of tool calls that need a
	// decision, under what a tool's binding sets (RouteTools answers the merge).
	ApprovalDefaults ToolApproval
	// WebhookSecret is the host's webhook key (WOP_WEBHOOK_SECRET), from which the
	// signing secret of every subscription is derived; without it DeliverWebhook
	// refuses to deliver. The API process holds the same key.
	WebhookSecret []byte
	// WebhookAllowPrivate lets deliveries reach loopback and private addresses (tests,
	// a receiver on the same host); link-local and metadata addresses stay refused.
	WebhookAllowPrivate bool
	// Version names the host in the User-Agent of webhook deliveries.
	Version string
	// Workflows signals and queries the host's own workflows (a run's notices to its
	// tenant's webhook dispatcher, NotifyDispatcher; whether a delivery's subscription
	// is still registered, DeliverWebhook); a Temporal client. Nil: NotifyDispatcher
	// signals nothing and deliveries ask nobody.
	Workflows WorkflowClient
	// Logger receives activity logs (model rounds, tool calls, webhook deliveries), each
	// with the run id and the round or call it is about; nil discards them. It is the
	// only log the activities write to.
	Logger *slog.Logger
	// Context bounds the messages a model round sends its provider (zero fields: the
	// defaults, DefaultContextBytes and DefaultContextMessages).
	Context ContextBudget
	// MaxResultBytes bounds a model reply and a tool result (DefaultMaxResultBytes when
	// <= 0); see limits.go.
	MaxResultBytes int
	// ModelOutage is how long model rounds wait out an unavailable provider, by logical
	// provider key or canonical provider id ("" for every provider); unset fields and
	// providers take DefaultModelOutage. An entry's RetryFor is taken as it is: 0 does
	// not wait (see outage.go, OutageFromEnv).
	ModelOutage map[string]OutagePolicy
	// StallReminder is how often a tool call that waits out an outage (its binding's
	// retry_for) records a workflow.stalled event; 0 means DefaultStallReminder.
	StallReminder time.Duration
	// Incarnation names the process the activities run in, made once when it starts
	// (NewIncarnation); empty: New makes one. DurabilityHold reports it.
	Incarnation string
	// DurabilityKill ends the process the way a lost machine does; the conformance
	// seams set it (the first attempt of DurabilityHold calls it). Nil: the process
	// serves no seams and DurabilityHold fails closed (ErrTypeSeamsOff).
	DurabilityKill func()
}

// Activities carries the dependencies of every activity of the host. Its exported
// methods are the activities; register the instance with worker.RegisterActivity.
type Activities struct {
	providers   map[string]Provider
	packKeys    map[string]map[string]string
	mockOnly    bool // every provider is the scripted mock: mock tool_results serve unbound tools
	scripts     map[string]*packs.MockScript
	transcripts TranscriptSource
	tools       map[string]ToolFunc
	bindings    ToolBindings
	chunks      *chunks.Hub
	logger      *slog.Logger
	context     ContextBudget
	maxResult   int
	// approvalDefaults are Config.ApprovalDefaults.
	approvalDefaults ToolApproval
	// outage is Config.ModelOutage; stallReminder Config.StallReminder.
	outage        map[string]OutagePolicy
	stallReminder time.Duration

	signals             WorkflowClient
	webhookKey          []byte
	webhookAllowPrivate bool
	version             string
	webhookOnce         sync.Once
	webhookHTTP         *http.Client

	// incarnation is Config.Incarnation; durabilityKill Config.DurabilityKill.
	incarnation    string
	durabilityKill func()
}

// New checks cfg and builds the activities.
func New(cfg Config) (*Activities, error) {
	if cfg.Transcripts == nil {
		return nil, errors.New("activities: Config.Transcripts is required (use ClientTranscripts in a worker)")
	}
	if err := cfg.ApprovalDefaults.Check(); err != nil {
		return nil, fmt.Errorf("activities: approval defaults: %w", err)
	}
	outage, err := outagePolicies(cfg.ModelOutage)
	if err != nil {
		return nil, fmt.Errorf("activities: %w", err)
	}
	if cfg.StallReminder < 0 {
		return nil, errors.New("activities: StallReminder must not be negative")
	}
	providers := make(map[string]Provider, len(cfg.Providers)+1)
	for key, p := range cfg.Providers {
		if p == nil {
			return nil, fmt.Errorf("activities: provider %q is nil", key)
		}
		if m, ok := p.(*MockProvider); ok && m.Scripts == nil {
			p = &MockProvider{Scripts: cfg.MockScripts, Strict: m.Strict || cfg.MockStrict, ChunkDelay: max(m.ChunkDelay, cfg.MockChunkDelay),
				RoundDelay: max(m.RoundDelay, cfg.MockRoundDelay)}
		}
		providers[key] = p
	}
	if len(providers) == 0 {
		providers[DefaultProviderKey] = &MockProvider{Scripts: cfg.MockScripts, Strict: cfg.MockStrict, ChunkDelay: cfg.MockChunkDelay,
			RoundDelay: cfg.MockRoundDelay}
	}
	if providers[DefaultProviderKey] == nil {
		return nil, fmt.Errorf("activities: no %q provider among the configured keys %v", DefaultProviderKey, slices.Sorted(maps.Keys(providers)))
	}
	for pack, keys := range cfg.PackProviders {
		for key, to := range keys {
			if providers[to] == nil {
				return nil, fmt.Errorf("activities: pack %q maps key %q to %q, which is not a configured provider key", pack, key, to)
			}
		}
	}
	mockOnly := true
	for _, p := range providers {
		if _, ok := p.(*MockProvider); !ok {
			mockOnly = false
		}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Activities{
		providers:   providers,
		packKeys:    cfg.PackProviders,
		mockOnly:    mockOnly,
		scripts:     cfg.MockScripts,
		transcripts: cfg.Transcripts,
		tools:       cfg.Tools,
		bindings:    cfg.Bindings,
		chunks:      cfg.Chunks,
		logger:      logger,
		context:     cfg.Context.withDefaults(),
		maxResult:   cmp.Or(max(cfg.MaxResultBytes, 0), DefaultMaxResultBytes), // <= 0: the default

		approvalDefaults: cfg.ApprovalDefaults,
		outage:           outage,
		stallReminder:    cmp.Or(cfg.StallReminder, DefaultStallReminder), // not negative (checked above)

		signals:             cfg.Workflows,
		webhookKey:          cfg.WebhookSecret,
		webhookAllowPrivate: cfg.WebhookAllowPrivate,
		version:             cmp.Or(cfg.Version, "dev"),

		incarnation:    cmp.Or(cfg.Incarnation, NewIncarnation()),
		durabilityKill: cfg.DurabilityKill,
	}, nil
}

// provider resolves a logical provider key of a pack's round: the pack's mapping
// (PackProviders) first, then the key itself. An empty key, or a key no provider is
// configured for, uses the default provider: a pack that names a logical provider
// (RFC 0012) runs on the worker's primary model unless that key is configured. It
// returns the provider key that serves.
func (a *Activities) provider(pack, key string) (Provider, string, error) {
	if key == "" {
		key = DefaultProviderKey
	}
	if to, ok := a.packKeys[pack][key]; ok {
		key = to
	}
	if p, ok := a.providers[key]; ok {
		return p, key, nil
	}
	if p, ok := a.providers[DefaultProviderKey]; ok {
		return p, DefaultProviderKey, nil
	}
	return nil, key, nonRetryable(ErrTypeUnknownProvider, "no model provider is configured for key %q", key)
}

// ModelRound runs one model round: it reads the round's transcript through its
// reference (the transcript never travels in the activity input, so history stays
// flat), calls the provider and returns the text, tool calls, usage and model. It
// heartbeats while the provider works. Permanent failures are non-retryable
// application errors typed with the ErrType* constants.
//
// A retryable provider error that names no delay of its own (Retry-After) is retried
// after ModelRoundErrorBackoff, doubled per attempt: the retry policy's shorter
// interval is for attempts Temporal counted lost, whose worker died.
//
// A second or later attempt has Temporal forget the run's sticky queue before it
// reads its transcript (resetStickyOnRetry): the worker before may have died holding
// it.
func (a *Activities) ModelRound(ctx context.Context, in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
	res, err := a.modelRound(ctx, in, a.transcripts)
	return res, withErrorBackoff(ctx, err)
}

// withErrorBackoff gives a retryable application error of a model round activity the
// NextRetryDelay of its attempt (errorBackoff), unless it names one already or the
// retry policy's own pause is as long. Other errors (a cancelled context, a
// non-retryable or untyped failure) are returned as they are.
func withErrorBackoff(ctx context.Context, err error) error {
	if err == nil || !activity.IsActivity(ctx) {
		return err
	}
	info := activity.GetInfo(ctx)
	return errorWithBackoff(err, info.Attempt, info.RetryPolicy)
}

// errorWithBackoff is withErrorBackoff for attempt under the retry policy rp.
func errorWithBackoff(err error, attempt int32, rp *temporal.RetryPolicy) error {
	appErr, ok := err.(*temporal.ApplicationError)
	if !ok || appErr.NonRetryable() || appErr.NextRetryDelay() > 0 || slices.Contains(NonRetryableErrorTypes, appErr.Type()) {
		return err
	}
	d := errorBackoff(attempt, rp)
	if d == 0 {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(appErr.Message(), appErr.Type(),
		temporal.ApplicationErrorOptions{NextRetryDelay: d, Cause: errors.Unwrap(appErr)})
}

// modelRound runs one model round reading its transcript from src.
func (a *Activities) modelRound(ctx context.Context, in convo.ModelRoundInput, src TranscriptSource) (*convo.ModelRoundResult, error) {
	p, key, err := a.provider(in.PackID, in.Provider)
	if err != nil {
		return nil, err
	}
	log := a.logger.With("runId", in.RunID, "packId", in.PackID, "state", in.State, "round", in.Round, "provider", p.Name(), "providerKey", key)
	if mn, ok := p.(modelNamer); ok && len(in.ModelOverrides) > 0 {
		if ov, ok := in.ModelOverrides[mn.ModelName()]; ok {
			if in, err = applyOverride(ov, in); err != nil {
				return nil, nonRetryable(ErrTypeBadRequest, "model round %d of run %s: model_overrides[%q]: %v", in.Round, in.RunID, mn.ModelName(), err)
			}
			log = log.With("modelOverride", mn.ModelName())
		}
	}

	// The round heartbeats from its start: reading its transcript may take a while too
	// (the query waits out the sticky queue of a worker that died holding the run), and
	// an attempt that sends no heartbeat for ModelRoundHeartbeatTimeout is counted lost.
	// The heartbeat's detail stays a fixed description: Temporal writes the last
	// heartbeat into the history when an attempt times out, and chunks never go there.
	stop := heartbeat(ctx, fmt.Sprintf("model round %d in state %s", in.Round, in.State))
	defer stop()
	a.resetStickyOnRetry(ctx)

	ref := in.Transcript
	ref.MaxBytes, ref.MaxMessages = a.context.MaxBytes, a.context.MaxMessages
	whole := false
	if w, ok := p.(wholeTranscriptProvider); ok && w.wantsWholeTranscript(in.PackID) {
		// The scripted mock plays its script over every round of the run: it reads the
		// transcript from the start, past the context budget a real model gets.
		ref.From, ref.MaxBytes, ref.MaxMessages, whole = 0, 0, 0, true
	}
	msgs, err := src.Transcript(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("model round %d of run %s: read transcript: %w", in.Round, in.RunID, err)
	}
	req := &Request{Input: in, Messages: msgs}
	if whole {
		base := ref.To - len(msgs) // 0, unless earlier executions are past retention
		from := min(max(in.Transcript.From-base, 0), len(msgs))
		req.Earlier, req.Messages = msgs[:from], msgs[from:]
	}

	// The reply streams to the worker's chunk hub while the provider writes it.
	pub := a.chunks.Begin(chunks.Round{RunID: in.RunID, NodeID: in.NodeID, State: in.State, Round: in.Round,
		MessageID: in.MessageID, Speaker: in.PackID, Attempt: attempt(ctx), Provider: p.Name(), Model: modelName(p)})
	req.Stream = pub.Text
	start := time.Now()
	res, err := p.Complete(ctx, req)
	if err != nil {
		pub.Abort(errorType(err))
		log.Warn("Model round failed", "error", err, "elapsed", time.Since(start).Round(time.Millisecond))
		return nil, err
	}
	if res.Provider == "" {
		res.Provider = p.Name()
	}
	if err := limitReply(res, a.maxResult, log); err != nil {
		pub.Abort(errorType(err))
		return nil, err
	}
	pub.End(finalChunk(res))
	log.Info("Model round done", "model", res.Model, "toolCalls", len(res.ToolCalls),
		"inputTokens", res.Usage.InputTokens, "outputTokens", res.Usage.OutputTokens, "elapsed", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// attempt is the activity attempt of ctx (1 outside an activity).
func attempt(ctx context.Context) int {
	if activity.IsActivity(ctx) {
		return int(activity.GetInfo(ctx).Attempt)
	}
	return 1
}

// modelName is the model a provider calls, when it says.
func modelName(p Provider) string {
	if mn, ok := p.(modelNamer); ok {
		return mn.ModelName()
	}
	if _, ok := p.(*MockProvider); ok {
		return MockModel
	}
	return ""
}

// errorType names a failed round for its last chunk: the application error's type,
// or what ended it.
func errorType(err error) string {
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.Type() != "":
		return appErr.Type()
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	}
	return "Error"
}

// finalChunk is what the last chunk of a round that succeeded says.
func finalChunk(res *convo.ModelRoundResult) chunks.Final {
	f := chunks.Final{FinishReason: res.FinishReason, Model: res.Model,
		Usage: chunks.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens}}
	for _, c := range res.ToolCalls {
		f.ToolCalls = append(f.ToolCalls, chunks.ToolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Args)})
	}
	return f
}

// heartbeat records a heartbeat with detail until the returned stop is called: every
// heartbeatEvery, or a quarter of the activity's heartbeat timeout when that is
// shorter (a model round's, ModelRoundHeartbeatInterval), so that the interval always
// follows the options the attempt was scheduled with. A call that ends sooner sends none: a heartbeat costs a call to
// Temporal, and the activity's completion says more. Outside an activity context it
// does nothing.
func heartbeat(ctx context.Context, detail string) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	every := heartbeatEvery
	if t := activity.GetInfo(ctx).HeartbeatTimeout; t > 0 {
		every = min(every, t/4)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, detail)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// ToolCall runs one tool call. The executor is, in order: the ToolFunc registered for
// the tool (Config.Tools); else the tool's binding on this worker (Config.Bindings:
// HTTP, MCP, a Go function); else the pack's mock tool_results entry for the tool
// (every call of the tool returns it); else no executor exists and the result is an
// IsError result telling the model that no executor is configured for the tool on this
// host, so the model can carry on without it. Arguments and results are not logged
// (they may hold user data); the log says which executor ran.
func (a *Activities) ToolCall(ctx context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, error) {
	res, err := a.toolCall(ctx, in)
	if err != nil {
		return nil, err
	}
	return limitToolResult(res, a.maxResult), nil
}

// toolCall runs one tool call with the executor ToolCall describes.
func (a *Activities) toolCall(ctx context.Context, in convo.ToolCallInput) (*convo.ToolCallResult, error) {
	log := a.logger.With("runId", in.RunID, "packId", in.PackID, "state", in.State, "round", in.Round, "tool", in.Tool, "callId", in.CallID)
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = ToolIdempotencyKey("", in)
	}
	if fn := a.tools[in.Tool]; fn != nil {
		stop := heartbeat(ctx, fmt.Sprintf("tool %s (call %s)", in.Tool, in.CallID))
		res, err := fn(ctx, in)
		stop()
		if err != nil {
			log.Warn("Tool call failed", "executor", "registered", "error", err)
			return nil, fmt.Errorf("tool %q (call %s): %w", in.Tool, in.CallID, err)
		}
		if res == nil {
			res = &convo.ToolCallResult{}
		}
		res.Content = jsonContent(res.Content)
		res.Route = RouteGo
		log.Info("Tool call done", "executor", "registered", "isError", res.IsError)
		return res, nil
	}
	if a.bindings != nil {
		start := time.Now()
		stop := heartbeat(ctx, fmt.Sprintf("tool %s (call %s)", in.Tool, in.CallID))
		res, ok, err := a.bindings.Execute(ctx, in)
		stop()
		if ok {
			elapsed := time.Since(start).Round(time.Millisecond)
			if err != nil {
				log.Warn("Tool call failed", "executor", "binding", "error", err, "elapsed", elapsed)
				return nil, err
			}
			if res == nil {
				res = &convo.ToolCallResult{}
			}
			res.Content = jsonContent(res.Content)
			res.Route = RouteNone
			if route, ok := a.bindings.Route(ToolRouteCall{CallID: in.CallID, Tool: in.Tool}); ok {
				res.Route = route.Kind
			}
			log.Info("Tool call done", "executor", "binding", "isError", res.IsError, "elapsed", elapsed)
			return res, nil
		}
	}
	if script := a.mockScript(in.PackID); script != nil {
		if out, ok := script.ToolResults[in.Tool]; ok {
			log.Info("Tool call done", "executor", "mock")
			return &convo.ToolCallResult{Content: jsonContent(out), Route: RouteMock}, nil
		}
	}
	log.Warn("Tool call has no binding", "executor", "none")
	return &convo.ToolCallResult{Content: noBindingContent(in.Tool), IsError: true, Route: RouteNone}, nil
}

// noBindingContent is the error result of a call whose tool has no binding on this
// worker.
func noBindingContent(tool string) json.RawMessage {
	content, _ := json.Marshal(map[string]string{
		"error": fmt.Sprintf("tool %q has no binding on this host (no entry in the tool bindings file and no registered function), so the call was not run", tool),
	})
	return content
}

// mockScript is the pack's mock script when its tool_results may answer calls: only on
// a worker whose every provider is the scripted mock. A worker that serves a real model
// never answers with the mock's invented data.
func (a *Activities) mockScript(pack string) *packs.MockScript {
	if !a.mockOnly {
		return nil
	}
	return a.scripts[pack]
}

// jsonContent returns raw as valid JSON: null for empty, a JSON string for text that
// is not JSON.
func jsonContent(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`null`)
	}
	if json.Valid(raw) {
		return raw
	}
	b, _ := json.Marshal(string(raw))
	return b
}
