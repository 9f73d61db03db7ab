package protocol

// Run statuses (RunSnapshot.status).
const (
	StatusPending         = "pending"
	StatusRunning         = "running"
	StatusWaitingApproval = "waiting-approval"
	StatusWaitingInput    = "waiting-input"
	StatusWaitingExternal = "waiting-external"
	StatusCompleted       = "completed"
	StatusFailed          = "failed"
	StatusCancelling      = "cancelling"
	StatusCancelled       = "cancelled"
	StatusPaused          = "paused"
)

// Interrupt kinds (InterruptPayload.kind).
const (
	KindApproval      = "approval"
	KindClarification = "clarification"
	KindExternalEvent = "external-event"
	KindCustom        = "custom"
	KindLowConfidence = "low-confidence"
	// An RFC 0005 conversation's interrupt: conversation.start when it opens, then
	// conversation.exchange with the next turn's index.
	KindConversationStart    = "conversation.start"
	KindConversationExchange = "conversation.exchange"
)

// Names of the data of the host's interrupts.
const (
	// ArtifactTypeToolCall is the artifactType of a tool call's approval interrupt.
	ArtifactTypeToolCall = "tool-call"
	// EventTypeAgentEvent is the eventType of the external-event interrupt an agent
	// raises beside its conversation unless it names another.
	EventTypeAgentEvent = "agent.event"
	// EventTypePackEvent is the eventType of the external-event interrupt a pack raises
	// while it waits in an `orchestration: external` state.
	EventTypePackEvent = "promptpack.event"
)
