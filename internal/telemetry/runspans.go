package telemetry

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/workflows"
)

// OpenWOP's span attributes (spec v1 observability.md, "Span attributes"). Every span
// of a run (the API's requests about it, the Temporal SDK's spans of its workflow,
// updates, signals, queries and activities, in every process) carries the run-level
// ones; the activity spans of a pack's model rounds and tool calls the node-level
// ones; a fork's and a child run's workflow spans their replay and parent ones. None
// carries a value a client sent as a credential, a prompt, a message or a tool's
// arguments: ids, kinds and counts only.
const (
	AttrRunID           = "openwop.run_id"
	AttrWorkflowID      = "openwop.workflow_id"
	AttrProtocolVersion = "openwop.protocol_version"
	AttrTenantID        = "openwop.tenant_id"
	AttrNodeID          = "openwop.node_id"
	AttrNodeType        = "openwop.node_type"
	AttrNodeAttempt     = "openwop.node_attempt"
	AttrInterruptKind   = "openwop.interrupt_kind"
	AttrInterruptID     = "openwop.interrupt_id"
	AttrReplaySource    = "openwop.replay.source_run_id"
	AttrReplayFromSeq   = "openwop.replay.from_seq"
	AttrReplayMode      = "openwop.replay.mode"
	AttrParentRunID     = "openwop.parent.run_id"
	AttrParentWorkflow  = "openwop.parent.workflow_id"
	AttrParentNodeID    = "openwop.parent.node_id"
)

// ProtocolVersion is the OpenWOP protocol version the host's spans name (discovery's
// protocolVersion).
const ProtocolVersion = "1.0"

// RunInfo is what a process knows of a run for its spans.
type RunInfo struct {
	WorkflowID  string
	Tenant      string
	ParentRunID string
	// ForkSource and ForkFromSeq are set on a fork's replay.
	ForkSource  string
	ForkFromSeq int64
}

// runs remembers what the process learned of recent runs, by run id: the API from the
// runs it starts and reads, a worker from the run workflows it executes. A span of a
// run the process has not seen yet carries the run id without the workflow id.
var runs = struct {
	sync.Mutex
	m map[string]RunInfo
}{m: map[string]RunInfo{}}

// maxRuns bounds runs; when full it starts afresh.
const maxRuns = 8192

// NoteRun records what a run is, for the spans that follow. An empty field keeps what
// was known.
func NoteRun(runID string, info RunInfo) {
	if runID == "" {
		return
	}
	runs.Lock()
	defer runs.Unlock()
	old, ok := runs.m[runID]
	if !ok && len(runs.m) >= maxRuns {
		runs.m = map[string]RunInfo{}
	}
	if info.WorkflowID == "" {
		info.WorkflowID = old.WorkflowID
	}
	if info.Tenant == "" {
		info.Tenant = old.Tenant
	}
	if info.ParentRunID == "" {
		info.ParentRunID = old.ParentRunID
	}
	if info.ForkSource == "" {
		info.ForkSource, info.ForkFromSeq = old.ForkSource, old.ForkFromSeq
	}
	runs.m[runID] = info
}

// NoteRunInput records a run from its workflow input.
func NoteRunInput(in *workflows.RunInput) {
	if in == nil {
		return
	}
	info := RunInfo{Tenant: in.Owner.Tenant, ParentRunID: in.ParentRunID}
	if in.Definition != nil {
		info.WorkflowID = in.Definition.ID
	}
	if in.Fork != nil {
		info.ForkSource, info.ForkFromSeq = in.Fork.SourceRunID, in.Fork.FromSeq
	}
	NoteRun(in.RunID, info)
}

// LookupRun returns what the process knows of a run.
func LookupRun(runID string) (RunInfo, bool) {
	runs.Lock()
	defer runs.Unlock()
	info, ok := runs.m[runID]
	return info, ok
}

// IsRunID reports whether a Temporal workflow id is a run's: not one of the host's own
// workflows (webhook dispatchers and deliveries).
func IsRunID(id string) bool {
	return id != "" && !strings.HasPrefix(id, "wop-webhook")
}

// RunAttributes are the run-level attributes of a span about run runID.
func RunAttributes(runID string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(AttrRunID, runID), attribute.String(AttrProtocolVersion, ProtocolVersion)}
	info, ok := LookupRun(runID)
	if !ok {
		return attrs
	}
	if info.WorkflowID != "" {
		attrs = append(attrs, attribute.String(AttrWorkflowID, info.WorkflowID))
	}
	if info.Tenant != "" {
		attrs = append(attrs, attribute.String(AttrTenantID, info.Tenant))
	}
	return attrs
}

// nodeInfo is what a span of one activity says of its node.
type nodeInfo struct {
	nodeID  string
	attempt int
}

// activitySpans holds the node of each activity executing now, by run and activity id,
// from the moment the activity reaches the interceptor until it returns.
var activitySpans = struct {
	sync.Mutex
	m map[[2]string]nodeInfo
}{m: map[[2]string]nodeInfo{}}

