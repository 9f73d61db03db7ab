// Package workflows is the OpenWOP run workflow: one Temporal workflow per run
// (WorkflowID = runId, type RunWorkflowName) that interprets an OpenWOP workflow
// definition and is the single writer of the run's event log.
//
// # For callers (the API)
//
//   - Start: build the input with Catalog.NewRunInput, then ExecuteWorkflow with ID =
//     runId, TaskQueue, and StaticSummary = RunSummary(in).
//   - Read: SnapshotQuery → *Snapshot, EventsQuery(EventsRequest) → EventsPage (one
//     page from the execution asked; a cursor before its FirstSequence is answered by
//     the earlier executions in Earlier and Index: one whose link says Recorded holds
//     its events in its own history, EventsRecord markers read with EventsRecordFrom,
//     and its start event's RunInput.Carried names those before it (CarriedLinks);
//     older ones are queried by their run id). Both queries work on closed workflows;
//     the workflow's result is its final Snapshot. See records.go.
//   - Resolve: ask ValidateResolveQuery(ResolveRequest) first and answer from the
//     ResolveCheck (OK=false carries an OpenWOP Code of package protocol:
//     interrupt_not_found, validation_error (Unprocessable for 422), forbidden,
//     interrupt_already_resolved, interrupt_cancelled, which the API alone maps to HTTP
//     statuses; Replayed with Outcome for a request the run has already
//     decided); on OK signal ResolveSignal with the same request. Set RequestID (the
//     request's identity), Caller (who, from the credential), ReceivedAtMs (the ts of a
//     bare conversation reply). The workflow takes signals in arrival order, validates
//     each again and records its ResolveOutcome (applied, or refused with a
//     code) by RequestID: answer the caller with that outcome (OutcomesQuery for many
//     at once, ValidateResolveQuery for one), not with the first check. Requests still
//     queued when the run ends are refused (410 after a cancel); see outcomes.go.
//     ResolveUpdate(ResolveUpdateRequest) does all of this in one call: its validator
//     refuses what the check refuses (ErrTypeResolveRefused, the check in its details,
//     nothing in history), its handler queues the request as the signal does and
//     returns its recorded outcome; use the RequestID as the Update ID, and the query
//     and the signal where a worker lacks the handler (resolve_update.go). Asked with
//     EventsMaxBytes, it also returns the run's events after the request's position once
//     the turn has gone as far as its workflow task takes it (resolve_events.go).
//   - Cancel: signal CancelSignal{Reason, CancelledBy}, or cancel the workflow. A
//     pack's turn stops between rounds and tool calls, and the activity in flight is
//     cancelled (packagent/pack_cancel.go).
//   - Pause and resume: the PauseUpdate (PauseRequest) and ResumeUpdate (ResumeRequest)
//     updates; their validators refuse what runs.md's 409 table refuses
//     (ErrTypePauseRefused with a PauseRefusal), and they answer a PauseResult. While
//     paused the run holds and refuses resolves (run_state_conflict); see pause.go.
//   - Fork: ask RunBasisQuery on the source, build the input with RunBasis.ForkInput
//     and set RunInput.Fork (fork.go, packagent/pack_replay.go).
//
// # Decisions
//
//   - Cancelled and failed runs end with their terminal event, then close Canceled
//     and Failed in Temporal with their Snapshot in the error's details
//     (SnapshotFromError); WopStatus tells the OpenWOP status. See terminal.go.
//   - Node execution is sequential in a deterministic topological order (ties by
//     definition order). A node without incoming edges runs; otherwise an edge is
//     taken when its source completed and its condition holds, and the node's
//     triggerRule decides (all_success by default; see shouldRun); nodes that do not
//     run get node.skipped.
//   - Interrupt keys are "<runId>:<nodeId>:<n>", ids InterruptID(key). Conversations
//     are "<runId>:<nodeId>:0", messageIds "<conversationId>:<turnIndex>:<role>".
//   - Event ids are "evt-<runId>-<sequence>" (a hash replaces the runId when the id
//     would exceed 128 characters); timestamps come from workflow.Now.
//   - History stays flat and state stays bounded: each execution keeps the events,
//     newest turns and transcript messages it produced in memory and answers queries
//     for them, closed executions included, and records its events in its history
//     (records.go, GetVersion "event-records"); a run continues as new between
//     conversation turns when Temporal suggests it (runId unchanged), carrying counts,
//     windows and links to its earlier executions, never the log. See carry.go.
//   - Reads are paged by bytes: EventsQuery and TranscriptPageQuery answer for one
//     execution and name the earlier ones; the Snapshot holds each conversation's
//     newest 20 turns and their count (Conversations).
//   - A fork replay (RunInput.Fork) re-folds recorded decisions and conversations;
//     see fork.go.
//   - RunInput.Limits are the host's per-turn limits of pack agent work, fixed at start.
//   - Behaviour that changed for runs in flight is asked lazily with workflow.GetVersion
//     (versions.go), where the new code would first act differently.
//   - A pack's tool calls are routed per batch by the RouteTools local activity (its
//     recorded answer, not the worker's bindings, decides); activity-bound calls are
//     scheduled on their binding's task queue, the others are ToolCall activities, and
//     a call that fails after its retries is an error result for the model. Runs
//     whose first tool batch predates this keep the ToolCall-only path
//     (GetVersion "tool-routes"); see packagent/packtools.go.
//   - A tool call that needs a person's decision (the binding's approval setting, or
//     the agent's autonomy_level acts_with_approval with a write, external or
//     undeclared tool) waits on an approval interrupt at the pack's node before its
//     batch runs, with a durable deadline, reminders and escalation; see
//     approvals_tool.go for the interrupt and packagent/pack_approvals.go for which
//     calls need one (GetVersion "tool-approvals").
//   - A real model round that fails its quick attempts with a retryable error waits out
//     the outage as the worker's policy says (the ModelOutagePolicy local activity),
//     the run stalled meanwhile (Snapshot.Stalled, workflow.stalled, the stalledOn tag of SATags, the
//     current details); past the policy's time the turn ends with a system turn, not
//     the conversation. Tool calls whose route carries an outage policy (a binding's
//     retry_for) wait likewise. See packagent/pack_outage.go, and outage.go for the
//     stall the run records (GetVersion "outage-wait").
//   - A write, external or undeclared tool call that may have been applied (a timeout,
//     a lost answer) gives the model an "outcome unknown" result with its idempotency
//     key, and the same call repeated in the turn reuses the key; see
//     packagent/tooloutcome.go (GetVersion "tool-outcome-unknown").
//   - While a conversation's agent works on a turn the run is running (its own
//     interrupts are not what the run waits on); the search attributes follow when the
//     turn waits outside its workflow task, and a resolve is answered with where the
//     turn left the run. Local rounds yield their workflow task every 100 ms (the Yield
//     activity) so queries and signals are served. See turnstatus.go and
//     packagent/localround.go (GetVersion "turn-status", "local-round-yield").
//   - The run core knows no packs: it imports neither package engine nor package packs
//     (imports_test.go). The PromptPack agent is package packagent, which imports this
//     package and serves the conversation seam (ConversationAgent, with the host's
//     services on Conversation) for node type PackNodeType; the catalog serves packs
//     through ServedPack (packagent.Serve), and a run carries its packs as JSON
//     (RunInput.Packs). packagent.Register registers the agent, in code, where a
//     worker is assembled, so every replay finds the same one.
//   - Webhooks: each tenant's subscriptions live in a webhook dispatcher workflow
//     (package webhooks); runs signal it the events webhooks may receive (notify.go,
//     WebhookNotice, GetVersion "webhook-notify"), and it starts one delivery workflow
//     per event and destination. worker.Register registers both packages' workflows.
//
// # Files
//
// The run workflow (Run, run.go) is a runner whose carried state is grouped by
// concern (state.go; carry.go carries and restores it). Its parts: node dispatch and
// records (dispatch.go), trigger rules (triggers.go), the run's ends (terminal.go),
// cancellation (cancel.go), pause and resume (pause.go), signals (signals.go), status, search attributes and
// details (status.go), queries (queries.go), events (events.go). Interrupts:
// the generic resolve machinery (interrupts.go, outcomes.go) and one file per kind
// (approval.go, clarification.go, interrupt_node.go, approvals_tool.go). A busy turn's
// status (turnstatus.go), the stalls of outages (outage.go), how a failed activity
// reads (activityerr.go). Conversations: the conversation (conversation.go) and the
// host's services to its agent (conversation_host.go), the agent seam
// (conversation_agent.go: the generic resolve path asks an agent through it,
// MisroutedEvent, CheckInject, ApprovesToolCalls, never by its type; RegisterAgent),
// resolves (conversation_resolve.go) and the node (conversation_node.go); the catalog
// (catalog.go, ServedPack). Pack agents are package packagent's. Gates: versions.go,
// the one registry, asked through runner.changed (Conversation.Changed for an agent). What a
// run sends its webhook dispatcher: notify.go (the dispatcher and deliveries are
// package webhooks). Event types, interrupt kinds, error codes, the turn, the run
// error, the statuses and payload structs are package protocol's. Registration is
// worker.Register's, where a worker is assembled (packagent.Register among it).
package workflows
