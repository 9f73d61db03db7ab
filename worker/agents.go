package worker

// The agents worker: the host side of package agentclient. Two activities on the
// host's task queue let a caller's workflow start a pack conversation as its child run
// and talk to it, with the validation and de-duplication of the API:
//
//   - PrepareActivity builds the run's input from the catalog, as POST /v1/runs does
//     (the definition, its packs, the inputs checked), mints its run id from the
//     tenant and the caller's key, and returns the search attributes and memo the API
//     starts a run with, so the child is an ordinary OpenWOP run of its owner's tenant.
//   - SendActivity sends one user message as the run's resolve update (Update ID = the
//     message id, the run's validator and de-duplication, its tenant checked) and
//     waits for the agent's reply in the run's event log, following the run's history
//     with Temporal's long poll and heartbeating, so a host worker that stops in the
//     middle hands the wait to another.

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/wop-dev/wop/agentclient"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// DefaultAgentMaxTurnBytes bounds one message a caller workflow sends, as the API's
// maxTurnBytes bounds a resolve (api.DefaultMaxTurnBytes).
const DefaultAgentMaxTurnBytes = 256 << 10

// Agents serves package agentclient's activities (and the Nexus operations,
// nexus.go) from a worker that has the catalog and a Temporal client.
type Agents struct {
	Client  client.Client
	Catalog *workflows.Catalog
	// MaxTurnBytes bounds a message's resume value (DefaultAgentMaxTurnBytes when 0).
	MaxTurnBytes int
	// Now is the clock of the runs' creation time (time.Now when nil).
	Now func() time.Time
	// NexusOwner owns the runs started through the Nexus service (nexus.go).
	NexusOwner agentclient.Owner
}

func (a *Agents) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// RegisterAgents registers the agents activities on r under agentclient's names.
func RegisterAgents(r sdkworker.Registry, a *Agents) {
	r.RegisterActivityWithOptions(a.Prepare, activity.RegisterOptions{Name: agentclient.PrepareActivity})
	r.RegisterActivityWithOptions(a.Send, activity.RegisterOptions{Name: agentclient.SendActivity})
	r.RegisterActivityWithOptions(a.Outcome, activity.RegisterOptions{Name: agentclient.OutcomeActivity})
	r.RegisterActivityWithOptions(a.Cancel, activity.RegisterOptions{Name: agentclient.CancelActivity})
}

// subjectIDRe is the grammar of a subject id (ids.schema.json#/$defs/subjectId).
var subjectIDRe = regexp.MustCompile(`^[^\s/]{1,256}$`)

// refuse is the non-retryable failure of a request the host refuses, typed with its
// OpenWOP code.
func refuse(code, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), code, nil)
}

// owner is the run owner a caller names, checked.
func owner(o agentclient.Owner) (workflows.Owner, error) {
	if !protocol.ValidTenantID(o.Tenant) {
		return workflows.Owner{}, refuse(protocol.CodeValidation, "owner tenant %q is not a tenant id", o.Tenant)
	}
	if !subjectIDRe.MatchString(o.Subject) {
		return workflows.Owner{}, refuse(protocol.CodeValidation, "owner subject %q is not a subject id (1 to 256 characters, no spaces or slashes)", o.Subject)
	}
	return workflows.Owner{Tenant: o.Tenant, Principal: o.Subject, Subject: protocol.WorkloadSubject(o.Tenant, o.Subject)}, nil
}

// Prepare builds the start of a conversation (agentclient.PrepareActivity).
func (a *Agents) Prepare(_ context.Context, req agentclient.PrepareRequest) (*agentclient.PrepareResult, error) {
	if req.Key == "" {
		return nil, refuse(protocol.CodeValidation, "a start needs a key")
	}
	own, err := owner(req.Owner)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte("openwop:agents\x00" + own.Tenant + "\x00" + req.Key))
	return a.prepare(protocol.DerivedRunID(sum), req, own)
}

