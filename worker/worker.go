// Package worker is the host's Temporal worker process: its configuration, the Temporal
// client options (the variables the Temporal SDKs use), and the run loop that polls the
// host's task queue with every workflow and activity registered.
//
// The production `wop worker` command and the in-process dev stack both build their
// workers here, so the two never drift.
package worker

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/agentclient"
	"github.com/wop-dev/wop/chunks"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/tools"
	"github.com/wop-dev/wop/workflows"
)

// Config configures a worker.
type Config struct {
	// PacksDir is the folder of PromptPack packs whose mock scripts and tools the
	// activities serve. A missing folder means no packs.
	PacksDir string
	// TaskQueue is the task queue the worker polls (WOP_TASK_QUEUE, --task-queue):
	// the one the API starts runs on. Empty means workflows.TaskQueue.
	TaskQueue string
	// Versioning opts the worker into Worker Versioning (versioning.go).
	Versioning Versioning
	// MaxConcurrentActivities bounds activity executions in flight (0 = SDK default).
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks bounds workflow tasks in flight (0 = SDK default).
	MaxConcurrentWorkflowTasks int
	// WorkflowTaskPollers is how many long polls fetch workflow tasks at once
	// (DefaultWorkflowTaskPollers unless set; 0 = the SDK's 2, and 1 is not allowed).
	WorkflowTaskPollers int
	// WorkflowCacheSize bounds the workflows kept in memory between their tasks (the
	// SDK's sticky cache, process-wide; DefaultWorkflowCacheSize unless set, 0 = the
	// SDK's own default of 10,000). A conversation evicted from the cache costs nothing
	// while it waits and is replayed from its history when its next message arrives.
	WorkflowCacheSize int
	// ShutdownTimeout is how long a stopping worker waits for running activities.
	ShutdownTimeout time.Duration
	// StickyScheduleToStartTimeout is how long a workflow task waits on this worker's
	// sticky queue before any worker may take it (DefaultStickyScheduleToStartTimeout
	// unless set; 0 = the SDK's 5 s). It bounds the wait of a conversation's next turn
	// after its worker was killed (RecoveryOf).
	StickyScheduleToStartTimeout time.Duration
	// Providers are the model providers by logical key (activities.ProviderConfigFromEnv).
	// Nil means the scripted mock, driven by the packs' mock scripts.
	Providers map[string]activities.Provider `json:"-"`
	// PackProviders maps a pack id to its provider keys that another key's provider
	// serves (the providers file's packs:).
	PackProviders map[string]map[string]string
	// ProviderSource says where the providers were configured (activities.
	// ProviderConfig.Source); empty when nothing was, and the scripted mock serves by
	// default, which `wop worker` refuses.
	ProviderSource string
	// ProvidersServed lists the provider keys the worker serves, with their providers
	// and models, as it states them when it starts.
	ProvidersServed []activities.ServedProvider
	// MockStrict makes the scripted mock fail a round that is off its script instead of
	// answering the script's default (the project's tests set it).
	MockStrict bool
	// ToolsFile is the tool bindings file (package tools): where pack tools run. Empty
	// means <PacksDir>/tools.yaml when that exists, else no bindings.
	ToolsFile string
	// Tools holds bindings built in code, such as the Go functions of a custom worker
	// binary (tools.Set.Add with tools.Typed); the bindings file adds to them.
	Tools *tools.Set `json:"-"`
	// Getenv reads the ${VAR} references of the bindings file (secrets in headers and
	// MCP environments). Nil means os.Getenv; ConfigFromEnv sets the getenv it was given.
	Getenv func(string) string `json:"-"`
	// WebhookSecret is the host's webhook key (WOP_WEBHOOK_SECRET, shared with the
	// API): deliveries are signed with secrets derived from it.
	WebhookSecret []byte `json:"-"`
	// WebhookAllowPrivate lets deliveries reach loopback and private addresses
	// (WOP_WEBHOOK_ALLOW_PRIVATE); link-local and metadata addresses stay refused.
	WebhookAllowPrivate bool
	// Version names the host in webhook deliveries' User-Agent.
	Version string
	// ApprovalDefaults are the host's approval settings of tool calls that need a
	// person's decision; a tool's entry in the bindings file overrides them field by
	// field. The deadline defaults to activities.DefaultApprovalTimeout.
	ApprovalDefaults activities.ToolApproval
	// HealthAddr, when set, serves GET /healthz on that address while the worker runs
	// (for container health checks; the worker has no other port), and GET /metrics
	// when Metrics is set.
	HealthAddr string
	// Metrics serves the process's Prometheus metrics (internal/telemetry) at /metrics
	// on HealthAddr.
	Metrics http.Handler `json:"-"`
	// Logger receives the worker's own logs. Nil discards them. It is not read from
	// the environment.
	Logger *slog.Logger `json:"-"`
	// StreamAddr is the address the worker serves its chunk endpoint on (package
	// chunks: the replies of its model rounds while they stream, to API processes that
	// present a token signed with StreamSecret), e.g. ":7244". Empty: no endpoint, and the
	// API processes get no chunks of this worker's rounds.
	StreamAddr string
	// StreamURL is the endpoint's URL as API processes reach it, advertised in the
	// worker's Temporal identity. Empty: http://<StreamAddr>, with the host name when the
	// address binds every interface.
	StreamURL string
	// StreamSecret is the secret the worker shares with the API processes
	// (WOP_STREAM_SECRET, at least 16 bytes); required with StreamAddr.
	StreamSecret []byte `json:"-"`
	// MockChunkDelay is the scripted mock's pause before each word of a reply as it
	// streams (0: at once).
	MockChunkDelay time.Duration
	// MockRoundDelay is the scripted mock's pause before each round answers
	// (WOP_MOCK_ROUND_DELAY; 0: at once).
	MockRoundDelay time.Duration
	// Chunks is the hub the model rounds publish to; StartStream sets it. Nil: none.
	Chunks *chunks.Hub `json:"-"`
	// Identity is the worker's Temporal identity; StartStream sets it to advertise the
	// chunk endpoint (chunks.Identity). Empty: the client's.
	Identity string
	// ModelOutage is how long model rounds wait out an unavailable provider, by logical
	// provider key or canonical provider id (activities.Config.ModelOutage;
	// activities.OutageFromEnv reads WOP_MODEL_RETRY_FOR and its kin). Nil: the
	// per-provider defaults (activities.DefaultModelOutage).
	ModelOutage map[string]activities.OutagePolicy
	// StallReminder is how often a call that waits out an outage records a
	// workflow.stalled event (WOP_STALL_REMINDER; 0: activities.DefaultStallReminder).
	StallReminder time.Duration
	// TurnLimits are the host's limits on the agent work of one user turn (model
	// rounds and tool calls, counted across a pack's state changes; 0 = none). Every
	// run carries the limits of the catalog that started it (LoadCatalog), so the
	// process that starts runs (wop api, wop dev) must be given them.
	TurnLimits workflows.TurnLimits
	// Catalog, when set, is the catalog the worker serves to workflows that start runs
	// themselves: a worker with one registers the agents activities (agents.go,
	// package agentclient). Run sets it from the packs it loads; it is not read from
	// the environment.
	Catalog *workflows.Catalog
	// NexusTenant and NexusSubject own the runs started through the Nexus service
	// (WOP_NEXUS_TENANT, WOP_NEXUS_SUBJECT; DefaultNexusTenant, DefaultNexusSubject).
	NexusTenant, NexusSubject string
	// DurabilityKill ends the process the way a lost machine does, for the conformance
	// kill seam's held work (activities.Config.DurabilityKill; `wop dev
	// --conformance-seams` sets it to api.ConformanceSeams.KillHeld). Nil: the worker
	// serves no seams and its DurabilityHold fails closed. Not read from the environment.
	DurabilityKill func() `json:"-"`
}

