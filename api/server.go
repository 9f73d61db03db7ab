// Package api is the host's OpenWOP REST surface, served with Echo: major 1 under /v1/
// and major 2 on the unversioned paths, from the same handlers (version.go). Every protocol
// call becomes a Temporal call: a workflow start, a signal, a query or a cancel, and
// listings read Temporal's visibility store. The API keeps no state of its own beyond
// in-memory rate-limit buckets and the keys it read (keys.go): runs, their event logs,
// idempotency digests and the outcomes of resolves live in the run workflows, so any
// number of API processes serve the same runs. It also serves the approvals inbox
// (inbox.go) and the process's metrics.
package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/internal/payloadcodec"
	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/workflows"
)

// Server is the HTTP API.
type Server struct {
	cfg Config
	tc  client.Client
	// dc reads the payloads the API takes from histories and memos itself: the default
	// converter behind Config.PayloadCodec's seal, when set.
	dc      converter.DataConverter
	cat     catalogView
	log     *slog.Logger
	e       *echo.Echo
	metrics *httpMetrics      // nil without Config.Metrics
	waiting *waitingCollector // the waiting gauges; nil without Config.Metrics
	limiter *rateLimiter
	// authFails and tokenRoutes are buckets per client address (authguard.go).
	authFails   *rateLimiter
	tokenRoutes *rateLimiter
	tokens      *tokenSigner
	watches     outcomeWatches
	routes      []route
	verbs       map[string]route // colon verbs on POST /v1/runs/{runId}:<verb>
	verbsV2     map[string]route // those served on POST /runs/{runId}:<verb> too

	// chunkClient reads the workers' chunk endpoints (nil without a stream secret);
	// chunkFeeds are the runs' shared chunk readers (chunkfeed.go).
	chunkClient  *chunks.Client
	chunkFeedsMu sync.Mutex
	chunkFeeds   map[string]*chunkFeed

	feedsMu sync.Mutex
	feeds   map[string]*runFeed // one per run being read (feed.go)
	// turnEvents are the events resolve updates carried, for the polls that follow.
	turnEvents turnEvents
	// closed keeps what was read of runs' closed executions (closedcache.go).
	closed *closedCache
	// updates lets one resolve update per run be in flight at a time (updategate.go).
	updates updateGate
	// keys are the accepted keys (keys_reload.go): staticKeys from Config.Keys plus
	// the keys file's, swapped whole on reload.
	keys          atomic.Pointer[keyStore]
	staticKeys    []keyEntry
	keysMu        sync.Mutex
	keysSum       [sha256.Size]byte // of the keys file content in use
	keysFailedSum [sha256.Size]byte // of the last content that did not parse
	// sessions are the requests in flight by key, ended when their key stops
	// authenticating (auth.go).
	sessions keySessions

	ctx    context.Context // cancelled by Shutdown: ends open streams
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// route is one documented endpoint. The same table registers the Echo routes and
// generates the OpenAPI document, so the two cannot drift apart.
type route struct {
	Method  string
	Path    string   // OpenAPI form, e.g. /v1/runs/{runId}
	Scopes  []string // nil: no authentication
	Summary string
	Handler echo.HandlerFunc
	// Verb is set for colon-verb paths (/v1/runs/{runId}:fork); they share one Echo
	// route and are dispatched by suffix.
	Verb string
	// Body names the request body shape in the OpenAPI document ("" = none).
	Body string
	// OK is the success status.
	OK int
	// Token marks the signed-token routes (rate-limited per client address).
	Token bool
	// Accepted marks the resolve routes, which may answer 202 queued (resolve.go).
	Accepted bool
	// Produces is the success content type ("" = application/json).
	Produces string
	// V2 marks the operations of OpenWOP v2's path manifest: they are also served on
	// the unversioned path (Path without /v1), under major 2 (version.go).
	V2 bool
	// UIOrigin marks the codec routes, which answer Config.CodecUIOrigin without a key
	// (codec.go).
	UIOrigin bool
	// V2PerEntry marks a route whose body names several resources that major 2
	// authorises one by one, never with a top-level 403 (bulk cancel): its v2 path asks
	// only for a valid key, and the handler checks Scopes for each entry.
	V2PerEntry bool
}

// v2Path is the unversioned path of a route.
func (r route) v2Path() string { return strings.TrimPrefix(r.Path, "/v1") }

// catalogView is what the API reads of the workflow catalog.
type catalogView interface {
	Definition(id string) (*workflows.Definition, bool)
	Pack(id string) (*packs.Pack, bool)
	PackIDs() []string
	Fixtures() []string
	NewRunInput(req workflows.RunRequest) (*workflows.RunInput, error)
	Limits() workflows.TurnLimits
}

// New builds the API server.
func New(cfg Config, tc client.Client, cat *workflows.Catalog, logger *slog.Logger) (*Server, error) {
	if cat == nil {
		return nil, errors.New("api.New: a workflow catalog is required")
	}
	return newServer(cfg, tc, packCatalog{cat}, logger)
}

// packCatalog is the workflow catalog as the API reads it: the packs it serves are
// packs.Pack.
type packCatalog struct{ *workflows.Catalog }

func (c packCatalog) Pack(id string) (*packs.Pack, bool) { return packagent.PackOf(c.Catalog, id) }

func newServer(cfg Config, tc client.Client, cat catalogView, logger *slog.Logger) (*Server, error) {
	if tc == nil {
		return nil, errors.New("api.New: a Temporal client is required")
	}
	if logger == nil {
		logger = slog.Default()
	}
	cfg = cfg.withDefaults()
	if len(cfg.TokenSecret) == 0 {
		return nil, errors.New("api.New: Config.TokenSecret is required to sign interrupt tokens")
	}
	static := cfg.Keys
	// The secrets are hashed by loadKeys; keep no plain copy.
	cfg.Keys = nil
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, tc: tc, cat: cat, log: logger, dc: payloadcodec.DataConverter(cfg.PayloadCodec),
		limiter:     newRateLimiter(cfg.RateLimitPerSecond, cfg.RateLimitBurst, cfg.Now),
		tokens:      newTokenSigner(cfg.TokenKeyID, cfg.TokenSecret, cfg.OldTokenSecrets),
		authFails:   newRateLimiter(cfg.Guards.AuthFailuresPerSecond, cfg.Guards.AuthFailureBurst, cfg.Now),
		tokenRoutes: newRateLimiter(cfg.Guards.TokenRoutePerSecond, cfg.Guards.TokenRouteBurst, cfg.Now),
		feeds:       map[string]*runFeed{},
		closed:      newClosedCache(),
		ctx:         ctx, cancel: cancel,
	}
	if len(cfg.StreamSecret) > 0 {
		key, err := chunks.NewKey(cfg.StreamSecret)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("api.New: Config.StreamSecret: %w", err)
		}
		s.chunkClient = &chunks.Client{Key: key}
	}
	s.chunkFeeds = map[string]*chunkFeed{}
	s.cfg.StreamSecret = nil
	if err := s.loadKeys(static); err != nil {
		cancel()
		return nil, fmt.Errorf("api.New: %w", err)
	}
	if cfg.Metrics != nil {
		m, err := newHTTPMetrics(cfg.Metrics)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("api.New: metrics: %w", err)
		}
		s.metrics = m
		if err := s.registerWaitingMetrics(cfg.Metrics); err != nil {
			cancel()
			return nil, fmt.Errorf("api.New: metrics: %w", err)
		}
	}
	s.e = s.buildEcho()
	if cfg.KeysFile != "" {
		s.wg.Add(1)
		go s.watchKeys()
	}
	return s, nil
}

