// Package tools binds the tools that PromptPack packs declare to where they run: an
// HTTP endpoint, a Temporal activity of the deployment's own workers, a tool of an MCP
// server, or a Go function of a custom worker binary. A pack says what a tool is; the
// bindings, deployment configuration kept beside the packs, say where it runs.
//
// # The bindings file
//
// wop dev and wop worker read it from --tools / WOP_TOOLS, else from <packs>/tools.yaml
// when that exists; `wop pack validate --tools FILE PATH...` checks it against packs.
//
//	tools:
//	  lookup_order:                 # a tool name declared by one or more packs
//	    http:
//	      url: http://orders.internal/lookup
//	      headers: { Authorization: "Bearer ${ORDERS_TOKEN}" }   # ${VAR}: the worker's environment
//	      timeout: 10s              # per attempt, default 30s
//	  get_balance:
//	    activity:                   # a Temporal activity on the team's own task queue
//	      type: GetBalance
//	      task_queue: banking-tools
//	      start_to_close_timeout: 30s         # default 2m
//	      schedule_to_close_timeout: 10m      # optional: bounds retries and the wait for a worker
//	      heartbeat_timeout: 10s              # optional
//	  refund_payment:
//	    http: { url: https://payments.internal/refunds }
//	    idempotent: true            # the target honours Idempotency-Key: a write may be retried
//	    max_attempts: 3             # attempts of a call that may be retried (default 5)
//	    retry_for: 6h               # then wait out an outage this long (see Outages)
//	    retry_max_interval: 1m      # the longest pause between two attempts meanwhile (default 1m)
//	    approval: required          # never | required; unset, the pack's governance decides
//	    approval_timeout: 72h       # the decision's deadline (then: rejected as expired)
//	    approval_reminder: 24h      # remind approvers while it waits
//	    approvers: [finance]        # who may decide (API key ids); unset: anyone allowed to resolve
//	    required_approvals: 1       # quorum of accepting votes
//	    escalate_after: 48h         # then escalate_to may decide too (and is notified)
//	    escalate_to: [finance-leads]
//	  issue_refund:                 # approval settings alone: the tool runs where it would
//	    approval: required          # without a binding (a Go function, the mock), after approval
//	  search_docs:
//	    mcp: { server: docs, tool: search, timeout: 60s }   # tool defaults to the binding's name
//	mcp_servers:
//	  docs:
//	    command: [docs-mcp, --stdio]          # a subprocess speaking MCP on stdio ...
//	    env: { DOCS_TOKEN: "${DOCS_TOKEN}" }
//	    dir: /srv/docs                        # optional working folder
//	  web:
//	    url: http://127.0.0.1:9000/mcp        # ... or a streamable HTTP endpoint
//	    headers: { Authorization: "Bearer ${WEB_TOKEN}" }
//
// A file that does not parse, an unknown field, a missing or malformed value, an unset
// ${VAR}, a tool bound twice, and an MCP binding whose tool the server lacks or whose
// pack parameters do not fit the server's input schema refuse the worker's start with
// file:line:col and a clear message (packs.Diagnostic). A binding no loaded pack
// declares and an MCP server that cannot be reached at start are warnings; pack tools
// without a binding are listed as unbound, and the packs' mock tool_results (or an
// error result) answer their calls.
//
// # What each binding does
//
// HTTP: POST to url with Content-Type application/json, the call's arguments object as
// the body, the binding's headers, and Idempotency-Key (the same for every attempt of
// one call), Wop-Run-Id, Wop-Tool-Call-Id, Wop-Tool, Wop-Pack-Id and Wop-Attempt. A 2xx
// answer is the result: its JSON body, text as a JSON string, an empty body as null.
// 429, 408 and 5xx answers, timeouts and connection failures are retried as the tool's
// retry rule allows, after the answer's Retry-After when it has one (capped at 10
// minutes). A request that was sent and got no answer (a timeout, a connection lost
// after sending) fails as activities.ErrTypeOutcomeUnknown: it may have been applied.
// Any other status is an error result the model reads:
// {"error": "POST <url> answered HTTP 404 Not Found", "status": 404, "body": …}.
// Redirects are not followed. Results over MaxResultBytes are refused.
//
// Activity: the run workflow itself schedules the activity type on the task queue
// (visible in the run's Temporal history and UI, with a summary), with the arguments
// object as its single input; its result is the tool result. The deployment's worker
// may be written with any Temporal SDK. The activity's ActivityID is the call's
// idempotency key. An activity that fails after its retries (or fails with a
// non-retryable error) gives the model an error result with the failure's message.
//
// MCP: the worker connects with the official Go SDK (one session per server, opened at
// start and again after a broken connection) and calls the tool, the call's _meta
// carrying wop/idempotencyKey (the same for every attempt of one call), wop/runId,
// wop/toolCallId, wop/tool, wop/packId and wop/attempt. The result maps to the
// tool result: structuredContent as is, else one text item (its JSON when it is JSON),
// else a list of the items (binary data is described, not sent). A result marked
// isError, and a protocol error such as invalid arguments, are error results the model
// reads; a broken connection is retried. A stdio server gets only HOME, LOGNAME, PATH,
// SHELL, TERM, TMPDIR and USER of the worker's environment, plus its env.
//
// Go: Set.Add with Binding{Go: fn}; Typed adapts a func(ctx, In) (Out, error). See the
// example.
//
// # Retries follow action_scope
//
// A tool whose action_scope.effect is read is retried (max_attempts, default 5). A
// write or external tool, and one that declares no effect, is attempted once, because
// a second attempt could act twice; unless its binding says idempotent: true, meaning
// the target honours the idempotency key (the Idempotency-Key header, the ActivityID,
// or an MCP call's _meta wop/idempotencyKey). Calls answered by the mock are retried freely. A call that still fails
// becomes an error result the model reads; it does not fail the run.
//
// # Outages
//
// A binding with retry_for waits out an outage of its target: a call that may be
// retried (a read tool, or an idempotent one) and still fails with a retryable error
// after its attempts is retried for retry_for from its first attempt, backing off to
// retry_max_interval, while the run reports itself stalled (a workflow.stalled event
// every WOP_STALL_REMINDER, the WopStalledOn search attribute, the Temporal UI's
// current details). Past retry_for the model gets the error result. retry_for has no
// effect on calls attempted once.
//
// # Unknown outcomes
//
// A call of a write, external or undeclared tool that may have been applied (it timed
// out, its worker died mid-call, the connection broke after the request was sent) is
// not reported as failed: the model reads {"error": "… outcome unknown …", "status":
// "outcome_unknown", "idempotencyKey": K} and is told not to repeat it. A call of the
// same tool with the same arguments later in the same turn carries the same key K, so
// a target that honours the key applies it once.
//
// The idempotency key is OpenWOP's logical invocation id (activities.ToolIdempotencyKey):
// base64url(sha256("openwop:activity:v2" \0 tenant \0 runId \0 nodeId \0 "<round>:<callId>"
// \0 "tool:<name>")).
//
// # Approvals
//
// A call waits for a person's decision before it runs when its binding says approval:
// required, or, unless the binding says approval: never, when the agent that calls it
// declares autonomy_level acts_with_approval (its agents.members governance, else the
// pack's metadata.governance) and the tool's action_scope.effect is write, external or
// undeclared. The wait is an OpenWOP approval interrupt on the run (see package
// workflows); approval_timeout, approval_reminder, approvers, required_approvals,
// escalate_after and escalate_to tune it, over the host's defaults (WOP_APPROVAL_*;
// the deadline is 72h unless set). Durations take Go units or whole days (7d). An
// entry may hold approval settings only: the tool then runs where it would without a
// binding.
//
// # Secrets
//
// ${VAR} is read from the worker's environment, once, at start, and only in header
// values and MCP env values: URLs and commands, which appear in messages, refuse it.
// Values read this way print as [REDACTED] (Secret), never enter the workflow's input,
// history, events or logs, and are redacted from results and error messages when a
// tool echoes them.
//
// # Determinism
//
// Workflow code never reads the bindings. Before a batch of tool calls the run
// workflow asks the RouteTools local activity where each call runs; Temporal records the
// answer in the run's history, so a replay reads it again, and a binding changed while
// a run waits applies from the run's next tool batch (docs/DECISIONS.md).
package tools