// Queue is the task queue the worker polls: TaskQueue, or workflows.TaskQueue.
func (c Config) Queue() string { return cmp.Or(c.TaskQueue, workflows.TaskQueue) }

// DefaultConfig returns the defaults ConfigFromEnv starts from.
func DefaultConfig() Config {
	return Config{PacksDir: "packs", ShutdownTimeout: 10 * time.Second, WorkflowCacheSize: DefaultWorkflowCacheSize,
		StickyScheduleToStartTimeout: DefaultStickyScheduleToStartTimeout,
		WorkflowTaskPollers:          DefaultWorkflowTaskPollers, TurnLimits: DefaultTurnLimits()}
}

// DefaultTurnLimits are the limits a host applies when WOP_MAX_ROUNDS_PER_TURN and
// WOP_MAX_TOOL_CALLS_PER_TURN are unset: 25 model rounds and 50 tool calls per turn.
func DefaultTurnLimits() workflows.TurnLimits {
	return workflows.TurnLimits{MaxRounds: engine.DefaultHostMaxRoundsPerTurn, MaxToolCalls: engine.DefaultHostMaxToolCallsPerTurn}
}

// TurnLimitsFromEnv reads the host's per-turn limits:
//
//	WOP_MAX_ROUNDS_PER_TURN       model rounds one user turn may run (default 25, 0 = no limit)
//	WOP_MAX_TOOL_CALLS_PER_TURN   tool calls one user turn may make (default 50, 0 = no limit)
func TurnLimitsFromEnv(getenv func(string) string) (workflows.TurnLimits, error) {
	lim := DefaultTurnLimits()
	var errs []error
	for _, v := range []struct {
		name string
		dst  *int
	}{{"WOP_MAX_ROUNDS_PER_TURN", &lim.MaxRounds}, {"WOP_MAX_TOOL_CALLS_PER_TURN", &lim.MaxToolCalls}} {
		raw := strings.TrimSpace(getenv(v.name))
		if raw == "" {
			continue
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a non-negative integer (0 = no limit)", v.name, raw))
			continue
		}
		*v.dst = n
	}
	return lim, errors.Join(errs...)
}

