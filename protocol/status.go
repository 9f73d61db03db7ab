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
)
