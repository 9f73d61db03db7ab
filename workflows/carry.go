package workflows

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// A run continues as new between conversation turns (its runId, the workflow id, does
// not change), and what it carries is bounded by design: only what the next execution
// needs to decide, never the log, the turns or the transcript. The run's state is thus
// spread over the chain of its executions:
//
//   - Each execution keeps in memory the events it emitted (sequences from
//     carriedState.Base on), the newest turns of each conversation (recentTurns), and
//     the transcript messages its model rounds appended (engine.State, from its
//     TranscriptBase on). Its queries answer for those.
//   - Earlier events and messages stay with the executions that emitted them: closed
//     executions answer queries too (QueryWorkflow with their run id), and hold their
//     events in their own history as well (records.go), where a reader decodes them
//     without a worker. Every answer that does not reach back far enough names the
//     executions before this one (Segments: run id and sequence range, newest first,
//     at most MaxSegmentLinks; Anchors: a sparse index of older ones); a reader that
//     needs an older one reads the start event (or asks) of the nearest one it knows,
//     which names those before it. Temporal stays the only store.
//   - Sets that would grow with every turn are windows: the request ids applied
//     (appliedWindow, the newest 64, so a resolve repeated with its Idempotency-Key
//     is recognised while fewer than 64 others came in between), the interrupts
//     resolved (resolvedWindow) and the outcomes of the newest requests (carriedOutcomes,
//     outcomes.go). Everything else carried is bounded by the definition
//     (nodes, outputs, pending interrupts) or by the limits on inputs.
//
// Adding carried state: a field whose size grows with the run's length does not
// belong here. Keep a count, a window (idWindow) or a bounded tail instead, and read
// older values from the executions that hold them.

// Bounds of the carried state.
const (
	// MaxSegmentLinks is how many earlier executions a run names in its state.
	MaxSegmentLinks = 32
	// appliedWindow and resolvedWindow size the id windows.
	appliedWindow  = 64
	resolvedWindow = 64
	// maxCarriedInboxBytes bounds the queued resolves a run carries into its next
	// execution; a larger queue is worked off first.
	maxCarriedInboxBytes = 64 << 10
	// maxCarriedBytes is the size at which a run fails rather than asks Temporal to
	// continue it with a state Temporal would reject (its payload limit is 2 MB).
	maxCarriedBytes = 1 << 20
)

// carriedShape is the shape of carriedState this code writes: 1 is the bounded state
// described above. 0 is the earlier shape, which carried the whole log (Events), every
// turn and the whole transcript; restore still reads it.
const carriedShape = 1

// carriedState is what a run carries across continue-as-new (RunInput.Carried).
type carriedState struct {
	Shape int `json:"shape,omitempty"`
	// Events is the whole log in the earlier shape; nil in the bounded one, where Base
	// is the sequence of the next event and the log lives in the executions (Segments).
	Events      []Event              `json:"events,omitempty"`
	Base        int64                `json:"base,omitempty"`
	LastEventID string               `json:"lastEventId,omitempty"`
	NodeEvents  map[string]string    `json:"nodeEvents,omitempty"` // newest eventId per node
	Segments    []activities.Segment `json:"segments,omitempty"`
	// Anchors is the sparse index of older executions (records.go), by level.
	Anchors [][]activities.Segment `json:"anchors,omitempty"`

	Status        string                                `json:"status"`
	StartedAt     string                                `json:"startedAt"`
	Nodes         []nodeRecord                          `json:"nodes"`
	Outputs       map[string]map[string]json.RawMessage `json:"outputs,omitempty"`
	Counts        map[string]int                        `json:"counts,omitempty"`
	Pending       []carriedInterrupt                    `json:"pending,omitempty"`
	ResolvedNodes []string                              `json:"resolvedNodes,omitempty"`
	ResolvedIDs   []string                              `json:"resolvedIds,omitempty"` // oldest first
	Applied       []string                              `json:"applied,omitempty"`     // oldest first
	Outcomes      []ResolveOutcome                      `json:"outcomes,omitempty"`    // at most carriedOutcomes, oldest first
	Inbox         []ResolveRequest                      `json:"inbox,omitempty"`
	Cancel        *CancelRequest                        `json:"cancel,omitempty"`
	ChildRuns     []ChildRun                            `json:"childRuns,omitempty"`
	// Convs hold each conversation's newest turns and its turn count (all its turns in
	// the earlier shape).
	Convs       []*Conversation            `json:"convs,omitempty"`
	AgentStates map[string]json.RawMessage `json:"agentStates,omitempty"`
	Generation  int                        `json:"generation"`
	// TriggerRules is the trigger-rules version the run started with (0: the earlier
	// reading; states carried before the field existed are such runs).
	TriggerRules int `json:"triggerRules,omitempty"`
	// Pause is the run's pause while it holds; Attempts the attempts of the nodes a
	// pause cut (pause.go).
	Pause    *pauseState    `json:"pause,omitempty"`
	Attempts map[string]int `json:"attempts,omitempty"`
}

