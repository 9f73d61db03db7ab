package workflows

// This file is the contract between the run workflow and its callers (the API, the
// tests, wop bench): names, inputs and the shapes queries return. Everything here is
// plain data that serialises to JSON.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// TaskQueue is the task queue the host's workers poll unless WOP_TASK_QUEUE names
// another (TaskQueueFromEnv): the queue of a run is the one it was started on, and its
// activities, child runs and webhook deliveries stay on it.
const TaskQueue = "wop"

// TaskQueueFromEnv is the task queue named by WOP_TASK_QUEUE, TaskQueue when unset. A
// name has no spaces, at most 200 characters, and not Temporal's reserved /_sys/ prefix.
func TaskQueueFromEnv(getenv func(string) string) (string, error) {
	v := strings.TrimSpace(getenv("WOP_TASK_QUEUE"))
	if v == "" {
		return TaskQueue, nil
	}
	if err := CheckTaskQueue(v); err != nil {
		return "", fmt.Errorf("WOP_TASK_QUEUE=%q: %w", v, err)
	}
	return v, nil
}

// CheckTaskQueue says what is wrong with a task queue name, if anything.
func CheckTaskQueue(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("the task queue name is empty")
	case len(name) > 200:
		return fmt.Errorf("a task queue name has at most 200 characters")
	case strings.ContainsAny(name, " \t\r\n"):
		return fmt.Errorf("a task queue name has no spaces")
	case strings.HasPrefix(name, "/_sys/"):
		return fmt.Errorf("/_sys/ is Temporal's own prefix")
	}
	return nil
}

// RunWorkflowName is the Temporal workflow type of every OpenWOP run.
const RunWorkflowName = "OpenWOPRun"

// Signal names.
const (
	// ResolveSignal carries a ResolveRequest: an interrupt resolution or a conversation
	// exchange/close.
	ResolveSignal = "openwop.resolve"
	// CancelSignal carries a CancelRequest. Temporal cancellation (the UI's Cancel
	// button) is honoured the same way, with reason "cancelled".
	CancelSignal = "openwop.cancel"
)

// Query names.
const (
	SnapshotQuery = "openwop.snapshot" // () -> Snapshot
	EventsQuery   = "openwop.events"   // (EventsRequest) -> EventsPage
	// TranscriptQuery answers a convo.TranscriptRef with the messages it points at
	// ([]convo.Message), when the execution it reaches holds them all. Readers use
	// TranscriptPageQuery, which also reaches earlier executions.
	TranscriptQuery = "openwop.transcript"
	// TranscriptPageQuery answers an activities.TranscriptPageRequest with an
	// activities.TranscriptPage. It works on every execution of the run, closed ones
	// included (QueryWorkflow with that execution's run id); a worker's
	// activities.ClientTranscripts asks it under this name.
	TranscriptPageQuery = "openwop.transcript-page"
	// ValidateResolveQuery runs the workflow's own validation of a ResolveRequest without
	// changing anything, so the API can answer 404/400/409 synchronously before it signals.
	ValidateResolveQuery = "openwop.validate-resolve" // (ResolveRequest) -> ResolveCheck
	// OutcomesQuery answers what the run did with several requests at once, so an API
	// process waiting on many resolves of one run asks once per change of the run.
	OutcomesQuery = "openwop.outcomes" // (OutcomesRequest) -> OutcomesPage
	// RunBasisQuery returns what the run was started with that a fork replay must
	// run on: its definitions, its packs by hash, its limits.
	RunBasisQuery = "openwop.run-basis" // () -> RunBasis
)

// OutcomesRequest asks for the outcomes of requests by RequestID.
type OutcomesRequest struct {
	RequestIDs []string `json:"requestIds"`
}

// OutcomesPage answers OutcomesQuery: the outcomes the run has recorded among the
// requested ids (the others are queued or not yet received), and whether the run has
// ended, after which a request without an outcome is never applied.
type OutcomesPage struct {
	Outcomes []ResolveOutcome `json:"outcomes"`
	Queued   []string         `json:"queued,omitempty"`
	Terminal bool             `json:"terminal,omitempty"`
	Status   string           `json:"status"`
}

