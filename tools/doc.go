// Package tools binds the tools that PromptPack packs declare to where they run: an
// HTTP endpoint, a Temporal activity of the deployment's own workers, a tool of an MCP
// server, or a Go function of a custom worker binary. A pack says what a tool is; the
// bindings, deployment configuration kept beside the packs, say where it runs.
//
// docs/tools.md is the reference of the bindings file (every field, what each binding
// sends and answers, retries, approvals, secrets); TestBindingsReferenceDoc keeps it
// equal to what this package's parser accepts, and docs/timeouts.md has the defaults.
// In short:
//
//	tools:
//	  lookup_order:
//	    http: { url: http://orders.internal/lookup, headers: { Authorization: "Bearer ${ORDERS_TOKEN}" } }
//	  get_balance:
//	    activity: { type: GetBalance, task_queue: banking-tools }
//	  search_docs:
//	    mcp: { server: docs, tool: search }
//	  issue_refund:
//	    approval: required
//	mcp_servers:
//	  docs:
//	    command: [docs-mcp, --stdio]
//
// wop dev and wop worker read it from --tools / WOP_TOOLS, else from <packs>/tools.yaml
// when that exists (Set.LoadFile); `wop pack validate --tools FILE PATH...` checks it
// against packs (Check). Every problem is a packs.Diagnostic with file:line:col.
//
// A tool whose action_scope.effect is read is retried; a write or external tool, and
// one that declares no effect, is attempted once unless its binding says idempotent:
// true (activities.ToolAttempts); with retry_for, a call that may be retried waits out
// its target's outage. Every attempt of one call carries the same idempotency key,
// OpenWOP's logical invocation id (activities.ToolIdempotencyKey), and a write that
// may have been applied reads as of unknown outcome (activities.ErrTypeOutcomeUnknown).
// ${VAR} values are read from the worker's environment once, at start, only in header
// and MCP env values; they print as [REDACTED] (Secret) and never enter a run's input,
// history, events or logs.
//
// # Go functions
//
// Set.Add with Binding{Executor: Func(fn)}, or Binding{Executor: Typed(f)} for a
// func(ctx, In) (Out, error). See the example.
//
// # Determinism
//
// Workflow code never reads the bindings. Before a batch of tool calls the run
// workflow asks the RouteTools local activity where each call runs; Temporal records the
// answer in the run's history, so a replay reads it again, and a binding changed while
// a run waits applies from the run's next tool batch (docs/DECISIONS.md).
package tools