// DefaultWorkflowTaskPollers is the default of Config.WorkflowTaskPollers. Besides two
// workflow tasks, a conversation turn brings the worker the API's queries that Temporal
// cannot answer from a workflow task in flight, and all of them arrive through these
// polls: with the SDK's 2, they queue behind each other under load. wop bench, 50
// conversations at once: 13.3-14.9 turns/s with 2, 15.6-17.6 with 8.
const DefaultWorkflowTaskPollers = 8

// DefaultWorkflowCacheSize is the default of Config.WorkflowCacheSize. The SDK keeps
// 10,000 workflows, sized for short workflows that finish while cached; a run of this
// host mostly waits for a person, and a cached run costs about 90 KB (wop bench's idle
// figures), so the SDK's default would hold close to a gigabyte of conversations that
// nobody is typing into. 256 keeps the conversations being worked on in memory (wop
// bench drives 50 at once) for about 23 MB; one that falls out replays its history,
// which continue-as-new keeps short, when its next message arrives.
const DefaultWorkflowCacheSize = 256

// sdkDefaultWorkflowCacheSize is the SDK's own default sticky cache size.
const sdkDefaultWorkflowCacheSize = 10000

// ConfigFromEnv reads the worker configuration from the environment:
//
//	WOP_PACKS                        packs folder (default "packs")
//	WOP_TOOLS                        tool bindings file (default <packs>/tools.yaml if it exists)
//	WOP_WORKER_MAX_ACTIVITIES        concurrent activity executions (default: SDK default)
//	WOP_WORKER_MAX_WORKFLOW_TASKS    concurrent workflow tasks (default: SDK default)
//	WOP_WORKER_WORKFLOW_POLLERS      long polls for workflow tasks (default 8, 0 = SDK default)
//	WOP_WORKER_SHUTDOWN_TIMEOUT      wait for running activities on stop (default 10s)
//	WOP_WORKER_CACHE_SIZE            workflows kept in memory between tasks (default 256, 0 = SDK default)
//	WOP_WORKER_HEALTH_ADDR           serve GET /healthz and /metrics there while running (default off)
//	WOP_MOCK_STRICT                  true: the scripted mock fails off-script rounds (default false)
//	WOP_MOCK_CHUNK_DELAY             pause of the scripted mock before each streamed word (default 0)
//	WOP_WORKER_STREAM_ADDR           serve the chunk endpoint there, e.g. :7244 (default off)
//	WOP_WORKER_STREAM_URL            the endpoint's URL as API processes reach it (default from the address)
//	WOP_STREAM_SECRET                secret shared with the API processes (required with the address)
//	WOP_MAX_ROUNDS_PER_TURN          model rounds per user turn (default 25, 0 = none; see TurnLimitsFromEnv)
//	WOP_MAX_TOOL_CALLS_PER_TURN      tool calls per user turn (default 50, 0 = none)
//	WOP_WEBHOOK_SECRET               key webhook signing secrets derive from (the API's too)
//	WOP_WEBHOOK_ALLOW_PRIVATE        true: deliver to loopback and private addresses
//	WOP_APPROVAL_TIMEOUT             deadline of a tool call's approval (default 72h; 7d and Go durations)
//	WOP_APPROVAL_REMINDER            remind approvers at this interval while a call waits (default off)
//	WOP_APPROVAL_ESCALATE_AFTER      add WOP_APPROVAL_ESCALATE_TO to the approvers after this wait
//	WOP_APPROVAL_ESCALATE_TO         comma-separated principals a waiting approval escalates to
//	WOP_MODEL_RETRY_FOR              how long a model round waits out an unavailable provider (default 24h)
//	WOP_MODEL_RETRY_MAX_INTERVAL     longest pause between its attempts meanwhile (default 1m; 30s openai-compatible)
//	WOP_STALL_REMINDER               a workflow.stalled event this often while a call waits (default 15m)
//
// and the model providers from the variables activities.ProviderConfigFromEnv reads
// (WOP_PROVIDERS, WOP_MODEL_PROVIDER, WOP_MODEL, OPENAI_API_KEY, GEMINI_API_KEY, ...).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	if v := strings.TrimSpace(getenv("WOP_PACKS")); v != "" {
		cfg.PacksDir = v
	}
	cfg.ToolsFile = strings.TrimSpace(getenv("WOP_TOOLS"))
	cfg.Getenv = getenv
	var errs []error
	if q, err := workflows.TaskQueueFromEnv(getenv); err != nil {
		errs = append(errs, err)
	} else {
		cfg.TaskQueue = q
	}
	if v, err := versioningFromEnv(getenv); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Versioning = v
	}
	cfg.HealthAddr = strings.TrimSpace(getenv("WOP_WORKER_HEALTH_ADDR"))
	cfg.NexusTenant = strings.TrimSpace(getenv("WOP_NEXUS_TENANT"))
	cfg.NexusSubject = strings.TrimSpace(getenv("WOP_NEXUS_SUBJECT"))
	if cfg.NexusTenant != "" && !protocol.ValidTenantID(cfg.NexusTenant) {
		errs = append(errs, fmt.Errorf("WOP_NEXUS_TENANT=%q is not a tenant id", cfg.NexusTenant))
	}
	intVar := func(name string, dst *int) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a non-negative integer", name, v))
				return
			}
			*dst = n
		}
	}
	intVar("WOP_WORKER_MAX_ACTIVITIES", &cfg.MaxConcurrentActivities)
	intVar("WOP_WORKER_MAX_WORKFLOW_TASKS", &cfg.MaxConcurrentWorkflowTasks)
	intVar("WOP_WORKER_WORKFLOW_POLLERS", &cfg.WorkflowTaskPollers)
	intVar("WOP_WORKER_CACHE_SIZE", &cfg.WorkflowCacheSize)
	if v := strings.TrimSpace(getenv("WOP_WORKER_SHUTDOWN_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("WOP_WORKER_SHUTDOWN_TIMEOUT=%q: want a duration such as 10s", v))
		} else {
			cfg.ShutdownTimeout = d
		}
	}
	if v := strings.TrimSpace(getenv("WOP_WORKER_STICKY_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("WOP_WORKER_STICKY_TIMEOUT=%q: want a duration such as 1s", v))
		} else {
			cfg.StickyScheduleToStartTimeout = d
		}
	}
	cfg.StreamAddr = strings.TrimSpace(getenv("WOP_WORKER_STREAM_ADDR"))
	cfg.StreamURL = strings.TrimSpace(getenv("WOP_WORKER_STREAM_URL"))
	if v := getenv("WOP_STREAM_SECRET"); v != "" {
		cfg.StreamSecret = []byte(v)
	}
	if v := strings.TrimSpace(getenv("WOP_MOCK_CHUNK_DELAY")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("WOP_MOCK_CHUNK_DELAY=%q: want a duration such as 20ms", v))
		} else {
			cfg.MockChunkDelay = d
		}
	}
	if v := strings.TrimSpace(getenv("WOP_MOCK_ROUND_DELAY")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("WOP_MOCK_ROUND_DELAY=%q: want a duration such as 1s", v))
		} else {
			cfg.MockRoundDelay = d
		}
	}
	if v := strings.TrimSpace(getenv("WOP_MOCK_STRICT")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("WOP_MOCK_STRICT=%q: want true or false", v))
		}
		cfg.MockStrict = b
	}
	limits, err := TurnLimitsFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.TurnLimits = limits
	if err := approvalDefaultsFromEnv(getenv, &cfg.ApprovalDefaults); err != nil {
		errs = append(errs, err)
	}
	if v := getenv("WOP_WEBHOOK_SECRET"); v != "" {
		cfg.WebhookSecret = []byte(v)
	}
	if v := strings.TrimSpace(getenv("WOP_WEBHOOK_ALLOW_PRIVATE")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("WOP_WEBHOOK_ALLOW_PRIVATE=%q: want true or false", v))
		}
		cfg.WebhookAllowPrivate = b
	}
	outage, err := activities.OutageFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.ModelOutage = outage
	if v := strings.TrimSpace(getenv(activities.EnvStallReminder)); v != "" {
		if d, err := activities.ParseLongDuration(v); err == nil && d > 0 {
			cfg.StallReminder = d
		}
	}
	if pc, err := activities.ProviderConfigFromEnv(getenv); err != nil {
		errs = append(errs, err)
	} else if set, err := pc.Build(context.Background(), getenv); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Providers, cfg.PackProviders, cfg.ProviderSource, cfg.ProvidersServed = set.Providers, set.Packs, set.Source, set.Served
	}
	return cfg, errors.Join(errs...)
}