func (s *Server) buildEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Pre(s.codecPreflight)
	e.Use(s.observe)
	e.Use(s.negotiate)
	e.Use(middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogMethod: true, LogRoutePath: true, LogLatency: true, LogError: true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			// The route pattern, not the URI: signed tokens travel in paths and are
			// credentials. Header values (Authorization, Idempotency-Key) are never read here.
			attrs := []any{"method", v.Method, "route", v.RoutePath, "status", v.Status, "latencyMs", v.Latency.Milliseconds()}
			if id := pathIDForLog(c, "runId"); id != "" {
				attrs = append(attrs, "runId", id)
			}
			if p := principalOf(c); p != nil {
				attrs = append(attrs, "keyId", p.KeyID, "tenant", p.Tenant)
			}
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			s.log.Log(c.Request().Context(), level, "HTTP request", attrs...)
			return nil
		},
	}))
	e.Use(middleware.Recover())
	e.Use(s.deadlines)

	s.routes = s.routeTable()
	s.verbs, s.verbsV2 = map[string]route{}, map[string]route{}
	for _, r := range s.routes {
		if r.Verb != "" {
			s.verbs[r.Verb] = r
			if r.V2 {
				s.verbsV2[r.Verb] = r
			}
			continue
		}
		var mw []echo.MiddlewareFunc
		if r.UIOrigin {
			mw = append(mw, s.codecAuthenticated(r.Scopes...))
		} else if r.Scopes != nil {
			mw = append(mw, s.authenticated(r.Scopes...))
		} else if r.Token {
			mw = append(mw, s.limitTokenRoute)
		}
		e.Add(r.Method, echoPath(r.Path), r.Handler, mw...)
		if r.V2 && r.v2Path() != r.Path {
			v2mw := mw
			if r.V2PerEntry {
				v2mw = []echo.MiddlewareFunc{s.authenticated()}
			}
			e.Add(r.Method, echoPath(r.v2Path()), r.Handler, v2mw...)
		}
	}
	e.POST("/v1/runs/:runId", s.dispatchVerb)
	e.POST("/runs/:runId", s.dispatchVerb)
	s.mountSeams(e)
	return e
}

