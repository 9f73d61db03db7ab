package workflows

// The run's side of waiting out an outage (packagent/pack_outage.go): a call that waits is a
// stall, which the run records (workflow.stalled, again at each reminder), shows
// (Snapshot.Stalled, the stalledOn tag of WopTags, the current details) and clears
// once the call is answered or given up.

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// Stall is a call the run waits for while what it calls is unavailable (Snapshot.Stalled).
type Stall struct {
	// Kind is "model" or "tool"; Provider or Tool names what is unavailable.
	Kind     string `json:"kind"`
	Provider string `json:"provider,omitempty"`
	Tool     string `json:"tool,omitempty"`
	CallID   string `json:"callId,omitempty"`
	NodeID   string `json:"nodeId"`
	State    string `json:"state,omitempty"`
	Round    int    `json:"round"`
	// Since is the call's first attempt; RetryUntil when the run stops waiting.
	Since      string             `json:"since"`
	RetryUntil string             `json:"retryUntil"`
	LastError  *protocol.RunError `json:"lastError,omitempty"`
	// Detail says it in words, as the Temporal UI's current details do.
	Detail string `json:"detail"`
}

// stall is one call waiting out an outage.
type stall struct {
	Stall
	since, until time.Time
	remindEvery  time.Duration
	reminders    int
}

// beginStall records that s waits: the event, the search attribute, the details.
func (r *runner) beginStall(s *stall) *stall {
	s.Since, s.RetryUntil = formatTime(s.since), formatTime(s.until)
	what := "the model provider " + s.Provider
	if s.Kind == "tool" {
		what = "tool " + s.Tool + " (call " + s.CallID + ")"
	}
	s.Detail = fmt.Sprintf("**Stalled**: %s is unavailable (%s). Round %d in state %s has waited since %s and is retried until %s; cancel the run to stop waiting.",
		what, s.LastError.Message, s.Round, s.State, s.Since, s.RetryUntil)
	r.stalls = append(r.stalls, s)
	r.emitStalled(s)
	r.publishStalls()
	return s
}

// endStall records that s no longer waits.
func (r *runner) endStall(s *stall) {
	for i, x := range r.stalls {
		if x == s {
			r.stalls = append(r.stalls[:i], r.stalls[i+1:]...)
			break
		}
	}
	r.publishStalls()
}

// emitStalled records workflow.stalled for s (its first, then each reminder).
func (r *runner) emitStalled(s *stall) {
	now := workflow.Now(r.ctx)
	retryable := true
	p := protocol.WorkflowStalled{
		StalledForMs: max(now.Sub(s.since).Milliseconds(), 0), LastNodeID: s.NodeID, Reason: s.Kind + "-unavailable",
		Kind: s.Kind, Round: s.Round, State: s.State, Since: s.Since, RetryUntil: s.RetryUntil,
		Error: protocol.NodeError{Code: s.LastError.Code, Message: s.LastError.Message, Retryable: &retryable},
	}
	if s.Kind == "tool" {
		p.Tool, p.CallID = s.Tool, s.CallID
	} else {
		p.Provider = s.Provider
	}
	if s.reminders > 0 {
		p.Reminder = s.reminders
	}
	r.emit(protocol.EvWorkflowStalled, s.NodeID, p, r.nodeLast[s.NodeID])
}

// publishStalls keeps the TagStalledOn tag ("model:<provider>" while a model round
// waits out an outage of its provider, "tool:<name>" while a tool call does) and the current details in step with r.stalls.
func (r *runner) publishStalls() {
	dctx, _ := workflow.NewDisconnectedContext(r.ctx) // also while the run is being cancelled
	if len(r.stalls) == 0 {
		r.upsertAttributes(dctx, nil, tagSet{TagStalledOn, ""})
		r.describeRun()
		return
	}
	s := r.stalls[len(r.stalls)-1]
	on := s.Kind + ":" + s.Provider
	if s.Kind == "tool" {
		on = s.Kind + ":" + s.Tool
	}
	r.upsertAttributes(dctx, nil, tagSet{TagStalledOn, on})
	r.describeRun()
}

// describeRun sets the current details: the stalls first, then the pending
// interrupts (or the agent's own description, which describePending would replace).
func (r *runner) describeRun() {
	if len(r.stalls) == 0 {
		if r.stallDetails != "" {
			r.stallDetails = ""
			r.setDetails(r.baseDetails)
		}
		return
	}
	var b strings.Builder
	for i, s := range r.stalls {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(s.Detail)
	}
	if r.stallDetails == "" {
		r.baseDetails = r.details
	}
	r.stallDetails = b.String()
	text := r.stallDetails
	if r.baseDetails != "" {
		text += "\n\n" + r.baseDetails
	}
	r.setDetails(text)
}

// stalled is the Snapshot's Stalled: the newest call that waits out an outage.
func (r *runner) stalled() *Stall {
	if len(r.stalls) == 0 {
		return nil
	}
	s := r.stalls[len(r.stalls)-1].Stall
	return &s
}
