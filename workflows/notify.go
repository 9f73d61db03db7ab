package workflows

// A run tells its tenant's webhook dispatcher (package webhooks) about the events webhooks
// may receive. emit queues them; a coroutine of the run sends what is queued as one
// WebhookNotice signal whenever the run's main coroutine waits, so the run never
// blocks on it, and a batch of events written together (node.suspended,
// interrupt.requested, approval.requested) is one signal. A signal to a tenant
// without a dispatcher fails, which costs the run nothing but the failed signal's
// history event; a run created since RunInput.Notices (NoticesLocal, and
// GateNotifyLocal) signals through the NotifyDispatcher
// local activity instead, which tells a dispatcher that exists and nobody else
// (activities/notify.go), so a healthy run's history shows no failed signal, and a
// replay fork, whose log re-emits its source's, notifies nothing. Before the
// run closes or continues as new it waits until Temporal
// has taken every queued signal (not until any receiver answered).
//
// Runs recorded before webhooks signal nothing (GetVersion GateWebhookNotify, asked
// at the first event webhooks may receive, normally run.started).

import (
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// RunInput.Notices: NoticesLocal, runs whose notices go through the NotifyDispatcher
// local activity (GateNotifyLocal); NoticesNodeEvents, runs whose notices carry their
// node events too (GateWebhookNodeEvents), and go through it as well.
const (
	NoticesLocal      = 1
	NoticesNodeEvents = 2
)

// maxNoticeBytes bounds the events of one notice signal; a larger batch is split.
const maxNoticeBytes = 256 << 10

// notifier is the run's queue of events for its webhook dispatcher.
type notifier struct {
	asked   bool // GateWebhookNotify was asked in this execution
	on      bool
	local   bool // GateNotifyLocal: notices go through the NotifyDispatcher local activity
	queue   []Event
	sending bool
}

// notifyWebhooks queues ev for the tenant's webhook dispatcher when webhooks may
// receive its type.
func (r *runner) notifyWebhooks(ev Event) {
	if !slices.Contains(WebhookEventTypes, ev.Type) {
		return
	}
	if slices.Contains(WebhookNodeEventTypes, ev.Type) && (r.in.Notices < NoticesNodeEvents || !r.changed(GateWebhookNodeEvents)) {
		return
	}
	n := &r.notify
	if !n.asked {
		n.asked = true
		n.on = r.changed(GateWebhookNotify)
		if n.on && r.in.Notices >= NoticesLocal && r.changed(GateNotifyLocal) {
			// A replay fork re-emits its source's history, which was delivered
			// once: it tells no dispatcher (OpenWOP replay.md, no fan-out).
			n.local = true
			n.on = r.in.Fork == nil
		}
		if n.on {
			dctx, _ := workflow.NewDisconnectedContext(r.ctx) // a cancelled run still reports its end
			workflow.Go(dctx, r.sendNotices)
		}
	}
	if n.on {
		n.queue = append(n.queue, ev)
	}
}

// sendNotices is the coroutine that signals queued events, in order.
func (r *runner) sendNotices(ctx workflow.Context) {
	n := &r.notify
	for {
		_ = workflow.Await(ctx, func() bool { return len(n.queue) > 0 })
		batch, size := 0, 0
		for batch < len(n.queue) && (batch == 0 || size+len(n.queue[batch].Payload) <= maxNoticeBytes) {
			size += len(n.queue[batch].Payload)
			batch++
		}
		notice := WebhookNotice{RunID: r.in.RunID, Tags: r.in.Tags, CallbackURL: r.in.CallbackURL, Events: slices.Clone(n.queue[:batch])}
		n.queue = slices.Delete(n.queue, 0, batch)
		n.sending = true
		if n.local {
			// A tenant without a dispatcher is nobody to tell (activities/notify.go).
			raw, _ := json.Marshal(notice) // events the run wrote: always encodable
			var acts *activities.Activities
			opts := activities.NotifyDispatcherOptions()
			opts.Summary = fmt.Sprintf("notify the webhook dispatcher: %d events", len(notice.Events))
			lctx := workflow.WithLocalActivityOptions(ctx, opts)
			_ = workflow.ExecuteLocalActivity(lctx, acts.NotifyDispatcher, activities.DispatcherNotice{
				WorkflowID: protocol.WebhookDispatcherID(r.in.Owner.Tenant), Signal: WebhookEventsSignal, Notice: raw}).Get(lctx, nil)
		} else {
			// Fails when the tenant has no dispatcher: nobody listens, nothing is lost.
			_ = workflow.SignalExternalWorkflow(ctx, protocol.WebhookDispatcherID(r.in.Owner.Tenant), "", WebhookEventsSignal, notice).Get(ctx, nil)
		}
		n.sending = false
	}
}

// flushNotices waits until every queued event was signalled.
func (r *runner) flushNotices() {
	n := &r.notify
	if !n.on {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(r.ctx)
	_ = workflow.Await(dctx, func() bool { return len(n.queue) == 0 && !n.sending })
}

// WebhookEventsSignal is the signal of a tenant's webhook dispatcher (package
// webhooks) that carries a WebhookNotice from a run.
const WebhookEventsSignal = "openwop.webhooks.events"

// WebhookEventTypes are the run events delivered to webhooks: what a person or a
// system waits for (WebhookEventTypesV1) and a run's node lifecycle
// (WebhookNodeEventTypes, the lifecycle OpenWOP's durable-delivery scenario
// subscribes to). Other types are not delivered, so a subscription may not ask for
// them.
var WebhookEventTypes = slices.Concat(WebhookEventTypesV1, WebhookNodeEventTypes)

// WebhookEventTypesV1 are what a person or a system waits for: a run started or
// ended, something waits for a decision, a reminder, an escalation, a decision taken.
// They are the types of the v1 surface (/v1/webhooks, the v1 discovery document) and
// what a run's callbackUrl gets.
var WebhookEventTypesV1 = []string{
	protocol.EvRunStarted, protocol.EvRunCompleted, protocol.EvRunFailed, protocol.EvRunCancelled,
	protocol.EvInterruptRequested, protocol.EvInterruptResolved,
	protocol.EvApprovalRequested, protocol.EvApprovalReceived,
	protocol.EvClarificationRequested, protocol.EvClarificationResolved,
	protocol.EvWorkflowStalled,
}

// WebhookNodeEventTypes are the node events delivered to v2 subscriptions, by runs
// that took GateWebhookNodeEvents.
var WebhookNodeEventTypes = []string{protocol.EvNodeStarted, protocol.EvNodeCompleted}

// WebhookNotice is what a run signals its tenant's dispatcher: events of one run.
type WebhookNotice struct {
	RunID       string   `json:"runId"`
	Tags        []string `json:"tags,omitempty"`
	CallbackURL string   `json:"callbackUrl,omitempty"`
	Events      []Event  `json:"events"`
}
