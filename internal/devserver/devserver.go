// Package devserver runs a real Temporal server (go.temporal.io/server) and, optionally,
// the Temporal Web UI inside the current process, on SQLite: a file that survives
// restarts (including kill -9) or a private in-memory database for tests.
//
// Only the dev entry point (cmd/wop's dev command), internal/stack and the tests import
// this package; the production worker and API processes never link the server.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	// ClusterName is the name of the single local cluster.
	ClusterName = "active"
	// ClusterID is fixed so a database file always belongs to the same cluster.
	ClusterID = "3f6c2e0a-8d1b-4c7e-9a52-6b0e4d7f1c38"
	// DefaultNamespace is the namespace created when Options.Namespace is empty.
	DefaultNamespace = "default"
	// DefaultRetention is the namespace's retention when Options.Retention is zero: 30
	// days, that of the compose file's namespace, rather than the server schema's 24 h
	// (a conversation that continued as new yesterday would lose its older events).
	DefaultRetention = 30 * 24 * time.Hour
	// DBFileName and LockFileName are the file names the server uses in a data folder.
	DBFileName   = "temporal.db"
	LockFileName = "temporal.db.lock"

	readyTimeout = 30 * time.Second
)

// Options configure Start. The zero value (plus a Logger, or not) starts an in-memory
// server on free loopback ports without the UI.
type Options struct {
	// DataDir holds the SQLite file (temporal.db) and its lock file. Empty means an
	// in-memory database with a random name that disappears on Stop.
	DataDir string
	// IP the server and UI bind to. Default 127.0.0.1.
	IP string
	// FrontendPort is the Temporal gRPC port. 0 picks a free port.
	FrontendPort int
	// UI enables the Temporal Web UI.
	UI bool
	// UIPort is the UI's HTTP port. 0 picks a free port.
	UIPort int
	// UICodecEndpoint is the remote codec the UI decodes payloads with ("": none).
	UICodecEndpoint string
	// Namespace to create. Default "default".
	Namespace string
	// Retention is how long the namespace keeps a closed execution, those a run
	// continued from included (their events and transcript messages go with them).
	// Zero means DefaultRetention. An existing database's namespace is updated to it.
	Retention time.Duration
	// SearchAttributes are custom search attributes registered on the namespace: at
	// creation for a new database, with AddSearchAttributes for an existing one.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's logs. Nil discards them.
	Logger *slog.Logger
	// LogLevel is the server's minimum log level. The zero value is info; the dev
	// command passes warn unless asked for more.
	LogLevel slog.Level
	// DynamicConfig adds or overrides dynamic config values by key.
	DynamicConfig map[string]any
	// SQLite adds or overrides connect attributes of the database file (pragmas such
	// as journal_mode or synchronous; see FileAttributes); an empty value removes one.
	SQLite map[string]string
	// MetricsHandler, when set, receives the server's own metrics (latencies of its
	// persistence calls, task queues and RPCs); wop bench reads them to break a turn down.
	MetricsHandler metrics.Handler
	// NexusEndpoints are created (or pointed at their task queue) once the namespace
	// is ready.
	NexusEndpoints []NexusEndpoint
}

// Server is a running embedded Temporal server.
type Server struct {
	opts     Options
	server   temporal.Server
	ui       *uiserver.Server
	uiDone   chan struct{}
	level    *slog.LevelVar
	lock     *fileLock
	frontend string
	uiURL    string
	dbPath   string
	dyn      *dynamicConfig
}

// Start starts the server and returns when the namespace answers DescribeNamespace and
// carries every requested search attribute. A busy port is reported as a
// *PortInUseError and a database held by another process as a *LockedError, before
// anything is started.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("retention %s is negative", opts.Retention)
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{opts: opts, level: new(slog.LevelVar)}
	s.level.Set(opts.LogLevel)
	defer func() {
		if err != nil {
			s.lock.release()
		}
	}()

	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data folder %s is not usable: %w", opts.DataDir, err)
		}
		s.dbPath = filepath.Join(opts.DataDir, DBFileName)
		s.lock, err = lockFile(filepath.Join(opts.DataDir, LockFileName))
		if err != nil {
			var locked *LockedError
			if errors.As(err, &locked) {
				return nil, err
			}
			return nil, fmt.Errorf("data folder %s is not writable: %w", opts.DataDir, err)
		}
	}

	ports, err := s.pickPorts()
	if err != nil {
		return nil, err
	}
	s.frontend = net.JoinHostPort(opts.IP, strconv.Itoa(ports.frontend))

	sqlConf, existed, err := s.prepareDatabase()
	if err != nil {
		return nil, err
	}
	if err := ownerOnly(s.dbPath); err != nil {
		return nil, err
	}

	s.server, err = temporal.NewServer(s.serverOptions(ports, sqlConf)...)
	if err != nil {
		return nil, fmt.Errorf("build Temporal server: %w", err)
	}
	if opts.UI {
		s.startUI(ports.ui)
	}
	if err := s.server.Start(); err != nil {
		s.stopUI()
		return nil, fmt.Errorf("start Temporal server: %w", err)
	}
	if err := s.waitReady(ctx, existed); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