// RunBasis is the part of a run's input a `:fork` replay reuses, so the fork runs on
// the source's recorded definition and packs (whatever the packs folder holds now)
// and under the source's limits. It is no larger than the run's input.
type RunBasis struct {
	Definition  *Definition                `json:"definition"`
	Definitions map[string]*Definition     `json:"definitions,omitempty"`
	Packs       map[string]json.RawMessage `json:"packs,omitempty"`
	PackHashes  map[string]string          `json:"packHashes,omitempty"`
	Limits      *TurnLimits                `json:"limits,omitempty"`
}

// ForkInput builds the RunInput of a replay fork of the run whose basis b is: the
// source's definitions, packs (as recorded, with their PackHashes) and limits
// (fallback when the source recorded none), with inputs checked against the
// definition. The caller sets Fork.
func (b *RunBasis) ForkInput(req RunRequest, fallback TurnLimits) (*RunInput, error) {
	if b.Definition == nil {
		return nil, fmt.Errorf("the source run recorded no workflow definition")
	}
	if err := CheckInputs(b.Definition, req.Inputs); err != nil {
		return nil, err
	}
	in := &RunInput{
		RunID: req.RunID, Definition: b.Definition, Definitions: b.Definitions, Packs: b.Packs, PackHashes: b.PackHashes,
		Inputs: req.Inputs, Owner: req.Owner, Tags: req.Tags, Metadata: req.Metadata, Configurable: req.Configurable,
		RequestDigest: req.RequestDigest, Limits: b.Limits, Era: req.Era, Notices: NoticesNodeEvents, Attributes: AttributesTags,
	}
	if in.Limits == nil && len(in.Packs) > 0 && fallback != (TurnLimits{}) {
		in.Limits = &fallback
	}
	return in, nil
}

// runBasis answers RunBasisQuery.
func (r *runner) runBasis() RunBasis {
	return RunBasis{Definition: r.in.Definition, Definitions: r.in.Definitions, Packs: r.in.Packs, PackHashes: r.in.PackHashes, Limits: r.in.Limits}
}

// Owner is the identity a run belongs to: its tenant, the key that created it, and,
// for runs created since the host records subjects, that key's Subject (OpenWOP v2's
// owner; a run without one reads with the legacy subject, protocol.LegacySubject).
type Owner struct {
	Tenant    string            `json:"tenant"`
	Principal string            `json:"principal,omitempty"`
	Subject   *protocol.Subject `json:"subject,omitempty"`
}

