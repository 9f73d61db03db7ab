package workflows

// The gate registry: every change of workflow behaviour that runs recorded before it
// do not take. Each gate is a workflow.GetVersion change id, asked only through
// runner.changed (or Conversation.Changed from an agent), lazily, at the first point
// where the new code would act differently, so runs that never reach such a point
// record no marker; once asked, an execution keeps its answer. A run recorded before a
// gate replays its earlier path (workflows/testdata holds such histories).
//
// Adding a gate: add its constant here, its entry in Gates (id, the date it was added,
// what it guards, when it may go) and ask it with changed where the new behaviour
// begins; TestGatesAskedThroughTheRegistry fails on a GetVersion asked any other way or
// a gate missing from Gates.
//
// Retiring a gate: once no open run was created before its date, no history can
// replay its earlier path; `wop gates` counts those runs through the visibility API
// (worker.RetirementQuery). Its old branch, its constant, its entry and the search
// attributes it retires (GateAttributes) go together, with the recorded histories that
// pin the earlier path (docs/DECISIONS.md, "Upgrades").

import (
	"strings"

	"go.temporal.io/sdk/workflow"
)

// Gate ids (workflow.GetVersion change ids), grouped by what they guard.
const (
	// Runs and their event log.
	GateBoundedState         = "bounded-state"
	GateTriggerRules         = "trigger-rules"
	GateCloseStatus          = "close-status"
	GateEventRecords         = "event-records"
	GateWebhookNotify        = "webhook-notify"
	GateRequestIntegrity     = "request-integrity"
	GateResolveEvents        = "resolve-update-events"
	GateTurnStatus           = "turn-status"
	GateForkReplay           = "fork-replay"
	GatePauseResume          = "pause-resume"
	GateApprovalRejection    = "approval-rejection"
	GateTurnParts            = "turn-parts"
	GateConversationRoster   = "conversation-roster"
	GateNotifyLocal          = "webhook-notify-local"
	GateForkDecisions        = "fork-approval-decisions"
	GateForkInputs           = "fork-input-divergence"
	GateSearchAttributeSlots = "search-attribute-slots"
	GateWebhookNodeEvents    = "webhook-node-events"
	GateForkSourceMissing    = "fork-tool-source-missing"

	// Pack agents.
	GateAgentCancel       = "agent-cancel"
	GateEventRouting      = "pack-event-routing"
	GatePackAttributes    = "pack-attributes-on-change"
	GateLocalRound        = "mock-round-local"
	GateLocalYield        = "local-round-yield"
	GateFirstLocal        = "first-round-local"
	GateToolRoutes        = "tool-routes"
	GateToolApprovals     = "tool-approvals"
	GateToolQuorum        = "tool-approval-quorum"
	GateToolOutcome       = "tool-outcome-unknown"
	GateOutage            = "outage-wait"
	GateConversationPacks = "pack-conversation"
	GatePackLimits        = "pack-limits-win"
	GatePackSkills        = "pack-skills"
	GateValidatorParams   = "validator-params"

	// OpenWOP v2.
	GateEventVocabulary = "event-vocabulary-v2"
)

// Gate is one entry of the registry.
type Gate struct {
	// ID is the workflow.GetVersion change id.
	ID string `json:"id"`
	// Added is the day the gate was added (YYYY-MM-DD): executions that began before
	// it may hold its earlier path in their histories.
	Added string `json:"added"`
	// Guards says what runs take since the gate, and what those recorded before do.
	Guards string `json:"guards"`
	// Retire says when the gate may go and what goes with it.
	Retire string `json:"retire"`
}

// ByDate reports whether the gate retires by its date (no open run created before it),
// as every gate does but those whose Retire says "never while ...": those hold for as
// long as a run of some kind is open, whatever its age.
func (g Gate) ByDate() bool { return !strings.HasPrefix(g.Retire, "never") }

