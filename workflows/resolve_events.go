package workflows

// The resolve update's events: an API that asks for them (ResolveUpdateRequest.EventsMaxBytes)
// gets, with the outcome, the run's events after the position the run was at when the
// handler took the request, so the client's poll that follows the resolve can be
// answered without a query of its own (api/turnevents.go).
//
// The handler then waits past the outcome until the run is no longer busy within this
// workflow task: a turn whose rounds run here (the scripted mock's local rounds) ends
// in the same task that records the outcome, so the update completes with the agent's
// reply in its result and at no later time than before. Whatever else the run waits
// on (an activity, a timer, the next input) is outside the task, and the handler
// returns at once: a real provider's round never holds the update. The run marks the
// in-task waits (localWaits), not the others, so a wait nobody marked releases the
// handler rather than holding it. Only a lone request is held: with others queued or
// waiting, the handler returns at the outcome as before.
//
// The events are carried only when they fit in one page of at most
// MaxResolveEventsBytes and all of them are in this execution; otherwise the result has
// none and the poll queries as before. The events are durable by the time the result
// arrives: an update's result is sent with the completion of the workflow task that
// produced them.

import "go.temporal.io/sdk/workflow"

// MaxResolveEventsBytes bounds the events a resolve update carries (EventBytes, as an
// events page counts them): a turn may be 256 KiB, and the result stays far within
// Temporal's payload limit.
const MaxResolveEventsBytes = 512 << 10

// ResolveEvents are the run's events a resolve update carries: those after After, up
// to the run's newest (LastSequence), all of them (never a cut page).
type ResolveEvents struct {
	// After is the sequence of the run's newest event when the handler took the request.
	After        int64   `json:"after"`
	Events       []Event `json:"events"`
	LastSequence int64   `json:"lastSequence"`
	// Terminal: the run has ended (or is ending) and Events reach its newest event.
	Terminal bool `json:"terminal,omitempty"`
}

// carriesEvents reports whether the update u returns the run's events (the caller
// asked and the run takes the path of GateResolveEvents).
func (r *runner) carriesEvents(u ResolveUpdateRequest) bool {
	return u.EventsMaxBytes > 0 && r.changed(GateResolveEvents)
}

// settledInTask reports whether the handler stops waiting: the run is not waiting on
// work done within this workflow task (a local round), so the turn the update applied
// has gone as far as this task takes it; or the run has more requests to take (queued,
// or other updates waiting), whose turns must not hold this one's answer (held until a
// queue of a hundred drained, updates outlast their callers and Temporal aborts them).
func (r *runner) settledInTask() bool {
	return r.terminal || r.localWaits == 0 || len(r.inbox) > 0 || r.resolveUpdates > 1
}

// resolveEvents is the run's events after after, or nil when they do not fit in one
// page of maxBytes (at most MaxResolveEventsBytes) or begin in an earlier execution.
func (r *runner) resolveEvents(after int64, maxBytes int) *ResolveEvents {
	if after+1 < r.base {
		return nil
	}
	page := r.eventsPage(EventsRequest{After: after, MaxBytes: min(maxBytes, MaxResolveEventsBytes)})
	if page.More {
		return nil
	}
	return &ResolveEvents{After: after, Events: page.Events, LastSequence: page.LastSequence, Terminal: page.Terminal}
}

// PageEvents bounds evs as an EventsQuery page is bounded (eventsPage): the first event
// always, then as many as fit in maxBytes (DefaultEventsPageBytes when not positive,
// never more than MaxEventsPageBytes); more reports that events were left out.
func PageEvents(evs []Event, maxBytes int) (page []Event, more bool) {
	if maxBytes <= 0 {
		maxBytes = DefaultEventsPageBytes
	}
	maxBytes = min(maxBytes, MaxEventsPageBytes)
	size := 0
	for i := range evs {
		b := EventBytes(&evs[i])
		if i > 0 && size+b > maxBytes {
			return evs[:i], true
		}
		size += b
	}
	return evs, false
}

// awaitSettled waits (on the handler's ctx) until the run is not busy within this
// workflow task, or has ended.
func (r *runner) awaitSettled(ctx workflow.Context) {
	_ = workflow.Await(ctx, r.settledInTask)
}