// RegisterFlags adds flags that override the configuration; call it after
// ConfigFromEnv so the environment provides the flag defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.PacksDir, "packs", c.PacksDir, "packs `folder` (env WOP_PACKS)")
	fs.StringVar(&c.ToolsFile, "tools", c.ToolsFile, "tool bindings `file`; default <packs>/tools.yaml when it exists (env WOP_TOOLS)")
	c.RegisterTuningFlags(fs)
	fs.StringVar(&c.HealthAddr, "health-addr", c.HealthAddr,
		"serve GET /healthz on this `address` while running (env WOP_WORKER_HEALTH_ADDR)")
	fs.StringVar(&c.StreamAddr, "stream-addr", c.StreamAddr,
		"serve the chunk endpoint (streamed replies, for the API processes) on this `address` (env WOP_WORKER_STREAM_ADDR; needs WOP_STREAM_SECRET)")
	fs.StringVar(&c.StreamURL, "stream-url", c.StreamURL,
		"the chunk endpoint's `URL` as API processes reach it (env WOP_WORKER_STREAM_URL; default from --stream-addr)")
}

// RegisterTuningFlags adds the flags that tune a running worker (concurrency, pollers,
// cache, shutdown), which `wop dev` shares with `wop worker`.
func (c *Config) RegisterTuningFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.TaskQueue, "task-queue", c.TaskQueue, "Temporal `task queue` of the host's runs, polled by the worker and used by the API (env WOP_TASK_QUEUE)")
	c.Versioning.registerFlags(fs)
	fs.IntVar(&c.MaxConcurrentActivities, "max-activities", c.MaxConcurrentActivities,
		"concurrent activity executions, 0 for the SDK default (env WOP_WORKER_MAX_ACTIVITIES)")
	fs.IntVar(&c.WorkflowTaskPollers, "workflow-pollers", c.WorkflowTaskPollers,
		"long polls fetching workflow tasks at once, 0 for the SDK's 2 (env WOP_WORKER_WORKFLOW_POLLERS)")
	fs.IntVar(&c.MaxConcurrentWorkflowTasks, "max-workflow-tasks", c.MaxConcurrentWorkflowTasks,
		"concurrent workflow tasks, 0 for the SDK default (env WOP_WORKER_MAX_WORKFLOW_TASKS)")
	fs.IntVar(&c.WorkflowCacheSize, "workflow-cache", c.WorkflowCacheSize,
		"workflows kept in memory between their tasks, 0 for the SDK's default of 10,000 (env WOP_WORKER_CACHE_SIZE)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout,
		"wait for running activities on stop (env WOP_WORKER_SHUTDOWN_TIMEOUT)")
	fs.DurationVar(&c.StickyScheduleToStartTimeout, "sticky-timeout", c.StickyScheduleToStartTimeout,
		"how long a workflow task waits for the worker that caches its run before any worker takes it, 0 for the SDK's 5s (env WOP_WORKER_STICKY_TIMEOUT)")
}

