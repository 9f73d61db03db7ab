// Package stack boots the whole host in one process: the embedded Temporal server (or a
// connection to an external one), a Temporal client, the worker and the HTTP API. It is
// what `wop dev`, the end-to-end test harness and `wop bench` start, so the three never
// drift apart. Parts of a running stack can be stopped and started again (the worker,
// the API), and a stopped stack can be started again on the same data folder.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/server/common/metrics"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/internal/devserver"
	"github.com/wop-dev/wop/internal/payloadcodec"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/tools"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// Options configure Start.
type Options struct {
	// DataDir holds the embedded server's SQLite file. Empty means in-memory.
	DataDir string
	// TemporalAddress, when set, dials that Temporal frontend instead of starting the
	// embedded server. TemporalClient supplies TLS, credentials and the namespace.
	TemporalAddress string
	// TemporalClient are extra client options (ignored: HostPort and Logger).
	TemporalClient client.Options
	// Namespace defaults to "default" (or TemporalClient.Namespace).
	Namespace string
	// Retention is the embedded server's namespace retention (zero:
	// devserver.DefaultRetention); ignored with an external Temporal, whose operator
	// sets it.
	Retention time.Duration
	// TemporalPort is the embedded server's gRPC port; 0 picks a free one.
	TemporalPort int
	// UI starts the Temporal Web UI of the embedded server on UIPort (0 = free port).
	UI     bool
	UIPort int
	// HTTPAddr is the API's listen address. Default 127.0.0.1:0 (a free port).
	HTTPAddr string
	// SeedFixtures adds the OpenWOP conformance fixtures to the catalog.
	SeedFixtures bool
	// API configures the HTTP API. An empty PublicURL becomes the API's own URL.
	API api.Config
	// Worker configures the worker; its PacksDir is the packs folder the catalog and the
	// activities load. A nil Worker.Logger uses Logger.
	Worker worker.Config
	// Packs, when not nil, are the packs to serve, already loaded from Worker.PacksDir
	// (wop dev checks them before it starts the server); nil loads the folder.
	Packs []*packs.Loaded
	// Logger receives the host's logs. Nil discards them.
	Logger *slog.Logger
	// ServerLogger receives the embedded Temporal server's logs (default Logger) at
	// ServerLogLevel and up.
	ServerLogger   *slog.Logger
	ServerLogLevel slog.Level
	// ServerDynamicConfig adds or overrides the embedded server's dynamic config by key
	// (tests lower Temporal's limits with it); ignored with an external Temporal.
	ServerDynamicConfig map[string]any
	// ServerMetrics receives the embedded server's own metrics (wop bench breaks a turn
	// down with them); ignored with an external Temporal.
	ServerMetrics metrics.Handler
	// NexusEndpoint, when set, is the Nexus endpoint the embedded server routes to the
	// host's task queue (the agents' Nexus service, worker/nexus.go); ignored with an
	// external Temporal, whose operator creates endpoints.
	NexusEndpoint string
}

// Stack is a running host.
type Stack struct {
	opts    Options
	logger  *slog.Logger
	server  *devserver.Server // nil when dialling an external Temporal
	client  client.Client
	catalog *workflows.Catalog
	acts    *activities.Activities
	packs   int
	tools   *tools.Set
	report  *tools.Report

	mu       sync.Mutex
	worker   sdkworker.Worker
	stream   *worker.StreamServer // the running worker's chunk endpoint
	apiSrv   *api.Server
	httpSrv  *http.Server
	httpDone chan struct{}
	apiAddr  string // the bound address, kept across StopAPI/StartAPI
}

