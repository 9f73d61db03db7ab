package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// runSetup is `wop setup`: it prepares a Temporal namespace for the host (creates it
// when missing, registers the Wop* search attributes) and exits. It is what
// deploy/temporal-namespace.sh does without the temporal CLI, and what
// `wop worker --ensure-search-attributes` does before it polls.
func runSetup(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	retention := worker.DefaultNamespaceRetention
	fs := newFlagSet("setup", "setup [flags]", stderr)
	tf := registerTemporalFlags(fs, env, "Temporal `namespace` to create or complete (env TEMPORAL_NAMESPACE)", time.Minute)
	fs.DurationVar(&retention, "retention", retention, "how long a namespace created here keeps closed runs (an existing namespace keeps its own)")
	legacy := fs.Bool("legacy-attributes", true, legacyAttributesUsage)
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	c, err := tf.dial(ctx, env)
	if err != nil {
		return fail(stderr, "setup", err)
	}
	defer c.Close()
	namespace := tf.namespace
	created, err := worker.Setup(ctx, c, namespace, retention, *legacy)
	if err != nil {
		return fail(stderr, "setup", err)
	}
	if created {
		fmt.Fprintf(stdout, "Created namespace %s (retention %s)\n", namespace, retention)
	} else {
		fmt.Fprintf(stdout, "Namespace %s exists\n", namespace)
	}
	fmt.Fprintf(stdout, "Search attributes registered: %d Wop* attributes\nNamespace %s is ready\n", len(workflows.SearchAttributesFor(*legacy)), namespace)
	return 0
}

// legacyAttributesUsage describes --legacy-attributes of `wop setup` and `wop worker`.
const legacyAttributesUsage = "also register the legacy search attributes that runs created before WopTags set (README \"Upgrades\"); false for a namespace no earlier release ran on: four Keyword attributes"

// temporalFlags are the flags of a command that dials Temporal, does one thing and exits.
type temporalFlags struct {
	address, namespace string
	wait               time.Duration
	client             *worker.ClientFlags
}

// registerTemporalFlags adds --address, --namespace (described by nsUsage), --wait
// (default wait) and the client's TLS and API key flags, with the environment's
// values as defaults.
func registerTemporalFlags(fs *flag.FlagSet, env func(string) string, nsUsage string, wait time.Duration) *temporalFlags {
	tf := &temporalFlags{
		address:   envOr(env, "TEMPORAL_ADDRESS", worker.DefaultTemporalAddress),
		namespace: envOr(env, "TEMPORAL_NAMESPACE", client.DefaultNamespace),
		wait:      wait,
	}
	fs.StringVar(&tf.address, "address", tf.address, "Temporal frontend `host:port` (env TEMPORAL_ADDRESS)")
	fs.StringVar(&tf.namespace, "namespace", tf.namespace, nsUsage)
	fs.DurationVar(&tf.wait, "wait", tf.wait, "how long to wait for Temporal to answer (a cluster starting beside this command)")
	tf.client = worker.RegisterClientFlags(fs)
	return tf
}

// dial dials Temporal as the parsed flags say, waiting for it to answer.
func (tf *temporalFlags) dial(ctx context.Context, env func(string) string) (client.Client, error) {
	env, err := tf.client.Env(env)
	if err != nil {
		return nil, err
	}
	return dialWaiting(ctx, env, tf.address, tf.namespace, tf.wait)
}

// dialWaiting dials Temporal until it answers or wait has passed: a cluster that is
// still starting refuses connections for a while.
func dialWaiting(ctx context.Context, env func(string) string, address, namespace string, wait time.Duration) (client.Client, error) {
	deadline := time.Now().Add(wait)
	for {
		c, err := dial(ctx, env, address, namespace, nil)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