// SetCacheSize sets the process-wide sticky workflow cache to c.WorkflowCacheSize. The
// SDK sizes the cache when the process's first SDK worker starts, so a process that
// also runs other SDK workers (the embedded Temporal server's own) calls this before
// starting them; New calls it too.
func (c Config) SetCacheSize() {
	if c.WorkflowCacheSize > 0 {
		sdkworker.SetStickyWorkflowCacheSize(c.WorkflowCacheSize)
	} else {
		sdkworker.SetStickyWorkflowCacheSize(sdkDefaultWorkflowCacheSize)
	}
}

// New builds an SDK worker on the configured task queue (cfg.Queue) with every workflow and the given
// activities registered. The caller starts and stops it. A WorkflowCacheSize applies
// to the whole process and only takes effect before the process's first worker starts.
func New(c client.Client, cfg Config, acts *activities.Activities) sdkworker.Worker {
	cfg.SetCacheSize()
	pollers := cfg.WorkflowTaskPollers
	if pollers == 1 {
		pollers = 2 // the SDK refuses 1: its pollers alternate between the sticky and the normal queue
	}
	w := sdkworker.New(c, cfg.Queue(), sdkworker.Options{
		MaxConcurrentActivityExecutionSize:     cfg.MaxConcurrentActivities,
		MaxConcurrentWorkflowTaskExecutionSize: cfg.MaxConcurrentWorkflowTasks,
		MaxConcurrentWorkflowTaskPollers:       pollers,
		WorkerStopTimeout:                      cfg.ShutdownTimeout,
		StickyScheduleToStartTimeout:           cfg.StickyScheduleToStartTimeout,
		// A heartbeat is how a running activity learns it was cancelled; the SDK's own
		// throttle (80% of the heartbeat timeout) would let a cancelled model round run
		// on for up to 24 s.
		MaxHeartbeatThrottleInterval: activities.MaxHeartbeatThrottle,
		// Advertises the chunk endpoint, if any, to the API processes (package chunks).
		Identity:          cfg.Identity,
		DeploymentOptions: cfg.Versioning.options(),
	})
	Register(w, acts)
	if cfg.Catalog != nil {
		a := &Agents{Client: c, Catalog: cfg.Catalog, NexusOwner: agentclient.Owner{
			Tenant: cmp.Or(cfg.NexusTenant, DefaultNexusTenant), Subject: cmp.Or(cfg.NexusSubject, DefaultNexusSubject)}}
		RegisterAgents(w, a)
		RegisterNexus(w, a, cfg.Queue())
	}
	return w
}

