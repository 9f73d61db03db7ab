package protocol

import "encoding/json"

// ApprovalReceived is the payload of approval.received: a decision (or one vote of a
// quorum) on an approval, or its timeout. Its fields are in the order of their JSON
// names, the order the maps it replaced encoded them in, so its bytes are those of the
// recorded runs.
type ApprovalReceived struct {
	Action string `json:"action"`
	// Arguments and Revision are those of the tool call the vote approves, when the
	// quorum is on the call's arguments.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// CallID and Tool name the tool call of a tool approval.
	CallID string `json:"callId,omitempty"`
	// Caller is who cast a delegated vote (the voter is someone else).
	Caller    string `json:"caller,omitempty"`
	Comment   string `json:"comment,omitempty"`
	DecidedAt string `json:"decidedAt"`
	// DecidedBy is present on a decision, empty or not, and absent on a timeout.
	DecidedBy          *string         `json:"decidedBy,omitempty"`
	EditedArtifactData json.RawMessage `json:"editedArtifactData,omitempty"`
	Feedback           string          `json:"feedback,omitempty"`
	NodeID             string          `json:"nodeId"`
	// Reason is "expired" for a tool approval nobody decided in time.
	Reason         string          `json:"reason,omitempty"`
	RefineFeedback json.RawMessage `json:"refineFeedback,omitempty"`
	Revision       *int            `json:"revision,omitempty"`
	Tool           string          `json:"tool,omitempty"`
	// Voided are the voters whose votes an edit of the arguments voided.
	Voided []string `json:"voided,omitempty"`
}

// The payloads of the node lifecycle and of run.completed. Like ApprovalReceived, each
// has its fields in the order of their JSON names (the order of the maps they
// replaced), every field present, so their bytes are those of the recorded runs.

// NodeStarted is the payload of node.started.
type NodeStarted struct {
	Attempt int    `json:"attempt"`
	NodeID  string `json:"nodeId"`
	TypeID  string `json:"typeId"`
}

// NodeCompleted is the payload of node.completed.
type NodeCompleted struct {
	DurationMs int64                      `json:"durationMs"`
	NodeID     string                     `json:"nodeId"`
	Outputs    map[string]json.RawMessage `json:"outputs"`
}

// NodeFailed is the payload of node.failed.
type NodeFailed struct {
	Attempts int       `json:"attempts"`
	Error    NodeError `json:"error"`
	NodeID   string    `json:"nodeId"`
}

// NodeError is node.failed's error: a RunError, or a gate's rejection, which also says
// it is not retryable. It is also workflow.stalled's error of an outage, the last
// failure of the call, which says it is retryable.
type NodeError struct {
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Details   json.RawMessage `json:"details,omitempty"`
	Retryable *bool           `json:"retryable,omitempty"`
}

// NodeSkipped is the payload of node.skipped.
type NodeSkipped struct {
	NodeID string `json:"nodeId"`
	Reason string `json:"reason"`
}

// NodeCancelled is the payload of node.cancelled.
type NodeCancelled struct {
	NodeID string `json:"nodeId"`
	Reason string `json:"reason"`
}

// NodeResumed is the payload of node.resumed: the value the interrupt was resolved with.
type NodeResumed struct {
	InterruptID string          `json:"interruptId"`
	NodeID      string          `json:"nodeId"`
	ResumeValue json.RawMessage `json:"resumeValue"`
}

// RunCompleted is the payload of run.completed: the outputs of the run's sink nodes.
type RunCompleted struct {
	DurationMs int64                      `json:"durationMs"`
	Outputs    map[string]json.RawMessage `json:"outputs"`
}

// WorkflowRestored is the payload of workflow.restored: the run's work in flight when
// its process died was carried on by another (the conformance kill seam's
// during-execution mode, activities.DurabilityHold). Incarnation names the process
// that carried it on, ReplacedIncarnation the one that died (empty when it never
// said), Attempt the attempt of the held work that returned. Its fields are in the
// order of their JSON names, as the other payloads'.
type WorkflowRestored struct {
	Attempt             int    `json:"attempt"`
	EngineVersion       string `json:"engineVersion"`
	Incarnation         string `json:"incarnation"`
	NodeID              string `json:"nodeId"`
	ReplacedIncarnation string `json:"replacedIncarnation"`
}