// echoPath converts an OpenAPI path template to Echo's syntax: {name} is a parameter,
// and a literal ':' (a colon verb such as /v1/runs:bulk-cancel) is escaped.
func echoPath(p string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '{')
		if i < 0 {
			b.WriteString(strings.ReplaceAll(p, ":", `\:`))
			return b.String()
		}
		j := strings.IndexByte(p[i:], '}')
		b.WriteString(strings.ReplaceAll(p[:i], ":", `\:`))
		b.WriteString(":" + p[i+1:i+j])
		p = p[i+j+1:]
	}
}

// dispatchVerb serves POST /v1/runs/{runId}:<verb> and, for the verbs of v2's path
// manifest, POST /runs/{runId}:<verb>.
func (s *Server) dispatchVerb(c echo.Context) error {
	raw := c.Param("runId")
	verbs, prefix := s.verbs, "/v1"
	if !isV1Path(c.Request().URL.Path) {
		verbs, prefix = s.verbsV2, ""
	}
	i := strings.LastIndexByte(raw, ':')
	if i < 0 && prefix == "/v1" {
		return codeErr(CodeMethodNotAllowed, "POST is not allowed on /v1/runs/{runId}; use one of the :fork, :cancel or :resolveInterrupt verbs")
	}
	if i < 0 {
		return codeErr(CodeMethodNotAllowed, "POST is not allowed on /runs/{runId}; use one of its colon verbs (%s)", verbList(verbs))
	}
	r, ok := verbs[raw[i+1:]]
	if !ok {
		return notFound("unknown run verb %q", raw[i+1:])
	}
	c.SetParamNames("runId")
	c.SetParamValues(raw[:i])
	c.Set(routeKey, prefix+"/runs/:runId:"+r.Verb)
	return s.authenticated(r.Scopes...)(r.Handler)(c)
}

