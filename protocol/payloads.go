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
// it is not retryable.
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
