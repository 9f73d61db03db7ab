package api

import (
	"testing"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestRefusalsMapCodesToHTTP: a run refuses a resolve with an OpenWOP code only; the
// API answers each code with the status runs used to pick themselves, a recorded
// status (outcomes in older histories, older workers) is answered as recorded, and a
// code the table does not know is a 400.
func TestRefusalsMapCodesToHTTP(t *testing.T) {
	for _, c := range []struct {
		check workflows.ResolveCheck
		want  int
	}{
		{workflows.ResolveCheck{Code: protocol.CodeValidation}, 400},
		{workflows.ResolveCheck{Code: protocol.CodeValidation, Unprocessable: true}, 422},
		{workflows.ResolveCheck{Code: protocol.CodeUnauthenticated}, 401},
		{workflows.ResolveCheck{Code: protocol.CodeForbidden}, 403},
		{workflows.ResolveCheck{Code: protocol.CodeInterruptNotFound}, 404},
		{workflows.ResolveCheck{Code: protocol.CodeInterruptResolved}, 409},
		{workflows.ResolveCheck{Code: protocol.CodeApprovalPending}, 409},
		{workflows.ResolveCheck{Code: protocol.CodeRunStateConflict}, 409},
		{workflows.ResolveCheck{Code: protocol.CodeInterruptCancelled}, 409}, // lost to a cancel: interrupt_already_resolved
		{workflows.ResolveCheck{Status: 410, Code: protocol.CodeInterruptCancelled}, 409},
		{workflows.ResolveCheck{Status: 422, Code: protocol.CodeValidation}, 422},
		{workflows.ResolveCheck{Status: 409, Code: protocol.CodeInterruptResolved}, 409},
		{workflows.ResolveCheck{Code: "a_code_of_a_newer_worker"}, 400},
		{workflows.ResolveCheck{}, 400},
	} {
		e := checkError(&c.check)
		want := lostToCancel(c.check.Code)
		if want == "" {
			want = CodeValidation
		}
		if e.Status != c.want || e.Code != want {
			t.Errorf("%+v: answered %d %s, want %d %s", c.check, e.Status, e.Code, c.want, want)
		}
	}
}

// TestResolveAnswersARefusalByItsCode: over HTTP, a check and an outcome that carry
// a code and no status are answered with the table's status.
func TestResolveAnswersARefusalByItsCode(t *testing.T) {
	env := newTestEnv(t)
	r := env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: "r_1", WorkflowID: "conformance-approval", Status: "waiting-approval", CurrentNodeID: "gate",
			Interrupt: &workflows.PendingInterrupt{NodeID: "gate", InterruptID: "int_1", Kind: "approval", RequestedAt: "2026-01-01T00:00:00Z"}},
		check: workflows.ResolveCheck{Code: protocol.CodeValidation, Unprocessable: true, Message: "correlation orderId mismatch"},
	})
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"orderId":"x"}}`), 422, CodeValidation)
	r.check = workflows.ResolveCheck{Code: protocol.CodeInterruptCancelled, Message: "run r_1 was cancelled"}
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)

	r.check = workflows.ResolveCheck{OK: true, RunStatus: "running"}
	r.onSignal = func(r *fakeRun, _ string, arg any) {
		req := arg.(workflows.ResolveRequest)
		r.outcomes[req.RequestID] = workflows.ResolveOutcome{RequestID: req.RequestID, Code: protocol.CodeInterruptResolved, Message: "the interrupt was resolved by another request"}
	}
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"reject"}}`), 409, CodeInterruptResolved)
}