// verbList names the colon verbs of a table, sorted.
func verbList(verbs map[string]route) string {
	names := make([]string, 0, len(verbs))
	for v := range verbs {
		names = append(names, ":"+v)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (s *Server) routeTable() []route {
	return append([]route{
		{Method: http.MethodGet, Path: "/.well-known/openwop", Summary: "Discovery document", Handler: s.handleDiscovery, OK: 200},
		{Method: http.MethodGet, Path: "/v1/openapi.json", Summary: "This OpenAPI document", Handler: s.handleOpenAPI, OK: 200, V2: true},
		{Method: http.MethodGet, Path: "/healthz", Summary: "Liveness and Temporal reachability", Handler: s.handleHealth, OK: 200},
		{Method: http.MethodGet, Path: "/metrics", Summary: "Prometheus metrics of the process", Handler: s.handleMetrics, OK: 200, Produces: "text/plain"},
		{Method: http.MethodPost, Path: "/codec/encode", Scopes: []string{ScopePayloadsCodec}, UIOrigin: true, Summary: "Seal Temporal payloads with the host's payload key (Temporal's remote codec protocol)", Handler: s.handleCodecEncode, Body: "Payloads", OK: 200},
		{Method: http.MethodPost, Path: "/codec/decode", Scopes: []string{ScopePayloadsCodec}, UIOrigin: true, Summary: "Open Temporal payloads the host sealed, for the Temporal UI and CLI", Handler: s.handleCodecDecode, Body: "Payloads", OK: 200},
		{Method: http.MethodGet, Path: "/inbox", Summary: "The approvals inbox (a web page; sign in with an API key)", Handler: s.handleInbox, OK: 200, Produces: "text/html"},
		{Method: http.MethodGet, Path: "/inbox/{asset}", Summary: "The inbox's script and style sheet", Handler: s.handleInboxAsset, OK: 200, Produces: "text/javascript"},
		{Method: http.MethodGet, Path: "/v1/workflows", Scopes: []string{ScopeManifestRead}, Summary: "List the workflows served: packs and conformance fixtures", Handler: s.handleListWorkflows, OK: 200},
		{Method: http.MethodGet, Path: "/v1/workflows/{workflowId}", Scopes: []string{ScopeManifestRead}, Summary: "Get a workflow definition", Handler: s.handleGetWorkflow, OK: 200, V2: true},
		{Method: http.MethodGet, Path: "/v1/runs", Scopes: []string{ScopeRunsRead}, Summary: "List the tenant's runs from Temporal visibility, filtered and cursor-paged", Handler: s.handleListRuns, OK: 200, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs", Scopes: []string{ScopeRunsCreate}, Summary: "Start a run", Handler: s.handleCreateRun, Body: "CreateRunRequest", OK: 201, V2: true},
		{Method: http.MethodGet, Path: "/v1/runs/{runId}", Scopes: []string{ScopeRunsRead}, Summary: "Get a run snapshot", Handler: s.handleGetRun, OK: 200, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs:bulk-cancel", Scopes: []string{ScopeRunsCancel}, Summary: "Cancel up to 100 runs, each on its own: per-id results in request order", Handler: s.handleBulkCancel, Body: "BulkCancelRequest", OK: 200, V2: true, V2PerEntry: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}/cancel", Scopes: []string{ScopeRunsCancel}, Summary: "Cancel a run", Handler: s.handleCancel, Body: "CancelRequest", OK: 200, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}:pause", Verb: "pause", Scopes: []string{ScopeRunsCancel}, Summary: "Pause a run: drainPolicy drain-current-node (default) lets the running node or turn finish, immediate cuts it", Handler: s.handlePause, Body: "PauseRequest", OK: 202, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}:resume", Verb: "resume", Scopes: []string{ScopeRunsCancel}, Summary: "Resume a paused run", Handler: s.handleResume, Body: "ResumeRequest", OK: 202, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}:cancel", Verb: "cancel", Scopes: []string{ScopeRunsCancel}, Summary: "Cancel a run (alias)", Handler: s.handleCancel, Body: "CancelRequest", OK: 200},
		{Method: http.MethodGet, Path: "/v1/runs/{runId}/events", Scopes: []string{ScopeRunsRead}, Summary: "Run events as SSE, or JSON with Accept: application/json", Handler: s.handleEvents, OK: 200, V2: true},
		{Method: http.MethodGet, Path: "/v1/runs/{runId}/events/poll", Scopes: []string{ScopeRunsRead}, Summary: "Long-poll run events", Handler: s.handlePoll, OK: 200, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}/interrupts/{nodeId}", Scopes: []string{ScopeApprovalsRespond}, Summary: "Resolve the interrupt pending at a node", Handler: s.handleResolve, Body: "ResolveRequest", OK: 200, Accepted: true, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}:resolveInterrupt", Verb: "resolveInterrupt", Scopes: []string{ScopeApprovalsRespond}, Summary: "Resolve an interrupt (RFC 0005 alias)", Handler: s.handleResolveAlias, Body: "ResolveInterruptRequest", OK: 200, Accepted: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}/approvals/{nodeId}", Scopes: []string{ScopeApprovalsRespond}, Summary: "Resolve an approval (legacy alias, bare body)", Handler: s.handleResolveLegacy, Body: "ApprovalDecision", OK: 200, Accepted: true},
		{Method: http.MethodGet, Path: "/v1/interrupts", Scopes: []string{ScopeApprovalsRespond}, Summary: "List the interrupts the caller may resolve; SSE with Accept: text/event-stream", Handler: s.handleListInterrupts, OK: 200},
		{Method: http.MethodGet, Path: "/v1/interrupts/{token}", Summary: "Inspect an interrupt by signed token", Handler: s.handleTokenGet, OK: 200, Token: true, V2: true},
		{Method: http.MethodPost, Path: "/v1/interrupts/{token}", Summary: "Resolve an interrupt by signed token", Handler: s.handleTokenPost, Body: "ResolveRequest", OK: 200, Token: true, Accepted: true, V2: true},
		{Method: http.MethodPost, Path: "/v1/runs/{runId}:fork", Verb: "fork", Scopes: []string{ScopeRunsCreate, ScopeRunsRead}, Summary: "Fork a run (mode replay)", Handler: s.handleFork, Body: "ForkRequest", OK: 201, V2: true},
		{Method: http.MethodGet, Path: "/v1/runs/{runId}/effects", Scopes: []string{ScopeRunsRead}, Summary: "The run's effect ledger: each model round and tool call it performed, with its idempotency identity and outcome", Handler: s.handleRunEffects, OK: 200, V2: true},
		{Method: http.MethodGet, Path: "/v1" + EffectSeamsPath, Scopes: []string{ScopeManifestRead}, Summary: "The effect-seam manifest: every outbound effect path and how a replay fork is kept from repeating it", Handler: s.handleEffectSeams, OK: 200, V2: true},
	}, s.webhookRoutes()...)
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.traced(s.e) }

// Shutdown ends open event streams and waits for them to return (not the listener; the
// caller owns it and should call its own Shutdown first or after).
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancel()
	s.unregisterWaitingMetrics()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("api shutdown: streams still open: %w", ctx.Err())
	}
}

func (s *Server) handleHealth(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), healthTimeout)
	defer cancel()
	if _, err := s.tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		s.log.Warn("Health check: Temporal unreachable", "error", err)
		return codeErr(CodeUnavailable, "Temporal is unreachable")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}
