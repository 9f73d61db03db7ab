package activities

// A run's notices to its tenant's webhook dispatcher (workflows/notify.go) go through
// NotifyDispatcher, a local activity, since GateNotifyLocal: a tenant without a
// dispatcher (no webhook, no callbackUrl) is nobody to tell, and the run's history
// shows one marker per batch instead of a failed "Signal External Workflow Execution"
// pair. The dispatcher takes a notice twice as once (a delivery's workflow id is the
// event's), so a retried signal delivers nothing twice.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// WorkflowClient signals and queries the host's own workflows (a Temporal client
// does).
type WorkflowClient interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// DispatcherNotice is one signal of a run to its tenant's webhook dispatcher.
type DispatcherNotice struct {
	WorkflowID string `json:"workflowId"`
	Signal     string `json:"signal"`
	// Notice is the signal's argument, JSON (a workflows.WebhookNotice).
	Notice json.RawMessage `json:"notice"`
}

// DispatcherNoticeResult says whether a dispatcher took the notice (false: the tenant
// has none, or the worker signals nothing).
type DispatcherNoticeResult struct {
	Signalled bool `json:"signalled"`
}

// NotifyDispatcherOptions are the local activity options of NotifyDispatcher.
func NotifyDispatcherOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         retryPolicy(200*time.Millisecond, 2*time.Second, 5),
	}
}

// NotifyDispatcher signals a run's notice to its tenant's webhook dispatcher; a
// dispatcher that does not exist is not an error.
func (a *Activities) NotifyDispatcher(ctx context.Context, n DispatcherNotice) (*DispatcherNoticeResult, error) {
	if a.signals == nil {
		return &DispatcherNoticeResult{}, nil
	}
	err := a.signals.SignalWorkflow(ctx, n.WorkflowID, "", n.Signal, n.Notice)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return &DispatcherNoticeResult{}, nil
	case err != nil:
		return nil, err
	}
	return &DispatcherNoticeResult{Signalled: true}, nil
}