// The payloads of run.started, the clarification and conversation events and
// replay.diverged. Each has its fields in the order of their JSON names, the order of
// the maps they replaced; a field is omitempty exactly where its map left the key out,
// so their bytes are those of the recorded runs.

// RunStarted is the payload of run.started. A run without a definition records only
// its WorkflowID ("unknown"); every other run records EngineVersion and Transport, and
// Inputs and Metadata when they are objects.
type RunStarted struct {
	EngineVersion string          `json:"engineVersion,omitempty"`
	Inputs        json.RawMessage `json:"inputs,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	// Owner is present when the run has a tenant.
	Owner     *RunOwner `json:"owner,omitempty"`
	Tags      []string  `json:"tags,omitempty"`
	Transport string    `json:"transport,omitempty"`
	// WorkflowID is present even when empty.
	WorkflowID string `json:"workflowId"`
}

// RunOwner is run.started's echo of the run's owner (runs.md). Only runs created with
// a subject carry one, so the payload of earlier runs is what it was.
type RunOwner struct {
	Principal string   `json:"principal,omitempty"`
	Subject   *Subject `json:"subject,omitempty"`
	Tenant    string   `json:"tenant"`
}

// ClarificationQuestion is one question of a clarification gate, as its config and
// its interrupt's data declare it.
type ClarificationQuestion struct {
	ID       string          `json:"id"`
	Question string          `json:"question"`
	Schema   json.RawMessage `json:"schema,omitempty"`
}

// ClarificationRequested is the payload of clarification.requested.
type ClarificationRequested struct {
	InterruptID string                  `json:"interruptId"`
	NodeID      string                  `json:"nodeId"`
	Questions   []ClarificationQuestion `json:"questions"`
}

// ConversationExchanged is the payload of conversation.exchanged: one turn.
type ConversationExchanged struct {
	ConversationID string `json:"conversationId"`
	Turn           Turn   `json:"turn"`
	TurnIndex      int    `json:"turnIndex"`
}

// ConversationClosed is the payload of conversation.closed: the final turn and the
// conversation's outcome (null when it has none).
type ConversationClosed struct {
	ConversationID string          `json:"conversationId"`
	FinalTurn      Turn            `json:"finalTurn"`
	Outcome        json.RawMessage `json:"outcome"`
	TurnIndex      int             `json:"turnIndex"`
}

// ReplayDiverged is the payload of replay.diverged: where a fork's replay no longer
// follows its source run (OpenWOP replay.md).
type ReplayDiverged struct {
	AtSequence      int64  `json:"atSequence"`
	DivergenceKind  string `json:"divergenceKind"`
	DivergencePoint string `json:"divergencePoint"`
	// NodeID names the node whose replay diverged, even when its id is empty; a
	// divergence of the run's inputs has none.
	NodeID *string `json:"nodeId,omitempty"`
	// OriginalEventID is the source's event the replay departs from, present whenever
	// it is set, even when empty.
	OriginalEventID *string `json:"originalEventId,omitempty"`
	Reason          string  `json:"reason"`
	// ReplayEventID is the replay's own event at the point of divergence, when there
	// is one.
	ReplayEventID string `json:"replayEventId,omitempty"`
	SourceRunID   string `json:"sourceRunId"`
}

// The payloads of the interrupt lifecycle, approval.requested, clarification.resolved,
// conversation.opened, the pause and the run's failure and cancellation. As the others,
// each has its fields in the order of their JSON names, and a field is omitempty
// exactly where its map left the key out: the run sets those fields only on the
// conditions the maps added their keys on.

// NodeSuspended is the payload of node.suspended. Kind is present for the kinds of the
// first vocabulary only (approval, clarification, external-event, custom).
type NodeSuspended struct {
	InterruptID string `json:"interruptId"`
	Key         string `json:"key"`
	Kind        string `json:"kind,omitempty"`
	NodeID      string `json:"nodeId"`
	Reason      string `json:"reason,omitempty"`
}

// InterruptRequested is the payload of interrupt.requested: the interrupt's kind, key
// and data, its resume schema when it has one and its timeout when it has one.
type InterruptRequested struct {
	Data         json.RawMessage `json:"data"`
	Key          string          `json:"key"`
	Kind         string          `json:"kind"`
	ResumeSchema json.RawMessage `json:"resumeSchema,omitempty"`
	TimeoutMs    int64           `json:"timeoutMs,omitempty"`
}

// InterruptResolved is the payload of interrupt.resolved. Kind is present as on
// node.suspended; Via is "token" when the request came with a signed token (ResolvedBy
// is then the key the token was issued to). An approval decided by a rejection (RFC
// 0223) carries its Action, Decision and, for a timeout, Reason.
type InterruptResolved struct {
	// Action is present with a decision, even when empty.
	Action      *string         `json:"action,omitempty"`
	Decision    string          `json:"decision,omitempty"`
	InterruptID string          `json:"interruptId"`
	Kind        string          `json:"kind,omitempty"`
	NodeID      string          `json:"nodeId"`
	Reason      string          `json:"reason,omitempty"`
	ResolvedAt  string          `json:"resolvedAt"`
	ResolvedBy  string          `json:"resolvedBy,omitempty"`
	ResumeValue json.RawMessage `json:"resumeValue"`
	Via         string          `json:"via,omitempty"`
}

// ApprovalRequested is the payload of approval.requested, in the legacy vocabulary of
// its actions (edit-accept is "edit").
//
// A tool approval also names its Tool and CallID (the engine names every call) and,
// when it has a deadline, ExpiresAt. Its escalation requests it again with Escalated,
// EscalatedTo (the group it escalates to, never empty) and EscalatedAfterMs; an edit
// of the arguments that restarts its quorum requests it again with Reason
// "arguments-edited", the new Arguments, their Revision (from 1), who EditedBy and the
// voters whose votes it Voided.
type ApprovalRequested struct {
	Actions       []string        `json:"actions"`
	ApproversList []string        `json:"approversList,omitempty"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ArtifactID    string          `json:"artifactId"`
	ArtifactType  string          `json:"artifactType"`
	CallID        string          `json:"callId,omitempty"`
	EditedBy      string          `json:"editedBy,omitempty"`
	Escalated     bool            `json:"escalated,omitempty"`
	// EscalatedAfterMs is present on an escalation, even when its delay is under a
	// millisecond.
	EscalatedAfterMs  *int64   `json:"escalatedAfterMs,omitempty"`
	EscalatedTo       []string `json:"escalatedTo,omitempty"`
	ExpiresAt         string   `json:"expiresAt,omitempty"`
	InterruptID       string   `json:"interruptId"`
	NodeID            string   `json:"nodeId"`
	Reason            string   `json:"reason,omitempty"`
	RequiredApprovals int      `json:"requiredApprovals,omitempty"`
	Revision          int      `json:"revision,omitempty"`
	Title             string   `json:"title"`
	Tool              string   `json:"tool,omitempty"`
	Voided            []string `json:"voided,omitempty"`
}

