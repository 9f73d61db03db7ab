// Package webhooks holds the host's webhook workflows (OpenWOP spec/v1/webhooks.md),
// with Temporal as the only store:
//
//   - Each tenant's subscriptions live in one long-running workflow, the webhook
//     dispatcher (protocol.WebhookDispatcherID(tenant), type
//     WebhookDispatcherWorkflowName). The API registers and unregisters through updates
//     (validated before they are written), lists through a query, and starts the
//     dispatcher on first use. It continues as new, carrying its subscriptions and the
//     newest dead letters.
//   - A run signals its tenant's dispatcher with the events webhooks may receive
//     (workflows.WebhookEventTypes), batched, from a coroutine of its own
//     (workflows/notify.go, which declares that signal and its WebhookNotice): the run
//     never waits for a receiver, only, before it closes, for Temporal to have taken
//     the last signal.
//   - For every matching subscription, and for the run's callbackUrl, the dispatcher
//     starts one delivery workflow (WebhookDeliveryWorkflowName) as an abandoned child,
//     so a slow receiver holds up neither the run nor the dispatcher, and the
//     dispatcher may continue as new while deliveries retry. A delivery is the
//     DeliverWebhook activity under a retry policy (durable: timers in Temporal, not in
//     a worker). One that exhausts it signals a dead letter to the dispatcher and
//     closes Failed, so it stays visible in the Temporal UI.
//
// Secrets never enter any of it in plain text: the activity derives each
// subscription's signing secret from the host's webhook key (activities.WebhookSecret),
// or opens the sealed secret a Standard Webhooks subscriber supplied
// (activities.OpenWebhookSecret).
package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// Names of the webhook workflows and their messages.
const (
	WebhookDispatcherWorkflowName = "OpenWOPWebhooks"
	WebhookDeliveryWorkflowName   = "OpenWOPWebhookDelivery"
	// WebhookRegisterUpdate carries a WebhookSubscription; it answers the stored one.
	WebhookRegisterUpdate = "openwop.webhooks.register"
	// WebhookUnregisterUpdate carries a webhook id.
	WebhookUnregisterUpdate = "openwop.webhooks.unregister"
	// WebhookListQuery answers a WebhookList. (protocol.WebhookRegisteredQuery, asked
	// by the activities, answers whether a webhook id is registered.)
	WebhookListQuery = "openwop.webhooks.list"
	// webhookDeadLetterSignal carries a DeadLetter from a delivery.
	webhookDeadLetterSignal = "openwop.webhooks.dead-letter"
)

// Bounds of a dispatcher's state, which it carries across continue-as-new as its
// input: whatever a tenant registers, the state stays under MaxDispatcherStateBytes,
// a quarter of the payload size Temporal refuses (2 MiB). A dispatcher whose input
// grew past that would be terminated, and its subscriptions and dead letters lost.
const (
	// MaxWebhooksPerTenant bounds a tenant's subscriptions.
	MaxWebhooksPerTenant = 100
	// MaxSubscriptionBytes bounds what a subscription's registrant chooses: its URL
	// and its tags together (the URL alone is bounded by
	// activities.MaxWebhookURLBytes, the events by the types delivered).
	MaxSubscriptionBytes = 3 << 10
	// MaxDispatcherStateBytes is the bound the limits above keep a dispatcher's
	// encoded state under (TestDispatcherStateIsBounded).
	MaxDispatcherStateBytes = 512 << 10

	// maxDeadLetters and maxDeadLetterBytes bound the dead letters a dispatcher keeps
	// (the newest); maxDeadLetterError bounds the error a dead letter keeps.
	maxDeadLetters = 100
	// DeadLetterRetention is how long a dead letter is kept (and readable).
	DeadLetterRetention = 30 * 24 * time.Hour
	maxDeadLetterBytes  = 128 << 10
	maxDeadLetterError  = 512
	// maxSealedSecret bounds a sealed secret: a whsec_ secret of 64 bytes (94
	// characters) sealed is 164.
	maxSealedSecret = 192
)

