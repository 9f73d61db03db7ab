package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wop-dev/wop/worker"
	"github.com/wop-dev/wop/workflows"
)

// runGates is `wop gates`: it lists every gate of the registry (workflows.Gates) with
// the open runs that may still take its earlier path, counted through Temporal's
// visibility API (worker.RetirementQuery); a gate with none may retire, and the search
// attributes it lists go with it.
func runGates(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	asJSON := false
	fs := newFlagSet("gates", "gates [flags]", stderr)
	tf := registerTemporalFlags(fs, env, "Temporal `namespace` of the runs (env TEMPORAL_NAMESPACE)", 10*time.Second)
	fs.BoolVar(&asJSON, "json", false, "print the gates as a JSON array (id, added, guards, retire, query, openRuns, attributes)")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	c, err := tf.dial(ctx, env)
	if err != nil {
		return fail(stderr, "gates", err)
	}
	defer c.Close()
	gates, err := worker.CountGateRuns(ctx, c, tf.namespace, workflows.Gates)
	if err != nil {
		return fail(stderr, "gates", err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(gates); err != nil {
			return fail(stderr, "gates", err)
		}
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GATE\tADDED\tOPEN RUNS CREATED BEFORE\tRETIRE")
	for _, g := range gates {
		verdict := "keep"
		switch {
		case g.MayRetire:
			verdict = "may retire"
		case !g.ByDate():
			verdict = "keep: " + g.Retire
		}
		if len(g.Attributes) > 0 {
			verdict += " (with " + strings.Join(g.Attributes, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", g.ID, g.Added, g.OpenRuns, verdict)
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "gates", err)
	}
	if len(gates) > 0 {
		fmt.Fprintf(stdout, "\nOpen runs created before a gate's day are counted with, for the gate of %s:\n  %s\n", gates[0].Added, gates[0].Query)
	}
	return 0
}