// Run builds the activities from the configuration, starts a worker and blocks until
// ctx is done, then stops the worker. It returns an error only when the worker cannot
// start (for example, Temporal is unreachable).
func Run(ctx context.Context, c client.Client, cfg Config) error {
	logger := cfg.logger()
	if err := cfg.Versioning.Check(); err != nil {
		return err
	}
	loaded, err := LoadPacks(cfg.PacksDir, logger)
	if err != nil {
		return err
	}
	bindings, report, err := LoadTools(ctx, cfg, loaded, logger)
	if err != nil {
		return err
	}
	defer func() { _ = bindings.Close() }()
	LogTools(logger, bindings, report)
	stream, err := StartStream(&cfg)
	if err != nil {
		return err
	}
	if stream != nil {
		defer func() { _ = stream.Close() }()
		logger.Info("Chunk endpoint listening", "addr", stream.Addr(), "url", stream.URL())
	}
	cctx, cancel := context.WithTimeout(ctx, providerCheckTimeout)
	err = activities.CheckProviders(cctx, cfg.Providers)
	cancel()
	if err != nil {
		return err
	}
	acts, err := NewActivities(c, cfg, loaded, bindings)
	if err != nil {
		return err
	}
	// The agents activities start runs of the packs this worker serves, with its
	// turn limits (the conformance fixtures stay the API's).
	if cfg.Catalog == nil {
		if cfg.Catalog, err = LoadCatalog(loaded, false, cfg.TurnLimits); err != nil {
			return err
		}
	}
	LogProviders(logger, cfg)
	var health net.Listener
	if cfg.HealthAddr != "" {
		if health, err = net.Listen("tcp", cfg.HealthAddr); err != nil {
			return fmt.Errorf("health address %s: %w", cfg.HealthAddr, err)
		}
	}
	w := New(c, cfg, acts)
	if err := w.Start(); err != nil {
		if health != nil {
			_ = health.Close()
		}
		return fmt.Errorf("start worker on task queue %q: %w", cfg.Queue(), err)
	}
	logger.Info("Worker started", "taskQueue", cfg.Queue(), "packsDir", cfg.PacksDir, "packs", len(loaded),
		"deployment", cfg.Versioning.Deployment, "buildId", cfg.Versioning.BuildID)
	if err := SetCurrentVersion(ctx, c, cfg.Versioning, logger); err != nil {
		w.Stop()
		if health != nil {
			_ = health.Close()
		}
		return err
	}
	var hs *http.Server
	if health != nil {
		hs = &http.Server{Handler: healthHandler(cfg.Metrics), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(health) }()
	}
	<-ctx.Done()
	logger.Info("Worker stopping")
	if hs != nil {
		_ = hs.Close()
	}
	w.Stop()
	return nil
}