// ClarificationResolved is the payload of clarification.resolved: the answers keyed by
// question id, and who answered when the request said.
type ClarificationResolved struct {
	AnsweredBy string          `json:"answeredBy,omitempty"`
	Answers    json.RawMessage `json:"answers"`
	NodeID     string          `json:"nodeId"`
}

// ConversationOpened is the payload of conversation.opened. Participants is the gate
// config's roster, unchanged, on runs that record it.
type ConversationOpened struct {
	AgentID        string          `json:"agentId"`
	ConversationID string          `json:"conversationId"`
	InitialTurn    Turn            `json:"initialTurn"`
	Participants   []Participant   `json:"participants,omitempty"`
	Schema         json.RawMessage `json:"schema,omitempty"`
}

// RunPaused is the payload of run.paused. InterruptedNodeID is the node an immediate
// pause interrupted, when one was running.
type RunPaused struct {
	DrainPolicy       string `json:"drainPolicy"`
	InterruptedNodeID string `json:"interruptedNodeId,omitempty"`
	PausedAt          string `json:"pausedAt"`
	PausedBy          string `json:"pausedBy,omitempty"`
	Reason            string `json:"reason,omitempty"`
}

// RunResumed is the payload of run.resumed.
type RunResumed struct {
	DrainPolicy string `json:"drainPolicy"`
	Reason      string `json:"reason,omitempty"`
	ResumedAt   string `json:"resumedAt"`
	ResumedBy   string `json:"resumedBy,omitempty"`
}

