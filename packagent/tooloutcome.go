package packagent

// Tool calls whose outcome is unknown. A call of a write, external or undeclared tool
// is attempted once (unless its binding says the target is idempotent), and a failure
// the call may have survived — it timed out, its worker died mid-call (a heartbeat or
// start-to-close timeout), the connection broke after the request went out
// (activities.ErrTypeOutcomeUnknown) — is not a failure the model may simply retry:
// the effect may have been applied. The model reads
//
//	{"error": "tool T: outcome unknown, do not repeat; idempotency key K (…)",
//	 "status": "outcome_unknown", "idempotencyKey": "K"}
//
// and a call of the same tool with the same arguments later in the same turn carries
// the same idempotency key K (for an activity binding, the same ActivityID), so a
// target that honours the key applies the effect once even when the model repeats it.
//
// Runs recorded before this (GateToolOutcome, asked where the new code would first
// act differently) read "tool T failed: …" and gave every call its own key.

import (
	"encoding/json"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/workflows"
)

// ToolStatusOutcomeUnknown is the "status" of a tool result whose call may have been
// applied.
const ToolStatusOutcomeUnknown = "outcome_unknown"

// mayHaveApplied reports whether a failed tool activity may have acted: it timed out
// after it could have started (start-to-close, heartbeat, schedule-to-close), or its
// executor says the request went out unanswered.
func mayHaveApplied(err error) bool {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return te.TimeoutType() != enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
	}
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeOutcomeUnknown
}

// unknownOutcome is the result the model reads of a call that may have been applied.
func unknownOutcome(in convo.ToolCallInput, err error) *convo.ToolCallResult {
	b, _ := json.Marshal(map[string]string{
		"error": fmt.Sprintf("tool %s: outcome unknown, do not repeat; idempotency key %s (%s; the call may have been applied)",
			in.Tool, in.IdempotencyKey, failureMessage(err)),
		"status":         ToolStatusOutcomeUnknown,
		"idempotencyKey": in.IdempotencyKey,
	})
	return &convo.ToolCallResult{Content: b, IsError: true}
}

// idempotencyKey is the key of call in: its own (activities.ToolIdempotencyKey), or,
// for a write, external or undeclared tool called earlier in this turn with the same
// arguments, that call's.
func (rt *packRuntime) idempotencyKey(tenant string, in convo.ToolCallInput) string {
	key := activities.ToolIdempotencyKey(tenant, in)
	if rt.a.pack.Tools[in.Tool].Effect() == "read" {
		return key
	}
	sig := in.Tool + "\x00" + canonicalArgs(in.Args)
	if prev, ok := rt.a.turnKeys[sig]; ok {
		if rt.c.Changed(workflows.GateToolOutcome) {
			return prev
		}
		return key
	}
	if rt.a.turnKeys == nil {
		rt.a.turnKeys = map[string]string{}
	}
	rt.a.turnKeys[sig] = key
	return key
}

// canonicalArgs is raw with its objects' keys sorted and no insignificant space, so
// arguments that mean the same compare equal; raw itself when it is not JSON. (Unlike
// canonicalJSON, numbers compare by value: 1 and 1.0 are one call's arguments.)
func canonicalArgs(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// reuseActivityID prepares the scheduling of an activity with ActivityID id: one this
// turn already scheduled (the same call waiting out an outage, or a repeat with the
// same idempotency key) is scheduled again only after a workflow task boundary, when
// the SDK has let go of the earlier one (it refuses two commands with one id in one
// workflow task): the no-op Yield activity ends the task first.
func (rt *packRuntime) reuseActivityID(ctx workflow.Context, id string) {
	if rt.a.turnActivityIDs[id] {
		var acts *activities.Activities
		yctx, cancel := workflow.WithCancel(ctx)
		f := workflow.ExecuteActivity(workflow.WithActivityOptions(yctx, activities.YieldOptions()), acts.Yield)
		rt.awaitActivity(f, cancel)
		_ = f.Get(yctx, nil) // a cancel is seen by the call scheduled next, on ctx
		return
	}
	if rt.a.turnActivityIDs == nil {
		rt.a.turnActivityIDs = map[string]bool{}
	}
	rt.a.turnActivityIDs[id] = true
}

// newTurn forgets what the previous turn's tool calls recorded.
func (a *packAgent) newTurn() {
	a.turnKeys, a.turnActivityIDs, a.turnModel = nil, nil, nil
}