// runInput builds the RunInput of run runID, as the API's create does.
func (a *Agents) runInput(runID string, req agentclient.PrepareRequest, own workflows.Owner) (*workflows.RunInput, error) {
	def, ok := a.Catalog.Definition(req.WorkflowID)
	if !ok {
		return nil, refuse(protocol.CodeValidation, "unknown workflowId %q", req.WorkflowID)
	}
	var meta json.RawMessage
	if req.CallerWorkflowID != "" {
		meta, _ = json.Marshal(map[string]string{"callerWorkflowId": req.CallerWorkflowID})
	}
	in, err := a.Catalog.NewRunInput(workflows.RunRequest{
		RunID: runID, WorkflowID: def.ID, Inputs: req.Inputs, Owner: own, Tags: req.Tags, Metadata: meta, Era: protocol.EraV2,
	})
	if err != nil {
		return nil, refuse(protocol.CodeValidation, "%v", err)
	}
	return in, nil
}

// prepare builds the RunInput of run runID and what its start carries.
func (a *Agents) prepare(runID string, req agentclient.PrepareRequest, own workflows.Owner) (*agentclient.PrepareResult, error) {
	in, err := a.runInput(runID, req, own)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encoding the input of run %s: %w", runID, err)
	}
	res := &agentclient.PrepareResult{
		RunID: runID, WorkflowType: workflows.RunWorkflowName, Input: raw, Summary: workflows.RunSummary(in),
		WorkflowTaskTimeout: workflows.RunWorkflowTaskTimeout, NodeID: in.Definition.PackNodeID(),
	}
	for k, v := range workflows.StartSearchAttributes(*in, a.now()).GetUntypedValues() {
		sa := agentclient.SearchAttribute{Name: k.GetName()}
		switch val := v.(type) {
		case string:
			sa.Type, sa.Value = agentclient.TypeKeyword, val
		case time.Time:
			sa.Type, sa.Value = agentclient.TypeDatetime, val.UTC().Format(time.RFC3339Nano)
		default:
			return nil, fmt.Errorf("search attribute %s of type %T", k.GetName(), v)
		}
		res.SearchAttributes = append(res.SearchAttributes, sa)
	}
	slices.SortFunc(res.SearchAttributes, func(x, y agentclient.SearchAttribute) int { return cmp.Compare(x.Name, y.Name) })
	if m := workflows.StartMemo(*in); len(m) > 0 {
		res.Memo = map[string]json.RawMessage{}
		for k, v := range m {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			res.Memo[k] = b
		}
	}
	return res, nil
}

// sendProgress is the send activity's heartbeat: where its wait for the reply stands,
// so a retried attempt neither sends again nor reads the log from its start.
type sendProgress struct {
	Delivered bool `json:"delivered"`
	// Positioned: After was read before the message was first sent.
	Positioned bool  `json:"positioned"`
	After      int64 `json:"after"`
	// SawMessage: the user turn of the message is in the log at or before After.
	SawMessage bool `json:"sawMessage"`
}

// Send sends one message and waits for the reply (agentclient.SendActivity). A
// request without text waits for the reply to the message the run was started with.
func (a *Agents) Send(ctx context.Context, req agentclient.SendRequest) (*agentclient.Reply, error) {
	own, err := owner(req.Owner)
	if err != nil {
		return nil, err
	}
	var p sendProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &p)
	} else {
		p.After = -1
	}
	if req.Text == "" {
		p.Delivered, p.SawMessage = true, true
	}
	if !p.Delivered {
		if err := a.deliver(ctx, req, own, &p); err != nil {
			return nil, err
		}
		p.Delivered = true
		activity.RecordHeartbeat(ctx, p)
	}
	return a.awaitReply(ctx, req, own, &p)
}

