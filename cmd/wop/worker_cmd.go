package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// runWorker is `wop worker`: the production worker process.
func runWorker(ctx context.Context, args []string, env func(string) string, _, stderr io.Writer) int {
	cfg, err := worker.ConfigFromEnv(env)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	address := envOr(env, "TEMPORAL_ADDRESS", worker.DefaultTemporalAddress)
	namespace := envOr(env, "TEMPORAL_NAMESPACE", client.DefaultNamespace)
	logLevel := envOr(env, "WOP_LOG_LEVEL", "info")
	ensureSA := false

	fs := newFlagSet("worker", "worker [flags]", stderr)
	cfg.RegisterFlags(fs)
	fs.StringVar(&address, "address", address, "Temporal frontend `host:port` (env TEMPORAL_ADDRESS)")
	fs.StringVar(&namespace, "namespace", namespace, "Temporal `namespace` (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&logLevel, "log-level", logLevel, "log `level`: debug, info, warn, error (env WOP_LOG_LEVEL)")
	fs.BoolVar(&ensureSA, "ensure-search-attributes", ensureSA, "create the namespace if Temporal lacks it and register the host's search attributes on it if missing, as `wop setup` does (needs operator rights)")
	legacy := fs.Bool("legacy-attributes", true, "with --ensure-search-attributes: "+legacyAttributesUsage)
	clientFlags := worker.RegisterClientFlags(fs)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	if env, err = clientFlags.Env(env); err != nil {
		return fail(stderr, "worker", err)
	}
	if err := workflows.CheckTaskQueue(cfg.Queue()); err != nil {
		return fail(stderr, "worker", fmt.Errorf("--task-queue %q: %w", cfg.Queue(), err))
	}
	// A production worker never answers real users from the demo scripts by accident.
	if cfg.ProviderSource == "" {
		return fail(stderr, "worker", worker.ErrNoProvider)
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	cfg.Logger = logger
	tel, metrics, stopTelemetry, err := startTelemetry(ctx, "wop-worker", env, logger)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	defer stopTelemetry()
	cfg.Metrics = metrics

	c, err := dial(ctx, env, address, namespace, logger, tel.ClientOptions)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	defer c.Close()
	if ensureSA {
		created, err := worker.Setup(ctx, c, namespace, 0, *legacy)
		if err != nil {
			return fail(stderr, "worker", err)
		}
		if created {
			logger.Info("Created the namespace", "namespace", namespace, "retention", worker.DefaultNamespaceRetention)
		}
	}
	if checked, legacy, err := worker.CheckSearchAttributes(ctx, c, namespace); err != nil {
		return fail(stderr, "worker", err)
	} else if checked && !legacy {
		logger.Info("The namespace has no legacy search attributes: runs created before WopTags cannot run on it", "namespace", namespace)
	} else if !checked {
		logger.Warn("Could not list the namespace's search attributes; make sure every Wop* attribute is registered", "namespace", namespace)
	}
	cfg.Versioning.Namespace = namespace
	if err := worker.Run(ctx, c, cfg); err != nil {
		return fail(stderr, "worker", err)
	}
	return 0
}

// dial connects to Temporal with the client options of the environment (TLS, API key),
// the address and namespace overridden by flags.
func dial(ctx context.Context, env func(string) string, address, namespace string, logger *slog.Logger, with ...func(*client.Options)) (client.Client, error) {
	opts, err := worker.ClientOptionsFromEnv(env, logger)
	if err != nil {
		return nil, err
	}
	opts.HostPort, opts.Namespace = address, namespace
	for _, f := range with {
		f(&opts)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", address, namespace, err)
	}
	return c, nil
}
