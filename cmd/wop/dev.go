//go:build !nodev

package main

// This file is the only path from the wop binary to the embedded Temporal server
// (internal/stack imports internal/devserver, which imports go.temporal.io/server and
// the UI server). Building with -tags nodev leaves it out: the binary keeps `wop worker`
// and `wop api` and drops about 180 MB of server code.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/agentclient"
	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/bench"
	"github.com/wop-dev/wop/internal/certify"
	"github.com/wop-dev/wop/internal/devserver"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

const hasEmbeddedServer = true

var devCommand = command{"dev", "run everything in one process: Temporal + UI on SQLite, worker, API", runDev}

var benchCommand = command{"bench", "measure host turn latency against Temporal's floor on an embedded server", func(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	return bench.Command(args, stdout, stderr)
}}

// Files the dev command keeps in the data folder besides the Temporal database.
const (
	devKeyFile     = "api-key"
	devSecretFile  = "token-secret"
	devWebhookFile = "webhook-secret"
	// devSigningKeyFile is the host's certification key (PKCS#8 PEM, Ed25519), whose
	// public half discovery publishes in signingKeys[] (wop certify signs with it).
	devSigningKeyFile = "signing-key.pem"
)

// devConfig is the resolved configuration of `wop dev`.
type devConfig struct {
	dataDir         string
	httpAddr        string
	temporalPort    int
	uiPort          int
	packsDir        string
	toolsFile       string
	logLevel        string
	temporalLog     string
	temporalAddress string
	retention       time.Duration
	seams           bool
}

