package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestWebhookDispatcher: registration and unregistration are validated updates;
// matching events start one delivery workflow per subscription (by event type and
// tags) and per run callback; a dead letter is kept; the dispatcher continues as new
// with its subscriptions; it answers whether a webhook id is registered.
func TestWebhookDispatcher(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	register(env)
	var mu sync.Mutex
	var deliveries []WebhookDeliveryInput
	env.OnWorkflow(WebhookDeliveryWorkflowName, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in WebhookDeliveryInput) (*activities.WebhookDeliveryResult, error) {
			mu.Lock()
			defer mu.Unlock()
			deliveries = append(deliveries, in)
			return &activities.WebhookDeliveryResult{Status: 204, Attempt: 1}, nil
		})
	sub := func(id string, events []string, tags ...string) WebhookRegistration {
		return WebhookRegistration{Subscription: WebhookSubscription{ID: id, URL: "https://r.example/" + id, Events: events, Tags: tags, Digest: "d-" + id}}
	}
	var dupErr, missingErr, mismatchErr error
	var list WebhookList
	registered := map[string]bool{}
	update := func(name string, arg any, onErr *error) {
		env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) {
				if onErr != nil {
					*onErr = err
				}
			},
			OnAccept:   func() {},
			OnComplete: func(any, error) {},
		}, arg)
	}
	env.RegisterDelayedCallback(func() {
		update(WebhookRegisterUpdate, sub("wh_all", []string{protocol.EvRunCompleted, protocol.EvInterruptRequested}), nil)
		update(WebhookRegisterUpdate, sub("wh_prod", []string{protocol.EvRunCompleted}, "prod"), nil)
		update(WebhookRegisterUpdate, sub("wh_gone", []string{protocol.EvRunCompleted}), nil)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		update(WebhookRegisterUpdate, sub("wh_all", []string{protocol.EvRunCompleted, protocol.EvInterruptRequested}), &dupErr) // idempotent
		bad := sub("wh_all", []string{protocol.EvRunFailed})
		bad.Subscription.Digest = "another body"
		update(WebhookRegisterUpdate, bad, &mismatchErr)
		update(WebhookUnregisterUpdate, "wh_gone", nil)
		update(WebhookUnregisterUpdate, "wh_nope", &missingErr)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.WebhookEventsSignal, workflows.WebhookNotice{RunID: "r1", Tags: []string{"dev"}, CallbackURL: "https://cb.example/x", Events: []workflows.Event{
			{EventID: "evt-r1-0", RunID: "r1", Type: protocol.EvRunStarted, Payload: json.RawMessage(`{}`)},
			{EventID: "evt-r1-3", RunID: "r1", Type: protocol.EvInterruptRequested, Sequence: 3, Payload: json.RawMessage(`{}`)},
			{EventID: "evt-r1-9", RunID: "r1", Type: protocol.EvRunCompleted, Sequence: 9, Payload: json.RawMessage(`{}`)},
		}})
		env.SignalWorkflow(workflows.WebhookEventsSignal, workflows.WebhookNotice{RunID: "r2", Tags: []string{"prod"}, Events: []workflows.Event{
			{EventID: "evt-r2-5", RunID: "r2", Type: protocol.EvRunCompleted, Sequence: 5, Payload: json.RawMessage(`{}`)},
		}})
		env.SignalWorkflow(webhookDeadLetterSignal, DeadLetter{WebhookID: "wh_all", URL: "https://r.example/wh_all", RunID: "r0", EventType: protocol.EvRunFailed, Error: "HTTP 500"})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(WebhookListQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&list))
		for _, id := range []string{"wh_all", "wh_gone"} {
			v, err := env.QueryWorkflow(protocol.WebhookRegisteredQuery, id)
			require.NoError(t, err)
			var ok bool
			require.NoError(t, v.Get(&ok))
			registered[id] = ok
		}
		env.SignalWorkflow(workflows.WebhookEventsSignal, workflows.WebhookNotice{RunID: "r3"}) // the 8th message: continue as new
	}, 4*time.Second)
	env.ExecuteWorkflow(WebhookDispatcherWorkflowName, WebhookDispatcherInput{Tenant: "t1", ContinueAsNewAfter: 8})
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "continued as new: %v", env.GetWorkflowError())

	require.NoError(t, dupErr, "the same registration again is answered, not refused")
	require.ErrorContains(t, mismatchErr, "another request under this Idempotency-Key")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(missingErr, &appErr))
	require.Equal(t, ErrTypeSubscriptionNotFound, appErr.Type())

	got := map[string]bool{}
	for _, d := range deliveries {
		got[d.Delivery.WebhookID+" "+d.Delivery.EventType+" "+d.Delivery.RunID] = true
		require.Equal(t, protocol.WebhookDispatcherID("t1"), d.Dispatcher)
	}
	require.Equal(t, map[string]bool{
		"wh_all interrupt.requested r1": true, "wh_all run.completed r1": true, // its two types
		" run.started r1": true, " interrupt.requested r1": true, " run.completed r1": true, // the callback gets them all
		"wh_all run.completed r2": true, "wh_prod run.completed r2": true, // wh_prod only for tag prod
	}, got)

	require.Len(t, list.Subscriptions, 2)
	require.Equal(t, "wh_all", list.Subscriptions[0].ID)
	require.EqualValues(t, 3, list.Subscriptions[0].Started)
	require.EqualValues(t, 1, list.Subscriptions[0].DeadLettered)
	require.Len(t, list.DeadLetters, 1)
	require.Equal(t, map[string]bool{"wh_all": true, "wh_gone": false}, registered, "the registered query the activities ask")
}