// providerCheckTimeout bounds the start-time check of the providers' credentials (an
// instance role's metadata server answers in milliseconds; a missing one times out).
const providerCheckTimeout = 20 * time.Second

// LogProviders states which providers and models the worker serves, one line per
// provider key, and the packs whose keys are mapped to another key.
func LogProviders(logger *slog.Logger, cfg Config) {
	served := cfg.ProvidersServed
	if len(served) == 0 {
		for _, key := range slices.Sorted(maps.Keys(cfg.Providers)) {
			p := cfg.Providers[key]
			model := activities.MockModel
			if mn, ok := p.(interface{ ModelName() string }); ok {
				model = mn.ModelName()
			}
			served = append(served, activities.ServedProvider{Key: key, Provider: p.Name(), Model: model})
		}
	}
	if len(served) == 0 {
		served = []activities.ServedProvider{{Key: activities.DefaultProviderKey, Provider: activities.ProviderMock, Model: activities.MockModel}}
	}
	source := cfg.ProviderSource
	if source == "" {
		source = "none configured: the scripted mock"
	}
	for _, s := range served {
		logger.Info("Model provider", "key", s.Key, "provider", s.Provider, "model", s.Model, "from", source)
	}
	for _, pack := range slices.Sorted(maps.Keys(cfg.PackProviders)) {
		for _, key := range slices.Sorted(maps.Keys(cfg.PackProviders[pack])) {
			logger.Info("Model provider of a pack", "pack", pack, "key", key, "servedBy", cfg.PackProviders[pack][key])
		}
	}
}

