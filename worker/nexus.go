package worker

// The host's Nexus service (agentclient.NexusService), registered by every worker that
// has a catalog: workflows in any SDK and any namespace reach agents through a Nexus
// endpoint that targets the host's task queue.
//
//   - start-conversation (sync) starts an ordinary run of the pack, as POST /v1/runs
//     does, owned by the configured Nexus owner; its run id derives from the
//     operation's request id, so a retried start starts one run.
//   - send-message and await-outcome (async) start a helper workflow on the host's
//     queue (agentclient.MessageWorkflow, agentclient.OutcomeWorkflow) whose
//     activities are the agents activities; Temporal delivers their results to the
//     caller, and cancelling the operation cancels the helper (await-outcome then
//     cancels the run).

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/agentclient"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// Defaults of the Nexus owner (Config.NexusTenant, Config.NexusSubject).
const (
	DefaultNexusTenant  = "default"
	DefaultNexusSubject = "nexus"
)

// RegisterNexus registers the Nexus service and the helper workflows behind its async
// operations on w, for runs owned by a.NexusOwner on taskQueue.
func RegisterNexus(w sdkworker.Worker, a *Agents, taskQueue string) {
	w.RegisterWorkflowWithOptions(agentclient.MessageWorkflow, workflow.RegisterOptions{Name: agentclient.MessageWorkflowName})
	w.RegisterWorkflowWithOptions(agentclient.OutcomeWorkflow, workflow.RegisterOptions{Name: agentclient.OutcomeWorkflowName})
	svc := nexus.NewService(agentclient.NexusService)
	start := nexus.NewSyncOperation(agentclient.NexusStartOperation, func(ctx context.Context, in agentclient.NexusStartInput, o nexus.StartOperationOptions) (agentclient.NexusStartOutput, error) {
		return a.nexusStart(ctx, taskQueue, in, o)
	})
	send := temporalnexus.MustNewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[agentclient.NexusSendInput, *agentclient.Reply]{
		Name: agentclient.NexusSendOperation,
		Handler: func(ctx context.Context, in agentclient.NexusSendInput, o nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[*agentclient.Reply], error) {
			id := in.MessageID
			if id == "" && in.Text != "" {
				id = "nx-" + protocol.IDDigest("openwop:agents:nexus-message", in.RunID, o.RequestID)[:32]
			}
			req := agentclient.SendRequest{RunID: in.RunID, NodeID: workflows.ServedPackNodeID, MessageID: id, Text: in.Text, Owner: a.NexusOwner}
			opts := helperStart("openwop-message-"+protocol.IDDigest(in.RunID, id, o.RequestID)[:32], taskQueue, "message to "+in.RunID)
			return temporalnexus.ExecuteWorkflow(ctx, o, opts, agentclient.MessageWorkflow, req)
		},
	})
	outcome := temporalnexus.MustNewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[agentclient.NexusOutcomeInput, *agentclient.Outcome]{
		Name: agentclient.NexusOutcomeOperation,
		Handler: func(ctx context.Context, in agentclient.NexusOutcomeInput, o nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[*agentclient.Outcome], error) {
			opts := helperStart("openwop-outcome-"+protocol.IDDigest(in.RunID, o.RequestID)[:32], taskQueue, "outcome of "+in.RunID)
			return temporalnexus.ExecuteWorkflow(ctx, o, opts, agentclient.OutcomeWorkflow, agentclient.OutcomeRequest{RunID: in.RunID, Owner: a.NexusOwner})
		},
	})
	if err := svc.Register(start, send, outcome); err != nil {
		panic(err) // three operations of distinct names
	}
	w.RegisterNexusService(svc)
}

// helperStart are the start options of a helper workflow (id derived from the
// operation, so a retried start attaches to the first).
func helperStart(id, taskQueue, summary string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue, StaticSummary: summary,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}
}

// nexusStart starts a conversation for a Nexus caller (NexusStartOperation).
func (a *Agents) nexusStart(ctx context.Context, taskQueue string, in agentclient.NexusStartInput, o nexus.StartOperationOptions) (agentclient.NexusStartOutput, error) {
	own, err := owner(a.NexusOwner)
	if err != nil {
		return agentclient.NexusStartOutput{}, err
	}
	inputs := maps.Clone(in.Inputs)
	if in.Message != "" {
		if inputs == nil {
			inputs = map[string]any{}
		}
		inputs["message"] = in.Message
	}
	var raw json.RawMessage
	if len(inputs) > 0 {
		if raw, err = json.Marshal(inputs); err != nil {
			return agentclient.NexusStartOutput{}, refuse(protocol.CodeValidation, "inputs: %v", err)
		}
	}
	sum := sha256.Sum256([]byte("openwop:agents:nexus\x00" + own.Tenant + "\x00" + o.RequestID))
	runID := protocol.DerivedRunID(sum)
	run, err := a.runInput(runID, agentclient.PrepareRequest{WorkflowID: in.Pack, Inputs: raw, Tags: in.Tags}, own)
	if err != nil {
		return agentclient.NexusStartOutput{}, err
	}
	_, err = a.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: runID, TaskQueue: taskQueue, WorkflowTaskTimeout: workflows.RunWorkflowTaskTimeout, StaticSummary: workflows.RunSummary(run),
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: workflows.StartSearchAttributes(*run, a.now()), Memo: workflows.StartMemo(*run),
	}, workflows.RunWorkflowName, run)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &already) { // already started: this request, retried
		return agentclient.NexusStartOutput{}, err
	}
	return agentclient.NexusStartOutput{RunID: runID}, nil
}

// Outcome waits for the end of a run req.Owner owns (agentclient.OutcomeActivity): a
// completed run's outcome, or the run's refusal code for a failed or cancelled one.
func (a *Agents) Outcome(ctx context.Context, req agentclient.OutcomeRequest) (*agentclient.Outcome, error) {
	if err := a.checkOwner(ctx, req.RunID, req.Owner); err != nil {
		return nil, err
	}
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				recordHeartbeat(hctx)
			case <-hctx.Done():
				return
			}
		}
	}()
	var out agentclient.Outcome
	if err := a.Client.GetWorkflow(ctx, req.RunID, "").Get(ctx, &out); err != nil {
		if snap, ok := workflows.SnapshotFromError(err); ok {
			code, msg := agentclient.CodeCancelled, "the run was cancelled"
			if snap.Status == protocol.StatusFailed && snap.Error != nil {
				code, msg = snap.Error.Code, snap.Error.Message
			}
			// The details say which run ended how (agentclient.AsError reads them).
			return nil, temporal.NewNonRetryableApplicationError(msg, code, nil, map[string]string{"runId": req.RunID, "status": snap.Status})
		}
		return nil, err
	}
	return &out, nil
}

// Cancel cancels a run req.Owner owns (agentclient.CancelActivity).
func (a *Agents) Cancel(ctx context.Context, req agentclient.OutcomeRequest) error {
	if err := a.checkOwner(ctx, req.RunID, req.Owner); err != nil {
		return err
	}
	return a.Client.CancelWorkflow(ctx, req.RunID, "")
}

// checkOwner refuses a run that is not o's tenant's as not found.
func (a *Agents) checkOwner(ctx context.Context, runID string, o agentclient.Owner) error {
	page, err := a.events(ctx, runID, 1<<62)
	if err != nil {
		return err
	}
	if page.Tenant != o.Tenant {
		return refuse(protocol.CodeNotFound, "run %q not found", runID)
	}
	return nil
}