// RunInput starts a run. It carries everything the run needs, so workflow code never
// reads files or configuration: the definition and the exact packs it runs.
type RunInput struct {
	RunID      string      `json:"runId"`
	Definition *Definition `json:"definition"`
	// Packs referenced by the definition's pack nodes, by pack id: each pack's JSON
	// (packs.Pack) as the run was started with it. The run core carries them without
	// reading them; the agent that serves a pack node decodes its pack.
	Packs        map[string]json.RawMessage `json:"packs,omitempty"`
	PackHashes   map[string]string          `json:"packHashes,omitempty"`
	Inputs       json.RawMessage            `json:"inputs,omitempty"`
	Owner        Owner                      `json:"owner"`
	Tags         []string                   `json:"tags,omitempty"`
	Metadata     json.RawMessage            `json:"metadata,omitempty"`
	Configurable json.RawMessage            `json:"configurable,omitempty"`
	// RequestDigest is the Idempotency-Key request digest the run was created with.
	RequestDigest string `json:"requestDigest,omitempty"`
	// ParentRunID is set on child runs (core.subWorkflow).
	ParentRunID string `json:"parentRunId,omitempty"`
	// CallbackURL, when set, receives the run's webhook events (package webhooks), signed
	// with the run's callback secret (activities.CallbackSecret).
	CallbackURL string `json:"callbackUrl,omitempty"`
	// Fork is set on a `:fork` replay: the source run and its recorded event log.
	Fork *ForkSource `json:"fork,omitempty"`
	// Limits are the host's limits on the agent work of one user turn (engine rounds
	// and tool calls counted across state changes), fixed when the run starts so a
	// changed configuration never alters a run in flight. Nil: no host limit (runs
	// started before the limits existed).
	Limits *TurnLimits `json:"limits,omitempty"`
	// Carried is set when the run continued as new; readers never see the chain.
	Carried json.RawMessage `json:"carried,omitempty"`
	// Definitions holds the definitions the run's core.subWorkflow nodes start, by id
	// (transitively), so a child run needs no catalog.
	Definitions map[string]*Definition `json:"definitions,omitempty"`
	// Era is the run's eventLogSchemaVersion, stamped when the run is created
	// (protocol.EraV2 for every run created since the era key; 0 on runs created before,
	// which read as protocol.EraV1). It selects the vocabulary the run writes its log in
	// for its whole life (events.go, writeType); a child run has its parent's.
	Era int `json:"eventLogSchemaVersion,omitempty"`
	// Notices is how the run tells its tenant's webhook dispatcher about its events,
	// stamped when the run is created (NoticesNodeEvents now, NoticesLocal before it;
	// 0 on runs created before either, which signal with SignalExternalWorkflow;
	// notify.go); a child run has its parent's.
	Notices int `json:"notices,omitempty"`
	// ContinueAsNewAfterEvents, when > 0, makes the run continue as new at its next
	// safe point once an execution has appended that many events (tests use a small
	// value; production relies on Temporal's suggestion).
	ContinueAsNewAfterEvents int `json:"continueAsNewAfterEvents,omitempty"`
	// TurnShape is the shape of the run's conversations, stamped when the run is created
	// (CurrentTurnShape; 0 on runs created before): from 1 on agent turns carry A2A
	// parts beside their content and agent.model, the model that answered
	// (turnparts.go), and rosters are RFC 0239's (roster.go).
	TurnShape int `json:"turnShape,omitempty"`
	// Attributes is the search attribute scheme of the run, stamped when the run is
	// created (AttributesTags; 0 on runs created before, which set the legacy Keyword
	// attributes for their whole life; searchattrs.go); a child run has its parent's.
	Attributes int `json:"attributes,omitempty"`
	// Seam is set on a run the conformance kill seam starts (SeamDuringExecution,
	// SeamDuplicateDelivery): its first node holds in activities.DurabilityHold, or
	// performs activities.DurabilityEffect aimed at SeamEffectURL, while the process
	// dies (seam.go). Both are empty on every other run, and absent from its carried
	// state.
	Seam          string `json:"seam,omitempty"`
	SeamEffectURL string `json:"seamEffectUrl,omitempty"`
}

// AttributesTags is RunInput.Attributes of runs that keep what changes within them in
// WopTags (GateSearchAttributeSlots).
const AttributesTags = 1

// CurrentTurnShape is the RunInput.TurnShape of runs created now.
const CurrentTurnShape = 1

// TurnLimits are the host's per-turn limits of RunInput.Limits: the limits of the
// agent work of one user turn, counted across state changes (the pack engine's
// engine.TurnLimits, which has the same fields). Zero means no limit.
type TurnLimits struct {
	// MaxRounds is the number of model rounds a turn may run.
	MaxRounds int `json:"maxRoundsPerTurn,omitempty"`
	// MaxToolCalls is the number of tool calls (workflow__* calls included) a turn
	// may make.
	MaxToolCalls int `json:"maxToolCallsPerTurn,omitempty"`
}

// ForkSource describes the run a replay fork re-folds.
type ForkSource struct {
	SourceRunID string  `json:"sourceRunId"`
	FromSeq     int64   `json:"fromSeq"`
	Events      []Event `json:"events"`
}

