package agentclient

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// Defaults of StartOptions.
const (
	DefaultPrepareTimeout = time.Minute
	// DefaultReplyTimeout bounds how long Send waits for a reply: a reply may wait on a
	// tool call's approval, decided by a person, so it is long.
	DefaultReplyTimeout = 7 * 24 * time.Hour
	// DefaultHeartbeatTimeout is how soon a host worker that stopped while it waited
	// for a reply is noticed, and the wait resumed on another.
	DefaultHeartbeatTimeout = 30 * time.Second
)

// StartOptions start a conversation.
type StartOptions struct {
	// Pack is the pack to talk to (its id, which is also its OpenWOP workflow id).
	Pack string
	// Message, when set, is the first user message (inputs.message): the agent
	// answers it at once, and FirstReply returns that answer.
	Message string
	// Inputs are further inputs of the run (objects of the pack workflow's variables).
	Inputs map[string]any
	// Owner is who the run belongs to. Owner.Tenant is required.
	Owner Owner
	Tags  []string
	// TaskQueue is the host's task queue (DefaultTaskQueue when empty).
	TaskQueue string
	// ParentClosePolicy is what becomes of the conversation when the caller closes
	// before it: REQUEST_CANCEL (the default) cancels it, ABANDON leaves it running.
	ParentClosePolicy enumspb.ParentClosePolicy
	// PrepareTimeout, ReplyTimeout and HeartbeatTimeout bound the host's activities
	// (defaults above when zero or negative).
	PrepareTimeout, ReplyTimeout, HeartbeatTimeout time.Duration
}

// Conversation is one conversation a caller workflow started as its child run.
type Conversation struct {
	runID, nodeID string
	owner         Owner
	opts          StartOptions
	child         workflow.ChildWorkflowFuture
	cancel        workflow.CancelFunc
	sent          int
	first         *Reply
}

// Start starts a conversation with opts.Pack as a child workflow of the calling
// workflow on the host's task queue, and returns once the child has started. The run
// is an ordinary OpenWOP run of opts.Owner.Tenant (listed by GET /v1/runs, its
// interrupts in the inbox, its events on the API), whose workflow id is its run id.
// With opts.Message the call also waits for the agent's answer (FirstReply).
func Start(ctx workflow.Context, opts StartOptions) (*Conversation, error) {
	if opts.Pack == "" {
		return nil, &Error{Code: protocol.CodeValidation, Message: "StartOptions.Pack is required"}
	}
	if opts.Owner.Tenant == "" {
		return nil, &Error{Code: protocol.CodeValidation, Message: "StartOptions.Owner.Tenant is required"}
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = DefaultTaskQueue
	}
	if opts.ParentClosePolicy == enumspb.PARENT_CLOSE_POLICY_UNSPECIFIED {
		opts.ParentClosePolicy = enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL
	}
	info := workflow.GetInfo(ctx)
	owner := opts.Owner
	if owner.Subject == "" {
		owner.Subject = info.WorkflowType.Name
	}
	inputs := map[string]any{}
	for k, v := range opts.Inputs {
		inputs[k] = v
	}
	if opts.Message != "" {
		inputs["message"] = opts.Message
	}
	var raw json.RawMessage
	if len(inputs) > 0 {
		b, err := json.Marshal(inputs)
		if err != nil {
			return nil, &Error{Code: protocol.CodeValidation, Message: fmt.Sprintf("inputs: %v", err)}
		}
		raw = b
	}
	// The key names this start: recorded once (a side effect), so a replay and a
	// retried activity name the same run, and a second start another one.
	var key string
	if err := workflow.SideEffect(ctx, func(workflow.Context) any {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return protocol.IDDigest(info.WorkflowExecution.ID, hex.EncodeToString(b[:]))
	}).Get(&key); err != nil {
		return nil, err
	}
	req := PrepareRequest{Key: key, WorkflowID: opts.Pack, Inputs: raw, Owner: owner, Tags: opts.Tags, CallerWorkflowID: info.WorkflowExecution.ID}
	var prep PrepareResult
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: opts.TaskQueue, StartToCloseTimeout: cmp.Or(max(opts.PrepareTimeout, 0), DefaultPrepareTimeout),
		Summary: "prepare the conversation with " + opts.Pack,
	})
	if err := workflow.ExecuteActivity(actx, PrepareActivity, req).Get(ctx, &prep); err != nil {
		return nil, AsError(err)
	}
	sa, err := searchAttributes(prep.SearchAttributes)
	if err != nil {
		return nil, err
	}
	memo := map[string]any{}
	for k, v := range prep.Memo {
		memo[k] = v
	}
	cctx, cancel := workflow.WithCancel(ctx)
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
		WorkflowID: prep.RunID, TaskQueue: opts.TaskQueue, WorkflowTaskTimeout: prep.WorkflowTaskTimeout,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     opts.ParentClosePolicy, WaitForCancellation: true,
		TypedSearchAttributes: sa, Memo: memo, StaticSummary: prep.Summary,
	})
	c := &Conversation{runID: prep.RunID, nodeID: prep.NodeID, owner: owner, opts: opts, cancel: cancel}
	c.child = workflow.ExecuteChildWorkflow(cctx, prep.WorkflowType, inputPayload(prep.Input))
	if err := c.child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		cancel()
		return nil, AsError(err)
	}
	if opts.Message != "" {
		rep, err := c.await(ctx, "")
		if err != nil {
			return c, err
		}
		c.first = rep
	}
	return c, nil
}

// RunID is the conversation's OpenWOP run id (its child workflow id).
func (c *Conversation) RunID() string { return c.runID }

// FirstReply is the agent's answer to StartOptions.Message (nil without one).
func (c *Conversation) FirstReply() *Reply { return c.first }