type portSet struct {
	frontend, frontendHTTP, history, matching, worker, ui int
}

// pickPorts checks the fixed ports and allocates the rest.
func (s *Server) pickPorts() (portSet, error) {
	var p portSet
	var err error
	if s.opts.FrontendPort != 0 {
		if err := checkPortFree("Temporal gRPC", s.opts.IP, s.opts.FrontendPort); err != nil {
			return p, err
		}
		p.frontend = s.opts.FrontendPort
	} else if p.frontend, err = freePort(s.opts.IP); err != nil {
		return p, err
	}
	if s.opts.UI {
		if s.opts.UIPort != 0 {
			if err := checkPortFree("Temporal UI", s.opts.IP, s.opts.UIPort); err != nil {
				return p, err
			}
			p.ui = s.opts.UIPort
		} else if p.ui, err = freePort(s.opts.IP); err != nil {
			return p, err
		}
	}
	for _, dst := range []*int{&p.frontendHTTP, &p.history, &p.matching, &p.worker} {
		if *dst, err = freePort(s.opts.IP); err != nil {
			return p, err
		}
	}
	return p, nil
}

// prepareDatabase builds the SQL config, creates the schema of a new file and the
// namespace (a no-op when it exists). existed reports an existing database file.
func (s *Server) prepareDatabase() (*config.SQL, bool, error) {
	conf := &config.SQL{PluginName: sqliteplugin.PluginName}
	existed := false
	if s.dbPath == "" {
		conf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		conf.DatabaseName = fmt.Sprintf("wop-%d", rand.Int64())
	} else {
		conf.ConnectAttributes = FileAttributes()
		for k, v := range s.opts.SQLite {
			if v == "" {
				delete(conf.ConnectAttributes, k)
			} else {
				conf.ConnectAttributes[k] = v
			}
		}
		conf.DatabaseName = s.dbPath
		switch _, err := os.Stat(s.dbPath); {
		case err == nil:
			existed = true
		case errors.Is(err, os.ErrNotExist):
			if err := sqliteschema.SetupSchema(conf); err != nil {
				return nil, false, fmt.Errorf("create Temporal schema in %s: %w", s.dbPath, err)
			}
		default:
			return nil, false, fmt.Errorf("read Temporal database %s: %w", s.dbPath, err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(ClusterName, s.opts.Namespace, false, s.opts.SearchAttributes)
	if err != nil {
		return nil, false, fmt.Errorf("namespace %q: %w", s.opts.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(s.opts.Retention)
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, false, fmt.Errorf("create namespace %q: %w", s.opts.Namespace, err)
	}
	return conf, existed, nil
}

// FileAttributes are the connect attributes of the SQLite file: the open mode and the
// pragmas the server's SQLite plugin applies on connecting.
//
// SQLite's defaults (a rollback journal, synchronous=FULL) sync the disk several times
// per transaction, and every hop of a workflow (a signal, a workflow task started or
// completed, an activity completed) is one transaction: 5-30 ms each on this kind of
// machine, most of a conversation turn. In WAL mode with synchronous=NORMAL a commit
// appends to the write-ahead log without syncing (0.5-1 ms): a committed transaction
// survives the process being killed (kill -9, a crash), and only a power loss or an
// operating system crash can take back the last transactions before the log is synced at
// a checkpoint; the database stays consistent either way. That is the trade-off of a
// development server; production runs Temporal on its own database.
func FileAttributes() map[string]string {
	return map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal"}
}

// TransferQueueReadsPerSecond caps how often the history shard reads its transfer
// queue (history.transferProcessorMaxPollRPS; Temporal's default is 20). The queue is
// read when a transaction adds a task to it (a workflow task to dispatch, an activity to
// schedule), so at 20 reads a second a turn waited up to 50 ms (30–40 ms at the median)
// between its signal and the dispatch of the workflow task it asked for: most of a turn
// on the embedded server. One shard serves every workflow here, and each read is one
// small indexed SQLite query, so the cap only has to stay above the rate tasks arrive.
const TransferQueueReadsPerSecond = 1000

// HistoryCacheSize is how many entries the embedded history service keeps in its cache
// of workflows (history.hostLevelCacheMaxSize; the server's default is 128,000). A
// workflow addressed by its id alone, as every run is, takes two: its run's mutable
// state (about 30 KB) and the lock of its current run. A workflow dropped from the cache
// loses more than a read: the cache clears its context, which aborts the updates in
// flight (the client sends them again) and drops the speculative workflow task carrying
// them. At 256 entries, 128 busy conversations filled it: past 128 concurrent
// conversations each turn reloaded its run 15 times and sent its resolve 3 times, and
// throughput fell to a fifth (wop bench, docs/DECISIONS.md "The history cache of the
// embedded server"). 4,096 entries keep 2,048 busy workflows, eight times what the
// worker's sticky cache holds by default; waiting ones leave it as busy ones come.
const HistoryCacheSize = 4096

// TimerShift is the embedded history service's history.timerProcessorMaxTimeShift
// (Temporal's default is 1 s): the least time from now at which it files a new timer
// task, so no timer it sets fires sooner. At 1 s every short timer waits a second: the
// 100 ms retry of a model round lost with its killed worker, and the re-armed heartbeat
// timeout of a round that did heartbeat, so another worker took over a killed worker's
// round 2-3 s after the kill instead of about one (docs/DECISIONS.md, "Recovery
// bound"). The shift guards the timer queue's reader against tasks that writers on
// other hosts, on other clocks, file behind it; one process on one clock writes every
// task here, and the tasks it has yet to write are tracked apart from the shift.
const TimerShift = 100 * time.Millisecond

// xdcCacheBytes bounds the cache of serialized history events kept for cross-cluster
// replication (history.xdcCacheMaxSizeBytes, 8 MB by default), which a single-cluster
// dev server never reads.
const xdcCacheBytes = 1 << 20

func (s *Server) serverOptions(p portSet, sqlConf *config.SQL) []temporal.ServerOption {
	ip := s.opts.IP
	hostPort := func(port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	svc := func(grpcPort, httpPort int) config.Service {
		var c config.Service
		c.RPC.GRPCPort = grpcPort
		c.RPC.HTTPPort = httpPort
		c.RPC.BindOnIP = ip
		return c
	}

	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = ip
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        ClusterName,
		CurrentClusterName:       ClusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			ClusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             hostPort(p.frontend),
				HTTPAddress:            hostPort(p.frontendHTTP),
				ClusterID:              ClusterID,
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{
		"frontend": svc(p.frontend, p.frontendHTTP),
		"history":  svc(p.history, 0),
		"matching": svc(p.matching, 0),
		"worker":   svc(p.worker, 0),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = hostPort(p.frontend)

	// Worker Deployments (Worker Versioning) need no entry: Temporal 1.32 turns
	// system.enableDeploymentVersions and frontend.workerVersioningWorkflowAPIs on by
	// default, and the deployment entity workflows run on the worker service above.
	dyn := dynamicconfig.StaticClient{
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 HistoryCacheSize,
		dynamicconfig.XDCCacheMaxSizeBytes.Key():                         xdcCacheBytes,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		dynamicconfig.TransferProcessorMaxPollRPS.Key():                  TransferQueueReadsPerSecond,
		dynamicconfig.TimerProcessorMaxTimeShift.Key():                   TimerShift,
	}
	for k, v := range s.opts.DynamicConfig {
		dyn[dynamicconfig.MakeKey(k)] = v
	}
	s.dyn = &dynamicConfig{values: dyn}

	logger := serverLogger{out: s.opts.Logger, level: s.level}
	opts := []temporal.ServerOption{
		temporal.WithConfig(&conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(hostPort(p.frontend)),
			primitives.HistoryService:  static.SingleLocalHost(hostPort(p.history)),
			primitives.MatchingService: static.SingleLocalHost(hostPort(p.matching)),
			primitives.WorkerService:   static.SingleLocalHost(hostPort(p.worker)),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
			return authorization.NewNoopClaimMapper()
		}),
		temporal.WithDynamicConfigClient(s.dyn),
	}
	if s.opts.MetricsHandler != nil {
		opts = append(opts, temporal.WithCustomMetricsHandler(s.opts.MetricsHandler))
	}
	return opts
}

// startUI runs the UI server in a goroutine (its Start blocks).
func (s *Server) startUI(port int) {
	s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                s.opts.IP,
		Port:                port,
		TemporalGRPCAddress: s.frontend,
		EnableUI:            true,
		DefaultNamespace:    s.opts.Namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		Codec:               uiconfig.Codec{Endpoint: s.opts.UICodecEndpoint},
		HideLogs:            true,
		DisableNewsFetch:    true,
	}))
	s.uiURL = "http://" + net.JoinHostPort(s.opts.IP, strconv.Itoa(port))
	s.uiDone = make(chan struct{})
	go func() {
		defer close(s.uiDone)
		if err := s.ui.Start(); err != nil {
			s.opts.Logger.Error("Temporal UI stopped", "error", err)
		}
	}()
}

func (s *Server) stopUI() {
	if s.ui == nil {
		return
	}
	s.ui.Stop()
	select {
	case <-s.uiDone:
	case <-time.After(5 * time.Second):
	}
	s.ui = nil
}

// waitReady waits for the namespace, registers missing search attributes on an
// existing database, and waits for the UI to accept connections.
func (s *Server) waitReady(ctx context.Context, existed bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  s.frontend,
		Namespace: s.opts.Namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		return fmt.Errorf("connect to the embedded Temporal server at %s: %w", s.frontend, err)
	}
	defer c.Close()

	var desc *workflowservice.DescribeNamespaceResponse
	for {
		desc, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.opts.Namespace})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %q not ready: %w", s.opts.Namespace, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got != s.opts.Retention {
		// A database created before (or with another retention): the namespace takes the
		// one asked for; executions already closed keep the retention they closed with.
		_, err := c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
			Namespace: s.opts.Namespace,
			Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(s.opts.Retention)},
		})
		if err != nil {
			return fmt.Errorf("set the retention of namespace %q to %s (it was %s): %w", s.opts.Namespace, s.opts.Retention, got, err)
		}
	}
	if existed && len(s.opts.SearchAttributes) > 0 {
		if err := s.addMissingSearchAttributes(ctx, c.OperatorService()); err != nil {
			return err
		}
	}
	for _, e := range s.opts.NexusEndpoints {
		if err := s.ensureNexusEndpoint(ctx, c.OperatorService(), e); err != nil {
			return err
		}
	}
	if s.ui != nil {
		addr := s.uiURL[len("http://"):]
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = conn.Close()
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("temporal UI at %s not ready: %w", s.uiURL, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// addMissingSearchAttributes registers the requested search attributes the namespace
// lacks (a database created by an older version of the host).
func (s *Server) addMissingSearchAttributes(ctx context.Context, ops operatorservice.OperatorServiceClient) error {
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.opts.Namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of %q: %w", s.opts.Namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range s.opts.SearchAttributes {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	s.dyn.forceSearchAttributeReads()
	if _, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        s.opts.Namespace,
		SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("add search attributes to %q: %w", s.opts.Namespace, err)
	}
	return nil
}

// FrontendAddress is the host:port of the Temporal gRPC frontend.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIURL is the base URL of the Temporal Web UI, or "" when the UI is off.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace is the namespace the server created.
func (s *Server) Namespace() string { return s.opts.Namespace }

// DBPath is the SQLite file, or "" for an in-memory database.
func (s *Server) DBPath() string { return s.dbPath }

// Quiet silences the server's logs from now on: a host stopping its own workers and
// clients before Stop makes the server log their cancelled polls as errors, which say
// nothing about a problem.
func (s *Server) Quiet() {
	if s.level != nil {
		s.level.Set(slog.LevelError + 4)
	}
}

// Stop stops the UI, then the server (silenced by Quiet, because a stopping server logs
// a burst of poll and dial errors), then releases the lock file. Stop the SDK workers
// and close the clients that use the server before calling it. It is safe to call more
// than once.
func (s *Server) Stop() {
	s.stopUI()
	if s.server != nil {
		s.Quiet()
		if err := s.server.Stop(); err != nil {
			s.opts.Logger.Error("Temporal server stop", "error", err)
		}
		s.server = nil
	}
	s.lock.release()
}