// Start boots the stack and returns once the API accepts connections. On error every
// part already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ServerLogger == nil {
		opts.ServerLogger = opts.Logger
	}
	if opts.Worker.Logger == nil {
		opts.Worker.Logger = opts.Logger
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = "127.0.0.1:0"
	}
	if opts.Namespace == "" {
		opts.Namespace = opts.TemporalClient.Namespace
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	// The API starts runs on the queue the worker polls (either side may name it).
	switch {
	case opts.API.TaskQueue == "":
		opts.API.TaskQueue = opts.Worker.Queue()
	case opts.Worker.TaskQueue == "":
		opts.Worker.TaskQueue = opts.API.TaskQueue
	case opts.API.TaskQueue != opts.Worker.TaskQueue:
		return nil, fmt.Errorf("the API's task queue %q is not the worker's %q", opts.API.TaskQueue, opts.Worker.TaskQueue)
	}
	// Streamed replies: the worker serves its chunk endpoint on a free loopback port,
	// and the API reads it with the secret they share (one made up for this process
	// unless either side was given one).
	switch {
	case len(opts.Worker.StreamSecret) == 0 && len(opts.API.StreamSecret) == 0:
		opts.Worker.StreamSecret = []byte(randomSecret())
		opts.API.StreamSecret = opts.Worker.StreamSecret
	case len(opts.API.StreamSecret) == 0:
		opts.API.StreamSecret = opts.Worker.StreamSecret
	case len(opts.Worker.StreamSecret) == 0:
		opts.Worker.StreamSecret = opts.API.StreamSecret
	}
	if opts.Worker.StreamAddr == "" {
		opts.Worker.StreamAddr = "127.0.0.1:0"
	}
	if opts.Worker.Chunks == nil {
		opts.Worker.Chunks = chunks.NewHub()
	}
	s := &Stack{opts: opts, logger: opts.Logger}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	// The API port is checked first: a busy port should fail fast, before the server
	// has spent time starting.
	ln, err := net.Listen("tcp", opts.HTTPAddr)
	if err != nil {
		return nil, &devserver.PortInUseError{What: "API", Addr: opts.HTTPAddr, Err: err}
	}
	s.apiAddr = ln.Addr().String()

	hostPort := opts.TemporalAddress
	if hostPort == "" {
		// The embedded server runs SDK workers of its own, and the first SDK worker of
		// the process sizes the sticky cache every worker shares.
		opts.Worker.SetCacheSize()
		s.server, err = devserver.Start(ctx, devserver.Options{
			DataDir:          opts.DataDir,
			FrontendPort:     opts.TemporalPort,
			UI:               opts.UI,
			UIPort:           opts.UIPort,
			UICodecEndpoint:  uiCodecEndpoint(opts.API.PayloadCodec, s.apiAddr),
			Namespace:        opts.Namespace,
			Retention:        opts.Retention,
			SearchAttributes: workflows.SearchAttributesFor(!opts.API.NoLegacyAttributes),
			Logger:           opts.ServerLogger,
			LogLevel:         opts.ServerLogLevel,
			DynamicConfig:    opts.ServerDynamicConfig,
			MetricsHandler:   opts.ServerMetrics,
			NexusEndpoints:   nexusEndpoints(opts),
		})
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		hostPort = s.server.FrontendAddress()
	}

	copts := opts.TemporalClient
	copts.HostPort = hostPort
	copts.Namespace = opts.Namespace
	copts.Logger = worker.SDKLogger(opts.Logger)
	if s.server != nil && copts.ConnectionOptions.GrpcCompression == nil {
		// The embedded server is in this process: gzip of every request (and, since the
		// server answers in the request's encoding, of every answer) over loopback costs
		// CPU on both sides and saves no bandwidth.
		copts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if opts.API.PayloadCodec != nil && copts.DataConverter == nil {
		// The API and the worker share this client: both seal what they write.
		copts.DataConverter = payloadcodec.DataConverter(opts.API.PayloadCodec)
	}
	s.client, err = client.DialContext(ctx, copts)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("connect to Temporal at %s: %w", hostPort, err)
	}
	if s.server == nil {
		// An external server may lack the namespace or the host's search attributes (a
		// test server, a fresh cluster). Creating them needs operator rights, so failure
		// only warns.
		if _, err := worker.Setup(ctx, s.client, opts.Namespace, 0, !opts.API.NoLegacyAttributes); err != nil {
			s.logger.Warn("Could not check the namespace's search attributes", "error", err)
		}
	}

	loaded := opts.Packs
	if loaded == nil {
		if loaded, err = worker.LoadPacks(opts.Worker.PacksDir, opts.Logger); err != nil {
			_ = ln.Close()
			return nil, err
		}
	}
	s.packs = len(loaded)
	if s.catalog, err = worker.LoadCatalog(loaded, opts.SeedFixtures, opts.Worker.TurnLimits); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if s.tools, s.report, err = worker.LoadTools(ctx, opts.Worker, loaded, opts.Logger); err != nil {
		_ = ln.Close()
		return nil, err
	}
	worker.LogTools(opts.Logger, s.tools, s.report)
	if s.acts, err = worker.NewActivities(s.client, opts.Worker, loaded, s.tools); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := s.StartWorker(); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := s.serveAPI(ln); err != nil {
		return nil, err
	}
	return s, nil
}

