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