// carriedInterrupt is a pending interrupt across continue-as-new.
type carriedInterrupt struct {
	PendingInterrupt
	RequestedEvent string         `json:"requestedEvent"`
	SuspendedEvent string         `json:"suspendedEvent"`
	Agent          bool           `json:"agent,omitempty"`
	Conv           bool           `json:"conv,omitempty"`
	Approval       *approvalData  `json:"approval,omitempty"`
	Votes          []approvalVote `json:"votes,omitempty"`
	Describe       string         `json:"describe,omitempty"`
}

func isContinueAsNew(err error) bool { return workflow.IsContinueAsNewError(err) }

// maybeContinueAsNew continues the run as new at a safe point (between conversation
// turns) when Temporal suggests it, or after RunInput.ContinueAsNewAfterEvents events
// in this execution (a test knob).
func (r *runner) maybeContinueAsNew() error {
	info := workflow.GetInfo(r.ctx)
	forced := r.in.ContinueAsNewAfterEvents > 0 && r.nextSeq()-r.startSeq >= int64(r.in.ContinueAsNewAfterEvents)
	if !info.GetContinueAsNewSuggested() && !forced {
		return nil
	}
	if r.cancelReq != nil || !r.canCarryInbox() {
		return nil // finish the queued work first; the next safe point will do
	}
	if r.resolveUpdates > 0 && len(r.inbox) > 0 {
		return nil // a resolve update waits for a queued request: apply it first
	}
	if err := workflow.Await(r.ctx, func() bool { return workflow.AllHandlersFinished(r.ctx) }); err != nil {
		return r.cancelErr(err)
	}
	r.flushNotices()
	r.drainSignals()
	if r.cancelReq != nil || !r.canCarryInbox() {
		// Keep the drained work in this execution; it is processed before the next
		// safe point.
		return nil
	}
	r.flushRecords() // the rest of this execution's events, before its link says so
	st, err := r.carry()
	if err != nil {
		return fmt.Errorf("prepare continue-as-new: %w", err)
	}
	if r.bounded && len(st) > maxCarriedBytes {
		return failNode(protocol.CodeStateTooLarge, "the run's state is %d bytes, more than the %d bytes it may carry into its next execution", len(st), maxCarriedBytes)
	}
	next := r.in
	next.Carried = st
	workflow.GetLogger(r.ctx).Info("Continuing the run as new", "runId", r.in.RunID, "nextSequence", r.nextSeq(), "carriedBytes", len(st))
	return workflow.NewContinueAsNewError(r.ctx, RunWorkflowName, next)
}

// canCarryInbox reports whether the queued resolves may travel into the next
// execution: none are queued, or (bounded state) they are small.
func (r *runner) canCarryInbox() bool {
	if len(r.inbox) == 0 {
		return true
	}
	if !r.bounded {
		return false
	}
	n := 0
	for _, q := range r.inbox {
		n += len(q.ResumeValue) + 256
	}
	return n <= maxCarriedInboxBytes
}

func (r *runner) carry() (json.RawMessage, error) {
	st := carriedState{Shape: carriedShape}
	this := r.thisSegment()
	r.eventLog.carryInto(&st, r.segmentsWithThis(this), r.anchorsWithThis(this))
	r.progress.carryInto(&st)
	r.resolveState.carryInto(&st)
	r.pausing.carryInto(&st)
	st.ChildRuns = r.childRuns
	if err := r.carryConversations(&st); err != nil {
		return nil, err
	}
	if !r.legacyTriggerRules {
		st.TriggerRules = 1
	}
	if r.carried != nil {
		st.Generation = r.carried.Generation + 1
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode the carried state: %w", err)
	}
	return b, nil
}

