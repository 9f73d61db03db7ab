package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/workflows"
)

// queuedRun is a run whose resolve update Temporal accepts at once and the run decides
// only once decide is closed; its result carries the events 5..6.
func queuedRun(env *testEnv, id string) *fakeRun {
	return env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: id, Status: "waiting-approval"}, outcomes: map[string]workflows.ResolveOutcome{},
		decide: make(chan struct{}),
		update: func(r *fakeRun, rid string, u workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
			o := workflows.ResolveOutcome{RequestID: rid, Applied: true, RunStatus: "running"}
			r.outcomes[rid] = o
			return workflows.ResolveUpdateResult{
				ResolveCheck: workflows.ResolveCheck{OK: true, Outcome: &o, Tenant: "default"}, Attempt: u.Attempt,
				Events: &workflows.ResolveEvents{After: 4, Events: teEvents(5, 6), LastSequence: 6},
			}, nil
		},
	})
}

// A resolve the run decides after Guards.ResolveWait: the 202 comes at the wait, from
// the one update call, which goes on; a poll of the caller's tenant waits for it and is
// answered from the events the update carried (no events or snapshot query, one update
// call for the turn); a poll of another tenant does not wait and is answered 404 by the
// run's own check.
func TestQueuedResolveHandsItsEventsToThePoll(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Guards.ResolveWait = 200 * time.Millisecond })
	r := queuedRun(env, "r_q")

	start := time.Now()
	rec := env.do("POST", "/v1/runs/r_q/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	took := time.Since(start)
	require.Equal(t, http.StatusAccepted, rec.Code, "%s", rec.Body)
	assert.Equal(t, "queued", decode[map[string]string](t, rec.Body.Bytes())["status"])
	assert.Less(t, took, 2*time.Second, "the 202 comes at the resolve wait (200 ms)")
	call := env.srv.updates.call("r_q")
	require.NotNil(t, call, "the update's call goes on after the 202")

	start = time.Now()
	other := env.do("GET", "/v1/runs/r_q/events/poll?lastSequence=4&timeout=5", otherKey, "")
	env.expectError(other, 404, CodeNotFound)
	assert.Less(t, time.Since(start), 2*time.Second, "another tenant's poll does not wait for the call")
	env.ft.mu.Lock()
	r.eventQueries, r.snapQueries = 0, 0 // the other tenant's poll took the run's own check
	env.ft.mu.Unlock()

	polled := make(chan *httptest.ResponseRecorder, 1)
	go func() { polled <- env.do("GET", "/v1/runs/r_q/events/poll?lastSequence=4&timeout=5", fullKey, "") }()
	require.Eventually(t, func() bool { return call.polls.Load() == 1 }, 5*time.Second, 5*time.Millisecond, "the poll waits for the update")
	close(r.decide)
	var page struct {
		Events []workflows.Event `json:"events"`
	}
	poll := <-polled
	require.Equal(t, http.StatusOK, poll.Code, "%s", poll.Body)
	require.NoError(t, json.Unmarshal(poll.Body.Bytes(), &page))
	assert.Equal(t, []int64{5, 6}, seqs(page.Events), "the turn's events, once each")

	<-call.done
	env.ft.mu.Lock()
	defer env.ft.mu.Unlock()
	assert.Equal(t, 1, r.updateCalls, "one update call for the turn")
	assert.Zero(t, r.eventQueries+r.snapQueries, "no events or snapshot query")
	assert.Empty(t, r.signals)
	assert.Len(t, r.outcomes, 1)
}

// A resolve the run decides within the wait is answered its outcome by the same call.
func TestResolveUpdateCallDecidedWithinTheWait(t *testing.T) {
	env := newTestEnv(t)
	r := queuedRun(env, "r_d")
	close(r.decide)
	rec := env.do("POST", "/v1/runs/r_d/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	rec = env.do("GET", "/v1/runs/r_d/events/poll?lastSequence=4&timeout=1", fullKey, "")
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	env.ft.mu.Lock()
	defer env.ft.mu.Unlock()
	assert.Equal(t, 1, r.updateCalls)
	assert.Zero(t, r.eventQueries+r.snapQueries)
}

// Shutdown cancels a resolve update's call still in flight after its 202 and waits for
// it; the run's gate is free again.
func TestShutdownEndsTheResolveUpdateCall(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Guards.ResolveWait = 50 * time.Millisecond })
	queuedRun(env, "r_s")
	rec := env.do("POST", "/v1/runs/r_s/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	require.Equal(t, http.StatusAccepted, rec.Code, "%s", rec.Body)
	call := env.srv.updates.call("r_s")
	require.NotNil(t, call)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, env.srv.Shutdown(ctx), "Shutdown waits for the call")
	select {
	case <-call.done:
	default:
		t.Fatal("Shutdown returned before the call ended")
	}
	assert.ErrorIs(t, call.err, context.Canceled)
	assert.Nil(t, env.srv.updates.call("r_s"), "the gate is free")
}

