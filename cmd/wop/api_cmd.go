package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// runAPI is `wop api`: the production HTTP API process.
func runAPI(ctx context.Context, args []string, env func(string) string, _, stderr io.Writer) int {
	apiCfg, err := api.ConfigFromEnv(env)
	if err != nil {
		return fail(stderr, "api", err)
	}
	httpAddr := envOr(env, "WOP_HTTP", ":8080")
	packsDir := envOr(env, "WOP_PACKS", "packs")
	address := envOr(env, "TEMPORAL_ADDRESS", worker.DefaultTemporalAddress)
	namespace := envOr(env, "TEMPORAL_NAMESPACE", client.DefaultNamespace)
	logLevel := envOr(env, "WOP_LOG_LEVEL", "info")
	fixtures, err := envBool(env, "WOP_SEED_FIXTURES", false)
	if err != nil {
		return fail(stderr, "api", err)
	}
	seamsOn, err := envBool(env, envConformanceSeams, false)
	if err != nil {
		return fail(stderr, "api", err)
	}
	seamsAllowed, err := envBool(env, envAllowConformanceSeams, false)
	if err != nil {
		return fail(stderr, "api", err)
	}
	// The runs this API starts carry the host's per-turn limits.
	limits, err := worker.TurnLimitsFromEnv(env)
	if err != nil {
		return fail(stderr, "api", err)
	}

	fs := newFlagSet("api", "api [flags]", stderr)
	fs.StringVar(&httpAddr, "http", httpAddr, "listen `address` (env WOP_HTTP)")
	fs.StringVar(&packsDir, "packs", packsDir, "packs `folder` served as workflows (env WOP_PACKS)")
	fs.StringVar(&address, "address", address, "Temporal frontend `host:port` (env TEMPORAL_ADDRESS)")
	fs.StringVar(&namespace, "namespace", namespace, "Temporal `namespace` (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&logLevel, "log-level", logLevel, "log `level`: debug, info, warn, error (env WOP_LOG_LEVEL)")
	fs.BoolVar(&fixtures, "fixtures", fixtures, "serve the OpenWOP conformance fixtures as workflows (env WOP_SEED_FIXTURES)")
	fs.StringVar(&apiCfg.TaskQueue, "task-queue", apiCfg.TaskQueue, "Temporal `task queue` runs are started on, the one the workers poll (env WOP_TASK_QUEUE)")
	fs.BoolVar(&seamsOn, "conformance-seams", seamsOn, "serve the conformance suite's test seams (env "+envConformanceSeams+"); refused without --allow-conformance-seams")
	fs.BoolVar(&seamsAllowed, "allow-conformance-seams", seamsAllowed, "allow --conformance-seams in this process: never in production (env "+envAllowConformanceSeams+")")
	clientFlags := worker.RegisterClientFlags(fs)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if env, err = clientFlags.Env(env); err != nil {
		return fail(stderr, "api", err)
	}
	if apiCfg.ConformanceSeams, err = apiSeams(env, seamsOn, seamsAllowed, stderr); err != nil {
		return fail(stderr, "api", err)
	}
	if err := workflows.CheckTaskQueue(apiCfg.TaskQueue); err != nil {
		return fail(stderr, "api", fmt.Errorf("--task-queue %q: %w", apiCfg.TaskQueue, err))
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return fail(stderr, "api", err)
	}
	if len(apiCfg.Keys) == 0 && apiCfg.KeysFile == "" {
		logger.Warn("No API keys configured (WOP_API_KEY, WOP_KEYS_FILE): every authenticated route answers 401")
	}
	if apiCfg.PublicURL == "" && len(apiCfg.Guards.AllowedHosts) == 0 {
		logger.Warn("Neither WOP_PUBLIC_URL nor WOP_ALLOWED_HOSTS is set: a request's Host header is not trusted, so snapshots carry interrupt tokens without callback URLs and links are relative")
	}

	loaded, err := worker.LoadPacks(packsDir, logger)
	if err != nil {
		return fail(stderr, "api", err)
	}
	cat, err := worker.LoadCatalog(loaded, fixtures, limits)
	if err != nil {
		return fail(stderr, "api", err)
	}
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fail(stderr, "api", fmt.Errorf("cannot listen on %s (set --http or WOP_HTTP): %w", httpAddr, err))
	}
	tel, metrics, stopTelemetry, err := startTelemetry(ctx, "wop-api", env, logger)
	if err != nil {
		_ = ln.Close()
		return fail(stderr, "api", err)
	}
	defer stopTelemetry()
	apiCfg.Metrics, apiCfg.MetricsHandler, apiCfg.TracerProvider = tel.Registry, metrics, tel.TracerProvider()
	c, err := dial(ctx, env, address, namespace, logger, tel.ClientOptions)
	if err != nil {
		_ = ln.Close()
		return fail(stderr, "api", err)
	}
	defer c.Close()

	apiCfg.Namespace = namespace
	// A namespace set up without the legacy search attributes cannot be asked about them.
	if _, legacy, _ := worker.CheckSearchAttributes(ctx, c, namespace); !legacy {
		apiCfg.NoLegacyAttributes = true
		logger.Info("The namespace has no legacy search attributes: the API's queries read WopTags only", "namespace", namespace)
	}
	srv, err := api.New(apiCfg, c, cat, logger)
	if err != nil {
		_ = ln.Close()
		return fail(stderr, "api", err)
	}
	defer onHangup(func() { _ = srv.ReloadKeys() })()
	hs := srv.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	logger.Info("API listening", "addr", ln.Addr().String(), "temporal", address, "namespace", namespace, "packs", len(loaded))

	select {
	case err := <-errc:
		return fail(stderr, "api", err)
	case <-ctx.Done():
	}
	logger.Info("API stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// Ending the API's streams first lets the HTTP server drain.
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("API shutdown", "error", err)
	}
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("HTTP shutdown", "error", err)
		_ = hs.Close()
	}
	return 0
}

// envBool reads a boolean env var.
func envBool(env func(string) string, name string, def bool) (bool, error) {
	v := strings.TrimSpace(env(name))
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}