// nexusEndpoints are the Nexus endpoints the embedded server creates.
func nexusEndpoints(opts Options) []devserver.NexusEndpoint {
	if opts.NexusEndpoint == "" {
		return nil
	}
	return []devserver.NexusEndpoint{{Name: opts.NexusEndpoint, TaskQueue: opts.Worker.Queue()}}
}

// StartWorker starts a new worker (after StopWorker). It is a no-op when one runs.
func (s *Stack) StartWorker() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worker != nil {
		return nil
	}
	w, stream, err := s.newWorker(s.opts.Worker)
	if err != nil {
		return err
	}
	s.worker, s.stream = w, stream
	return nil
}

// AddWorker starts one more worker beside the stack's, with the stack's worker
// configuration as tweak changes it (another build of a Worker Deployment, as a
// rolling upgrade starts one), and returns the function that stops it.
func (s *Stack) AddWorker(tweak func(*worker.Config)) (stop func(), err error) {
	wcfg := s.opts.Worker
	tweak(&wcfg)
	w, stream, err := s.newWorker(wcfg)
	if err != nil {
		return nil, err
	}
	return func() {
		w.Stop()
		if stream != nil {
			_ = stream.Close()
		}
	}, nil
}

// newWorker starts a worker of configuration wcfg: it gets a chunk endpoint of its own
// (a new port, as a new process would) serving the stack's hub, advertised in its
// identity, and, with Versioning.SetCurrent, makes its version current once it polls.
func (s *Stack) newWorker(wcfg worker.Config) (sdkworker.Worker, *worker.StreamServer, error) {
	if err := wcfg.Versioning.Check(); err != nil {
		return nil, nil, fmt.Errorf("start worker: %w", err)
	}
	wcfg.Versioning.Namespace = s.opts.Namespace
	if wcfg.Catalog == nil {
		wcfg.Catalog = s.catalog // the agents activities start runs of the API's catalog
	}
	stream, err := worker.StartStream(&wcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("start worker: %w", err)
	}
	w := worker.New(s.client, wcfg, s.acts)
	if err := w.Start(); err != nil {
		if stream != nil {
			_ = stream.Close()
		}
		return nil, nil, fmt.Errorf("start worker: %w", err)
	}
	if err := worker.SetCurrentVersion(context.Background(), s.client, wcfg.Versioning, s.opts.Logger); err != nil {
		w.Stop()
		if stream != nil {
			_ = stream.Close()
		}
		return nil, nil, fmt.Errorf("start worker: %w", err)
	}
	return w, stream, nil
}

// StopWorker stops the worker; runs keep their state in Temporal and continue when a
// worker polls again.
func (s *Stack) StopWorker() {
	s.mu.Lock()
	w, stream := s.worker, s.stream
	s.worker, s.stream = nil, nil
	s.mu.Unlock()
	if w != nil {
		w.Stop()
	}
	if stream != nil {
		_ = stream.Close()
	}
}

// StartAPI serves the API again on the address it had before StopAPI, so its URL does
// not change.
func (s *Stack) StartAPI() error {
	s.mu.Lock()
	running := s.httpSrv != nil
	addr := s.apiAddr
	s.mu.Unlock()
	if running {
		return nil
	}
	var ln net.Listener
	var err error
	// The port was ours a moment ago; a connection in TIME_WAIT can delay the rebind
	// briefly on some systems.
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return &devserver.PortInUseError{What: "API", Addr: addr, Err: err}
	}
	return s.serveAPI(ln)
}

func (s *Stack) serveAPI(ln net.Listener) error {
	cfg := s.opts.API
	cfg.Namespace = s.opts.Namespace
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + ln.Addr().String()
	}
	if cfg.PayloadCodec != nil && s.server != nil && s.server.UIURL() != "" {
		// The embedded UI, on loopback, opens sealed payloads at this API's /codec.
		cfg.CodecUIOrigin = s.server.UIURL()
	}
	apiSrv, err := api.New(cfg, s.client, s.catalog, s.logger)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("build API: %w", err)
	}
	httpSrv := apiSrv.HTTPServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("API server stopped", "error", err)
		}
	}()
	s.mu.Lock()
	s.apiSrv, s.httpSrv, s.httpDone = apiSrv, httpSrv, done
	s.mu.Unlock()
	return nil
}

