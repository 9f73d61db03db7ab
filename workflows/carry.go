package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// carriedState is what a run carries across continue-as-new (RunInput.Carried): the
// whole OpenWOP state, so readers never see the chain and the runId is unchanged.
type carriedState struct {
	Events        []Event                               `json:"events"`
	Status        string                                `json:"status"`
	StartedAt     string                                `json:"startedAt"`
	Nodes         []nodeRecord                          `json:"nodes"`
	Outputs       map[string]map[string]json.RawMessage `json:"outputs,omitempty"`
	Counts        map[string]int                        `json:"counts,omitempty"`
	Pending       []carriedInterrupt                    `json:"pending,omitempty"`
	ResolvedNodes []string                              `json:"resolvedNodes,omitempty"`
	ResolvedIDs   []string                              `json:"resolvedIds,omitempty"`
	Applied       []string                              `json:"applied,omitempty"`
	Inbox         []ResolveRequest                      `json:"inbox,omitempty"`
	Cancel        *CancelRequest                        `json:"cancel,omitempty"`
	ChildRuns     []ChildRun                            `json:"childRuns,omitempty"`
	Convs         []*conversation                       `json:"convs,omitempty"`
	AgentStates   map[string]json.RawMessage            `json:"agentStates,omitempty"`
	Generation    int                                   `json:"generation"`
	// TriggerRules is the trigger-rules version the run started with (0: the earlier
	// reading; states carried before the field existed are such runs).
	TriggerRules int `json:"triggerRules,omitempty"`
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
	forced := r.in.ContinueAsNewAfterEvents > 0 && len(r.events)-r.eventsAtStart >= r.in.ContinueAsNewAfterEvents
	if !info.GetContinueAsNewSuggested() && !forced {
		return nil
	}
	if r.cancelReq != nil || len(r.inbox) > 0 {
		return nil // finish the queued work first; the next safe point will do
	}
	if err := workflow.Await(r.ctx, func() bool { return workflow.AllHandlersFinished(r.ctx) }); err != nil {
		return r.cancelErr(err)
	}
	r.flushNotices()
	r.drainSignals()
	if r.cancelReq != nil || len(r.inbox) > 0 {
		// Keep the drained work in this execution; it is processed before the next
		// safe point.
		return nil
	}
	st, err := r.carry()
	if err != nil {
		return fmt.Errorf("prepare continue-as-new: %w", err)
	}
	next := r.in
	next.Carried = st
	workflow.GetLogger(r.ctx).Info("Continuing the run as new", "runId", r.in.RunID, "events", len(r.events))
	return workflow.NewContinueAsNewError(r.ctx, RunWorkflowName, next)
}

func (r *runner) carry() (json.RawMessage, error) {
	st := carriedState{
		Events: r.events, Status: r.status, StartedAt: formatTime(r.startedAt), Nodes: r.nodes,
		Outputs: r.outputs, Counts: r.counts, Inbox: r.inbox, Cancel: r.cancelReq,
		ChildRuns: r.childRuns, Convs: r.convs, AgentStates: map[string]json.RawMessage{},
	}
	if !r.legacyTriggerRules {
		st.TriggerRules = 1
	}
	if r.carried != nil {
		st.Generation = r.carried.Generation + 1
	}
	st.ResolvedNodes = sortedKeys(r.resolvedNodes)
	st.ResolvedIDs = sortedKeys(r.resolvedIDs)
	st.Applied = sortedKeys(r.applied)
	for _, it := range r.pending {
		st.Pending = append(st.Pending, carriedInterrupt{
			PendingInterrupt: it.PendingInterrupt, RequestedEvent: it.requestedEvent, SuspendedEvent: it.suspendedEvent,
			Agent: it.agent, Conv: it.conv != nil, Approval: it.approval, Votes: it.votes, Describe: it.describe,
		})
	}
	for _, id := range sortedKeys(r.agents) {
		saved, err := r.agents[id].Save()
		if err != nil {
			return nil, fmt.Errorf("save the agent of node %q: %w", id, err)
		}
		st.AgentStates[id] = saved
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode the carried state: %w", err)
	}
	return b, nil
}

// restore rebuilds the runner from RunInput.Carried.
func (r *runner) restore() error {
	var st carriedState
	if err := json.Unmarshal(r.in.Carried, &st); err != nil {
		return fmt.Errorf("decode the carried state: %w", err)
	}
	r.carried = &st
	r.events = st.Events
	r.eventsAtStart = len(st.Events)
	r.status = st.Status
	if t, err := time.Parse(time.RFC3339Nano, st.StartedAt); err == nil {
		r.startedAt = t
	}
	r.nodes = st.Nodes
	if st.Outputs != nil {
		r.outputs = st.Outputs
	}
	if st.Counts != nil {
		r.counts = st.Counts
	}
	for _, k := range st.ResolvedNodes {
		r.resolvedNodes[k] = true
	}
	for _, k := range st.ResolvedIDs {
		r.resolvedIDs[k] = true
	}
	for _, k := range st.Applied {
		r.applied[k] = true
	}
	r.inbox = st.Inbox
	r.cancelReq = st.Cancel
	r.childRuns = st.ChildRuns
	r.convs = st.Convs
	for _, c := range r.convs {
		if c.Turns == nil {
			c.Turns = []Turn{}
		}
		c.r = r
	}
	for _, ci := range st.Pending {
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
	for _, rec := range r.nodes {
		if rec.State == "running" {
			r.currentNode = rec.NodeID
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