// ErrNoProvider is the error of a production worker that has no provider configured.
var ErrNoProvider = errors.New("no model provider is configured: set WOP_MODEL_PROVIDER (gemini, vertex, bedrock, azure-openai, openai, " +
	"anthropic, openai-compatible) and its variables, or WOP_PROVIDERS to a providers file; " +
	"WOP_MODEL_PROVIDER=mock serves the scripted mock on purpose (packs/*.mock.yaml), never real users")

// healthHandler answers GET /healthz with 200 while the worker runs, and serves
// metrics at GET /metrics when it is not nil.
func healthHandler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return mux
}

// NewActivities builds the host's activities: the configured model providers (the
// scripted mock when none), the mock scripts of the loaded packs, the tool bindings
// (LoadTools; nil for none), and transcript reads through queries on c, kept between a
// run's rounds in a TranscriptCache.
func NewActivities(c client.Client, cfg Config, loaded []*packs.Loaded, bindings *tools.Set) (*activities.Activities, error) {
	scripts := map[string]*packs.MockScript{}
	for _, l := range loaded {
		if l.Mock != nil {
			scripts[l.Pack.ID] = l.Mock
		}
	}
	acts, err := activities.New(activities.Config{
		Providers:      cfg.Providers,
		PackProviders:  cfg.PackProviders,
		MockScripts:    scripts,
		MockStrict:     cfg.MockStrict,
		MockChunkDelay: cfg.MockChunkDelay,
		MockRoundDelay: cfg.MockRoundDelay,
		Chunks:         cfg.Chunks,
		// Rounds after a run's first on this worker append the messages their input
		// carries to the transcript kept here, instead of querying the workflow.
		Transcripts: activities.NewTranscriptCache(activities.ClientTranscripts{Client: c, Query: workflows.TranscriptPageQuery, Logger: cfg.Logger}, 0),
		Bindings:    toolBindings(bindings),
		Logger:      cfg.Logger,

		ApprovalDefaults:    cfg.ApprovalDefaults,
		ModelOutage:         cfg.ModelOutage,
		StallReminder:       cfg.StallReminder,
		WebhookSecret:       cfg.WebhookSecret,
		WebhookAllowPrivate: cfg.WebhookAllowPrivate,
		Version:             cfg.Version,
		Workflows:           c,
		DurabilityKill:      cfg.DurabilityKill,
	})
	if err != nil {
		return nil, fmt.Errorf("build activities: %w", err)
	}
	return acts, nil
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// approvalDefaultsFromEnv reads the WOP_APPROVAL_* variables into a.
func approvalDefaultsFromEnv(getenv func(string) string, a *activities.ToolApproval) error {
	var errs []error
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{"WOP_APPROVAL_TIMEOUT", &a.Timeout}, {"WOP_APPROVAL_REMINDER", &a.RemindEvery}, {"WOP_APPROVAL_ESCALATE_AFTER", &a.EscalateAfter}} {
		if raw := strings.TrimSpace(getenv(v.name)); raw != "" {
			d, err := tools.ParseApprovalDuration(raw)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", v.name, err))
				continue
			}
			*v.dst = d
		}
	}
	if raw := strings.TrimSpace(getenv("WOP_APPROVAL_ESCALATE_TO")); raw != "" {
		for _, p := range strings.Split(raw, ",") {
			if p = strings.TrimSpace(p); p != "" {
				a.EscalateTo = append(a.EscalateTo, p)
			}
		}
	}
	if err := a.Check(); err != nil {
		errs = append(errs, fmt.Errorf("WOP_APPROVAL_*: %w", err))
	}
	return errors.Join(errs...)
}