// CheckSubscriptionSize refuses a subscription larger than the dispatcher keeps.
func CheckSubscriptionSize(url string, tags []string) error {
	n := len(url)
	for _, t := range tags {
		n += len(t)
	}
	if n > MaxSubscriptionBytes {
		return fmt.Errorf("a webhook's url and tags may take at most %d bytes together (got %d)", MaxSubscriptionBytes, n)
	}
	if len(url) > activities.MaxWebhookURLBytes {
		return fmt.Errorf("a webhook URL may be at most %d bytes (got %d)", activities.MaxWebhookURLBytes, len(url))
	}
	return nil
}

// internalIDPrefix starts the workflow ids of the host's own workflows that are not
// runs: webhook dispatchers and deliveries. Run ids never start with it.
const internalIDPrefix = "wop-webhook"

// IsInternalWorkflowID reports whether id names one of the host's own workflows that
// is not a run (a webhook dispatcher or delivery): no tenant may read it as a run.
func IsInternalWorkflowID(id string) bool { return strings.HasPrefix(id, internalIDPrefix) }

// WebhookSubscription is one registered webhook. It holds no secret in plain text.
type WebhookSubscription struct {
	ID     string   `json:"webhookId"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Tags   []string `json:"tags,omitempty"`
	// SecretFingerprint is the first 8 hex of sha256(secret).
	SecretFingerprint string `json:"secretFingerprint"`
	// Major is the protocol major of the registration (0: 1): it selects the body of
	// the deliveries (activities.WebhookBody).
	Major int `json:"major,omitempty"`
	// SignatureAlgorithms are the schemes its deliveries are signed with when it opted
	// into more than v1 (["v1", "standard-webhooks-1"]); nil: v1 only.
	SignatureAlgorithms []string `json:"signatureAlgorithms,omitempty"`
	// SealedSecret is the secret the subscriber supplied, sealed
	// (activities.SealWebhookSecret): only the delivery activity opens it.
	SealedSecret string `json:"sealedSecret,omitempty"`
	CreatedAt    string `json:"createdAt,omitempty"`
	CreatedBy    string `json:"createdBy,omitempty"`
	// Digest is the registration request's digest: the same Idempotency-Key with
	// another body is a conflict.
	Digest string `json:"digest,omitempty"`
	// Delivered and DeadLettered count the subscription's deliveries.
	Started      int64 `json:"deliveriesStarted"`
	DeadLettered int64 `json:"deadLettered"`
}

// WebhookDeliveryConfig is the retry policy of deliveries.
type WebhookDeliveryConfig struct {
	// InitialInterval is the first retry's delay (default 1s); each next one doubles,
	// up to MaxInterval (default 10m).
	InitialInterval time.Duration `json:"initialInterval,omitempty"`
	MaxInterval     time.Duration `json:"maxInterval,omitempty"`
	// MaxAttempts bounds the attempts (0: until RetryFor has passed).
	MaxAttempts int32 `json:"maxAttempts,omitempty"`
	// RetryFor bounds the whole delivery with its retries (default 24h).
	RetryFor time.Duration `json:"retryFor,omitempty"`
	// AttemptTimeout bounds one POST (default 5s).
	AttemptTimeout time.Duration `json:"attemptTimeout,omitempty"`
}

func (c WebhookDeliveryConfig) withDefaults() WebhookDeliveryConfig {
	if c.InitialInterval <= 0 {
		c.InitialInterval = time.Second
	}
	if c.MaxInterval <= 0 {
		c.MaxInterval = 10 * time.Minute
	}
	if c.MaxInterval < c.InitialInterval {
		c.MaxInterval = c.InitialInterval
	}
	if c.RetryFor <= 0 {
		c.RetryFor = 24 * time.Hour
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = activities.DefaultWebhookAttemptTimeout
	}
	return c
}

// WebhookDispatcherInput starts (or continues) a tenant's dispatcher.
type WebhookDispatcherInput struct {
	Tenant string                `json:"tenant"`
	Config WebhookDeliveryConfig `json:"config"`
	// Subscriptions and DeadLetters are carried across continue-as-new.
	Subscriptions []WebhookSubscription `json:"subscriptions,omitempty"`
	DeadLetters   []DeadLetter          `json:"deadLetters,omitempty"`
	// ContinueAsNewAfter, when > 0, continues as new after that many signals and
	// updates (tests; production follows Temporal's suggestion).
	ContinueAsNewAfter int `json:"continueAsNewAfter,omitempty"`
}

// WebhookRegistration is the payload of WebhookRegisterUpdate.
type WebhookRegistration struct {
	Subscription WebhookSubscription `json:"subscription"`
	// Config, when set, becomes the dispatcher's delivery policy from now on.
	Config *WebhookDeliveryConfig `json:"config,omitempty"`
}

// DeadLetter records a delivery that exhausted its retries.
type DeadLetter struct {
	WebhookID string `json:"webhookId,omitempty"` // "" for a run's callbackUrl
	URL       string `json:"url"`
	RunID     string `json:"runId"`
	EventID   string `json:"eventId"`
	EventType string `json:"eventType"`
	Sequence  int64  `json:"sequence"`
	Error     string `json:"error"`
	At        string `json:"at"`
	// DeliveryWorkflowID is the failed delivery workflow (Temporal UI).
	DeliveryWorkflowID string `json:"deliveryWorkflowId"`
}

// WebhookList answers WebhookListQuery.
type WebhookList struct {
	Tenant        string                `json:"tenant"`
	Subscriptions []WebhookSubscription `json:"subscriptions"`
	DeadLetters   []DeadLetter          `json:"deadLetters"`
}

// Error types of the webhook updates (the API maps them to HTTP).
const (
	ErrTypeSubscriptionNotFound = protocol.CodeSubscriptionNotFound
	ErrTypeTooManyWebhooks      = protocol.CodeTooManyWebhooks
	ErrTypeIdempotencyMismatch  = protocol.CodeIdempotencyMismatch
)

// WebhookDispatcher is a tenant's webhook registry and dispatcher (see the file
// comment).
func WebhookDispatcher(ctx workflow.Context, in WebhookDispatcherInput) error {
	d := &dispatcher{ctx: ctx, in: in}
	d.in.Config = d.in.Config.withDefaults()
	if err := workflow.SetQueryHandler(ctx, WebhookListQuery, func() (WebhookList, error) {
		return WebhookList{Tenant: d.in.Tenant, Subscriptions: orEmptySlice(d.in.Subscriptions), DeadLetters: orEmptySlice(d.in.DeadLetters)}, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, protocol.WebhookRegisteredQuery, func(id string) (bool, error) {
		return d.find(id) >= 0, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, WebhookRegisterUpdate, d.register,
		workflow.UpdateHandlerOptions{Validator: d.validateRegister}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, WebhookUnregisterUpdate, d.unregister,
		workflow.UpdateHandlerOptions{Validator: d.validateUnregister}); err != nil {
		return err
	}
	events := workflow.GetSignalChannel(ctx, workflows.WebhookEventsSignal)
	dead := workflow.GetSignalChannel(ctx, webhookDeadLetterSignal)
	for {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(events, func(c workflow.ReceiveChannel, _ bool) {
			var n workflows.WebhookNotice
			c.Receive(ctx, &n)
			d.dispatch(n)
		})
		sel.AddReceive(dead, func(c workflow.ReceiveChannel, _ bool) {
			var dl DeadLetter
			c.Receive(ctx, &dl)
			d.deadLetter(dl)
		})
		sel.Select(ctx)
		d.handled++
		if d.shouldContinueAsNew() {
			return d.continueAsNew(events, dead)
		}
	}
}

type dispatcher struct {
	ctx     workflow.Context
	in      WebhookDispatcherInput
	handled int
	// starts are the delivery starts not yet known to have started.
	starts []workflow.ChildWorkflowFuture
}

func orEmptySlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (d *dispatcher) find(id string) int {
	for i, s := range d.in.Subscriptions {
		if s.ID == id {
			return i
		}
	}
	return -1
}

func (d *dispatcher) validateRegister(reg WebhookRegistration) error {
	s := reg.Subscription
	if s.ID == "" || s.URL == "" || len(s.Events) == 0 {
		return temporal.NewApplicationError("a subscription needs an id, a URL and events", protocol.CodeValidation)
	}
	if err := CheckSubscriptionSize(s.URL, s.Tags); err != nil {
		return temporal.NewApplicationError(err.Error(), protocol.CodeValidation)
	}
	if len(s.Events) > len(workflows.WebhookEventTypes) || len(s.SignatureAlgorithms) > 2 || len(s.SealedSecret) > maxSealedSecret ||
		len(s.ID)+len(s.CreatedBy)+len(s.Digest)+len(s.SecretFingerprint) > 512 {
		return temporal.NewApplicationError("a subscription's events or ids are larger than any this host registers", protocol.CodeValidation)
	}
	if i := d.find(s.ID); i >= 0 {
		if d.in.Subscriptions[i].Digest != s.Digest {
			return temporal.NewApplicationError(fmt.Sprintf("webhook %s was registered with another request under this Idempotency-Key", s.ID), ErrTypeIdempotencyMismatch)
		}
		return nil // the same registration again: answered as the first
	}
	if len(d.in.Subscriptions) >= MaxWebhooksPerTenant {
		return temporal.NewApplicationError(fmt.Sprintf("tenant %s has %d webhooks, the most it may have", d.in.Tenant, MaxWebhooksPerTenant), ErrTypeTooManyWebhooks)
	}
	return nil
}

// WebhookRegistered answers WebhookRegisterUpdate: the stored subscription, and
// whether it was registered before (the same Idempotency-Key again).
type WebhookRegistered struct {
	Subscription WebhookSubscription `json:"subscription"`
	Replayed     bool                `json:"replayed,omitempty"`
}

func (d *dispatcher) register(ctx workflow.Context, reg WebhookRegistration) (WebhookRegistered, error) {
	if reg.Config != nil {
		d.in.Config = reg.Config.withDefaults()
	}
	if i := d.find(reg.Subscription.ID); i >= 0 {
		return WebhookRegistered{Subscription: d.in.Subscriptions[i], Replayed: true}, nil
	}
	s := reg.Subscription
	s.CreatedAt = workflows.FormatTime(workflow.Now(ctx))
	s.Started, s.DeadLettered = 0, 0
	d.in.Subscriptions = append(d.in.Subscriptions, s)
	d.handled++
	return WebhookRegistered{Subscription: s}, nil
}

func (d *dispatcher) validateUnregister(id string) error {
	if d.find(id) < 0 {
		return temporal.NewApplicationError(fmt.Sprintf("no webhook %q in tenant %s", id, d.in.Tenant), ErrTypeSubscriptionNotFound)
	}
	return nil
}

func (d *dispatcher) unregister(_ workflow.Context, id string) error {
	if i := d.find(id); i >= 0 {
		d.in.Subscriptions = slices.Delete(d.in.Subscriptions, i, i+1)
	}
	d.handled++
	return nil
}

// matches reports whether subscription s receives event typ of a run with these tags.
func (s WebhookSubscription) matches(typ string, tags []string) bool {
	if !slices.Contains(s.Events, typ) {
		return false
	}
	if len(s.Tags) == 0 {
		return true
	}
	for _, t := range tags {
		if slices.Contains(s.Tags, t) {
			return true
		}
	}
	return false
}

// dispatch starts one delivery per matching subscription (and the run's callback) for
// every event of the notice.
func (d *dispatcher) dispatch(n workflows.WebhookNotice) {
	for _, ev := range n.Events {
		for i := range d.in.Subscriptions {
			s := &d.in.Subscriptions[i]
			if s.matches(ev.Type, n.Tags) {
				s.Started++
				d.deliver(*s, ev)
			}
		}
		// A callback gets the types it always got: node events reach only the
		// subscriptions that ask for them (no gate: no notice recorded before them
		// carries one, and workers are rolled before the API that stamps the runs
		// which send them).
		if n.CallbackURL != "" && slices.Contains(workflows.WebhookEventTypesV1, ev.Type) {
			d.deliver(WebhookSubscription{URL: n.CallbackURL}, ev)
		}
	}
}

// WebhookDeliveryWorkflowID names the delivery of one event (by its eventId) to one
// subscription ("" for the run's callbackUrl): the same event to the same destination
// is one workflow, so a notice signalled twice delivers once.
func WebhookDeliveryWorkflowID(tenant, webhookID, eventID string) string {
	target := webhookID
	if target == "" {
		target = "callback"
	}
	return fmt.Sprintf("wop-webhook:%s:%s:%s", tenant, target, eventID)
}

// deliver starts the delivery of ev to subscription s (its zero value with a URL: the
// run's callback).
func (d *dispatcher) deliver(s WebhookSubscription, ev workflows.Event) {
	webhookID, url := s.ID, s.URL
	raw, _ := json.Marshal(ev)
	cfg := d.in.Config
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:            WebhookDeliveryWorkflowID(d.in.Tenant, webhookID, ev.EventID),
		TaskQueue:             workflow.GetInfo(d.ctx).TaskQueueName, // the dispatcher's own: the host's queue
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         fmt.Sprintf("Deliver %s #%d of run %s to %s", ev.Type, ev.Sequence, ev.RunID, url),
	}
	in := WebhookDeliveryInput{
		Dispatcher: protocol.WebhookDispatcherID(d.in.Tenant),
		Delivery: activities.WebhookDelivery{Tenant: d.in.Tenant, WebhookID: webhookID, URL: url, RunID: ev.RunID,
			EventType: ev.Type, Sequence: ev.Sequence, Event: raw, AttemptTimeout: cfg.AttemptTimeout, Major: s.Major,
			SealedSecret: s.SealedSecret, StandardWebhooks: slices.Contains(s.SignatureAlgorithms, activities.WebhookSignatureAlgoStandard)},
		Config:  cfg,
		EventID: ev.EventID,
	}
	f := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(d.ctx, opts), WebhookDeliveryWorkflowName, in)
	// Keep only the starts still in flight (continueAsNew waits for those).
	d.starts = slices.DeleteFunc(d.starts, func(f workflow.ChildWorkflowFuture) bool { return f.GetChildWorkflowExecution().IsReady() })
	d.starts = append(d.starts, f)
}

func (d *dispatcher) deadLetter(dl DeadLetter) {
	if dl.WebhookID != "" && d.find(dl.WebhookID) < 0 {
		return // its subscription was unregistered: nobody reads its dead letters
	}
	if len(dl.Error) > maxDeadLetterError {
		dl.Error = strings.ToValidUTF8(dl.Error[:maxDeadLetterError], "") + "…"
	}
	d.in.DeadLetters = append(d.in.DeadLetters, dl)
	n := max(len(d.in.DeadLetters)-maxDeadLetters, 0)
	for cutoff := workflow.Now(d.ctx).Add(-DeadLetterRetention); n < len(d.in.DeadLetters)-1; n++ {
		if at, err := time.Parse(time.RFC3339Nano, d.in.DeadLetters[n].At); err != nil || !at.Before(cutoff) {
			break // the oldest kept is within retention
		}
	}
	for size := deadLettersSize(d.in.DeadLetters[n:]); size > maxDeadLetterBytes && n < len(d.in.DeadLetters)-1; n++ {
		size -= deadLetterSize(d.in.DeadLetters[n])
	}
	if n > 0 {
		d.in.DeadLetters = slices.Clone(d.in.DeadLetters[n:])
	}
	if i := d.find(dl.WebhookID); i >= 0 && dl.WebhookID != "" {
		d.in.Subscriptions[i].DeadLettered++
	}
}

// deadLetterSize is about what a dead letter takes of the dispatcher's encoded state:
// its strings and a bound for its names and numbers.
func deadLetterSize(dl DeadLetter) int {
	return len(dl.WebhookID) + len(dl.URL) + len(dl.RunID) + len(dl.EventID) + len(dl.EventType) + len(dl.Error) + len(dl.At) + len(dl.DeliveryWorkflowID) + 160
}

func deadLettersSize(dls []DeadLetter) int {
	n := 0
	for _, dl := range dls {
		n += deadLetterSize(dl)
	}
	return n
}

func (d *dispatcher) shouldContinueAsNew() bool {
	if d.in.ContinueAsNewAfter > 0 && d.handled >= d.in.ContinueAsNewAfter {
		return true
	}
	return workflow.GetInfo(d.ctx).GetContinueAsNewSuggested()
}

// continueAsNew waits until every delivery started (a start in flight would be lost)
// and every update finished, takes in the signals already received, and continues as
// new with the subscriptions and dead letters.
func (d *dispatcher) continueAsNew(events, dead workflow.ReceiveChannel) error {
	for {
		for _, f := range d.starts {
			_ = f.GetChildWorkflowExecution().Get(d.ctx, nil) // a duplicate start fails: that delivery exists
		}
		d.starts = nil
		if err := workflow.Await(d.ctx, func() bool { return workflow.AllHandlersFinished(d.ctx) }); err != nil {
			return err
		}
		drained := false
		for {
			var n workflows.WebhookNotice
			if !events.ReceiveAsync(&n) {
				break
			}
			d.dispatch(n)
			drained = true
		}
		for {
			var dl DeadLetter
			if !dead.ReceiveAsync(&dl) {
				break
			}
			d.deadLetter(dl)
		}
		if !drained && len(d.starts) == 0 {
			break
		}
	}
	next := d.in
	next.Subscriptions = slices.Clone(d.in.Subscriptions)
	return workflow.NewContinueAsNewError(d.ctx, WebhookDispatcherWorkflowName, next)
}

// WebhookDeliveryInput starts a delivery workflow.
type WebhookDeliveryInput struct {
	// Dispatcher is the workflow id a dead letter is signalled to.
	Dispatcher string                     `json:"dispatcher"`
	Delivery   activities.WebhookDelivery `json:"delivery"`
	Config     WebhookDeliveryConfig      `json:"config"`
	EventID    string                     `json:"eventId"`
}

// WebhookDelivery delivers one event to one destination: the DeliverWebhook activity,
// retried as the config says; when it gives up, it signals a dead letter to the
// dispatcher and fails.
func WebhookDelivery(ctx workflow.Context, in WebhookDeliveryInput) (*activities.WebhookDeliveryResult, error) {
	cfg := in.Config.withDefaults()
	opts := workflow.ActivityOptions{
		StartToCloseTimeout:    cfg.AttemptTimeout + 10*time.Second,
		ScheduleToCloseTimeout: cfg.RetryFor,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: cfg.InitialInterval, BackoffCoefficient: 2, MaximumInterval: cfg.MaxInterval,
			MaximumAttempts: cfg.MaxAttempts, NonRetryableErrorTypes: []string{activities.ErrTypeWebhookRefused},
		},
		Summary: fmt.Sprintf("%s #%d → %s", in.Delivery.EventType, in.Delivery.Sequence, in.Delivery.URL),
	}
	var acts *activities.Activities
	var res activities.WebhookDeliveryResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), acts.DeliverWebhook, in.Delivery).Get(ctx, &res)
	if err == nil {
		return &res, nil
	}
	msg := err.Error()
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		msg = appErr.Message()
	}
	dl := DeadLetter{WebhookID: in.Delivery.WebhookID, URL: in.Delivery.URL, RunID: in.Delivery.RunID, EventID: in.EventID,
		EventType: in.Delivery.EventType, Sequence: in.Delivery.Sequence, Error: msg, At: workflows.FormatTime(workflow.Now(ctx)),
		DeliveryWorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID}
	_ = workflow.SignalExternalWorkflow(ctx, in.Dispatcher, "", webhookDeadLetterSignal, dl).Get(ctx, nil)
	return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("dead-lettered %s #%d of run %s for %s: %s",
		in.Delivery.EventType, in.Delivery.Sequence, in.Delivery.RunID, in.Delivery.URL, msg), protocol.CodeWebhookDeadLettered, err)
}
