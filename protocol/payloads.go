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