// carryConversations writes the conversations and each agent's saved state.
func (r *runner) carryConversations(st *carriedState) error {
	st.Convs, st.AgentStates = r.convs, map[string]json.RawMessage{}
	for _, id := range slices.Sorted(maps.Keys(r.agents)) {
		saved, err := r.agents[id].Save()
		if err != nil {
			return fmt.Errorf("save the agent of node %q: %w", id, err)
		}
		st.AgentStates[id] = saved
	}
	return nil
}

// thisSegment is the link to this execution the next one carries.
func (r *runner) thisSegment() activities.Segment {
	return activities.Segment{RunID: workflow.GetInfo(r.ctx).WorkflowExecution.RunID, FirstSequence: r.base, LastSequence: r.nextSeq() - 1,
		Recorded: r.recordedAll()}
}

// segmentsWithThis is the list of the newest earlier executions the next execution
// carries: this one first, then those this one knew of, at most MaxSegmentLinks.
func (r *runner) segmentsWithThis(this activities.Segment) []activities.Segment {
	out := append([]activities.Segment{this}, r.segments...)
	if len(out) > MaxSegmentLinks {
		out = out[:MaxSegmentLinks]
	}
	return out
}

// restore rebuilds the runner from RunInput.Carried, in either shape.
func (r *runner) restore() error {
	var st carriedState
	if err := json.Unmarshal(r.in.Carried, &st); err != nil {
		return fmt.Errorf("decode the carried state: %w", err)
	}
	r.carried = &st
	r.eventLog.restoreFrom(&st)
	r.progress.restoreFrom(&st)
	r.resolveState.restoreFrom(&st)
	r.pausing.restoreFrom(&st)
	r.childRuns = st.ChildRuns
	r.convs = st.Convs
	for _, c := range r.convs {
		c.restored(st.Shape)
		c.r = r
	}
	r.restorePending(st.Pending)
	return nil
}

// restorePending rebuilds the pending interrupts, tied to their conversations, and
// restarts their timers.
func (r *runner) restorePending(pending []carriedInterrupt) {
	for _, ci := range pending {
		it := &interrupt{PendingInterrupt: ci.PendingInterrupt, requestedEvent: ci.RequestedEvent, suspendedEvent: ci.SuspendedEvent,
			agent: ci.Agent, approval: ci.Approval, votes: ci.Votes, describe: ci.Describe}
		if c := r.convOf(ci.NodeID); c != nil && (ci.Conv || ci.Agent) {
			if ci.Conv {
				it.conv = c
				c.it = it
			} else {
				c.agentIt = it
			}
		}
		r.pending = append(r.pending, it)
		r.startTimer(it)
	}
}

// historyFailFactor is how far past Temporal's continue-as-new suggestion an execution
// may grow before checkHistory fails the run.
const historyFailFactor = 8

// checkHistory fails the run when this execution's history has grown to
// historyFailFactor times its length or size at the point where Temporal first
// suggested continuing as new: the run kept waiting somewhere it cannot continue as
// new (an approval gate asked questions thousands of times, a conversation never free
// of queued messages). With Temporal's defaults (a suggestion at 4,096 events or 4 MB)
// that is 32,768 events or 32 MB, short of the 51,200 events and 50 MB at which
// Temporal terminates a run without its terminal event. The run ends failed with
// history_limit_exceeded and stays readable.
func (r *runner) checkHistory() error {
	if !r.bounded {
		return nil
	}
	info := workflow.GetInfo(r.ctx)
	if !info.GetContinueAsNewSuggested() {
		return nil
	}
	n, size := info.GetCurrentHistoryLength(), info.GetCurrentHistorySize()
	if r.suggestedAtLength == 0 {
		r.suggestedAtLength, r.suggestedAtSize = max(n, 1), max(size, 1)
		return nil
	}
	if n >= historyFailFactor*r.suggestedAtLength || size >= historyFailFactor*r.suggestedAtSize {
		return failNode(protocol.CodeHistoryLimitExceeded, "the run's Temporal history reached %d events and %d bytes without a point where it could continue as new (Temporal suggested it at %d events and %d bytes)",
			n, size, r.suggestedAtLength, r.suggestedAtSize)
	}
	return nil
}