// Send sends text as the next user message and waits for the agent's reply (through
// approvals its tools wait for). A message the run refuses fails with its OpenWOP code
// (*Error): validation_error for a closed conversation or a bad turn,
// approval_pending while a tool call waits, interrupt_cancelled for a cancelled run.
func (c *Conversation) Send(ctx workflow.Context, text string) (*Reply, error) {
	c.sent++
	info := workflow.GetInfo(ctx)
	id := "wfc-" + protocol.IDDigest(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, c.runID, strconv.Itoa(c.sent))[:32]
	return c.SendWithID(ctx, id, text)
}

// SendWithID is Send with the caller's own message id: the same id sent again (by any
// caller) is recorded once and answers with the same reply.
func (c *Conversation) SendWithID(ctx workflow.Context, messageID, text string) (*Reply, error) {
	if text == "" {
		return nil, &Error{Code: protocol.CodeValidation, Message: "a message needs text", RunID: c.runID}
	}
	return c.await(ctx, messageID, text)
}

// await runs the send activity: with a message, that message and its reply; without
// (messageID ""), the reply to the first message the run started with.
func (c *Conversation) await(ctx workflow.Context, messageID string, text ...string) (*Reply, error) {
	req := SendRequest{RunID: c.runID, NodeID: c.nodeID, MessageID: messageID, Owner: c.owner}
	if len(text) > 0 {
		req.Text = text[0]
	}
	rep, err := send(ctx, c.opts, req)
	return rep, AsError(err)
}

// send runs the host's send activity on opts.TaskQueue.
func send(ctx workflow.Context, opts StartOptions, req SendRequest) (*Reply, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: opts.TaskQueue, StartToCloseTimeout: cmp.Or(max(opts.ReplyTimeout, 0), DefaultReplyTimeout),
		HeartbeatTimeout: cmp.Or(max(opts.HeartbeatTimeout, 0), DefaultHeartbeatTimeout),
		Summary:          "message to " + req.RunID,
	})
	var rep Reply
	if err := workflow.ExecuteActivity(actx, SendActivity, req).Get(ctx, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Cancel asks Temporal to cancel the conversation's run (the run ends cancelled, its
// interrupts void); Outcome then returns the cancellation.
func (c *Conversation) Cancel() { c.cancel() }

// Outcome waits for the run's end and returns it: the final status of a completed run,
// or an *Error with the run's OpenWOP error code (Status failed), or code cancelled
// (Status cancelled) for a cancelled run.
func (c *Conversation) Outcome(ctx workflow.Context) (*Outcome, error) {
	var out Outcome
	err := c.child.Get(ctx, &out)
	if err == nil {
		return &out, nil
	}
	err = AsError(err)
	var e *Error
	if errors.As(err, &e) && e.Status == "" {
		e.RunID, e.Status = c.runID, protocol.StatusFailed // the child closed failed
	}
	return nil, err
}

// Error is a refusal or failure with its OpenWOP error code (package protocol's
// Code…), and Status the run's status when the run ended.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	RunID   string `json:"runId,omitempty"`
	Status  string `json:"status,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// CodeCancelled is Error.Code for a run that was cancelled.
const CodeCancelled = protocol.StatusCancelled

// runEnd is the part of a run's final snapshot an ended run's error carries.
type runEnd struct {
	RunID  string             `json:"runId"`
	Status string             `json:"status"`
	Error  *protocol.RunError `json:"error,omitempty"`
}

// AsError maps a failed activity, child run or Nexus operation to *Error: the ApplicationError type is
// the OpenWOP code (the host's activities and a failed run both use it); a cancelled
// run's details are its final snapshot. Other errors (timeouts, a cancelled caller)
// are returned as they are.
func AsError(err error) error {
	var end runEnd
	var ce *temporal.CanceledError
	if errors.As(err, &ce) {
		if ce.HasDetails() && ce.Details(&end) == nil && end.Status != "" {
			return &Error{Code: CodeCancelled, Message: "the run was cancelled", RunID: end.RunID, Status: end.Status}
		}
		return err
	}
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() == "" {
		return err
	}
	out := &Error{Code: ae.Type(), Message: ae.Message()}
	if ae.HasDetails() && ae.Details(&end) == nil {
		out.RunID, out.Status = end.RunID, end.Status
		if end.Error != nil && end.Error.Message != "" {
			out.Message = end.Error.Message
		}
	}
	return out
}

// searchAttributes builds the typed search attributes of the child's start.
func searchAttributes(list []SearchAttribute) (temporal.SearchAttributes, error) {
	updates := make([]temporal.SearchAttributeUpdate, 0, len(list))
	for _, a := range list {
		switch a.Type {
		case TypeKeyword:
			updates = append(updates, temporal.NewSearchAttributeKeyKeyword(a.Name).ValueSet(a.Value))
		case TypeDatetime:
			t, err := time.Parse(time.RFC3339Nano, a.Value)
			if err != nil {
				return temporal.SearchAttributes{}, &Error{Code: protocol.CodeInternal, Message: fmt.Sprintf("search attribute %s: %v", a.Name, err)}
			}
			updates = append(updates, temporal.NewSearchAttributeKeyTime(a.Name).ValueSet(t))
		default:
			return temporal.SearchAttributes{}, &Error{Code: protocol.CodeInternal, Message: fmt.Sprintf("search attribute %s has type %q", a.Name, a.Type)}
		}
	}
	return temporal.NewSearchAttributes(updates...), nil
}

// inputPayload hands the run's input to the data converter as the JSON it is (a
// json.RawMessage is not a []byte to the converter, so it encodes as JSON, not binary).
func inputPayload(raw json.RawMessage) any { return raw }