// TestWebhookDeliveryDeadLetters: a delivery whose activity fails until its attempts
// run out signals a dead letter to its dispatcher and fails; a refused destination is
// not retried.
func TestWebhookDeliveryDeadLetters(t *testing.T) {
	for _, c := range []struct {
		name     string
		fail     error
		attempts int
	}{
		{"retried", errors.New("POST answered HTTP 500"), 3},
		{"refused", temporal.NewNonRetryableApplicationError("169.254.169.254 is a link-local or cloud metadata address", activities.ErrTypeWebhookRefused, nil), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			register(env)
			var mu sync.Mutex
			calls := 0
			env.RegisterActivityWithOptions(func(context.Context, activities.WebhookDelivery) (*activities.WebhookDeliveryResult, error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				return nil, c.fail
			}, activity.RegisterOptions{Name: "DeliverWebhook"})
			var dead []DeadLetter
			env.OnSignalExternalWorkflow(mock.Anything, "wop-webhooks:t1", mock.Anything, webhookDeadLetterSignal, mock.Anything).
				Return(func(_, _, _, _ string, arg any) error { dead = append(dead, arg.(DeadLetter)); return nil })
			env.ExecuteWorkflow(WebhookDeliveryWorkflowName, WebhookDeliveryInput{
				Dispatcher: "wop-webhooks:t1", EventID: "evt-r-9",
				Delivery: activities.WebhookDelivery{Tenant: "t1", WebhookID: "wh_1", URL: "https://r.example/", RunID: "r", EventType: protocol.EvRunCompleted, Sequence: 9},
				Config:   WebhookDeliveryConfig{MaxAttempts: 3, InitialInterval: time.Second},
			})
			require.True(t, env.IsWorkflowCompleted())
			require.Error(t, env.GetWorkflowError())
			require.Equal(t, c.attempts, calls)
			require.Len(t, dead, 1)
			require.Equal(t, "wh_1", dead[0].WebhookID)
			require.Equal(t, "evt-r-9", dead[0].EventID)
			require.NotEmpty(t, dead[0].Error)
		})
	}
}

// register registers the webhook workflows on a test environment.
func register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(WebhookDispatcher, workflow.RegisterOptions{Name: WebhookDispatcherWorkflowName})
	env.RegisterWorkflowWithOptions(WebhookDelivery, workflow.RegisterOptions{Name: WebhookDeliveryWorkflowName})
}

// TestDispatcherStateIsBounded: whatever a tenant registers, and however many
// deliveries dead-letter, the state a dispatcher continues as new with stays under
// MaxDispatcherStateBytes: a subscription past the bounds, or one too many, is refused
// before it is written, and the dead letters kept are the newest that fit.
func TestDispatcherStateIsBounded(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	register(env)
	long := func(c byte, n int) string { return string(bytes.Repeat([]byte{c}, n)) }
	url := "https://r.example/" + long('u', activities.MaxWebhookURLBytes-len("https://r.example/"))
	tags := []string{long('a', 256), long('b', 256), long('c', 256), long('d', 256)} // url and tags: MaxSubscriptionBytes
	sub := func(i int) WebhookRegistration {
		return WebhookRegistration{Subscription: WebhookSubscription{ID: fmt.Sprintf("wh_%020d", i), URL: url, Events: workflows.WebhookEventTypes,
			Tags: tags, SecretFingerprint: "0123abcd", CreatedBy: long('k', 64), Digest: "sha256:" + long('0', 64),
			SignatureAlgorithms: []string{activities.WebhookSignatureAlgoV1, activities.WebhookSignatureAlgoStandard}, SealedSecret: long('s', maxSealedSecret)}}
	}
	var refused []error
	update := func(arg WebhookRegistration) {
		env.UpdateWorkflow(WebhookRegisterUpdate, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { refused = append(refused, err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, arg)
	}
	const deadLetters = 150
	env.RegisterDelayedCallback(func() {
		big := sub(-1)
		big.Subscription.Tags = append(big.Subscription.Tags, "e")
		update(big)
		for i := range MaxWebhooksPerTenant + 1 {
			update(sub(i))
		}
		for i := range deadLetters {
			env.SignalWorkflow(webhookDeadLetterSignal, DeadLetter{WebhookID: sub(i % MaxWebhooksPerTenant).Subscription.ID, URL: url,
				RunID: long('r', 128), EventID: fmt.Sprintf("evt-%0124d", i), EventType: protocol.EvInterruptRequested, Sequence: int64(i),
				Error: long('x', 64<<10), At: "2026-12-03T06:00:00.000Z", DeliveryWorkflowID: long('w', 300)})
		}
	}, time.Second)
	env.ExecuteWorkflow(WebhookDispatcherWorkflowName, WebhookDispatcherInput{Tenant: "t1", ContinueAsNewAfter: MaxWebhooksPerTenant + deadLetters})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "continued as new: %v", env.GetWorkflowError())
	require.Len(t, refused, 2, "the oversized subscription and the one past MaxWebhooksPerTenant")
	require.ErrorContains(t, refused[0], "at most 3072 bytes")
	require.ErrorContains(t, refused[1], "the most it may have")

	var next WebhookDispatcherInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Len(t, next.Subscriptions, MaxWebhooksPerTenant)
	require.NotEmpty(t, next.DeadLetters)
	require.Equal(t, int64(deadLetters-1), next.DeadLetters[len(next.DeadLetters)-1].Sequence, "the newest dead letters are kept")
	size := proto.Size(can.Input)
	t.Logf("the largest dispatcher state: %d bytes, %d dead letters", size, len(next.DeadLetters))
	require.Less(t, size, MaxDispatcherStateBytes)
}