// Event is one OpenWOP run event (schemas/run-event.schema.json, a closed envelope).
type Event struct {
	EventID       string          `json:"eventId"`
	RunID         string          `json:"runId"`
	NodeID        string          `json:"nodeId,omitempty"`
	Type          string          `json:"type"`
	Payload       json.RawMessage `json:"payload"`
	Timestamp     string          `json:"timestamp"` // RFC 3339, from workflow.Now
	Sequence      int64           `json:"sequence"`
	CausationID   string          `json:"causationId,omitempty"`
	SchemaVersion *int            `json:"schemaVersion,omitempty"`
	EngineVersion string          `json:"engineVersion,omitempty"`
}

// EventsRequest asks for events with Sequence > After (After = -1 for all): at most
// Limit of them (0 = no limit) and at most MaxBytes (EventBytes; 0 =
// DefaultEventsPageBytes, never more than MaxEventsPageBytes), but at least one.
type EventsRequest struct {
	After    int64 `json:"after"`
	Limit    int   `json:"limit,omitempty"`
	MaxBytes int   `json:"maxBytes,omitempty"`
}

// EventsPage is the answer to EventsQuery from one execution of the run. An execution
// holds the events from FirstSequence on; events before it are held by the earlier
// executions in Earlier (newest first), which answer the same query on their run id.
type EventsPage struct {
	Events       []Event `json:"events"`
	LastSequence int64   `json:"lastSequence"` // highest sequence in the log, -1 if empty
	Terminal     bool    `json:"terminal"`     // the log holds the run's terminal event
	// More is set when the page stopped at its bound with events left after it.
	More bool `json:"more,omitempty"`
	// FirstSequence is the first event this execution holds.
	FirstSequence int64                `json:"firstSequence"`
	Earlier       []activities.Segment `json:"earlier,omitempty"`
	// Index is a sparse index of older executions (records.go): with Earlier, a
	// reader finds the execution that holds any event in a few reads of start events
	// (CarriedLinks).
	Index []activities.Segment `json:"index,omitempty"`
	// Tenant owns the run, so a reader can check access with this one query.
	Tenant string `json:"tenant,omitempty"`
}

// Snapshot is the RunSnapshot (schemas/run-snapshot.schema.json, an open object).
type Snapshot struct {
	RunID         string                     `json:"runId"`
	WorkflowID    string                     `json:"workflowId"`
	Status        string                     `json:"status"`
	CurrentNodeID string                     `json:"currentNodeId,omitempty"`
	StartedAt     string                     `json:"startedAt,omitempty"`
	CompletedAt   string                     `json:"completedAt,omitempty"`
	Variables     map[string]json.RawMessage `json:"variables,omitempty"`
	Channels      map[string]json.RawMessage `json:"channels,omitempty"`
	Error         *protocol.RunError         `json:"error,omitempty"`
	// Interrupt is the first pending interrupt; Interrupts lists all of them. The API
	// adds interruptToken and callbackUrl to what it serves.
	Interrupt    *PendingInterrupt  `json:"interrupt,omitempty"`
	Interrupts   []PendingInterrupt `json:"interrupts,omitempty"`
	ChildRuns    []ChildRun         `json:"childRuns,omitempty"`
	Owner        Owner              `json:"owner"`
	Tags         []string           `json:"tags,omitempty"`
	Metadata     json.RawMessage    `json:"metadata,omitempty"`
	Configurable json.RawMessage    `json:"configurable,omitempty"`
	// Conversations describes each conversation of the run: how many turns it has and
	// which of them Channels holds (the newest; older ones are read from the
	// conversation.exchanged events).
	Conversations []ConversationInfo `json:"conversations,omitempty"`
	// Pack is the state of the run's PromptPack conversation, when it has one.
	Pack *PackStatus `json:"pack,omitempty"`
	// Stalled is set while a model round or tool call waits out an outage of what it
	// calls (outage.go): what is unavailable, since when, until when it is retried.
	Stalled      *Stall `json:"stalled,omitempty"`
	LastSequence int64  `json:"lastSequence"`
	// RequestDigest is echoed for the API's Idempotency-Key check.
	RequestDigest string `json:"requestDigest,omitempty"`
	ParentRunID   string `json:"parentRunId,omitempty"`
	// Era is RunInput.Era (0 for runs created before the era key); the API serves it as
	// v2's eventLogSchemaVersion and leaves it out of v1 snapshots.
	Era int `json:"eventLogSchemaVersion,omitempty"`
	// TemporalClose is set by the API (not the workflow) on a run Temporal closed
	// without the run's own terminal event, e.g. terminated: Status then comes from it.
	TemporalClose *TemporalClose `json:"temporalClose,omitempty"`
}