func runDev(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	started := time.Now()
	cfg := devConfig{
		dataDir:         envOr(env, "WOP_DATA", ".wop"),
		httpAddr:        envOr(env, "WOP_HTTP", "127.0.0.1:8080"),
		packsDir:        envOr(env, "WOP_PACKS", "packs"),
		toolsFile:       envOr(env, "WOP_TOOLS", ""),
		logLevel:        envOr(env, "WOP_LOG_LEVEL", "info"),
		temporalLog:     envOr(env, "WOP_TEMPORAL_LOG_LEVEL", "warn"),
		temporalAddress: strings.TrimSpace(env("TEMPORAL_ADDRESS")),
	}
	var err error
	if cfg.temporalPort, err = envPort(env, "WOP_TEMPORAL_PORT", 7233); err != nil {
		return fail(stderr, "dev", err)
	}
	if cfg.uiPort, err = envPort(env, "WOP_UI_PORT", 8233); err != nil {
		return fail(stderr, "dev", err)
	}
	cfg.retention = devserver.DefaultRetention
	if v := strings.TrimSpace(env("WOP_RETENTION")); v != "" {
		if cfg.retention, err = time.ParseDuration(v); err != nil || cfg.retention <= 0 {
			return fail(stderr, "dev", fmt.Errorf("WOP_RETENTION=%q: want a positive duration such as 720h", v))
		}
	}

	if cfg.seams, err = envBool(env, envConformanceSeams, false); err != nil {
		return fail(stderr, "dev", err)
	}
	wcfg, err := worker.ConfigFromEnv(env)
	if err != nil {
		return fail(stderr, "dev", err)
	}

	fs := newFlagSet("dev", "dev [flags]", stderr)
	fs.StringVar(&cfg.dataDir, "data", cfg.dataDir, "data `folder` for the Temporal database and the dev key (env WOP_DATA)")
	fs.StringVar(&cfg.httpAddr, "http", cfg.httpAddr, "API listen `address` (env WOP_HTTP)")
	fs.IntVar(&cfg.temporalPort, "temporal-port", cfg.temporalPort, "Temporal gRPC `port` (env WOP_TEMPORAL_PORT)")
	fs.IntVar(&cfg.uiPort, "ui-port", cfg.uiPort, "Temporal UI `port` (env WOP_UI_PORT)")
	fs.StringVar(&cfg.packsDir, "packs", cfg.packsDir, "packs `folder` (env WOP_PACKS)")
	fs.StringVar(&cfg.toolsFile, "tools", cfg.toolsFile, "tool bindings `file`; default <packs>/tools.yaml when it exists (env WOP_TOOLS)")
	fs.StringVar(&cfg.logLevel, "log-level", cfg.logLevel, "log `level` of the host: debug, info, warn, error (env WOP_LOG_LEVEL)")
	fs.DurationVar(&cfg.retention, "retention", cfg.retention, "how long the embedded namespace keeps closed executions, those a conversation continued from included (env WOP_RETENTION)")
	fs.StringVar(&cfg.temporalLog, "temporal-log-level", cfg.temporalLog, "log `level` of the embedded Temporal server (env WOP_TEMPORAL_LOG_LEVEL)")
	fs.BoolVar(&cfg.seams, "conformance-seams", cfg.seams, "serve the conformance suite's test seams, the durability kill among them, and supervise the process so a kill restarts it (env "+envConformanceSeams+"); for conformance runs only")
	wcfg.RegisterTuningFlags(fs)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return fail(stderr, "dev", fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if cfg.retention <= 0 {
		return fail(stderr, "dev", fmt.Errorf("--retention %s: want a positive duration such as 720h", cfg.retention))
	}
	if err := workflows.CheckTaskQueue(wcfg.Queue()); err != nil {
		return fail(stderr, "dev", fmt.Errorf("--task-queue %q: %w", wcfg.Queue(), err))
	}
	// The kill seam kills this process: with the seams on, a supervisor runs it as
	// its child and starts it again (dev_supervise.go).
	supervised := env(devSupervisedEnv) == "1"
	if cfg.seams && !supervised {
		exe, err := os.Executable()
		if err != nil {
			return fail(stderr, "dev", fmt.Errorf("find the wop binary to supervise: %w", err))
		}
		return superviseDev(ctx, append([]string{exe, "dev"}, args...), os.Environ(), stdout, stderr)
	}

	logger, err := newLogger(stderr, cfg.logLevel)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	var serverLevel slog.Level
	if err := serverLevel.UnmarshalText([]byte(cfg.temporalLog)); err != nil {
		return fail(stderr, "dev", fmt.Errorf("temporal log level %q: want debug, info, warn or error", cfg.temporalLog))
	}

	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return fail(stderr, "dev", fmt.Errorf("data folder %s is not writable: %w", cfg.dataDir, unwrapPath(err)))
	}
	key, keyFromFile, err := devSecret(env, "WOP_API_KEY", filepath.Join(cfg.dataDir, devKeyFile), "wop_dev_", 24)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	secret, _, err := devSecret(env, "WOP_TOKEN_SECRET", filepath.Join(cfg.dataDir, devSecretFile), "", 32)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	webhookSecret, _, err := devSecret(env, "WOP_WEBHOOK_SECRET", filepath.Join(cfg.dataDir, devWebhookFile), "", 32)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	signingKey := strings.TrimSpace(env("WOP_SIGNING_KEY_FILE"))
	if signingKey == "" {
		signingKey = filepath.Join(cfg.dataDir, devSigningKeyFile)
		if _, _, err := certify.EnsureKey(signingKey, env("WOP_SIGNING_KEY_ID")); err != nil {
			return fail(stderr, "dev", err)
		}
	}
	// The API and the worker of the dev process share the generated secrets: the
	// worker's config was read before the webhook key existed, so it takes the key
	// here (a worker without it could sign no delivery).
	env = withEnv(env, map[string]string{"WOP_API_KEY": key, "WOP_TOKEN_SECRET": secret, "WOP_WEBHOOK_SECRET": webhookSecret, "WOP_SIGNING_KEY_FILE": signingKey})
	wcfg.WebhookSecret = []byte(webhookSecret)
	apiCfg, err := api.ConfigFromEnv(env)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	apiCfg.TaskQueue = wcfg.Queue() // the API starts runs where the worker polls
	var st *stack.Stack
	if cfg.seams {
		apiCfg.ConformanceSeams = devSeams(&wcfg, func() { st.StopWorker() }, killSelf)
	}

	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = activities.CheckProviders(cctx, wcfg.Providers)
	cancel()
	if err != nil {
		return fail(stderr, "dev", err)
	}

	wcfg.PacksDir = cfg.packsDir
	wcfg.ToolsFile = cfg.toolsFile
	wcfg.Logger = logger

	// The packs are checked before the server starts: a broken pack is reported once,
	// here, and left out; the others serve.
	loaded, diags, err := packs.LoadDir(cfg.packsDir)
	var broken *packs.DirError
	switch {
	case errors.As(err, &broken):
		fmt.Fprint(stderr, broken.Report())
	case err != nil:
		return fail(stderr, "dev", err)
	}
	for _, d := range diags.Warnings() {
		logger.Warn("Pack warning", "diagnostic", d.String())
	}
	if loaded == nil {
		loaded = []*packs.Loaded{}
	}

	opts := stack.Options{
		DataDir:        cfg.dataDir,
		Retention:      cfg.retention,
		TemporalPort:   cfg.temporalPort,
		UI:             true,
		UIPort:         cfg.uiPort,
		HTTPAddr:       cfg.httpAddr,
		SeedFixtures:   true,
		API:            apiCfg,
		Worker:         wcfg,
		Packs:          loaded,
		Logger:         logger,
		ServerLogLevel: serverLevel,
		// Workflows call the agents through this endpoint (agentclient's Nexus service).
		NexusEndpoint: agentclient.DefaultNexusEndpoint,
	}
	if cfg.temporalAddress != "" {
		fmt.Fprintf(stderr, "wop dev: TEMPORAL_ADDRESS is set (%s): using that Temporal server instead of the embedded one; unset it to use the embedded server\n", cfg.temporalAddress)
		copts, err := worker.ClientOptionsFromEnv(env, logger)
		if err != nil {
			return fail(stderr, "dev", err)
		}
		opts.TemporalAddress = copts.HostPort
		opts.TemporalClient = copts
		opts.UI = false
	}

	tel, metrics, stopTelemetry, err := startTelemetry(ctx, "wop", env, logger)
	if err != nil {
		return fail(stderr, "dev", err)
	}
	defer stopTelemetry()
	tel.ClientOptions(&opts.TemporalClient)
	opts.API.Metrics, opts.API.MetricsHandler, opts.API.TracerProvider = tel.Registry, metrics, tel.TracerProvider()

	st, err = stack.Start(ctx, opts)
	if err != nil {
		return fail(stderr, "dev", devStartError(err))
	}
	defer st.Stop()
	defer onHangup(func() { _ = st.ReloadKeys() })()

	keyNote := "from WOP_API_KEY"
	if keyFromFile {
		keyNote = "the whole key is in " + filepath.Join(cfg.dataDir, devKeyFile) + ", readable by you only"
	}
	fmt.Fprintf(stdout, "wop dev is ready in %.2fs\n", time.Since(started).Seconds())
	fmt.Fprintf(stdout, "  API          %s\n", st.APIURL())
	fmt.Fprintf(stdout, "  Inbox        %s/inbox (approvals; sign in with the API key)\n", st.APIURL())
	fmt.Fprintf(stdout, "  Metrics      %s/metrics\n", st.APIURL())
	if u := st.UIURL(); u != "" {
		fmt.Fprintf(stdout, "  Temporal UI  %s\n", u)
	}
	if c := apiCfg.PayloadCodec; c != nil {
		fmt.Fprintf(stdout, "  Payloads     sealed with AES-256-GCM under key %q; the UI opens them at %s/codec\n", c.EncryptingKeyID(), st.APIURL())
	}
	where := "embedded, data in " + cfg.dataDir + ", retention " + formatRetention(cfg.retention)
	if cfg.temporalAddress != "" {
		where = "external, from TEMPORAL_ADDRESS"
	}
	fmt.Fprintf(stdout, "  Temporal     %s (namespace %s, %s)\n", st.TemporalAddress(), st.Namespace(), where)
	if cfg.temporalAddress == "" {
		fmt.Fprintf(stdout, "  Nexus        endpoint %s, service %s (agents for your workflows)\n", agentclient.DefaultNexusEndpoint, agentclient.NexusService)
	}
	fmt.Fprintf(stdout, "  API key      %s (%s)\n", maskSecret(key), keyNote)
	packsLine := fmt.Sprintf("%d from %s", st.PackCount(), cfg.packsDir)
	if broken != nil {
		packsLine += fmt.Sprintf(" (%d not served, see above)", len(broken.Failed))
	}
	fmt.Fprintf(stdout, "  Packs        %s\n", packsLine)
	for i, line := range modelLines(wcfg) {
		label := "Model"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(stdout, "  %-12s %s\n", label, line)
	}
	printTools(stdout, st.ToolsFile(), st.ToolsReport())
	if cfg.seams {
		fmt.Fprintf(stdout, "  Seams        conformance seams on (%s, %s): a kill restarts this process; never in production\n", api.DurabilityKillPath, api.DurabilityBoundPath)
	}
	fmt.Fprintf(stdout, "Try: curl -s %s/.well-known/openwop\n", st.APIURL())
	fmt.Fprintln(stdout, "Press Ctrl-C to stop.")

	<-ctx.Done()
	fmt.Fprintln(stdout, "Stopping...")
	st.Stop()
	fmt.Fprintln(stdout, "Stopped.")
	return 0
}