// retireAfter is the common condition under which a gate may go.
const retireAfter = "when no open execution began before it was added (a visibility query on StartTime shows none), with the histories of testdata/earlier that pin its earlier path"

// Gates lists every gate, oldest first.
var Gates = []Gate{
	{GateTriggerRules, "2026-11-30",
		"edge trigger rules are read as OpenWOP defines them, all_success by default (shouldRun); runs started before read them the earlier way, and carry that reading across continue-as-new (carriedState.TriggerRules)",
		"when no open run began before it: the reading is carried, so a run keeps it across executions"},
	{GateCloseStatus, "2026-11-30",
		"failed and cancelled runs close Failed and Canceled in Temporal with their Snapshot in the error's details; runs ended before returned their Snapshot with a nil error and show Completed (terminal.go)",
		retireAfter},
	{GateBoundedState, "2026-11-30",
		"the decisions of the bounded carried state: a run continues as new with small queued resolves (carrying them), fails state_too_large rather than carry over maxCarriedBytes, and fails history_limit_exceeded short of Temporal's hard limits (carry.go); asked when an execution starts",
		retireAfter + "; restore keeps reading the earlier carried shape (carriedShape 0) until no execution carries it"},
	{GateWebhookNotify, "2026-11-30",
		"a run signals its tenant's webhook dispatcher the events webhooks may receive (notify.go); asked at the first such event",
		retireAfter},
	{GateRequestIntegrity, "2026-11-30",
		"a signalled client turn must be a user turn (an agent turn only as a roster participant), with bounded fields and no messageId in the host's namespace but its own (checkClientTurn); a run asks only when a request breaks a rule the earlier code did not have (checkSignalled)",
		retireAfter},
	{GateResolveEvents, "2026-11-30",
		"a resolve update that asks for events waits until the run is not busy within the workflow task and returns the run's events with its outcome (resolve_events.go); updates recorded before complete at the outcome",
		retireAfter},
	{GateAgentCancel, "2026-11-30",
		"a cancel stops a pack turn between rounds and tool calls and cancels the model or tool activity in flight; runs that recorded a cancel mid-turn before went on with the turn",
		retireAfter},
	{GateEventRouting, "2026-11-30",
		"an injected event is refused where the pack's state accepts none (409 run_state_conflict, 422 when no state declares it), and hybrid (and external entry) states raise their event interrupt; runs before took such an event as a chat reply",
		retireAfter},
	{GateForkReplay, "2026-11-30",
		"a fork replay re-folds a pack in causal order, never calls a model or tool for a recorded turn, spends no usage twice and reports divergence (fork.go and the pack agent's replay)",
		retireAfter},
	{GatePackAttributes, "2026-11-30",
		"WopPackId and the pack state (WopPackState, WopTags since GateSearchAttributeSlots) are set only when the pack's state changes; runs before set them at every turn",
		retireAfter},
	{GateLocalRound, "2026-11-30",
		"a model round after one the scripted mock answered runs as the ModelRoundLocal local activity; runs before ran every round as the ModelRound activity",
		retireAfter},
	{GateToolRoutes, "2026-11-30",
		"a pack's tool batch is routed by the RouteTools local activity and activity-bound calls run on their binding's task queue; runs whose first tool batch ran before call every tool as a ToolCall activity",
		retireAfter},
	{GateToolApprovals, "2026-11-30",
		"a tool call that needs a person's decision waits on a durable approval interrupt; asked only for a batch with such a call, and runs before ran it at once",
		retireAfter},
	{GateEventRecords, "2026-12-01",
		"an execution records its events in its own history (EventsRecord markers, records.go); asked at the execution's first event, so an execution records all of its events or none",
		retireAfter + "; readers keep querying closed executions whose links say they are not recorded until none is within retention"},
	{GateTurnStatus, "2026-12-01",
		"a run is running while its agent works on a turn, and a resolve is answered with where the turn left the run (turnstatus.go); asked at the first turn of an execution",
		retireAfter},
	{GateLocalYield, "2026-12-01",
		"a turn whose local rounds ran 100 ms in one workflow task yields it before the next round (the Yield activity); runs before ran their local rounds in one task",
		retireAfter},
	{GateOutage, "2026-12-01",
		"a model round (or a tool call whose binding says so) that fails its quick attempts with a retryable error waits out the outage, the run stalled meanwhile; asked when a round or call first fails that way, and runs before failed the run (a model round) or gave the model the error (a tool call)",
		retireAfter},
	{GateToolOutcome, "2026-12-01",
		"a write, external or undeclared tool call that may have been applied is reported as of unknown outcome, and a repeat in the same turn reuses its idempotency key; runs before read \"tool T failed\" and gave every call its own key",
		retireAfter},
	{GateToolQuorum, "2026-12-01",
		"in the approval of a call that needs more than one approval, an edit-accept with other arguments restarts the quorum on them, so the call runs with arguments every counted vote approved; asked when such an approval is raised, and approvals raised before count votes whatever their arguments",
		retireAfter},
	{GateFirstLocal, "2026-12-02",
		"a node's first model round of an execution (no round answered yet) is tried as the ModelRoundLocal local activity too, and a worker whose provider is real refuses it at once (ErrTypeNotLocal); runs before ran a first round as the ModelRound activity",
		retireAfter},
	{GateEventVocabulary, "2026-12-02",
		"a run of the v2 era (RunInput.Era) writes the event types OpenWOP v2 renamed under their v2 names (events.go, writeType); asked at the first such event only, so runs of the v1 era never record the marker",
		"never while a run of the v2 era is open: its log is in v2 names for its whole life"},
	{GateNotifyLocal, "2026-12-03",
		"a run's notices to its tenant's webhook dispatcher go through the NotifyDispatcher local activity, which signals a dispatcher that exists and no other (notify.go); runs before signalled with SignalExternalWorkflow, which failed where the tenant had no dispatcher; a replay fork notifies nothing (its log re-emits its source's), where forks before fanned it out again; asked with GateWebhookNotify, by runs created with RunInput.Notices only, so the runs created before never record the marker",
		retireAfter},
	{GateForkDecisions, "2026-12-03",
		"a fork replay re-emits the decision events the source recorded on the approval of a tool call whose result it takes from the record (node.suspended to node.resumed, deciders included; packagent/pack_replay.go, replayDecision); asked only for such a call, and forks before left the decision out of their log",
		retireAfter},
	{GateWebhookNodeEvents, "2026-12-03",
		"a run notifies its tenant's webhook dispatcher of node.started and node.completed too, which subscriptions may now ask for (notify.go, WebhookNodeEventTypes); asked at the first node event of a run created with RunInput.Notices NoticesNodeEvents, so the runs created before never record the marker and notify the other WebhookEventTypes only",
		retireAfter},
	{GateForkInputs, "2026-12-03",
		"a replay fork whose inputs differ from those its source's run.started recorded writes replay.diverged (divergenceKind input) after its run.started (fork.go, checkForkInputs); asked only for such a fork, which could not be requested before",
		retireAfter},
	{GateForkSourceMissing, "2026-12-03",
		"a fork replay never performs a tool call its source made (agent.toolCalled) without recording its outcome: the pack's turn fails closed with replay_source_missing, which closes the conversation with that error and fails the node (packagent/pack_replay.go, replayedTool); asked only for such a call, and forks before reported it as a divergence in the fold and performed it again in the unanswered last turn",
		retireAfter},
	{GatePauseResume, "2026-12-03",
		"a run takes a pause (PauseUpdate) and holds until resumed; an immediate pause cuts a delay's wait or a pack turn, which opens again with a fresh node.started on resume (pause.go); asked when a run takes its first pause, so runs never paused record no marker",
		retireAfter},
	{GateApprovalRejection, "2026-12-03",
		"an approval gate's rejection records action and decision on interrupt.resolved, a timeout resolves it rejected, and a rejected gate is a failed source (approval_rejected, not retryable) that all_complete and any_failed edges route, or an output with onReject: output (rejection.go); asked when a gate is decided or times out, and gates decided before failed the run at once (a timeout with interrupt_timeout)",
		retireAfter},
	{GateTurnParts, "2026-12-03",
		"an agent turn of a run created with RunInput.TurnShape 1 carries A2A parts beside its content and agent{agentId, model{provider, model}} (turnparts.go); asked at such a run's first agent turn, so runs created before (TurnShape 0) never record the marker",
		retireAfter},
	{GateConversationRoster, "2026-12-03",
		"conversation.opened of a run created with RunInput.TurnShape 1 carries the gate config's roster as participants (roster.go); asked when such a run opens a conversation with a roster",
		retireAfter},
	{GateConversationPacks, "2026-12-03",
		"a pack without a workflow runs as a conversation with one of its prompts (packs.AsConversation, chosen by inputs.prompt); asked when such a pack's node starts, and runs before failed there (\"has no workflow\")",
		retireAfter},
	{GatePackLimits, "2026-12-03",
		"the host's per-turn limits (WOP_MAX_ROUNDS_PER_TURN, WOP_MAX_TOOL_CALLS_PER_TURN) count only the rounds and calls of states on loops the pack does not bound (packs.Pack.UnboundedLoops), so a max_visits or engine.budget bound decides; asked when a turn reaches the host's limit outside such a loop, and runs before ended there with loop_limit_exceeded",
		retireAfter},
	{GatePackSkills, "2026-12-03",
		"a state that has skills (RFC 0008) offers skill__activate and its preloaded skills' instructions (engine/skills.go); asked at the first round in such a state, and runs before ran without them",
		retireAfter},
	{GateValidatorParams, "2026-12-03",
		"a validator's params.direction (input: the user's message is checked and, blocked, not answered by the model), params.expect_match (false: matching text is blocked) and params.message are read (engine/validators.go); asked at the first validator that has one, and runs before checked every validator against the model's text, a regex one as a pattern the text must match",
		retireAfter},
	{GateSearchAttributeSlots, "2026-12-03",
		"what changes within a run (pack state, what it waits on and its kind, the tool waiting for approval, what stalls it) is the one KeywordList WopTags of prefixed values, and the first update of an execution unsets the legacy Keyword attributes (upsertAttributes, searchattrs.go); asked at the first such update of an execution of a run created with RunInput.Attributes 1, so runs created before (Attributes 0, for their whole life, continue-as-new included) never record the marker and set WopPackState, WopWaitingOn, WopWaitingKind, WopWaitingTool and WopStalledOn",
		"when no open run was created before it (WopCreatedAt, which continue-as-new keeps: `wop gates` counts them); with it go RunInput.Attributes 0, LegacySearchAttributes: their legacy clauses in the API's queries (api/legacyattrs.go) and their registration"},
}

// changed reports whether the run takes the new path of gate id (version 1), asking
// workflow.GetVersion the first time in this execution. It is the only place the
// workflow code asks a version.
func (r *runner) changed(id string) bool {
	if v, ok := r.versions[id]; ok {
		return v >= 1
	}
	if r.versions == nil {
		r.versions = map[string]workflow.Version{}
	}
	v := workflow.GetVersion(r.ctx, id, workflow.DefaultVersion, 1)
	r.versions[id] = v
	return v >= 1
}

// Changed asks gate id for the conversation's agent as runner.changed does: whether
// the run takes the new path. An agent asks a Gate constant of this file, where its
// new behaviour first acts differently.
func (c *Conversation) Changed(id string) bool { return c.r.changed(id) }

// tookNew reports whether this execution has asked gate id and takes its new path,
// without asking it.
func (r *runner) tookNew(id string) bool { return r.versions[id] >= 1 }
