package agentclient

import (
	"encoding/json"
	"time"
)

// The wire between this package (in a caller's workflow) and the host's agents worker
// (worker/agents.go), which implements the two activities on the host's task queue.
// These types are the contract; the host imports them, never the other way round.

// Activity names of the host's agents worker.
const (
	// PrepareActivity answers a PrepareRequest with a PrepareResult: everything the
	// caller needs to start the run as its child.
	PrepareActivity = "openwop.agents.prepare"
	// SendActivity answers a SendRequest with the agent's Reply.
	SendActivity = "openwop.agents.send"
)

// DefaultTaskQueue is the host's task queue unless its operator named another
// (WOP_TASK_QUEUE).
const DefaultTaskQueue = "wop"

// Owner is who a conversation started from a workflow belongs to: the OpenWOP tenant
// whose listings show it, and the subject id the run records as its owner (issuer
// urn:wop:temporal, lane and kind workload). An empty Subject records the caller's
// workflow type.
type Owner struct {
	Tenant  string `json:"tenant"`
	Subject string `json:"subject,omitempty"`
}

// PrepareRequest asks the host for the start of a conversation with a pack.
type PrepareRequest struct {
	// Key names this start among the caller's (derived from the caller's workflow id,
	// run id and start count): the host derives the run id from the tenant and the key,
	// so a retried activity names the same run.
	Key string `json:"key"`
	// WorkflowID is the OpenWOP workflow to run: a pack id (each pack is served as a
	// workflow of its own) or another definition of the host's catalog.
	WorkflowID string          `json:"workflowId"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
	Owner      Owner           `json:"owner"`
	Tags       []string        `json:"tags,omitempty"`
	// CallerWorkflowID is recorded with the run (metadata), so the run says who started it.
	CallerWorkflowID string `json:"callerWorkflowId,omitempty"`
}

// PrepareResult is what the caller starts its child with: the run id (the child's
// workflow id), the workflow type, the run's input (opaque to the caller), the search
// attributes and memo the API would set, and the node messages go to.
type PrepareResult struct {
	RunID               string                     `json:"runId"`
	WorkflowType        string                     `json:"workflowType"`
	Input               json.RawMessage            `json:"input"`
	SearchAttributes    []SearchAttribute          `json:"searchAttributes"`
	Memo                map[string]json.RawMessage `json:"memo,omitempty"`
	Summary             string                     `json:"summary,omitempty"`
	WorkflowTaskTimeout time.Duration              `json:"workflowTaskTimeout,omitempty"`
	NodeID              string                     `json:"nodeId"`
}

// SearchAttribute is one search attribute of a run's start: Type is "keyword" or
// "datetime" (RFC 3339 Value).
type SearchAttribute struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Search attribute types of SearchAttribute.Type.
const (
	TypeKeyword  = "keyword"
	TypeDatetime = "datetime"
)

// SendRequest sends one user message to a run's conversation and waits for the reply.
type SendRequest struct {
	RunID  string `json:"runId"`
	NodeID string `json:"nodeId"`
	// MessageID is the user turn's messageId and the request id the run de-duplicates
	// by: the same message sent twice is recorded once.
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
	// Owner must own the run (its tenant), as an API key must.
	Owner Owner `json:"owner"`
}

// Reply is the agent's answer to one message: its turn, or, when the conversation or
// the run ended instead, Closed/Ended with what the run recorded.
type Reply struct {
	RunID     string `json:"runId"`
	MessageID string `json:"messageId,omitempty"`
	Text      string `json:"text"`
	// State is the pack state the agent answered in, when the turn names one.
	State     string `json:"state,omitempty"`
	TurnIndex int    `json:"turnIndex"`
	// Closed is set when the reply is the conversation's final turn; Outcome is then
	// the conversation's outcome (JSON null when it closed without one).
	Closed  bool            `json:"closed,omitempty"`
	Outcome json.RawMessage `json:"outcome,omitempty"`
	// Ended is set when the run ended without a reply to the message (Outcome of the
	// Conversation says how).
	Ended bool `json:"ended,omitempty"`
}

// Outcome is how a conversation's run ended: its final OpenWOP status and, for a
// completed run, its outputs.
type Outcome struct {
	RunID   string                     `json:"runId"`
	Status  string                     `json:"status"`
	Outputs map[string]json.RawMessage `json:"variables,omitempty"`
	Pack    *PackState                 `json:"pack,omitempty"`
}

// PackState is the pack conversation's state at the run's end.
type PackState struct {
	State string `json:"state"`
}