// Past the wait, a resolve whose update Temporal has not accepted yet is answered only
// once it is: 202 when the run has not decided it, its outcome when the accepting task
// decided it too.
func TestResolveAnsweredOnceTemporalAcceptsIt(t *testing.T) {
	const wait = 50 * time.Millisecond
	env := newTestEnv(t, func(c *Config) { c.Guards.ResolveWait = wait })
	for _, decided := range []bool{false, true} {
		id := "r_late"
		if decided {
			id = "r_late_decided"
		}
		r := queuedRun(env, id)
		r.hold, r.entered = make(chan struct{}), make(chan struct{}, 1)
		if decided {
			close(r.decide)
		}
		start := time.Now()
		answered := make(chan int, 1)
		go func() {
			answered <- env.do("POST", "/v1/runs/"+id+"/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`).Code
		}()
		<-r.entered
		require.Eventually(t, func() bool { return time.Since(start) > 3*wait }, 5*time.Second, wait, "the wait is over")
		select {
		case code := <-answered:
			t.Fatalf("answered %d before Temporal accepted the update", code)
		default:
		}
		close(r.hold)
		code := <-answered
		if decided {
			assert.Equal(t, http.StatusOK, code, "decided as Temporal accepted it")
		} else {
			assert.Equal(t, http.StatusAccepted, code, "queued once Temporal accepted it")
		}
	}
}

// An update call Temporal leaves unanswered past Guards.ResolveWait (its waiter lost on
// the server) is sent again with the same Update ID, and the resolve is answered by the
// attempt that Temporal answers: the outcome, once.
func TestUnansweredUpdateCallIsSentAgain(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Guards.ResolveWait = 200 * time.Millisecond })
	r := queuedRun(env, "r_u")
	close(r.decide)
	env.ft.mu.Lock()
	r.unanswered = 1
	env.ft.mu.Unlock()

	rec := env.do("POST", "/v1/runs/r_u/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	env.ft.mu.Lock()
	defer env.ft.mu.Unlock()
	require.Len(t, r.updateIDs, 2, "the unanswered attempt and the one sent again")
	assert.Equal(t, r.updateIDs[0], r.updateIDs[1], "sent again under the same Update ID")
	assert.Len(t, r.outcomes, 1, "the resolve applied once")
	assert.Empty(t, r.signals)
}

// A resolve whose update Temporal neither accepts nor decides: past Guards.ResolveWait
// it waits Guards.AcceptWait more for the acceptance, then answers 503 with the
// Idempotency-Key to repeat it with (the request may still be taken); meanwhile the
// call keeps sending the update under its Update ID, never a second resolve.
func TestUnacceptedResolveAnswers503AfterTheAcceptWait(t *testing.T) {
	env := newTestEnv(t, func(c *Config) {
		c.Guards.ResolveWait = 100 * time.Millisecond
		c.Guards.AcceptWait = 300 * time.Millisecond
	})
	r := queuedRun(env, "r_n")
	env.ft.mu.Lock()
	r.unanswered = 1 << 20
	env.ft.mu.Unlock()

	start := time.Now()
	rec := env.do("POST", "/v1/runs/r_n/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	took := time.Since(start)
	env.expectError(rec, http.StatusServiceUnavailable, CodeUnavailable)
	var e struct {
		Details map[string]any `json:"details"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s", rec.Body)
	assert.NotEmpty(t, e.Details["idempotencyKey"], "the key to repeat the request with: %s", rec.Body)
	assert.GreaterOrEqual(t, took, 400*time.Millisecond, "the resolve wait and the accept wait")
	assert.Less(t, took, 3*time.Second, "the accept wait, not the default 30 s")
	env.ft.mu.Lock()
	defer env.ft.mu.Unlock()
	require.NotEmpty(t, r.updateIDs)
	for _, id := range r.updateIDs {
		assert.Equal(t, r.updateIDs[0], id, "every attempt under the same Update ID")
	}
	assert.Empty(t, r.outcomes, "nothing applied")
	assert.Empty(t, r.signals)
}

// An answer that carries the outcome is the outcome, however long its decoding takes:
// Temporal answers the update just before the resolve wait ends and the handle takes
// longer than that to decode the result; the resolve answers 200 with it, not 202
// queued (an acceptance read from how long the handle took would say queued).
func TestDecidedAnswerIsNotTakenForAnAcceptance(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Guards.ResolveWait = 150 * time.Millisecond })
	r := queuedRun(env, "r_d")
	close(r.decide)
	env.ft.mu.Lock()
	r.hold, r.decodeDelay = make(chan struct{}), 150*time.Millisecond
	env.ft.mu.Unlock()
	time.AfterFunc(100*time.Millisecond, func() { close(r.hold) })

	rec := env.do("POST", "/v1/runs/r_d/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
	env.ft.mu.Lock()
	defer env.ft.mu.Unlock()
	assert.Equal(t, 1, r.updateCalls, "one update call")
	assert.Len(t, r.outcomes, 1)
}