// modelLines say which model providers the worker serves, one line per provider key,
// for the banner.
func modelLines(cfg worker.Config) []string {
	if len(cfg.ProvidersServed) == 0 || (len(cfg.ProvidersServed) == 1 && cfg.ProvidersServed[0].Provider == activities.ProviderMock) {
		return []string{"scripted mock (packs/*.mock.yaml); set WOP_MODEL_PROVIDER (gemini, vertex, bedrock, azure-openai, openai, anthropic) " +
			"or OPENAI_API_KEY for a real model"}
	}
	var lines []string
	for _, s := range cfg.ProvidersServed {
		line := s.Provider
		if s.Model != "" {
			line += ", model " + s.Model
		}
		lines = append(lines, fmt.Sprintf("%s: %s", s.Key, line))
	}
	lines[0] += " (from " + cfg.ProviderSource + ")"
	for _, s := range cfg.ProvidersServed {
		if s.Provider == activities.ProviderMock {
			continue
		}
		if pol := activities.ModelOutageOf(cfg.ModelOutage, s.Key, s.Provider); pol.RetryFor > 0 {
			lines = append(lines, fmt.Sprintf("%s: an outage is waited out for %s (WOP_MODEL_RETRY_FOR)", s.Key, pol.RetryFor))
		} else {
			lines = append(lines, fmt.Sprintf("%s: an outage fails the turn at once (WOP_MODEL_RETRY_FOR=0)", s.Key))
		}
	}
	return lines
}