// TemporalClose says how Temporal closed a run that wrote no terminal event.
type TemporalClose struct {
	// Status is Temporal's close status: Terminated, TimedOut, Failed, Canceled.
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	ClosedAt string `json:"closedAt"`
}

// ConversationInfo is one conversation in a Snapshot. Channels holds its turns from
// turnIndex FirstTurnIndex to TurnCount-1 (at most the newest 20, and at most 256 KiB
// of them but always the newest); the earlier ones are in the run's
// conversation.exchanged events, whose payload carries the whole turn.
type ConversationInfo struct {
	ConversationID string `json:"conversationId"`
	NodeID         string `json:"nodeId"`
	Channel        string `json:"channel"`
	TurnCount      int    `json:"turnCount"`
	FirstTurnIndex int    `json:"firstTurnIndex"`
	Closed         bool   `json:"closed"`
}

// PendingInterrupt describes an interrupt a run waits on.
type PendingInterrupt struct {
	NodeID       string          `json:"nodeId"`
	InterruptID  string          `json:"interruptId"`
	Kind         string          `json:"kind"`
	Key          string          `json:"key"`
	Data         json.RawMessage `json:"data,omitempty"`
	ResumeSchema json.RawMessage `json:"resumeSchema,omitempty"`
	TimeoutMs    int64           `json:"timeoutMs,omitempty"`
	RequestedAt  string          `json:"requestedAt"`
	ExpiresAt    string          `json:"expiresAt,omitempty"`
	// BearerOnly interrupts resume only with an authenticated call (Authorization:
	// Bearer); the API issues no signed token for them and refuses token resumes (401).
	BearerOnly bool `json:"bearerOnly,omitempty"`
	// Set by the API, not the workflow.
	InterruptToken string `json:"interruptToken,omitempty"`
	CallbackURL    string `json:"callbackUrl,omitempty"`
}

// ChildRun is a child run of a core.subWorkflow node.
type ChildRun struct {
	RunID  string `json:"runId"`
	NodeID string `json:"nodeId,omitempty"`
	Status string `json:"status"`
}

// PackStatus is the PromptPack side of a run: where the state machine is and what it
// has spent.
type PackStatus struct {
	PackID       string            `json:"packId"`
	PackVersion  string            `json:"packVersion"`
	PackHash     string            `json:"packHash"`
	NodeID       string            `json:"nodeId"`
	State        string            `json:"state"`
	Status       string            `json:"status"`
	Visits       map[string]int    `json:"visits"`
	TotalVisits  int               `json:"totalVisits"`
	ToolCalls    int               `json:"toolCalls"`
	ModelRounds  int               `json:"modelRounds"`
	InputTokens  int               `json:"inputTokens"`
	OutputTokens int               `json:"outputTokens"`
	Budget       *PackBudget       `json:"budget,omitempty"`
	Artifacts    map[string]string `json:"artifacts,omitempty"`
}

// PackBudget is the engine.budget a pack declares (packs.Budget, same fields).
type PackBudget struct {
	MaxTotalVisits int `json:"max_total_visits,omitempty"`
	MaxToolCalls   int `json:"max_tool_calls,omitempty"`
	MaxWallTimeSec int `json:"max_wall_time_sec,omitempty"`
}