// deliver sends req as the run's resolve update and returns once the run has applied
// it; a refusal fails with the run's OpenWOP code.
func (a *Agents) deliver(ctx context.Context, req agentclient.SendRequest, own workflows.Owner, p *sendProgress) error {
	if req.MessageID == "" || len(req.MessageID) > 256 {
		return refuse(protocol.CodeValidation, "a message needs a messageId of at most 256 characters")
	}
	turn := map[string]any{"role": protocol.RoleUser, "from": protocol.RoleUser, "messageId": req.MessageID, "content": map[string]string{"text": req.Text}}
	value, err := json.Marshal(map[string]any{"operation": "exchange", "turn": turn})
	if err != nil {
		return err
	}
	limit := a.MaxTurnBytes
	if limit <= 0 {
		limit = DefaultAgentMaxTurnBytes
	}
	if len(value) > limit {
		return refuse(protocol.CodePayloadTooLarge, "the message is %d bytes; a turn holds at most %d bytes", len(value), limit)
	}
	if !p.Positioned {
		// Where the log stands before the message: its reply comes after. Recorded
		// before the message is sent, so a retry reads from there.
		page, err := a.events(ctx, req.RunID, 1<<62)
		if err != nil {
			return err
		}
		if page.Tenant != "" && page.Tenant != own.Tenant {
			return refuse(protocol.CodeNotFound, "run %q not found", req.RunID)
		}
		if page.Terminal {
			return refuse(protocol.CodeInterruptCancelled, "run %s has ended; its conversation takes no more messages", req.RunID)
		}
		p.After, p.Positioned = page.LastSequence, true
		activity.RecordHeartbeat(ctx, *p)
	}
	rr := workflows.ResolveRequest{
		RequestID: req.MessageID, NodeID: req.NodeID, ResumeValue: value, ReceivedAtMs: time.Now().UnixMilli(),
		Via: "temporal", ResolvedBy: own.Principal, Caller: own.Principal,
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	u := workflows.ResolveUpdateRequest{Request: rr, Tenant: own.Tenant, CheckTenant: true, Attempt: hex.EncodeToString(nonce[:])}
	h, err := a.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: req.RunID, UpdateID: rr.RequestID, UpdateName: workflows.ResolveUpdate,
		Args: []any{u}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var res workflows.ResolveUpdateResult
	if err == nil {
		err = h.Get(ctx, &res)
	}
	var ae *temporal.ApplicationError
	switch {
	case errors.As(err, &ae) && ae.Type() == workflows.ErrTypeResolveRefused:
		var check workflows.ResolveCheck
		if derr := ae.Details(&check); derr != nil {
			return fmt.Errorf("decoding the refusal of message %s: %w", req.MessageID, derr)
		}
		if check.Tenant != own.Tenant {
			return refuse(protocol.CodeNotFound, "run %q not found", req.RunID)
		}
		res.ResolveCheck = check
		res.Attempt = ""
	case errors.As(err, new(*serviceerror.NotFound)):
		return refuse(protocol.CodeInterruptCancelled, "run %s ended before the message was applied", req.RunID)
	case err != nil:
		return err // retried: the update is de-duplicated by its id
	}
	if res.Attempt != u.Attempt || res.Replayed {
		// An earlier attempt delivered the message (its heartbeat with the position may
		// not have reached Temporal): the user turn may precede the position read above.
		p.After = -1
	}
	return checked(req, res.ResolveCheck)
}

// checked is nil when check says the run applied the message, else its refusal.
func checked(req agentclient.SendRequest, check workflows.ResolveCheck) error {
	switch o := check.Outcome; {
	case o != nil && o.Applied:
		return nil
	case o != nil:
		return refuse(o.Code, "%s", o.Message)
	case check.CurrentStatus == protocol.StatusCancelled || check.CurrentStatus == protocol.StatusCancelling:
		return refuse(protocol.CodeInterruptCancelled, "run %s was cancelled; its conversation is closed", req.RunID)
	case check.Terminal:
		return refuse(protocol.CodeInterruptCancelled, "run %s ended (%s) before the message was applied", req.RunID, check.CurrentStatus)
	case !check.OK:
		return refuse(check.Code, "%s", check.Message)
	}
	return fmt.Errorf("run %s has not decided message %s", req.RunID, req.MessageID)
}

// events asks the run for its events after after (its current execution's, or the
// earlier execution's that holds after+1 when the run continued as new since).
func (a *Agents) events(ctx context.Context, runID string, after int64) (*workflows.EventsPage, error) {
	page, err := a.queryEvents(ctx, runID, "", after)
	if err != nil || page.FirstSequence <= after+1 || after >= page.LastSequence {
		return page, err
	}
	for _, seg := range page.Earlier {
		if seg.FirstSequence <= after+1 && after+1 <= seg.LastSequence {
			return a.queryEvents(ctx, runID, seg.RunID, after)
		}
	}
	return page, nil
}

func (a *Agents) queryEvents(ctx context.Context, runID, execution string, after int64) (*workflows.EventsPage, error) {
	v, err := a.Client.QueryWorkflow(ctx, runID, execution, workflows.EventsQuery, workflows.EventsRequest{After: after})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, refuse(protocol.CodeNotFound, "run %q not found", runID)
	}
	if err != nil {
		return nil, err
	}
	var page workflows.EventsPage
	if err := v.Get(&page); err != nil {
		return nil, err
	}
	return &page, nil
}