// runTracer is the Temporal SDK's OpenTelemetry tracer with OpenWOP's attributes on the
// spans of runs. It sees every span the SDK starts (the client's StartWorkflow,
// UpdateWorkflow, QueryWorkflow, SignalWorkflow; the worker's RunWorkflow, Handle*,
// StartActivity, RunActivity, ...), each with the Temporal workflow id, which is the
// run id.
type runTracer struct {
	interceptor.Tracer
}

// Temporal's span tags (go.temporal.io/sdk/interceptor).
const (
	tagWorkflowID = "temporalWorkflowID"
	tagActivityID = "temporalActivityID"
)

// StartSpan implements interceptor.Tracer.
func (t runTracer) StartSpan(opts *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	span, err := t.Tracer.StartSpan(opts)
	if err != nil || span == nil {
		return span, err
	}
	runID := opts.Tags[tagWorkflowID]
	s, ok := span.(interface{ SetAttributes(...attribute.KeyValue) })
	if !ok || !IsRunID(runID) {
		return span, nil
	}
	attrs := RunAttributes(runID)
	if opts.Operation == "RunWorkflow" {
		attrs = append(attrs, workflowAttributes(runID)...)
	}
	if id := opts.Tags[tagActivityID]; id != "" && opts.Operation == "RunActivity" {
		activitySpans.Lock()
		n, ok := activitySpans.m[[2]string{runID, id}]
		activitySpans.Unlock()
		if ok {
			attrs = append(attrs, attribute.String(AttrNodeID, n.nodeID), attribute.String(AttrNodeType, workflows.PackNodeType),
				attribute.Int(AttrNodeAttempt, max(n.attempt-1, 0)))
		}
	}
	s.SetAttributes(attrs...)
	return span, nil
}

// workflowAttributes are the replay and parent attributes of a run's workflow span.
func workflowAttributes(runID string) []attribute.KeyValue {
	info, ok := LookupRun(runID)
	if !ok {
		return nil
	}
	var attrs []attribute.KeyValue
	if info.ForkSource != "" {
		attrs = append(attrs, attribute.String(AttrReplaySource, info.ForkSource), attribute.Int64(AttrReplayFromSeq, info.ForkFromSeq),
			attribute.String(AttrReplayMode, "replay"))
	}
	if info.ParentRunID != "" {
		attrs = append(attrs, attribute.String(AttrParentRunID, info.ParentRunID))
		if p, ok := LookupRun(info.ParentRunID); ok && p.WorkflowID != "" {
			attrs = append(attrs, attribute.String(AttrParentWorkflow, p.WorkflowID))
		}
		// A child run's id is <parent>.<node>.<n> (workflows.ChildRunID), unless hashed.
		if rest, ok := strings.CutPrefix(runID, info.ParentRunID+"."); ok {
			if node, _, ok := strings.Cut(rest, "."); ok && node != "" {
				attrs = append(attrs, attribute.String(AttrParentNodeID, node))
			}
		}
	}
	return attrs
}

// RunSpans is a worker interceptor that tells runTracer what each span is about: it
// records a run workflow's input before the tracing interceptor starts the workflow's
// span, and the node of each model round and tool call before it starts the
// activity's. It must come before the tracing interceptor (ClientOptions puts it
// there).
type RunSpans struct {
	interceptor.InterceptorBase
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (*RunSpans) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	w := &runSpansWorkflow{}
	w.Next = next
	return w
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (*RunSpans) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &runSpansActivity{}
	a.Next = next
	return a
}

type runSpansWorkflow struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (w *runSpansWorkflow) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if len(in.Args) > 0 {
		switch ri := in.Args[0].(type) {
		case workflows.RunInput:
			NoteRunInput(&ri)
		case *workflows.RunInput:
			NoteRunInput(ri)
		}
	}
	return w.Next.ExecuteWorkflow(ctx, in)
}

type runSpansActivity struct {
	interceptor.ActivityInboundInterceptorBase
}

func (a *runSpansActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	var arg any
	if len(in.Args) > 0 {
		arg = in.Args[0]
	}
	var runID, packID, nodeID string
	switch v := arg.(type) {
	case convo.ModelRoundInput:
		runID, packID, nodeID = v.RunID, v.PackID, v.NodeID
	case activities.LocalModelRoundInput:
		runID, packID, nodeID = v.Round.RunID, v.Round.PackID, v.Round.NodeID
	case convo.ToolCallInput:
		runID, packID, nodeID = v.RunID, v.PackID, v.NodeID
	}
	if nodeID == "" {
		return a.Next.ExecuteActivity(ctx, in)
	}
	info := activity.GetInfo(ctx)
	if _, ok := LookupRun(runID); !ok {
		// A worker that did not execute the run's workflow: a pack's model rounds and
		// tool calls run in the workflow the catalog serves the pack as, whose id is
		// the pack id.
		NoteRun(runID, RunInfo{WorkflowID: packID})
	}
	key := [2]string{info.WorkflowExecution.ID, info.ActivityID}
	activitySpans.Lock()
	activitySpans.m[key] = nodeInfo{nodeID: nodeID, attempt: int(info.Attempt)}
	activitySpans.Unlock()
	defer func() {
		activitySpans.Lock()
		delete(activitySpans.m, key)
		activitySpans.Unlock()
	}()
	return a.Next.ExecuteActivity(ctx, in)
}