// devStartError turns the stack's start errors into the one line a developer needs.
func devStartError(err error) error {
	var port *devserver.PortInUseError
	if errors.As(err, &port) {
		hint := map[string]string{
			"API":           "--http or WOP_HTTP",
			"Temporal gRPC": "--temporal-port or WOP_TEMPORAL_PORT",
			"Temporal UI":   "--ui-port or WOP_UI_PORT",
		}[port.What]
		if hint == "" {
			return port
		}
		return fmt.Errorf("%v; is another wop dev running? Choose another port with %s", port, hint)
	}
	var locked *devserver.LockedError
	if errors.As(err, &locked) {
		return fmt.Errorf("the data folder's Temporal database is in use by another process (pid %s); stop it or choose another data folder with --data or WOP_DATA", locked.PID)
	}
	return err
}

// devSecret returns the value of env var name, or the content of file, or a new random
// value (prefix + n random bytes in hex) written to file with mode 0600. fromFile
// reports that the value came from (or went to) the file.
func devSecret(env func(string) string, name, file, prefix string, n int) (value string, fromFile bool, err error) {
	if v := strings.TrimSpace(env(name)); v != "" {
		return v, false, nil
	}
	if raw, err := os.ReadFile(file); err == nil {
		if v := strings.TrimSpace(string(raw)); v != "" {
			// A file written by an earlier version may be readable by others.
			if err := os.Chmod(file, 0o600); err != nil {
				return "", false, fmt.Errorf("restrict %s to its owner: %w", file, unwrapPath(err))
			}
			return v, true, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read %s: %w", file, unwrapPath(err))
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", false, fmt.Errorf("generate %s: %w", name, err)
	}
	v := prefix + hex.EncodeToString(b)
	if err := os.WriteFile(file, []byte(v+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("data folder %s is not writable: %w", filepath.Dir(file), unwrapPath(err))
	}
	return v, true, nil
}

// maskSecret shows enough of a secret to recognise it and not enough to use it: the
// first 8 and last 4 characters of a long one, nothing of a short one.
func maskSecret(v string) string {
	if len(v) < 20 {
		return strings.Repeat("*", len(v))
	}
	return v[:8] + "…" + v[len(v)-4:]
}

// unwrapPath drops the *os.PathError wrapper, whose path the message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// envPort reads a port number from env var name, or returns def.
func envPort(env func(string) string, name string, def int) (int, error) {
	v := strings.TrimSpace(env(name))
	if v == "" {
		return def, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("%s=%q: want a port number", name, v)
	}
	return p, nil
}

// withEnv returns env with the given variables set.
func withEnv(env func(string) string, set map[string]string) func(string) string {
	return func(name string) string {
		if v, ok := set[name]; ok {
			return v
		}
		return env(name)
	}
}

// formatRetention spells a retention in days when it is whole days ("30 days").
func formatRetention(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		if n := d / (24 * time.Hour); n > 1 {
			return fmt.Sprintf("%d days", n)
		}
		return "1 day"
	}
	return d.String()
}