// RunFailed is the payload of run.failed. FailedNodeID names the node whose failure
// failed the run, when one did.
type RunFailed struct {
	DurationMs   int64    `json:"durationMs"`
	Error        RunError `json:"error"`
	FailedNodeID string   `json:"failedNodeId,omitempty"`
}

// RunCancelled is the payload of run.cancelled. ParentRunID names the parent whose
// cancellation cancelled the run (reason "parent-cancelled").
type RunCancelled struct {
	CancelledBy string `json:"cancelledBy,omitempty"`
	DurationMs  int64  `json:"durationMs"`
	ParentRunID string `json:"parentRunId,omitempty"`
	Reason      string `json:"reason"`
}

// The payloads of the pack agent's events: agent.decided, agent.handoff, the tool
// calls and their results, provider.usage, workflow.loopback-limit and cap.breached.
// As the others, each has its fields in the order of their JSON names, and a field is
// omitempty exactly where its map left the key out.

// AgentDecided is the payload of agent.decided: what the agent decided in one step.
// Replayed marks a decision a fork's replay took from its source run's recording.
type AgentDecided struct {
	AgentID string `json:"agentId"`
	// Decision is the agent's own record of the step; its shape is the agent's (the
	// pack agent records a model round).
	Decision any  `json:"decision"`
	Replayed bool `json:"replayed,omitempty"`
}

// AgentHandoff is the payload of agent.handoff: a committed transition of a pack from
// one state (and its agent) to the next. Reason repeats Event. OriginalTarget is the
// state the transition named when max_visits redirected it (Redirected), HostExtras
// the transition call's arguments beyond event and context, when it had any.
type AgentHandoff struct {
	Context        string         `json:"context"`
	Event          string         `json:"event"`
	FromAgentID    string         `json:"fromAgentId"`
	FromState      string         `json:"fromState"`
	HostExtras     map[string]any `json:"hostExtras,omitempty"`
	Origin         string         `json:"origin"`
	OriginalTarget string         `json:"originalTarget,omitempty"`
	Reason         string         `json:"reason"`
	Redirected     bool           `json:"redirected,omitempty"`
	ToAgentID      string         `json:"toAgentId"`
	ToState        string         `json:"toState"`
	ToolCalls      int            `json:"toolCalls"`
	TotalVisits    int            `json:"totalVisits"`
	Transitions    int            `json:"transitions"`
	Visits         int            `json:"visits"`
}

// AgentToolCalled is the payload of agent.toolCalled: a tool call the model asked for.
// System is written when false too: it says whether the engine answers the call itself.
type AgentToolCalled struct {
	AgentID  string          `json:"agentId"`
	CallID   string          `json:"callId"`
	Inputs   json.RawMessage `json:"inputs"`
	Round    int             `json:"round"`
	System   bool            `json:"system"`
	ToolName string          `json:"toolName"`
}

// AgentToolReturned is the payload of agent.toolReturned: the result of a tool call,
// with status "ok" or "error".
type AgentToolReturned struct {
	AgentID  string          `json:"agentId"`
	CallID   string          `json:"callId"`
	Outcome  json.RawMessage `json:"outcome"`
	Round    int             `json:"round"`
	Status   string          `json:"status"`
	ToolName string          `json:"toolName"`
}