// StopAPI stops accepting requests, waits for in-flight ones (bounded by ctx; long
// polls and streams are cut when ctx ends) and stops the API's background work.
func (s *Stack) StopAPI(ctx context.Context) error {
	s.mu.Lock()
	apiSrv, httpSrv, done := s.apiSrv, s.httpSrv, s.httpDone
	s.apiSrv, s.httpSrv, s.httpDone = nil, nil, nil
	s.mu.Unlock()
	if httpSrv == nil {
		return nil
	}
	// Stop the API's own background work first so streams end and Shutdown can drain.
	errAPI := apiSrv.Shutdown(ctx)
	errHTTP := httpSrv.Shutdown(ctx)
	if errHTTP != nil {
		_ = httpSrv.Close()
	}
	<-done
	return errors.Join(errAPI, errHTTP)
}

// Stop stops the API, the worker, the client and the embedded server, in that order.
// It is safe to call more than once and on a partly started stack.
func (s *Stack) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.server != nil {
		s.server.Quiet() // the server would log the polls cancelled below as errors
	}
	if err := s.StopAPI(ctx); err != nil {
		s.logger.Warn("API shutdown", "error", err)
	}
	s.StopWorker()
	if s.tools != nil {
		if err := s.tools.Close(); err != nil {
			s.logger.Warn("Closing the tool bindings", "error", err)
		}
		s.tools = nil
	}
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	if s.server != nil {
		s.server.Stop()
		s.server = nil
	}
}

// ReloadKeys reloads the API's keys file (api.Server.ReloadKeys); it does nothing
// while the API is stopped or without a keys file.
func (s *Stack) ReloadKeys() error {
	s.mu.Lock()
	apiSrv := s.apiSrv
	s.mu.Unlock()
	if apiSrv == nil {
		return nil
	}
	return apiSrv.ReloadKeys()
}

// APIURL is the base URL of the HTTP API, e.g. http://127.0.0.1:8080.
func (s *Stack) APIURL() string { return "http://" + s.apiAddr }

// UIURL is the Temporal Web UI's URL, or "" when it is off or Temporal is external.
func (s *Stack) UIURL() string {
	if s.server == nil {
		return ""
	}
	return s.server.UIURL()
}

// TemporalAddress is the host:port of the Temporal frontend the stack uses.
func (s *Stack) TemporalAddress() string {
	if s.server != nil {
		return s.server.FrontendAddress()
	}
	return s.opts.TemporalAddress
}

// StreamURL is the chunk endpoint of the running worker ("" when none runs).
func (s *Stack) StreamURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		return ""
	}
	return s.stream.URL()
}

// Chunks is the hub the stack's model rounds publish to.
func (s *Stack) Chunks() *chunks.Hub { return s.opts.Worker.Chunks }

// randomSecret is a fresh 32-byte secret, hex-encoded.
func randomSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// Namespace is the Temporal namespace of the stack.
func (s *Stack) Namespace() string { return s.opts.Namespace }

// Client is the stack's Temporal client. It stays valid until Stop.
func (s *Stack) Client() client.Client { return s.client }

// Catalog is the catalog the API serves.
func (s *Stack) Catalog() *workflows.Catalog { return s.catalog }

// ToolsReport says which pack tools are bound, to what, and which are not (nil before
// the stack loaded its packs).
func (s *Stack) ToolsReport() *tools.Report { return s.report }

// ToolsFile is the bindings file the worker loaded, or "" for none.
func (s *Stack) ToolsFile() string { return s.opts.Worker.ToolsFilePath() }

// PackCount is the number of packs loaded from the packs folder.
func (s *Stack) PackCount() int { return s.packs }

// Options returns the options the stack was started with (after defaults), so a test
// can start a new stack on the same data folder.
func (s *Stack) Options() Options { return s.opts }

// uiCodecEndpoint is the codec endpoint the embedded UI is given: this stack's API when
// payloads are sealed, else none.
func uiCodecEndpoint(codec *payloadcodec.Codec, apiAddr string) string {
	if codec == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(apiAddr)
	if ip := net.ParseIP(host); err == nil && (ip == nil || ip.IsUnspecified()) {
		host = "127.0.0.1" // the UI's browser dials the API on this machine
	}
	return "http://" + net.JoinHostPort(host, port) + "/codec"
}
