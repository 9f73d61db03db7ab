package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/mapkeys"
)

// Cancellation, failure and Temporal status (a decision): the event log is the run's
// source of truth, and its last event is run.completed, run.failed or run.cancelled.
// Temporal's close status says the same, so operators can filter on it in the UI:
//   - a completed run returns its final Snapshot (Temporal: Completed);
//   - a failed run returns a non-retryable ApplicationError whose type is the OpenWOP
//     error code and whose details are the final Snapshot (Temporal: Failed);
//   - a cancelled run — by CancelSignal, or by Temporal cancellation (the UI's Cancel
//     button, a parent's cascade) — returns a CanceledError whose details are the final
//     Snapshot (Temporal: Canceled).
// SnapshotFromError reads the Snapshot back from either error. Runs that ended before
// this (without the closeStatusVersion marker) returned their Snapshot with a nil error
// and show Completed; WopStatus is the filter that works for both.

// childStatusSignal carries a ChildRun from a child run to its parent whenever the
// child's status changes, so the parent can report its child's waiting status.
const childStatusSignal = "openwop.child-status"

// errCancelled is returned by node executors when the run is being cancelled.
var errCancelled = errors.New("run cancelled")

// nodeError is a node failure with its OpenWOP error.
type nodeError struct{ RunError }

func (e *nodeError) Error() string { return e.Code + ": " + e.Message }

