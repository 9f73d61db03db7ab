package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// runner is the state of one run. Queries read it; only the workflow's main coroutine
// and the signal goroutines write it.
type runner struct {
	ctx workflow.Context
	in  RunInput

	// The state the run carries across continue-as-new, by concern (state.go).
	eventLog
	progress
	resolveState
	childState
	conversations
	pausing

	// The state of this execution; of it, carry passes on only the trigger-rules
	// reading (legacyTriggerRules) and the generation (carried).
	details       string
	lastSAStatus  string
	lastWaitingOn string
	// tags are the run's SATags by prefix, and legacyCleared is set once this
	// execution unset the legacy attributes (upsertAttributes).
	tags          map[string]string
	legacyCleared bool
	schemaCache   map[string]*compiledSchema

	carried *carriedState
	forkIdx *forkIndex
	// bounded is set for executions that make the bounded state's decisions
	// (GateBoundedState); suggestedAt* record where Temporal first suggested
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
	// that accepts none as a chat reply, as they did before GateEventRouting.
	legacyEventRouting bool

	// resolveUpdates counts ResolveUpdate handlers waiting for their request's outcome.
	resolveUpdates int
	// localWaits counts waits on work done within the workflow task (local rounds).
	localWaits int
	// records is how far this execution has written its events into its history
	// (records.go).
	records eventRecorder

	// The turn an agent is working on (turnstatus.go): busy is its conversation,
	// liveStatus records the answer of GateTurnStatus, hold and busyShown what the search
	// attributes show of it, taskMark when the turn last began a workflow task, turnReqs
	// the requests whose turn it is (the one that started it, approvals applied in it).
	busy       *Conversation
	liveStatus bool
	hold       statusHold
	busyShown  bool
	taskMark   time.Time
	turnReqs   []string
	// stalls are the calls that wait out an outage (outage.go); stallDetails the
	// current details they add, baseDetails those they were added to.
	stalls       []*stall
	stallDetails string
	baseDetails  string
}

// Run is the workflow of every OpenWOP run (WorkflowID = runId). It interprets the
// run's definition node by node and keeps the run's OpenWOP event log.
func Run(ctx workflow.Context, in RunInput) (*Snapshot, error) {
	r := &runner{
		ctx:      ctx,
		in:       in,
		eventLog: eventLog{nodeLast: map[string]string{}},
		progress: progress{
			status:  protocol.StatusPending,
			outputs: map[string]map[string]json.RawMessage{},
			counts:  map[string]int{},
		},
		resolveState: resolveState{
			resolvedNodes: map[string]bool{},
			resolvedIDs:   newIDWindow(resolvedWindow),
			applied:       newIDWindow(appliedWindow),
		},
		childState:    childState{childSeq: map[string]int64{}},
		conversations: conversations{agents: map[string]ConversationAgent{}},
		schemaCache:   map[string]*compiledSchema{},
	}
	if r.in.RunID == "" {
		r.in.RunID = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	if err := r.setup(); err != nil {
		return nil, err
	}
	r.bounded = r.changed(GateBoundedState)
	snap, err := r.run()
	if err != nil || snap == nil {
		return snap, err
	}
	return r.close(snap)
}

// setup registers queries and signal receivers before anything blocks, and restores a
// carried state after continue-as-new.
func (r *runner) setup() error {
	if err := r.registerQueries(); err != nil {
		return err
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
	if err := r.registerPause(); err != nil {
		return fmt.Errorf("register %s: %w", PauseUpdate, err)
	}
	r.receiveSignals()
	return nil
}

// run executes the definition and ends the run with exactly one terminal event.
func (r *runner) run() (*Snapshot, error) {
	if r.in.Definition == nil {
		r.startedAt = workflow.Now(r.ctx)
		r.emit(protocol.EvRunStarted, "", protocol.RunStarted{WorkflowID: "unknown"}, "")
		return r.fail("", protocol.RunError{Code: protocol.CodeValidation, Message: "the run input carries no workflow definition"})
	}
	if r.carried == nil {
		r.startedAt = workflow.Now(r.ctx)
		r.initSearchAttributes()
		r.setStatus(protocol.StatusRunning)
		started := r.emit(protocol.EvRunStarted, "", r.runStartedPayload(), "")
		r.countRunStarted()
		r.checkForkInputs(started)
	}
	order, err := topoOrder(r.in.Definition)
	if err != nil {
		return r.fail("", protocol.RunError{Code: protocol.CodeValidation, Message: err.Error()})
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
		if err := r.holdPaused(); err != nil {
			return r.cancelled("")
		}
		run, err := r.shouldRun(n)
		if err != nil {
			return r.fail(n.ID, protocol.RunError{Code: protocol.CodeValidation, Message: err.Error()})
		}
		if !run {
			r.nodes = append(r.nodes, nodeRecord{NodeID: n.ID, State: "skipped"})
			r.emit(protocol.EvNodeSkipped, n.ID, protocol.NodeSkipped{NodeID: n.ID, Reason: "no incoming edge was taken"}, "")
			continue
		}
		_, err = r.execNode(n) // the outputs are in the node record
		var rejected *gateRejected
		switch {
		case err == nil:
		case errors.Is(err, errCancelled):
			return r.cancelled(n.ID)
		case isContinueAsNew(err):
			return nil, err
		case errors.As(err, &rejected):
			// A rejected approval gate is a failed source (rejection.go).
			r.setRecord(n.ID, "failed", nil)
			r.emit(protocol.EvNodeFailed, n.ID, protocol.NodeFailed{NodeID: n.ID, Error: rejected.nodeFailedError(), Attempts: 1}, r.lastNodeEvent(n.ID))
			if r.currentNode == n.ID {
				r.currentNode = ""
			}
			if !r.failureRouted(n.ID) {
				return r.fail(n.ID, rejected.RunError)
			}
		default:
			var ne *nodeError
			if !errors.As(err, &ne) {
				ne = &nodeError{protocol.RunError{Code: protocol.CodeInternal, Message: err.Error()}}
			}
			r.setRecord(n.ID, "failed", nil)
			r.emit(protocol.EvNodeFailed, n.ID, protocol.NodeFailed{NodeID: n.ID, Error: protocol.NodeError{Code: ne.Code, Message: ne.Message, Details: ne.Details}, Attempts: 1}, r.lastNodeEvent(n.ID))
			return r.fail(n.ID, ne.RunError)
		}
	}
	if err := r.holdPaused(); err != nil {
		return r.cancelled("")
	}
	return r.complete()
}

func (r *runner) runStartedPayload() protocol.RunStarted {
	p := protocol.RunStarted{WorkflowID: r.in.Definition.ID, Transport: "rest", EngineVersion: EngineVersion, Tags: r.in.Tags}
	if len(r.in.Inputs) > 0 && r.in.Inputs[0] == '{' {
		p.Inputs = r.in.Inputs
	}
	if r.in.Owner.Tenant != "" {
		// run.started echoes the owner (runs.md); only runs created with a subject
		// carry one, so the payload of earlier runs is what it was.
		p.Owner = &protocol.RunOwner{Tenant: r.in.Owner.Tenant, Principal: r.in.Owner.Principal, Subject: r.in.Owner.Subject}
	}
	if len(r.in.Metadata) > 0 && r.in.Metadata[0] == '{' {
		p.Metadata = r.in.Metadata
	}
	return p
}
