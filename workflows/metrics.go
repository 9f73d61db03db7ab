package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// Metrics the run workflow records. They go through workflow.GetMetricsHandler, the
// SDK's replay-aware handler: a workflow task replayed from history (after a worker
// restart, a cache eviction, a query) records nothing a second time. Recording adds no
// command to the history, so it changes no run in flight. The worker's metrics handler
// (internal/telemetry) exports them with the _total and _seconds suffixes.
//
// Labels say what they hold: openwop_workflow_id is the OpenWOP workflow id (a pack's
// is its pack id; a Temporal workflow id is a run's id and is never a label),
// openwop_run_status a final run status, waiting_kind a WaitingKind.
const (
	MetricRunsStarted = "wop_runs_started" // {openwop_workflow_id}
	MetricRunsEnded   = "wop_runs_ended"   // {openwop_workflow_id, openwop_run_status}
	MetricTurns       = "wop_turns"        // {openwop_workflow_id, role}: conversation turns recorded
	// MetricHumanWait is how long an interrupt waited for the person who resolved it,
	// and how long a conversation waited for its user's next message {waiting_kind}.
	MetricHumanWait = "wop_human_wait"
)

// Metric label names.
const (
	LabelWorkflowID  = "openwop_workflow_id"
	LabelRunStatus   = "openwop_run_status"
	LabelWaitingKind = "waiting_kind"
)

func (r *runner) workflowID() string {
	if r.in.Definition == nil {
		return "unknown"
	}
	return r.in.Definition.ID
}

func (r *runner) countRunStarted() {
	workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{LabelWorkflowID: r.workflowID()}).Counter(MetricRunsStarted).Inc(1)
}

func (r *runner) countRunEnded(status string) {
	workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{LabelWorkflowID: r.workflowID(), LabelRunStatus: status}).Counter(MetricRunsEnded).Inc(1)
}

// countTurn counts turn t, about to follow turns; a user's message answering the
// agent's turn also records how long the user took (the turns' own timestamps).
func (r *runner) countTurn(turns []protocol.Turn, t protocol.Turn) {
	workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{LabelWorkflowID: r.workflowID(), "role": t.Role}).Counter(MetricTurns).Inc(1)
	if n := len(turns); t.Role == protocol.RoleUser && n > 0 && turns[n-1].Role == protocol.RoleAgent {
		r.recordHumanWait(WaitingConversation, time.Duration(t.Ts-turns[n-1].Ts)*time.Millisecond)
	}
}

// recordHumanWait records d for waiting kind kind (WaitingKind). A negative duration
// (a message sent before the reply it answers was recorded, or clock skew between the
// API and the worker) records 0: nobody was kept waiting.
func (r *runner) recordHumanWait(kind string, d time.Duration) {
	d = max(d, 0)
	workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{LabelWaitingKind: kind}).Timer(MetricHumanWait).Record(d)
}