func failNode(code, format string, args ...any) error {
	return &nodeError{RunError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// nodeExecutor runs one built-in node type and returns its outputs (port → value).
type nodeExecutor func(r *runner, n *Node, inputs map[string]json.RawMessage) (map[string]json.RawMessage, error)

// builtinNodes maps the built-in node types to their executors. Agent node types are
// looked up in agentFactories (conversation.go) instead.
var builtinNodes map[string]nodeExecutor

func init() {
	builtinNodes = map[string]nodeExecutor{
		"core.noop":              execNoop,
		"core.identity":          execIdentity,
		"core.delay":             execDelay,
		"core.fail":              execFail,
		"core.approvalGate":      execApprovalGate,
		"core.clarificationGate": execClarificationGate,
		"core.interrupt":         execInterrupt,
		"core.subWorkflow":       execSubWorkflow,
		"core.conversationGate":  execConversationNode,
	}
}

// providedCapabilities are the capabilities a node may declare in config.requires.
var providedCapabilities = map[string]bool{"conversationPrimitive": true}

// nodeRecord is the execution record of one node.
type nodeRecord struct {
	NodeID  string                     `json:"nodeId"`
	State   string                     `json:"state"` // running | completed | failed | skipped | cancelled
	Outputs map[string]json.RawMessage `json:"outputs,omitempty"`
}

// runner is the state of one run. Queries read it; only the workflow's main coroutine
// and the signal goroutines write it.
type runner struct {
	ctx workflow.Context
	in  RunInput

	// events are the events of this execution, sequences from base on (carry.go);
	// lastID and nodeLast are the newest eventId of the run and of each node, and
	// segments the earlier executions that hold the events before base.
	events      []Event
	base        int64
	lastID      string
	nodeLast    map[string]string
	segments    []activities.Segment
	status      string
	currentNode string
	startedAt   time.Time
	completedAt string
	terminal    bool
	err         *RunError
	failedNode  string

	nodes   []nodeRecord                          // in execution order
	outputs map[string]map[string]json.RawMessage // nodeId → outputs
	counts  map[string]int                        // nodeId → interrupts raised

	pending       []*interrupt
	resolvedNodes map[string]bool
	resolvedIDs   *idWindow  // InterruptIDs resolved, the newest ones
	applied       *idWindow  // RequestIDs applied, the newest ones
	outcomes      outcomeLog // what the run did with recent requests, by RequestID
	inbox         []ResolveRequest
	cancelReq     *CancelRequest

	childRuns []ChildRun
	childSeq  map[string]int64 // newest status sequence seen per child
	statusSeq int64            // this run's status changes, reported to its parent
	convs     []*conversation  // every conversation of the run, in opening order
	agents    map[string]conversationAgent

	details       string
	lastSAStatus  string
	lastWaitingOn string
	schemaCache   map[string]*compiledSchema

	// startSeq is the log length when this execution started (continue-as-new).
	startSeq int64
	carried  *carriedState
	forkIdx  *forkIndex
	// bounded is set for executions that make the bounded state's decisions
	// (boundedStateVersion); suggestedAt* record where Temporal first suggested
	// continuing as new in this execution (checkHistory).
	bounded           bool
	suggestedAtLength int
	suggestedAtSize   int

	// notify queues the events webhooks may receive (notify.go).
	notify notifier
	// closing is the status the run is finishing with while its last webhook notices
	// are signalled (finish): readers already see the end, and nothing new is accepted.
	closing string

	// legacyTriggerRules is set for runs that started before the trigger rules were
	// read as shouldRun documents.
	legacyTriggerRules bool
	// versions caches the answers of changed (versions.go).
	versions map[string]workflow.Version
	// legacyEventRouting is set for runs that take an event injected into a pack state
	// that accepts none as a chat reply, as they did before eventRoutingVersion.
	legacyEventRouting bool

	// resolveUpdates counts ResolveUpdate handlers waiting for their request's outcome.
	resolveUpdates int
}

// Run is the workflow of every OpenWOP run (WorkflowID = runId). It interprets the
// run's definition node by node and keeps the run's OpenWOP event log.
func Run(ctx workflow.Context, in RunInput) (*Snapshot, error) {
	r := &runner{
		ctx:           ctx,
		in:            in,
		status:        StatusPending,
		outputs:       map[string]map[string]json.RawMessage{},
		counts:        map[string]int{},
		resolvedNodes: map[string]bool{},
		resolvedIDs:   newIDWindow(resolvedWindow),
		applied:       newIDWindow(appliedWindow),
		nodeLast:      map[string]string{},
		agents:        map[string]conversationAgent{},
		childSeq:      map[string]int64{},
		schemaCache:   map[string]*compiledSchema{},
	}
	if r.in.RunID == "" {
		r.in.RunID = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	if err := r.setup(); err != nil {
		return nil, err
	}
	r.bounded = workflow.GetVersion(ctx, boundedStateVersion, workflow.DefaultVersion, 1) >= 1
	snap, err := r.run()
	if err != nil || snap == nil {
		return snap, err
	}
	return r.close(snap)
}

// closeStatusVersion is the workflow.GetVersion change id of failed and cancelled runs
// closing as Failed and Canceled in Temporal rather than Completed.
const closeStatusVersion = "close-status"

// close returns the workflow's result for the final snapshot: the snapshot itself, or,
// for a failed or cancelled run, the error that closes the execution with that status
// and carries the snapshot.
func (r *runner) close(snap *Snapshot) (*Snapshot, error) {
	if snap.Status != StatusFailed && snap.Status != StatusCancelled {
		return snap, nil
	}
	if workflow.GetVersion(r.ctx, closeStatusVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return snap, nil
	}
	if snap.Status == StatusCancelled {
		return nil, temporal.NewCanceledError(snap)
	}
	code, msg := "run_failed", "the run failed"
	if snap.Error != nil {
		code, msg = orDefault(snap.Error.Code, code), orDefault(snap.Error.Message, msg)
	}
	return nil, temporal.NewNonRetryableApplicationError(msg, code, nil, snap)
}

// SnapshotFromError returns the final Snapshot a failed or cancelled run closed with
// (see close), unwrapping a child workflow's error; ok is false for any other error.
func SnapshotFromError(err error) (snap *Snapshot, ok bool) {
	// Details decode into a *Snapshot: from payloads, and from the values the SDK's
	// test environment keeps as they were (a *Snapshot).
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.HasDetails() && ae.Details(&snap) == nil && snap != nil && snap.Status == StatusFailed {
		return snap, true
	}
	snap = nil
	var ce *temporal.CanceledError
	if errors.As(err, &ce) && ce.HasDetails() && ce.Details(&snap) == nil && snap != nil && snap.Status == StatusCancelled {
		return snap, true
	}
	return nil, false
}

// setup registers queries and signal receivers before anything blocks, and restores a
// carried state after continue-as-new.
func (r *runner) setup() error {
	ctx := r.ctx
	if err := workflow.SetQueryHandler(ctx, SnapshotQuery, func() (*Snapshot, error) {
		return r.snapshot(), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", SnapshotQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, EventsQuery, func(req EventsRequest) (EventsPage, error) {
		return r.eventsPage(req), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", EventsQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, RunBasisQuery, func() (RunBasis, error) { return r.runBasis(), nil }); err != nil {
		return fmt.Errorf("register %s: %w", RunBasisQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, TranscriptQuery, r.transcript); err != nil {
		return fmt.Errorf("register %s: %w", TranscriptQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, TranscriptPageQuery, r.transcriptPage); err != nil {
		return fmt.Errorf("register %s: %w", TranscriptPageQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, ValidateResolveQuery, func(req ResolveRequest) (ResolveCheck, error) {
		return r.resolveCheck(req), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", ValidateResolveQuery, err)
	}
	if err := workflow.SetQueryHandler(ctx, OutcomesQuery, func(req OutcomesRequest) (OutcomesPage, error) {
		return r.outcomesPage(req), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", OutcomesQuery, err)
	}
	if len(r.in.Carried) > 0 {
		if err := r.restore(); err != nil {
			return err
		}
	}
	if r.in.Fork != nil {
		r.forkIdx = newForkIndex(r.in.Fork)
	}
	if err := r.registerResolveUpdate(); err != nil {
		return fmt.Errorf("register %s: %w", ResolveUpdate, err)
	}
	// One coroutine receives every signal, on a disconnected context so it keeps
	// queueing while the run winds down after a Temporal cancellation. It wakes when any
	// of the three channels holds a signal and drains them in a fixed order (resolves,
	// cancels, child statuses), so a waiting run costs one coroutine besides its main one.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	resolveCh := workflow.GetSignalChannel(ctx, ResolveSignal)
	cancelCh := workflow.GetSignalChannel(ctx, CancelSignal)
	childCh := workflow.GetSignalChannel(ctx, childStatusSignal)
	workflow.Go(dctx, func(gctx workflow.Context) {
		for {
			_ = workflow.Await(gctx, func() bool {
				return resolveCh.Len() > 0 || cancelCh.Len() > 0 || childCh.Len() > 0
			})
			r.drainSignals()
		}
	})
	return nil
}

// IdempotentRequestPrefix starts the RequestID of a resolve sent with an
// Idempotency-Key (the API derives the rest from the key).
const IdempotentRequestPrefix = "idem-"

// drainSignals moves every buffered signal into the run's state without blocking
// (before continue-as-new, so nothing is lost).
func (r *runner) drainSignals() {
	resolveCh := workflow.GetSignalChannel(r.ctx, ResolveSignal)
	for {
		var req ResolveRequest
		if !resolveCh.ReceiveAsync(&req) {
			break
		}
		r.inbox = append(r.inbox, req)
	}
	cancelCh := workflow.GetSignalChannel(r.ctx, CancelSignal)
	for {
		var req CancelRequest
		if !cancelCh.ReceiveAsync(&req) {
			break
		}
		r.requestCancel(req)
	}
	childCh := workflow.GetSignalChannel(r.ctx, childStatusSignal)
	for {
		var cs childStatus
		if !childCh.ReceiveAsync(&cs) {
			break
		}
		r.updateChild(cs)
	}
}

func (r *runner) requestCancel(req CancelRequest) {
	if r.cancelReq != nil || r.terminal || r.closing != "" {
		return
	}
	if req.Reason == "" {
		req.Reason = "cancelled"
	}
	r.cancelReq = &req
	r.setStatus(StatusCancelling)
}

// childStatus is the payload of childStatusSignal. Signals from one child may arrive
// out of order, so each carries the child's status sequence; stale ones are dropped.
type childStatus struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
	Seq    int64  `json:"seq"`
}

func (r *runner) updateChild(cs childStatus) {
	if cs.Seq <= r.childSeq[cs.RunID] {
		return
	}
	r.childSeq[cs.RunID] = cs.Seq
	cr := ChildRun{RunID: cs.RunID, Status: cs.Status}
	if r.terminal {
		for i := range r.childRuns {
			if r.childRuns[i].RunID == cr.RunID {
				r.childRuns[i].Status = cr.Status
			}
		}
		return
	}
	r.addChild(cr)
}

// run executes the definition and ends the run with exactly one terminal event.
func (r *runner) run() (*Snapshot, error) {
	if r.in.Definition == nil {
		r.startedAt = workflow.Now(r.ctx)
		r.emit(EvRunStarted, "", map[string]any{"workflowId": "unknown"}, "")
		return r.fail("", RunError{Code: "validation_error", Message: "the run input carries no workflow definition"})
	}
	if r.carried == nil {
		r.startedAt = workflow.Now(r.ctx)
		r.initSearchAttributes()
		r.setStatus(StatusRunning)
		r.emit(EvRunStarted, "", r.runStartedPayload(), "")
		r.countRunStarted()
	}
	order, err := topoOrder(r.in.Definition)
	if err != nil {
		return r.fail("", RunError{Code: "validation_error", Message: err.Error()})
	}
	r.checkTriggerRulesVersion()
	for _, n := range order {
		if rec := r.record(n.ID); rec != nil && rec.State != "running" {
			continue // done before continue-as-new
		}
		if r.cancelReq != nil {
			return r.cancelled("")
		}
		if err := r.checkCancelled(); err != nil {
			return r.cancelled("")
		}
		run, err := r.shouldRun(n)
		if err != nil {
			return r.fail(n.ID, RunError{Code: "validation_error", Message: err.Error()})
		}
		if !run {
			r.nodes = append(r.nodes, nodeRecord{NodeID: n.ID, State: "skipped"})
			r.emit(EvNodeSkipped, n.ID, map[string]any{"nodeId": n.ID, "reason": "no incoming edge was taken"}, "")
			continue
		}
		_, err = r.execNode(n) // the outputs are in the node record
		switch {
		case err == nil:
		case errors.Is(err, errCancelled):
			return r.cancelled(n.ID)
		case isContinueAsNew(err):
			return nil, err
		default:
			var ne *nodeError
			if !errors.As(err, &ne) {
				ne = &nodeError{RunError{Code: "internal_error", Message: err.Error()}}
			}
			r.setRecord(n.ID, "failed", nil)
			r.emit(EvNodeFailed, n.ID, map[string]any{"nodeId": n.ID, "error": ne.RunError, "attempts": 1}, r.lastNodeEvent(n.ID))
			return r.fail(n.ID, ne.RunError)
		}
	}
	return r.complete()
}

// shouldRun decides from the node's incoming edges whether it runs. A node without
// incoming edges runs. Otherwise an edge is taken when its source completed and its
// condition holds, and the node's trigger rule (the first incoming edge that names one;
// all_success by default) decides:
//
//	all_success   every incoming edge taken
//	any_success   at least one taken
//	all_complete  always: every source has finished (nodes run in topological order)
//	none_failed   always: a failed node ends the run, so no source failed
//	any_failed    never, for the same reason
//
// Runs that started before these rules (no triggerRulesVersion marker) keep the earlier
// reading: all_success when an edge names it, otherwise any edge taken.
func (r *runner) shouldRun(n *Node) (bool, error) {
	if n.Disabled {
		return false, nil
	}
	var incoming, taken int
	rule, legacyAll := "", false
	for _, e := range r.in.Definition.Edges {
		if e.TargetNodeID != n.ID {
			continue
		}
		incoming++
		if rule == "" {
			rule = e.TriggerRule
		}
		if e.TriggerRule == "all_success" {
			legacyAll = true
		}
		rec := r.record(e.SourceNodeID)
		if rec == nil || rec.State != "completed" {
			continue
		}
		ok, err := r.evalCondition(e)
		if err != nil {
			return false, fmt.Errorf("edge %q: %w", e.ID, err)
		}
		if ok {
			taken++
		}
	}
	if incoming == 0 {
		return true, nil
	}
	if r.legacyTriggerRules {
		if legacyAll {
			return taken == incoming, nil
		}
		return taken > 0, nil
	}
	switch rule {
	case "", "all_success":
		return taken == incoming, nil
	case "any_success":
		return taken > 0, nil
	case "all_complete", "none_failed":
		return true, nil
	case "any_failed":
		return false, nil
	}
	return false, fmt.Errorf("node %q: unknown triggerRule %q (all_success, any_success, all_complete, none_failed, any_failed)", n.ID, rule)
}

// triggerRulesVersion is the workflow.GetVersion change id of the trigger rules as
// shouldRun reads them now.
const triggerRulesVersion = "trigger-rules"

// checkTriggerRulesVersion marks, for a definition whose edges the change affects (a
// node with several incoming edges, or a rule other than all_success and any_success),
// whether this run reads trigger rules as it started with. A continued run keeps the
// reading its first execution chose.
func (r *runner) checkTriggerRulesVersion() {
	if r.carried != nil {
		r.legacyTriggerRules = r.carried.TriggerRules == 0
		return
	}
	counts := map[string]int{}
	affected := false
	for _, e := range r.in.Definition.Edges {
		counts[e.TargetNodeID]++
		if counts[e.TargetNodeID] > 1 {
			affected = true
		}
		switch e.TriggerRule {
		case "", "all_success", "any_success":
		default:
			affected = true
		}
	}
	if affected {
		r.legacyTriggerRules = workflow.GetVersion(r.ctx, triggerRulesVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	}
}

// execNode runs one node with its node.started / node.completed events.
func (r *runner) execNode(n *Node) (map[string]json.RawMessage, error) {
	resumed := r.record(n.ID) != nil // continued as new inside this node
	if !resumed {
		r.nodes = append(r.nodes, nodeRecord{NodeID: n.ID, State: "running"})
		r.currentNode = n.ID
		r.emit(EvNodeStarted, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "attempt": 0}, "")
	}
	r.currentNode = n.ID
	started := workflow.Now(r.ctx)
	if err := r.checkRequires(n); err != nil {
		return nil, err
	}
	exec, ok := builtinNodes[n.TypeID]
	if !ok {
		if _, isAgent := agentFactories[n.TypeID]; isAgent {
			exec = execConversationNode
		} else {
			return nil, failNode("capability_not_provided", "node %q has type %q, which this host does not provide", n.ID, n.TypeID)
		}
	}
	inputs, err := r.nodeInputs(n)
	if err != nil {
		return nil, failNode("validation_error", "%v", err)
	}
	outs, err := exec(r, n, inputs)
	if err != nil {
		return nil, err
	}
	if outs == nil {
		outs = map[string]json.RawMessage{}
	}
	r.outputs[n.ID] = outs
	r.setRecord(n.ID, "completed", outs)
	dur := workflow.Now(r.ctx).Sub(started).Milliseconds()
	if dur < 0 {
		dur = 0
	}
	r.emit(EvNodeCompleted, n.ID, map[string]any{"nodeId": n.ID, "outputs": outs, "durationMs": dur}, r.lastNodeEvent(n.ID))
	r.currentNode = ""
	r.refreshStatus()
	return outs, nil
}

// checkRequires fails a node whose config declares capabilities the host lacks.
func (r *runner) checkRequires(n *Node) error {
	var cfg struct {
		Requires []string `json:"requires"`
	}
	if len(n.Config) > 0 {
		// Lenient, as it always was: a config that does not decode requires nothing
		// here (the nodes that read it report it).
		_ = json.Unmarshal(n.Config, &cfg)
	}
	for _, c := range cfg.Requires {
		if !providedCapabilities[c] {
			return failNode("capability_not_provided", "node %q requires capability %q, which this host does not provide", n.ID, c)
		}
	}
	return nil
}

// lastNodeEvent is the newest event of the node (the causation of its completion).
func (r *runner) lastNodeEvent(nodeID string) string { return r.nodeLast[nodeID] }

func (r *runner) record(nodeID string) *nodeRecord {
	for i := range r.nodes {
		if r.nodes[i].NodeID == nodeID {
			return &r.nodes[i]
		}
	}
	return nil
}

func (r *runner) setRecord(nodeID, state string, outs map[string]json.RawMessage) {
	if rec := r.record(nodeID); rec != nil {
		rec.State = state
		rec.Outputs = outs
		return
	}
	r.nodes = append(r.nodes, nodeRecord{NodeID: nodeID, State: state, Outputs: outs})
}

// variables = the run's inputs (with declared defaults) overlaid by the outputs of the
// completed nodes, in execution order.
func (r *runner) variables() map[string]json.RawMessage {
	vars := map[string]json.RawMessage{}
	if r.in.Definition != nil {
		for _, v := range r.in.Definition.Variables {
			if len(v.DefaultValue) > 0 {
				vars[v.Name] = v.DefaultValue
			}
		}
	}
	if len(r.in.Inputs) > 0 {
		var in map[string]json.RawMessage
		if json.Unmarshal(r.in.Inputs, &in) == nil {
			for _, k := range mapkeys.Sorted(in) {
				vars[k] = in[k]
			}
		}
	}
	for _, rec := range r.nodes {
		if rec.State != "completed" {
			continue
		}
		for _, k := range mapkeys.Sorted(rec.Outputs) {
			vars[k] = rec.Outputs[k]
		}
	}
	return vars
}

func (r *runner) runStartedPayload() map[string]any {
	p := map[string]any{"workflowId": r.in.Definition.ID, "transport": "rest", "engineVersion": EngineVersion}
	if len(r.in.Inputs) > 0 && r.in.Inputs[0] == '{' {
		p["inputs"] = r.in.Inputs
	}
	if r.in.Owner.Tenant != "" {
		owner := map[string]string{"tenant": r.in.Owner.Tenant}
		if r.in.Owner.Principal != "" {
			owner["principal"] = r.in.Owner.Principal
		}
		p["owner"] = owner
	}
	if len(r.in.Tags) > 0 {
		p["tags"] = r.in.Tags
	}
	if len(r.in.Metadata) > 0 && r.in.Metadata[0] == '{' {
		p["metadata"] = r.in.Metadata
	}
	return p
}

func (r *runner) durationMs() int64 {
	d := workflow.Now(r.ctx).Sub(r.startedAt).Milliseconds()
	if d < 0 {
		return 0
	}
	return d
}

// complete ends the run successfully.
func (r *runner) complete() (*Snapshot, error) {
	outs := map[string]json.RawMessage{}
	// The run's outputs are the outputs of its sink nodes (no outgoing edge).
	hasOut := map[string]bool{}
	for _, e := range r.in.Definition.Edges {
		hasOut[e.SourceNodeID] = true
	}
	for _, rec := range r.nodes {
		if rec.State == "completed" && !hasOut[rec.NodeID] {
			for _, k := range mapkeys.Sorted(rec.Outputs) {
				outs[k] = rec.Outputs[k]
			}
		}
	}
	r.emit(EvRunCompleted, "", map[string]any{"outputs": outs, "durationMs": r.durationMs()}, r.lastEventIDAny())
	return r.finish(StatusCompleted)
}

// fail ends the run as failed.
func (r *runner) fail(nodeID string, e RunError) (*Snapshot, error) {
	r.err = &e
	r.failedNode = nodeID
	p := map[string]any{"error": e, "durationMs": r.durationMs()}
	if nodeID != "" {
		p["failedNodeId"] = nodeID
	}
	r.emit(EvRunFailed, "", p, r.lastEventIDAny())
	return r.finish(StatusFailed)
}

// cancelled ends the run as cancelled: pending interrupts are invalidated, the running
// node gets node.cancelled, and run.cancelled is the last event. It runs on a
// disconnected context so it completes after a Temporal cancellation too.
func (r *runner) cancelled(nodeID string) (*Snapshot, error) {
	dctx, _ := workflow.NewDisconnectedContext(r.ctx)
	r.ctx = dctx
	req := r.cancelReq
	if req == nil {
		req = &CancelRequest{Reason: "cancelled"}
		r.cancelReq = req
	}
	for _, it := range r.pending {
		it.cancelTimer()
	}
	r.pending = nil
	if nodeID != "" {
		if rec := r.record(nodeID); rec != nil && rec.State == "running" {
			rec.State = "cancelled"
			r.emit(EvNodeCancelled, nodeID, map[string]any{"nodeId": nodeID, "reason": req.Reason}, "")
		}
	}
	p := map[string]any{"reason": req.Reason, "durationMs": r.durationMs()}
	if req.CancelledBy != "" {
		p["cancelledBy"] = req.CancelledBy
	}
	if req.Reason == "parent-cancelled" && r.in.ParentRunID != "" {
		p["parentRunId"] = r.in.ParentRunID
	}
	r.emit(EvRunCancelled, "", p, r.lastEventIDAny())
	return r.finish(StatusCancelled)
}

func (r *runner) lastEventIDAny() string { return r.lastID }

func (r *runner) finish(status string) (*Snapshot, error) {
	// The terminal event is written; while Temporal takes the last webhook notices the
	// run already reads as ended (snapshot, events, resolve checks), and the commands
	// that close it follow.
	r.closing = status
	r.completedAt = formatTime(workflow.Now(r.ctx))
	r.flushNotices()
	r.terminal = true
	r.pending = nil
	r.currentNode = ""
	r.setStatus(status)
	r.setDetails("")
	r.refuseQueued()
	r.countRunEnded(status)
	return r.snapshot(), nil
}

// checkCancelled reports a pending cancellation (signal or Temporal).
func (r *runner) checkCancelled() error {
	if r.cancelReq != nil {
		return errCancelled
	}
	if r.ctx.Err() != nil {
		r.cancelReq = r.temporalCancel()
		return errCancelled
	}
	return nil
}

// await blocks until cond holds, the run is cancelled (errCancelled) or timeout (>0)
// elapses (timedOut). The timer is durable.
func (r *runner) await(timeout time.Duration, cond func() bool) (timedOut bool, err error) {
	full := func() bool { return r.cancelReq != nil || cond() }
	if timeout > 0 {
		ok, werr := workflow.AwaitWithTimeout(r.ctx, timeout, full)
		if werr != nil {
			return false, r.cancelErr(werr)
		}
		if r.cancelReq != nil {
			return false, errCancelled
		}
		return !ok, nil
	}
	if werr := workflow.Await(r.ctx, full); werr != nil {
		return false, r.cancelErr(werr)
	}
	if r.cancelReq != nil {
		return false, errCancelled
	}
	return false, nil
}

func (r *runner) cancelErr(err error) error {
	var ce *temporal.CanceledError
	if errors.As(err, &ce) || r.ctx.Err() != nil {
		if r.cancelReq == nil {
			r.cancelReq = r.temporalCancel()
		}
		return errCancelled
	}
	return err
}

// temporalCancel is the cancel request a Temporal cancellation stands for: a child
// run is cancelled by its parent's cascade.
func (r *runner) temporalCancel() *CancelRequest {
	if r.in.ParentRunID != "" {
		return &CancelRequest{Reason: "parent-cancelled", CancelledBy: "temporal"}
	}
	return &CancelRequest{Reason: "cancelled", CancelledBy: "temporal"}
}

// ---- status, search attributes, details ----

// refreshStatus derives the run status from the pending interrupts and child runs.
func (r *runner) refreshStatus() {
	if r.terminal || r.closing != "" {
		return
	}
	if r.cancelReq != nil {
		r.setStatus(StatusCancelling)
		return
	}
	if len(r.pending) > 0 {
		best := ""
		for _, it := range r.pending {
			s := statusForKind(it.Kind)
			if best == "" || s == StatusWaitingExternal {
				best = s
			}
		}
		r.setStatus(best)
		return
	}
	for _, c := range r.childRuns {
		if strings.HasPrefix(c.Status, "waiting-") {
			r.setStatus(c.Status)
			return
		}
	}
	if r.status != StatusPending || r.nextSeq() > 0 {
		r.setStatus(StatusRunning)
	}
}

// statusForKind maps an interrupt kind to the run status while it is pending.
func statusForKind(kind string) string {
	switch {
	case kind == "approval", kind == "low-confidence", strings.HasPrefix(kind, "conversation"):
		return StatusWaitingApproval
	case kind == "external-event":
		return StatusWaitingExternal
	default:
		return StatusWaitingInput
	}
}

func (r *runner) setStatus(s string) {
	changed := r.status != s
	r.status = s
	waitingOn := ""
	if len(r.pending) > 0 && !r.terminal {
		it := r.pending[len(r.pending)-1]
		waitingOn = it.Kind + ":" + it.NodeID
	}
	if s != r.lastSAStatus || waitingOn != r.lastWaitingOn {
		r.lastSAStatus, r.lastWaitingOn = s, waitingOn
		_ = workflow.UpsertTypedSearchAttributes(r.ctx, statusAttributes(s, r.pending, r.terminal)...)
	}
	if changed && r.in.ParentRunID != "" {
		r.statusSeq++
		cr := childStatus{RunID: r.in.RunID, Status: s, Seq: r.statusSeq}
		dctx, _ := workflow.NewDisconnectedContext(r.ctx)
		workflow.SignalExternalWorkflow(dctx, r.in.ParentRunID, "", childStatusSignal, cr)
	}
}

func (r *runner) initSearchAttributes() {
	upd := []temporal.SearchAttributeUpdate{SAWorkflowID.ValueSet(r.in.Definition.ID)}
	if r.in.Owner.Tenant != "" {
		upd = append(upd, SATenant.ValueSet(r.in.Owner.Tenant))
	}
	_ = workflow.UpsertTypedSearchAttributes(r.ctx, upd...)
}

// setDetails sets the workflow's current details (shown in the Temporal UI).
func (r *runner) setDetails(text string) {
	if text == r.details {
		return
	}
	r.details = text
	workflow.SetCurrentDetails(r.ctx, text)
}

// describePending renders the pending interrupts in words for current details.
func (r *runner) describePending() {
	if len(r.pending) == 0 {
		r.setDetails("")
		return
	}
	var b strings.Builder
	for i, it := range r.pending {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "**Waiting on %s** at node `%s` (interrupt `%s`, key `%s`) since %s.", it.Kind, it.NodeID, it.InterruptID, it.Key, it.RequestedAt)
		if it.ExpiresAt != "" {
			fmt.Fprintf(&b, " Times out at %s.", it.ExpiresAt)
		}
		if it.describe != "" {
			b.WriteString(" ")
			b.WriteString(it.describe)
		}
	}
	r.setDetails(b.String())
}

// ---- snapshot ----

// snapshot builds the RunSnapshot.
func (r *runner) snapshot() *Snapshot {
	s := &Snapshot{
		RunID:         r.in.RunID,
		Status:        r.status,
		CurrentNodeID: r.currentNode,
		CompletedAt:   r.completedAt,
		Variables:     r.variables(),
		Error:         r.err,
		ChildRuns:     append([]ChildRun(nil), r.childRuns...),
		Owner:         r.in.Owner,
		Tags:          r.in.Tags,
		Metadata:      r.in.Metadata,
		Configurable:  r.in.Configurable,
		LastSequence:  r.nextSeq() - 1,
		RequestDigest: r.in.RequestDigest,
		ParentRunID:   r.in.ParentRunID,
	}
	if r.in.Definition != nil {
		s.WorkflowID = r.in.Definition.ID
	}
	if !r.startedAt.IsZero() {
		s.StartedAt = formatTime(r.startedAt)
	}
	if r.closing != "" && !r.terminal {
		// The terminal event is written and the run is closing (finish).
		s.Status, s.CurrentNodeID = r.closing, ""
	} else {
		for _, it := range r.pending {
			s.Interrupts = append(s.Interrupts, it.PendingInterrupt)
		}
	}
	if len(s.Interrupts) > 0 {
		// The interrupt a client resolves next: a tool call's approval or an agent's
		// external wait before the conversation it interrupts.
		first := s.Interrupts[0]
		for _, it := range s.Interrupts {
			if it.Kind == "external-event" || it.Kind == "approval" {
				first = it
			}
		}
		s.Interrupt = &first
		if s.CurrentNodeID == "" {
			s.CurrentNodeID = first.NodeID
		}
	}
	s.Channels = r.channels()
	s.Conversations = r.conversationInfos()
	for _, c := range r.convs {
		if a := r.agents[c.NodeID]; a != nil {
			if st := a.Status(); st != nil {
				s.Pack = st
			}
		}
	}
	return s
}

// transcriptPage answers TranscriptPageQuery by delegating to the agent whose node
// matches the request's key (the key is "<nodeId>" or starts with "<nodeId>/" or
// "<nodeId>:"), and names the executions before this one.
func (r *runner) transcriptPage(req activities.TranscriptPageRequest) (activities.TranscriptPage, error) {
	a := r.agentFor(req.Key)
	if a == nil {
		return activities.TranscriptPage{}, fmt.Errorf("run %s has no transcript %q", r.in.RunID, req.Key)
	}
	if req.MaxBytes <= 0 {
		req.MaxBytes = activities.DefaultTranscriptPageBytes
	}
	page, err := a.TranscriptPage(req)
	if err != nil {
		return page, err
	}
	if page.Messages == nil {
		page.Messages = []convo.Message{}
	}
	page.Earlier = r.segments
	return page, nil
}

// transcript answers TranscriptQuery: messages [From, To), which this execution must
// hold within one page (DefaultTranscriptPageBytes).
func (r *runner) transcript(ref convo.TranscriptRef) ([]convo.Message, error) {
	a := r.agentFor(ref.Key)
	if a == nil {
		return nil, fmt.Errorf("run %s has no transcript %q", r.in.RunID, ref.Key)
	}
	page, err := a.TranscriptPage(activities.TranscriptPageRequest{Key: ref.Key, From: ref.From, To: ref.To, MaxBytes: activities.DefaultTranscriptPageBytes})
	if err != nil {
		return nil, err
	}
	if page.Start != ref.From {
		return nil, fmt.Errorf("run %s: messages [%d, %d) of transcript %q are not in one page of this execution (it holds [%d, %d)); use %s", r.in.RunID, ref.From, ref.To, ref.Key, page.Base, page.Len, TranscriptPageQuery)
	}
	return page.Messages, nil
}

// agentFor is the agent whose node a transcript key names.
func (r *runner) agentFor(key string) conversationAgent {
	nodes := make([]string, 0, len(r.agents))
	for id := range r.agents {
		nodes = append(nodes, id)
	}
	sort.Strings(nodes)
	for _, id := range nodes {
		if key == id || strings.HasPrefix(key, id+"/") || strings.HasPrefix(key, id+":") {
			return r.agents[id]
		}
	}
	return nil
}
