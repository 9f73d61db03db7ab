package caller

import (
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/agentclient"
)

// NexusWorkflowName is the Temporal type of the caller that reaches the host through
// its Nexus endpoint (any namespace, any SDK: only the operation names and their JSON
// inputs are shared).
const NexusWorkflowName = "AgentCallerNexus"

// NexusInput is Input for a caller through the Nexus endpoint Endpoint; the endpoint's
// configuration names the tenant.
type NexusInput struct {
	Endpoint string   `json:"endpoint"`
	Pack     string   `json:"pack"`
	Messages []string `json:"messages"`
	Cancel   bool     `json:"cancel,omitempty"`
}

// ConverseNexus is Converse through the host's Nexus service: it starts the
// conversation, awaits its outcome as an operation of its own from then on, sends the
// messages one reply at a time and, with Cancel, cancels the outcome operation, which
// cancels the conversation.
func ConverseNexus(ctx workflow.Context, in NexusInput) (*Result, error) {
	res := &Result{}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (*Result, error) { return res, nil }); err != nil {
		return nil, err
	}
	nc := workflow.NewNexusClient(in.Endpoint, agentclient.NexusService)
	var opts workflow.NexusOperationOptions
	start := agentclient.NexusStartInput{Pack: in.Pack}
	msgs := in.Messages
	if len(msgs) > 0 {
		start.Message, msgs = msgs[0], msgs[1:]
	}
	var started agentclient.NexusStartOutput
	if err := nc.ExecuteOperation(ctx, agentclient.NexusStartOperation, start, opts).Get(ctx, &started); err != nil {
		return res.failed(err)
	}
	res.RunID = started.RunID
	octx, cancel := workflow.WithCancel(ctx)
	outcome := nc.ExecuteOperation(octx, agentclient.NexusOutcomeOperation, agentclient.NexusOutcomeInput(started), opts)
	sends := []agentclient.NexusSendInput{}
	if start.Message != "" {
		sends = append(sends, agentclient.NexusSendInput{RunID: started.RunID}) // the reply to the first message
	}
	for _, m := range msgs {
		sends = append(sends, agentclient.NexusSendInput{RunID: started.RunID, Text: m})
	}
	for _, s := range sends {
		var r agentclient.Reply
		if err := nc.ExecuteOperation(ctx, agentclient.NexusSendOperation, s, opts).Get(ctx, &r); err != nil {
			cancel()
			return res.failed(err)
		}
		res.Replies = append(res.Replies, r)
		if r.Closed || r.Ended {
			break
		}
	}
	if in.Cancel {
		cancel()
	}
	var out agentclient.Outcome
	if err := outcome.Get(ctx, &out); err != nil {
		return res.failed(err)
	}
	res.Status = out.Status
	return res, nil
}
