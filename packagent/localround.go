package packagent

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/workflows"
)

// modelRoundLocalName is the registered name of activities.ModelRoundLocal.
const modelRoundLocalName = "ModelRoundLocal"

// localRound runs a model round as a local activity when the node's previous round was
// answered by the scripted mock (a deterministic fact: that round's result is in the
// history), or when it is the node's first round of the execution (GateFirstLocal). A scripted answer costs nothing to compute, and a local activity spares the
// round the activity task's round trips through Temporal: scheduled, started, completed
// and a second workflow task to read the result, about half of a conversation turn.
//
// ok=false means the round is the caller's to run as the ModelRound activity: the
// previous round came from another provider (or, before GateFirstLocal, there was
// none), the run started before
// local rounds existed, or the worker's provider turned out not to be the scripted mock
// (ModelRoundLocal refuses real providers; the node then stops trying until it continues
// as new), or the transcript began in an earlier execution of the run. Any other
// failure is the round's failure, as the activity's would be.
func (rt *packRuntime) localRound(in convo.ModelRoundInput) (out convo.ModelRoundResult, ok bool, err error) {
	a := rt.a
	if a.notLocal {
		return out, false, nil
	}
	if a.lastProvider != activities.ProviderMock && (a.lastProvider != "" || !rt.c.Changed(workflows.GateFirstLocal)) {
		return out, false, nil
	}
	if !rt.c.Changed(workflows.GateLocalRound) {
		return out, false, nil
	}
	// The scripted mock reads the whole transcript; messages appended by earlier
	// executions of the run are no longer in the machine, so such a round is an activity
	// (which reads them from the run).
	if a.m.TranscriptBase() > 0 || in.Transcript.To > a.m.TranscriptLen() {
		return out, false, nil
	}
	if err := rt.yieldTask(); err != nil {
		return out, true, err
	}
	msgs := a.m.Transcript(0, in.Transcript.To)
	lctx, cancel := workflow.WithCancel(rt.ctx)
	lctx = workflow.WithLocalActivityOptions(lctx, activities.LocalModelRoundOptions(activities.ModelRoundSummary(in)))
	f := workflow.ExecuteLocalActivity(lctx, modelRoundLocalName, activities.LocalModelRoundInput{Round: in, Messages: msgs})
	rt.c.BeginLocalWait()
	rt.await(f, cancel)
	rt.c.EndLocalWait()
	err = f.Get(lctx, &out)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeNotLocal {
		a.notLocal = true
		return convo.ModelRoundResult{}, false, nil
	}
	return out, true, err
}

// yieldTask ends the workflow task before a local round when the turn's local rounds
// have run in it for localYieldAfter (workflow time moves on with each local
// activity's result, as recorded in its marker, so the measure replays): the no-op
// Yield activity completes the task, and Temporal answers the queries and delivers the
// signals that came meanwhile before the task that reads the activity's result goes on
// with the turn, a few milliseconds later. A cancel that arrived is then seen before
// the round (ErrStopped). A turn of a few rounds never yields. (A timer would yield
// too, but Temporal fires timers up to a second late: history.timerProcessorMaxTimeShift.)
func (rt *packRuntime) yieldTask() error {
	if !rt.c.YieldDue() || !rt.c.Changed(workflows.GateLocalYield) {
		return nil
	}
	actx, cancel := workflow.WithCancel(rt.ctx)
	actx = workflow.WithActivityOptions(actx, activities.YieldOptions())
	var acts *activities.Activities
	f := workflow.ExecuteActivity(actx, acts.Yield)
	rt.awaitActivity(f, cancel)
	if err := f.Get(actx, nil); err != nil && !temporal.IsCanceledError(err) {
		return rt.newActivityError("yield the workflow task", err)
	}
	if rt.Stopped() || rt.ctx.Err() != nil {
		return fmt.Errorf("%w: the run was cancelled between local rounds", engine.ErrStopped)
	}
	return nil
}
