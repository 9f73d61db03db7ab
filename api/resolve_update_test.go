package api

import (
	"net/http"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// A run whose worker has the resolve update is resolved by it alone (no query, no
// signal), and each way the update ends maps to the answer the query and the signal
// gave: the recorded outcome, a refusal with the run's check, another tenant's run,
// a run that ended first, and an accepted update cut short by the run's end.
func TestResolveByUpdate(t *testing.T) {
	env := newTestEnv(t)
	applied := func(r *fakeRun, id string, u workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
		o := workflows.ResolveOutcome{RequestID: id, Applied: true, RunStatus: "running"}
		if prev, ok := r.outcomes[id]; ok {
			return workflows.ResolveUpdateResult{ResolveCheck: workflows.ResolveCheck{OK: true, Outcome: &prev, Tenant: "default"}, Attempt: "an earlier call"}, nil
		}
		r.outcomes[id] = o
		return workflows.ResolveUpdateResult{ResolveCheck: workflows.ResolveCheck{OK: true, Outcome: &o, Tenant: "default"}, Attempt: u.Attempt}, nil
	}
	r := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_u", Status: "waiting-approval"}, outcomes: map[string]workflows.ResolveOutcome{}, update: applied})
	first := env.do("POST", "/v1/runs/r_u/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`, "Idempotency-Key", "u-1")
	if first.Code != http.StatusOK || first.Header().Get(HeaderIdempotentReplay) != "" || len(r.signals) != 0 {
		t.Fatalf("applied: %d %s %v, %d signals", first.Code, first.Body, first.Header(), len(r.signals))
	}
	again := env.do("POST", "/v1/runs/r_u/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`, "Idempotency-Key", "u-1")
	if again.Code != http.StatusOK || again.Header().Get(HeaderIdempotentReplay) != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("repeated: %d %s %v", again.Code, again.Body, again.Header())
	}
	if len(r.outcomes) != 1 {
		t.Fatalf("outcomes %v", r.outcomes)
	}

	refuse := func(check workflows.ResolveCheck) func(*fakeRun, string, workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
		return func(*fakeRun, string, workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
			return workflows.ResolveUpdateResult{}, temporal.NewNonRetryableApplicationError("resolve refused", workflows.ErrTypeResolveRefused, nil, check)
		}
	}
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_409"}, update: refuse(workflows.ResolveCheck{Status: 409, Code: CodeInterruptResolved, Message: "already resolved", Tenant: "default"})})
	env.expectError(env.do("POST", "/v1/runs/r_409/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_other"}, update: refuse(workflows.ResolveCheck{Tenant: "other"})})
	env.expectError(env.do("POST", "/v1/runs/r_other/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 404, CodeNotFound)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_gone"}, update: refuse(workflows.ResolveCheck{OK: true, Tenant: "default", CurrentStatus: protocol.StatusCancelled})})
	env.expectError(env.do("POST", "/v1/runs/r_gone/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)

	// The run ended before applying it: the handler's answer has no outcome.
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_end"}, update: func(*fakeRun, string, workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
		return workflows.ResolveUpdateResult{ResolveCheck: workflows.ResolveCheck{Terminal: true, CurrentStatus: protocol.StatusCompleted, Tenant: "default"}}, nil
	}})
	env.expectError(env.do("POST", "/v1/runs/r_end/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)

	// Accepted, then the execution closed before the handler answered: the outcome the
	// run recorded answers, through the outcome watch.
	cut := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_cut", Status: "waiting-approval"}, outcomes: map[string]workflows.ResolveOutcome{},
		update: func(r *fakeRun, id string, _ workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
			r.outcomes[id] = workflows.ResolveOutcome{RequestID: id, Status: 409, Code: CodeInterruptResolved, Message: "another request won"}
			return workflows.ResolveUpdateResult{}, temporal.NewNonRetryableApplicationError("Workflow Update failed because the Workflow completed before the Update completed.", "AcceptedUpdateCompletedWorkflow", nil)
		}})
	env.expectError(env.do("POST", "/v1/runs/r_cut/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)
	if len(cut.signals) != 0 {
		t.Errorf("%d signals", len(cut.signals))
	}
}

// While one resolve of a run is in flight as an update, another resolve of the same
// run from this process validates and signals instead; once the update is done, the
// next resolve is an update again.
func TestOneResolveUpdatePerRunInFlight(t *testing.T) {
	env := newTestEnv(t)
	updates := 0
	r := env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: "r_one", Status: "waiting-approval"}, outcomes: map[string]workflows.ResolveOutcome{},
		check: workflows.ResolveCheck{OK: true, Tenant: "default"},
		update: func(r *fakeRun, id string, u workflows.ResolveUpdateRequest) (workflows.ResolveUpdateResult, error) {
			updates++
			o := workflows.ResolveOutcome{RequestID: id, Applied: true, RunStatus: "running"}
			r.outcomes[id] = o
			return workflows.ResolveUpdateResult{ResolveCheck: workflows.ResolveCheck{OK: true, Outcome: &o, Tenant: "default"}, Attempt: u.Attempt}, nil
		},
		hold: make(chan struct{}), entered: make(chan struct{}, 1),
	})
	first := make(chan int)
	go func() {
		first <- env.do("POST", "/v1/runs/r_one/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`, "Idempotency-Key", "one-1").Code
	}()
	<-r.entered
	second := env.do("POST", "/v1/runs/r_one/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`, "Idempotency-Key", "one-2")
	env.ft.mu.Lock()
	signals := len(r.signals)
	env.ft.mu.Unlock()
	if signals != 1 {
		t.Fatalf("the second resolve, while the first was an update in flight: %d signals (answer %d %s)", signals, second.Code, second.Body)
	}
	close(r.hold)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the update's resolve answered %d", code)
	}
	r.entered = make(chan struct{}, 1)
	third := env.do("POST", "/v1/runs/r_one/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`, "Idempotency-Key", "one-3")
	env.ft.mu.Lock()
	defer env.ft.mu.Unlock()
	if third.Code != http.StatusOK || updates != 2 || len(r.signals) != 1 {
		t.Fatalf("after the update: %d %s, %d updates, %d signals", third.Code, third.Body, updates, len(r.signals))
	}
}
