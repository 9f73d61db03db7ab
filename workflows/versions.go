package workflows

import "go.temporal.io/sdk/workflow"

// Change ids of behaviour that differs from what runs recorded before it. Each is asked
// lazily, at the first point where the new code would act differently, so runs that
// never reach such a point record no marker; once asked, an execution keeps its answer.
const (
	// agentCancelVersion: a cancel stops a pack turn between rounds and tool calls and
	// cancels the model or tool activity in flight (pack_cancel.go).
	agentCancelVersion = "agent-cancel"
	// eventRoutingVersion: an injected event is refused where the pack's state accepts
	// none, and hybrid (and external entry) states raise their event interrupt
	// (pack_events.go).
	eventRoutingVersion = "pack-event-routing"
	// forkReplayVersion: a fork replay re-folds a pack in causal order, never calls a
	// model or tool for a recorded turn, spends no usage twice and reports divergence
	// (pack_replay.go).
	forkReplayVersion = "fork-replay"
	// integrityVersion: a signalled client turn must be a user turn (an agent turn only
	// as a roster participant), with bounded fields and no messageId of the host's but
	// its own (conversation_resolve.go checkClientTurn). A run asks only when a request breaks a
	// rule the earlier code did not have (interrupts.go checkSignalled).
	integrityVersion = "request-integrity"
	// eventVocabularyVersion: a run of the v2 era (RunInput.Era) writes the event types
	// OpenWOP v2 renamed under their v2 names (events.go, writeType). Asked at the first
	// such event only, so runs of the v1 era never record the marker.
	eventVocabularyVersion = "event-vocabulary-v2"
)

// changed reports whether the run takes the new path of change id (version 1), asking
// workflow.GetVersion the first time in this execution.
func (r *runner) changed(id string) bool {
	if v, ok := r.versions[id]; ok {
		return v >= 1
	}
	if r.versions == nil {
		r.versions = map[string]workflow.Version{}
	}
	v := workflow.GetVersion(r.ctx, id, workflow.DefaultVersion, 1)
	r.versions[id] = v
	return v >= 1
}
