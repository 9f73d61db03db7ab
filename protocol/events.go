package protocol

// OpenWOP event types the host emits (the run's event log, its event stream).
const (
	EvRunStarted             = "run.started"
	EvRunCompleted           = "run.completed"
	EvRunFailed              = "run.failed"
	EvRunCancelled           = "run.cancelled"
	EvNodeStarted            = "node.started"
	EvNodeCompleted          = "node.completed"
	EvNodeFailed             = "node.failed"
	EvNodeSkipped            = "node.skipped"
	EvNodeCancelled          = "node.cancelled"
	EvNodeSuspended          = "node.suspended"
	EvNodeResumed            = "node.resumed"
	EvInterruptRequested     = "interrupt.requested"
	EvInterruptResolved      = "interrupt.resolved"
	EvApprovalRequested      = "approval.requested"
	EvApprovalReceived       = "approval.received"
	EvClarificationRequested = "clarification.requested"
	EvClarificationResolved  = "clarification.resolved"
	EvConversationOpened     = "conversation.opened"
	EvConversationExchanged  = "conversation.exchanged"
	EvConversationClosed     = "conversation.closed"
	EvReplayDiverged         = "replay.diverged"

	// A run stalls: an approval reminder, or a model round or tool call waiting out an
	// outage of what it calls.
	EvWorkflowStalled = "workflow.stalled"

	// A run's work in flight when its process died is carried on by another (the
	// conformance kill seam's during-execution mode).
	EvWorkflowRestored = "workflow.restored"

	// A pack agent's work: a transition between states, each tool call and result,
	// each model round (its usage, and what the model decided, which a fork replay
	// reuses), max_visits reached, a budget exhausted.
	EvAgentHandoff      = "agent.handoff"
	EvAgentToolCalled   = "agent.toolCalled"
	EvAgentToolReturned = "agent.toolReturned"
	EvAgentDecided      = "agent.decided"
	EvProviderUsage     = "provider.usage"
	EvLoopbackLimit     = "workflow.loopback-limit"
	EvCapBreached       = "cap.breached"
)

// Frames of the event stream that are not in the run's event log.
const (
	// EvMessageChunk is a piece of a model's reply as it streams (streamMode=messages).
	EvMessageChunk = "ai.message.chunk"
	// EvStateSnapshot is the snapshot an SSE stream opens with.
	EvStateSnapshot = "state.snapshot"
)

// Event types of the specification this host does not emit; a stream filter still
// names them (the "updates" mode).
const (
	EvRunPaused        = "run.paused"
	EvRunResumed       = "run.resumed"
	EvNodeDispatched   = "node.dispatched"
	EvArtifactCreated  = "artifact.created"
	EvWorkspaceUpdated = "workspace.updated"
)
