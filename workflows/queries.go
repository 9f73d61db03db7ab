package workflows

import (
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

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
		Era:           r.in.Era,
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
			if it.Kind == protocol.KindExternalEvent || it.Kind == protocol.KindApproval {
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
	s.Stalled = r.stalled()
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
func (r *runner) agentFor(key string) ConversationAgent {
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

// registerQueries registers the run's query handlers (setup).
func (r *runner) registerQueries() error {
	for _, q := range []struct {
		name    string
		handler any
	}{
		{SnapshotQuery, func() (*Snapshot, error) { return r.snapshot(), nil }},
		{EventsQuery, func(req EventsRequest) (EventsPage, error) { return r.eventsPage(req), nil }},
		{RunBasisQuery, func() (RunBasis, error) { return r.runBasis(), nil }},
		{TranscriptQuery, r.transcript},
		{TranscriptPageQuery, r.transcriptPage},
		{ValidateResolveQuery, func(req ResolveRequest) (ResolveCheck, error) { return r.resolveCheck(req), nil }},
		{OutcomesQuery, func(req OutcomesRequest) (OutcomesPage, error) { return r.outcomesPage(req), nil }},
	} {
		if err := workflow.SetQueryHandler(r.ctx, q.name, q.handler); err != nil {
			return fmt.Errorf("register %s: %w", q.name, err)
		}
	}
	return nil
}
