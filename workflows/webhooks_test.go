package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// TestRunNotifiesWebhooks: a run signals its tenant's dispatcher with the events
// webhooks may receive, batched, and signals the terminal event before it closes.
func TestRunNotifiesWebhooks(t *testing.T) {
	in := fixtureInput(t, "conformance-approval", `{"payload":{"doc":"x"}}`)
	in.CallbackURL = "https://receiver.example/hook"
	in.Tags = []string{"prod"}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(startOpts(in.RunID))
	Register(env, nil)
	var mu sync.Mutex
	var notices []WebhookNotice
	env.OnSignalExternalWorkflow(mock.Anything, WebhookDispatcherID("t1"), mock.Anything, WebhookEventsSignal, mock.Anything).
		Return(func(_, _, _, _ string, arg any) error {
			mu.Lock()
			defer mu.Unlock()
			notices = append(notices, arg.(WebhookNotice))
			return nil
		})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(ResolveSignal, ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "key_test"})
	}, time.Minute)
	env.ExecuteWorkflow(RunWorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	var types [][]string
	for _, n := range notices {
		require.Equal(t, in.RunID, n.RunID)
		require.Equal(t, in.CallbackURL, n.CallbackURL)
		require.Equal(t, []string{"prod"}, n.Tags)
		var ts []string
		for _, e := range n.Events {
			ts = append(ts, e.Type)
		}
		types = append(types, ts)
	}
	require.Equal(t, [][]string{
		{EvRunStarted, EvInterruptRequested, EvApprovalRequested},
		{EvInterruptResolved, EvApprovalReceived, EvRunCompleted},
	}, types, "one signal per batch of events, the terminal one before the run closed")
}

// TestRunReadsEndedWhileClosing: while Temporal takes the notice of the terminal
// event, the run already reads as ended: the snapshot says completed with nothing
// pending, the events page is terminal, and a resolve is refused.
func TestRunReadsEndedWhileClosing(t *testing.T) {
	in := fixtureInput(t, "conformance-approval", `{"payload":{"doc":"x"}}`)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(startOpts(in.RunID))
	Register(env, nil)
	var (
		checked bool
		snap    Snapshot
		page    EventsPage
		check   ResolveCheck
		qerr    error
	)
	env.OnSignalExternalWorkflow(mock.Anything, WebhookDispatcherID("t1"), mock.Anything, WebhookEventsSignal, mock.Anything).
		Return(func(_, _, _, _ string, arg any) error {
			evs := arg.(WebhookNotice).Events
			if evs[len(evs)-1].Type != EvRunCompleted {
				return nil
			}
			// Every coroutine of the run waits for this signal's result.
			checked = true
			v, err := env.QueryWorkflow(SnapshotQuery)
			if qerr = err; err != nil {
				return nil
			}
			if qerr = v.Get(&snap); qerr != nil {
				return nil
			}
			if v, qerr = env.QueryWorkflow(EventsQuery, EventsRequest{After: -1}); qerr != nil {
				return nil
			}
			if qerr = v.Get(&page); qerr != nil {
				return nil
			}
			if v, qerr = env.QueryWorkflow(ValidateResolveQuery, ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`)}); qerr != nil {
				return nil
			}
			qerr = v.Get(&check)
			return nil
		})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(ResolveSignal, ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "key_test"})
	}, time.Minute)
	env.ExecuteWorkflow(RunWorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.True(t, checked, "the terminal event was signalled")
	require.NoError(t, qerr)
	require.Equal(t, protocol.StatusCompleted, snap.Status)
	require.NotEmpty(t, snap.CompletedAt)
	require.Empty(t, snap.Interrupts)
	require.Nil(t, snap.Interrupt)
	require.True(t, page.Terminal)
	require.Equal(t, EvRunCompleted, page.Events[len(page.Events)-1].Type)
	require.False(t, check.OK, "a resolve is refused: %+v", check)
	require.Equal(t, protocol.StatusCompleted, check.CurrentStatus)
}

// TestWebhookDispatcher: registration and unregistration are validated updates;
// matching events start one delivery workflow per subscription (by event type and
// tags) and per run callback; a dead letter is kept; the dispatcher continues as new
// with its subscriptions.
func TestWebhookDispatcher(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	Register(env, nil)
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
		update(WebhookRegisterUpdate, sub("wh_all", []string{EvRunCompleted, EvInterruptRequested}), nil)
		update(WebhookRegisterUpdate, sub("wh_prod", []string{EvRunCompleted}, "prod"), nil)
		update(WebhookRegisterUpdate, sub("wh_gone", []string{EvRunCompleted}), nil)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		update(WebhookRegisterUpdate, sub("wh_all", []string{EvRunCompleted, EvInterruptRequested}), &dupErr) // idempotent
		bad := sub("wh_all", []string{EvRunFailed})
		bad.Subscription.Digest = "another body"
		update(WebhookRegisterUpdate, bad, &mismatchErr)
		update(WebhookUnregisterUpdate, "wh_gone", nil)
		update(WebhookUnregisterUpdate, "wh_nope", &missingErr)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(WebhookEventsSignal, WebhookNotice{RunID: "r1", Tags: []string{"dev"}, CallbackURL: "https://cb.example/x", Events: []Event{
			{EventID: "evt-r1-0", RunID: "r1", Type: EvRunStarted, Payload: json.RawMessage(`{}`)},
			{EventID: "evt-r1-3", RunID: "r1", Type: EvInterruptRequested, Sequence: 3, Payload: json.RawMessage(`{}`)},
			{EventID: "evt-r1-9", RunID: "r1", Type: EvRunCompleted, Sequence: 9, Payload: json.RawMessage(`{}`)},
		}})
		env.SignalWorkflow(WebhookEventsSignal, WebhookNotice{RunID: "r2", Tags: []string{"prod"}, Events: []Event{
			{EventID: "evt-r2-5", RunID: "r2", Type: EvRunCompleted, Sequence: 5, Payload: json.RawMessage(`{}`)},
		}})
		env.SignalWorkflow(webhookDeadLetterSignal, DeadLetter{WebhookID: "wh_all", URL: "https://r.example/wh_all", RunID: "r0", EventType: EvRunFailed, Error: "HTTP 500"})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(WebhookListQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&list))
		env.SignalWorkflow(WebhookEventsSignal, WebhookNotice{RunID: "r3"}) // the 8th message: continue as new
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
		require.Equal(t, WebhookDispatcherID("t1"), d.Dispatcher)
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
			Register(env, nil)
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
				Delivery: activities.WebhookDelivery{Tenant: "t1", WebhookID: "wh_1", URL: "https://r.example/", RunID: "r", EventType: EvRunCompleted, Sequence: 9},
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
