package agentclient

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The host's Nexus service: what a workflow in any SDK and any namespace calls through
// a Nexus endpoint that targets the host's task queue (wop dev creates one,
// DefaultNexusEndpoint). The runs it starts belong to the owner the host's worker is
// configured with (WOP_NEXUS_TENANT, WOP_NEXUS_SUBJECT): who may call the endpoint is
// the endpoint's access policy, so the endpoint, not the caller, names the tenant.
const (
	NexusService = "openwop-agents"
	// NexusStartOperation (sync) starts a conversation: NexusStartInput -> NexusStartOutput.
	NexusStartOperation = "start-conversation"
	// NexusSendOperation (async) sends a message and returns the agent's reply:
	// NexusSendInput -> Reply. Without Text it returns the reply to the start's Message.
	NexusSendOperation = "send-message"
	// NexusOutcomeOperation (async) waits for the run's end: NexusOutcomeInput ->
	// Outcome; a failed run fails it with the run's OpenWOP code, a cancelled one with
	// CodeCancelled. Cancelling this operation cancels the conversation.
	NexusOutcomeOperation = "await-outcome"
	// DefaultNexusEndpoint is the endpoint wop dev creates on its embedded server.
	DefaultNexusEndpoint = "wop-agents"
)

// Names of the host's helper workflows and activities behind the async operations.
const (
	MessageWorkflowName = "OpenWOPAgentMessage"
	OutcomeWorkflowName = "OpenWOPAgentOutcome"
	OutcomeActivity     = "openwop.agents.outcome"
	CancelActivity      = "openwop.agents.cancel"
)

// NexusStartInput starts a conversation with Pack; Message is its first message.
type NexusStartInput struct {
	Pack    string         `json:"pack"`
	Message string         `json:"message,omitempty"`
	Inputs  map[string]any `json:"inputs,omitempty"`
	Tags    []string       `json:"tags,omitempty"`
}

// NexusStartOutput names the run started.
type NexusStartOutput struct {
	RunID string `json:"runId"`
}

// NexusSendInput sends Text to run RunID. MessageID is optional: by default the
// operation's request id names the message, so a retried operation sends it once.
type NexusSendInput struct {
	RunID     string `json:"runId"`
	Text      string `json:"text,omitempty"`
	MessageID string `json:"messageId,omitempty"`
}

// NexusOutcomeInput names the run whose end is awaited.
type NexusOutcomeInput struct {
	RunID string `json:"runId"`
}

// OutcomeRequest asks the host for the end of run RunID, which Owner must own.
type OutcomeRequest struct {
	RunID string `json:"runId"`
	Owner Owner  `json:"owner"`
}

// MessageWorkflow is the host's workflow behind NexusSendOperation: one send activity
// on its own task queue.
func MessageWorkflow(ctx workflow.Context, req SendRequest) (*Reply, error) {
	q := workflow.GetInfo(ctx).TaskQueueName
	return send(ctx, StartOptions{TaskQueue: q}, req)
}

// OutcomeWorkflow is the host's workflow behind NexusOutcomeOperation: it waits for the
// run's end (the outcome activity), and, when the operation is cancelled, cancels the
// run.
func OutcomeWorkflow(ctx workflow.Context, req OutcomeRequest) (*Outcome, error) {
	ao := workflow.ActivityOptions{StartToCloseTimeout: DefaultReplyTimeout, HeartbeatTimeout: DefaultHeartbeatTimeout}
	var out Outcome
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ao), OutcomeActivity, req).Get(ctx, &out)
	if err != nil && temporal.IsCanceledError(err) && ctx.Err() != nil {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		ao.StartToCloseTimeout, ao.HeartbeatTimeout = time.Minute, 0
		_ = workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, ao), CancelActivity, req).Get(dctx, nil)
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}