// ProviderUsage is the payload of provider.usage: the tokens of one model round.
type ProviderUsage struct {
	InputTokens  int    `json:"inputTokens"`
	Model        string `json:"model"`
	NodeID       string `json:"nodeId"`
	OutputTokens int    `json:"outputTokens"`
	Provider     string `json:"provider"`
	TotalTokens  int    `json:"totalTokens"`
}

// LoopbackLimit is the payload of workflow.loopback-limit: a transition that hit its
// target state's max_visits (State), from FromState on Event, and was redirected
// (RedirectedTo) or ended the run (Terminated).
type LoopbackLimit struct {
	Event        string `json:"event"`
	FromState    string `json:"fromState"`
	Iterations   int    `json:"iterations"`
	Limit        int    `json:"limit"`
	NodeID       string `json:"nodeId"`
	RedirectedTo string `json:"redirectedTo"`
	State        string `json:"state"`
	Terminated   bool   `json:"terminated"`
}

// CapBreached is the payload of cap.breached: a limit that ended the agent's work. A
// pack's budget names its limit in Budget; a host limit names it in HostLimit, with
// Scope "turn".
type CapBreached struct {
	Budget      string `json:"budget,omitempty"`
	HostLimit   string `json:"hostLimit,omitempty"`
	Kind        string `json:"kind"`
	Limit       int    `json:"limit"`
	NodeID      string `json:"nodeId"`
	Observed    int    `json:"observed"`
	Scope       string `json:"scope,omitempty"`
	State       string `json:"state"`
	Transitions int    `json:"transitions"`
}

// The payloads of workflow.stalled: a model round or tool call waiting out an outage
// (WorkflowStalled), and a tool approval still waiting for its decision
// (ApprovalReminder). As the others, each has its fields in the order of their JSON
// names, and a field is omitempty exactly where its map left the key out.

// WorkflowStalled is the payload of workflow.stalled for a call waiting out an outage
// of what it calls: Kind "model" names the Provider, Kind "tool" the Tool and CallID
// (a stall always names them). Since is the call's first attempt, RetryUntil when the
// run stops waiting; Reminder counts the reminders after the first event.
type WorkflowStalled struct {
	CallID       string    `json:"callId,omitempty"`
	Error        NodeError `json:"error"`
	Kind         string    `json:"kind"`
	LastNodeID   string    `json:"lastNodeId"`
	Provider     string    `json:"provider,omitempty"`
	Reason       string    `json:"reason"`
	Reminder     int       `json:"reminder,omitempty"`
	RetryUntil   string    `json:"retryUntil"`
	Round        int       `json:"round"`
	Since        string    `json:"since"`
	StalledForMs int64     `json:"stalledForMs"`
	State        string    `json:"state"`
	Tool         string    `json:"tool,omitempty"`
}

// ApprovalReminder is the payload of workflow.stalled (reason "approval-reminder")
// reminding that a tool approval still waits: its Reminder-th reminder, every field
// present but the approvers, who are listed when the approval names them.
type ApprovalReminder struct {
	ApproversList []string `json:"approversList,omitempty"`
	CallID        string   `json:"callId"`
	ExpiresAt     string   `json:"expiresAt"`
	InterruptID   string   `json:"interruptId"`
	Kind          string   `json:"kind"`
	LastNodeID    string   `json:"lastNodeId"`
	Reason        string   `json:"reason"`
	Reminder      int      `json:"reminder"`
	StalledForMs  int64    `json:"stalledForMs"`
	Tool          string   `json:"tool"`
}

// The data of interrupts the run raises for a conversation and for an external event,
// which interrupt.requested records as its data. As the payloads, each has its fields
// in the order of their JSON names, every one present.

// ConversationStartData is the data of a conversation.start interrupt: the
// conversation the run opened.
type ConversationStartData struct {
	ConversationID string `json:"conversationId"`
	Title          string `json:"title"`
}

// ExternalEventData is the data of an external-event interrupt: the type of the event
// it waits for and the keys the event must match (an object, {} when none).
type ExternalEventData struct {
	Correlation json.RawMessage `json:"correlation"`
	EventType   string          `json:"eventType"`
}