// turnEvent is the payload of conversation.exchanged and conversation.closed.
type turnEvent struct {
	Turn      *protocol.Turn  `json:"turn"`
	FinalTurn *protocol.Turn  `json:"finalTurn"`
	Outcome   json.RawMessage `json:"outcome"`
}

// turnText is a turn's content: its text and the state it names.
type turnText struct {
	Text  string `json:"text"`
	State string `json:"state"`
}

// scan reads evs for the reply to req, moving p along; nil while there is none yet.
func scan(req agentclient.SendRequest, evs []workflows.Event, p *sendProgress) *agentclient.Reply {
	var reply *agentclient.Reply
	for _, e := range evs {
		var te turnEvent
		if e.Type == protocol.EvConversationExchanged || e.Type == protocol.EvConversationClosed {
			_ = json.Unmarshal(e.Payload, &te)
		}
		switch {
		case reply != nil:
			// The reply is read; a close right behind it is reported with it.
			if e.Type == protocol.EvConversationClosed {
				reply.Closed, reply.Outcome = true, te.Outcome
			}
			continue
		case e.Type == protocol.EvConversationExchanged && te.Turn != nil && !p.SawMessage:
			p.SawMessage = te.Turn.MessageID == req.MessageID
		case e.Type == protocol.EvConversationExchanged && te.Turn != nil && te.Turn.Role == protocol.RoleAgent:
			reply = replyOf(req.RunID, te.Turn)
		case e.Type == protocol.EvConversationClosed && p.SawMessage && te.FinalTurn != nil:
			reply = replyOf(req.RunID, te.FinalTurn)
			reply.Closed, reply.Outcome = true, te.Outcome
		}
		if reply == nil {
			p.After = e.Sequence
		}
	}
	return reply
}

func replyOf(runID string, t *protocol.Turn) *agentclient.Reply {
	var c turnText
	_ = json.Unmarshal(t.Content, &c)
	return &agentclient.Reply{RunID: runID, MessageID: t.MessageID, Text: c.Text, State: c.State, TurnIndex: t.TurnIndex}
}

// awaitReply waits until the run's log holds the reply to req (or the run has ended),
// reading the log whenever the run's history shows a completed workflow task.
func (a *Agents) awaitReply(ctx context.Context, req agentclient.SendRequest, own workflows.Owner, p *sendProgress) (*agentclient.Reply, error) {
	ctx, stop := context.WithCancel(ctx) // ends the history follower with the wait
	defer stop()
	wake := a.followHistory(ctx, req.RunID)
	beat := time.NewTicker(5 * time.Second)
	defer beat.Stop()
	for {
		page, err := a.events(ctx, req.RunID, p.After)
		if err != nil {
			return nil, err
		}
		if page.Tenant != "" && page.Tenant != own.Tenant {
			return nil, refuse(protocol.CodeNotFound, "run %q not found", req.RunID)
		}
		if rep := scan(req, page.Events, p); rep != nil {
			return rep, nil
		}
		activity.RecordHeartbeat(ctx, *p)
		if page.More {
			continue
		}
		if page.Terminal {
			return &agentclient.Reply{RunID: req.RunID, Ended: true}, nil
		}
		select {
		case <-wake:
		case <-beat.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// followHistory signals on the returned channel whenever the run's history shows a
// completed workflow task or the execution's close, until ctx ends. It follows the
// history with the server's long poll, and starts over on the run's next execution.
func (a *Agents) followHistory(ctx context.Context, runID string) <-chan struct{} {
	wake := make(chan struct{}, 1)
	go func() {
		for ctx.Err() == nil {
			it := a.Client.GetWorkflowHistory(ctx, runID, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					break
				}
				switch ev.GetEventType() {
				case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
				default:
					continue
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			select {
			case wake <- struct{}{}:
			default:
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}()
	return wake
}

func recordHeartbeat(ctx context.Context) { activity.RecordHeartbeat(ctx) }