// ResolveRequest is the payload of ResolveSignal and ValidateResolveQuery.
type ResolveRequest struct {
	// RequestID de-duplicates signals: a request whose id was already applied is ignored.
	// For conversation turns the turn's messageId plays the same role.
	RequestID string `json:"requestId"`
	NodeID    string `json:"nodeId"`
	// InterruptID, when set, must match the pending interrupt (signed-token resolves).
	InterruptID string          `json:"interruptId,omitempty"`
	ResumeValue json.RawMessage `json:"resumeValue"`
	ResolvedBy  string          `json:"resolvedBy,omitempty"`
	// ReceivedAtMs is the API's receipt time (ms since epoch), used as a turn's ts when
	// the caller sent a bare reply.
	ReceivedAtMs int64 `json:"receivedAtMs,omitempty"`
	// Via is "rest" or "token".
	Via string `json:"via,omitempty"`
	// Caller is the authenticated identity that sent the request: the API key's id, or
	// the subject a signed token was issued to. A quorum vote counts for Caller, so a
	// caller votes once however it names itself. Empty on requests sent before callers
	// were named (the run then reads the voter from the resume value, as it did).
	Caller string `json:"caller,omitempty"`
	// Delegate is set when the caller may cast votes for the voters it names in the
	// resume value (resumeValue.voter or decidedBy): a key with approvals:delegate.
	Delegate bool `json:"delegate,omitempty"`
	// AtTurn, when set, is the conversation turn index the request was issued for (a
	// signed token binds one exchange); the run refuses it once the conversation has
	// moved past that turn.
	AtTurn *int `json:"atTurn,omitempty"`
}

// ResolveCheck is the answer to ValidateResolveQuery. OK=false carries the HTTP status
// and OpenWOP error code the API returns.
type ResolveCheck struct {
	OK bool `json:"ok"`
	// Code is the OpenWOP error code of a refusal (package protocol); the API decides
	// the HTTP status it answers with. Unprocessable marks a validation_error about a
	// well-formed value that does not fit (an external event's correlation, an event no
	// pack state declares), which the API answers with 422 rather than 400.
	Code          string          `json:"code,omitempty"`
	Unprocessable bool            `json:"unprocessable,omitempty"`
	Message       string          `json:"message,omitempty"`
	Details       json.RawMessage `json:"details,omitempty"`
	// Status is the HTTP status a worker that picked statuses itself answered with;
	// this code never sets it, and the API still honours it (refusalStatus).
	Status int `json:"status,omitempty"`
	// RunStatus is the run status the API answers with after an accepted resolve.
	RunStatus string `json:"runStatus,omitempty"`
	// Tenant, CurrentStatus and LastSequence describe the run as the check saw it, so
	// the API needs no second query for tenancy and for waiting on the resolve's effect.
	Tenant        string `json:"tenant,omitempty"`
	CurrentStatus string `json:"currentStatus,omitempty"`
	LastSequence  int64  `json:"lastSequence"`
	// Replayed is true when the run already received a request with this RequestID (a
	// resolve repeated with the same Idempotency-Key, or the API asking after its own
	// signal): Outcome then says what the run did with it, or Pending that it waits in
	// the run's queue. The API sends nothing more for such a request.
	Replayed bool `json:"replayed,omitempty"`
	// Outcome is what the run did with the request (Replayed only).
	Outcome *ResolveOutcome `json:"outcome,omitempty"`
	// Pending is true when the request is queued and not yet applied or refused.
	Pending bool `json:"pending,omitempty"`
	// Terminal is true when the run has ended: a request it has not applied never will be.
	Terminal bool `json:"terminal,omitempty"`

	// misrouted marks the refusal of an event injection that runs recorded before
	// GateEventRouting took as a chat reply (packagent/pack_events.go).
	misrouted bool
}

// CancelRequest is the payload of CancelSignal.
type CancelRequest struct {
	Reason      string `json:"reason,omitempty"`
	CancelledBy string `json:"cancelledBy,omitempty"`
}

// RunWorkflowTaskTimeout is the workflow task timeout of the runs the API starts:
// Temporal's default, 10 s, carried across continue-as-new. It is how long Temporal waits
// for a worker that took a turn's workflow task and died before it gives the task to
// another worker (worker.RecoveryOf). One second was tried and given up: on a loaded
// 2-core machine against PostgreSQL a run's workflow tasks kept timing out (each retry
// replays the history from the start, slower than the one before), and the run stopped
// answering ("Workflow Task in failed state").
const RunWorkflowTaskTimeout = 10 * time.Second
