// Package caller is the workflow of examples/temporal-caller: a team's own workflow
// that holds a conversation with a pack of an OpenWOP host, as its child workflow
// (package agentclient). The example's main runs it on a worker of its own; the host's
// end-to-end tests (tests/agents_e2e_test.go) drive it through approvals, cancels and
// a worker restart, and its recorded history is replayed by this package's tests.
package caller

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/agentclient"
)

// WorkflowName is the caller workflow's Temporal type.
const WorkflowName = "AgentCaller"

// StateQuery answers the caller's Result so far (the run id once started).
const StateQuery = "caller.state"

// Input is what the caller says to which pack.
type Input struct {
	Pack   string `json:"pack"`
	Tenant string `json:"tenant"`
	// HostTaskQueue is the host's task queue (agentclient.DefaultTaskQueue when empty).
	HostTaskQueue string `json:"hostTaskQueue,omitempty"`
	// Messages are sent in turn; the first starts the conversation.
	Messages []string `json:"messages"`
	// Cancel cancels the conversation once the messages are answered.
	Cancel bool `json:"cancel,omitempty"`
}

// Result is what the caller learnt: the run, each reply, and how the run ended (Code
// and Message when it failed or was cancelled).
type Result struct {
	RunID   string              `json:"runId"`
	Replies []agentclient.Reply `json:"replies"`
	Status  string              `json:"status,omitempty"`
	Code    string              `json:"code,omitempty"`
	Message string              `json:"message,omitempty"`
}

// Converse holds one conversation: it starts it with the first message, sends the
// others one reply at a time, optionally cancels it, and waits for its end. A refusal
// or a failed run ends the caller with the OpenWOP code in its Result, not an error.
func Converse(ctx workflow.Context, in Input) (*Result, error) {
	res := &Result{}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (*Result, error) { return res, nil }); err != nil {
		return nil, err
	}
	opts := agentclient.StartOptions{Pack: in.Pack, Owner: agentclient.Owner{Tenant: in.Tenant}, TaskQueue: in.HostTaskQueue}
	msgs := in.Messages
	if len(msgs) > 0 {
		opts.Message, msgs = msgs[0], msgs[1:]
	}
	conv, err := agentclient.Start(ctx, opts)
	if conv != nil {
		res.RunID = conv.RunID()
		if r := conv.FirstReply(); r != nil {
			res.Replies = append(res.Replies, *r)
		}
	}
	if err != nil {
		return res.failed(err)
	}
	for _, m := range msgs {
		r, err := conv.Send(ctx, m)
		if err != nil {
			return res.failed(err)
		}
		res.Replies = append(res.Replies, *r)
		if r.Closed || r.Ended {
			break
		}
	}
	if in.Cancel {
		conv.Cancel()
	}
	out, err := conv.Outcome(ctx)
	if err != nil {
		return res.failed(err)
	}
	res.Status = out.Status
	return res, nil
}

// failed records an OpenWOP refusal or failure in the result (a cancelled operation as
// agentclient.CodeCancelled); other errors fail the caller.
func (r *Result) failed(err error) (*Result, error) {
	if temporal.IsCanceledError(err) && !errors.As(agentclient.AsError(err), new(*agentclient.Error)) {
		r.Code, r.Status = agentclient.CodeCancelled, agentclient.CodeCancelled
		return r, nil
	}
	var ae *agentclient.Error
	if !errors.As(agentclient.AsError(err), &ae) {
		return r, err
	}
	r.Code, r.Message, r.Status = ae.Code, ae.Message, ae.Status
	return r, nil
}
