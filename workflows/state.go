package workflows

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// The runner's state by concern. Each group that continues across continue-as-new
// writes its part of carriedState (carryInto) and reads it back (restoreFrom), so
// carry and restore (carry.go) read as the list of groups. The groups are embedded in
// runner: their fields are the runner's fields (r.events, r.pending, ...).

// eventLog is the run's event log as this execution holds it: the events it emitted,
// sequences from base on (events.go); lastID and nodeLast are the newest eventId of
// the run and of each node, segments the newest earlier executions that hold the
// events before base and anchors the sparse index of older ones (records.go).
type eventLog struct {
	events   []Event
	base     int64
	lastID   string
	nodeLast map[string]string
	segments []activities.Segment
	anchors  [][]activities.Segment
	// startSeq is the log length when this execution started (continue-as-new).
	startSeq int64
}

// nextSeq is the sequence of the next event (the log's length).
func (l *eventLog) nextSeq() int64 { return l.base + int64(len(l.events)) }

// carryInto writes the log's position; the events stay with this execution, which
// segments names first.
func (l *eventLog) carryInto(st *carriedState, segments []activities.Segment, anchors [][]activities.Segment) {
	st.Base, st.LastEventID, st.NodeEvents, st.Segments, st.Anchors = l.nextSeq(), l.lastID, l.nodeLast, segments, anchors
}

// restoreFrom reads the log back, in either shape.
func (l *eventLog) restoreFrom(st *carriedState) {
	if st.Shape == 0 {
		// The earlier shape carried the whole log: this execution holds it all.
		l.events = st.Events
		l.base = 0
		if n := len(st.Events); n > 0 {
			l.lastID = st.Events[n-1].EventID
		}
		for _, e := range st.Events {
			if e.NodeID != "" {
				l.nodeLast[e.NodeID] = e.EventID
			}
		}
	} else {
		l.base = st.Base
		l.lastID = st.LastEventID
		if st.NodeEvents != nil {
			l.nodeLast = st.NodeEvents
		}
		l.segments = st.Segments
		l.anchors = st.Anchors
	}
	l.startSeq = l.nextSeq()
}

// progress is where the run stands: its status, its nodes' records and outputs.
// Only status, startedAt, nodes, outputs and counts are carried; the rest is set
// while the run runs and ends.
type progress struct {
	status      string
	currentNode string
	startedAt   time.Time
	completedAt string
	terminal    bool
	err         *protocol.RunError
	failedNode  string

	nodes   []nodeRecord                          // in execution order
	outputs map[string]map[string]json.RawMessage // nodeId → outputs
	counts  map[string]int                        // nodeId → interrupts raised
}

func (p *progress) carryInto(st *carriedState) {
	st.Status, st.StartedAt, st.Nodes = p.status, formatTime(p.startedAt), p.nodes
	st.Outputs, st.Counts = p.outputs, p.counts
}

func (p *progress) restoreFrom(st *carriedState) {
	p.status = st.Status
	if t, err := time.Parse(time.RFC3339Nano, st.StartedAt); err == nil {
		p.startedAt = t
	}
	p.nodes = st.Nodes
	if st.Outputs != nil {
		p.outputs = st.Outputs
	}
	if st.Counts != nil {
		p.counts = st.Counts
	}
	for _, rec := range p.nodes {
		if rec.State == "running" {
			p.currentNode = rec.NodeID
		}
	}
}

// resolveState is the run's pending interrupts and what it did with the resolves and
// the cancel it received (interrupts.go, outcomes.go, cancel.go).
type resolveState struct {
	pending       []*interrupt
	resolvedNodes map[string]bool
	resolvedIDs   *idWindow  // InterruptIDs resolved, the newest ones
	applied       *idWindow  // RequestIDs applied, the newest ones
	outcomes      outcomeLog // what the run did with recent requests, by RequestID
	inbox         []ResolveRequest
	cancelReq     *CancelRequest
}

func (s *resolveState) carryInto(st *carriedState) {
	st.ResolvedNodes, st.ResolvedIDs, st.Applied = slices.Sorted(maps.Keys(s.resolvedNodes)), s.resolvedIDs.list(), s.applied.list()
	st.Outcomes = s.outcomes.newest(carriedOutcomes)
	st.Inbox, st.Cancel = s.inbox, s.cancelReq
	for _, it := range s.pending {
		st.Pending = append(st.Pending, carriedInterrupt{
			PendingInterrupt: it.PendingInterrupt, RequestedEvent: it.requestedEvent, SuspendedEvent: it.suspendedEvent,
			Agent: it.agent, Conv: it.conv != nil, Approval: it.approval, Votes: it.votes, Describe: it.describe,
		})
	}
}

// restoreFrom reads all but the pending interrupts back (restorePending, which needs
// the conversations).
func (s *resolveState) restoreFrom(st *carriedState) {
	for _, k := range st.ResolvedNodes {
		s.resolvedNodes[k] = true
	}
	s.resolvedIDs.addAll(st.ResolvedIDs)
	s.applied.addAll(st.Applied)
	s.outcomes.list = st.Outcomes
	s.inbox = st.Inbox
	s.cancelReq = st.Cancel
}

// childState is the run's child runs and the status it reports to its parent. Only
// childRuns is carried.
type childState struct {
	childRuns []ChildRun
	childSeq  map[string]int64 // newest status sequence seen per child
	statusSeq int64            // this run's status changes, reported to its parent
}

// conversations is every conversation of the run, in opening order, and the agent of
// each conversation node (conversation.go, conversation_agent.go).
type conversations struct {
	convs  []*Conversation
	agents map[string]ConversationAgent
}
