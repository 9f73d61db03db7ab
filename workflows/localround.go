package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
)

// localRoundVersion is the workflow.GetVersion change id of model rounds that run as the
// ModelRoundLocal local activity. Runs recorded before it run every round as the
// ModelRound activity and replay that way.
const localRoundVersion = "mock-round-local"

// modelRoundLocalName is the registered name of activities.ModelRoundLocal.
const modelRoundLocalName = "ModelRoundLocal"

// localRound runs a model round as a local activity when the node's previous round was
// answered by the scripted mock (a deterministic fact: that round's result is in the
// history). A scripted answer costs nothing to compute, and a local activity spares the
// round the activity task's round trips through Temporal: scheduled, started, completed
// and a second workflow task to read the result, about half of a conversation turn.
//
// ok=false means the round is the caller's to run as the ModelRound activity: the
// previous round came from another provider (or there was none), the run started before
// local rounds existed, or the worker's provider turned out not to be the scripted mock
// (ModelRoundLocal refuses real providers; the node then stops trying until it continues
// as new). Any other failure is the round's failure, as the activity's would be.
func (rt *packRuntime) localRound(in activities.ModelRoundInput) (out activities.ModelRoundResult, ok bool, err error) {
	a := rt.a
	if a.lastProvider != activities.ProviderMock || a.notLocal {
		return out, false, nil
	}
	if workflow.GetVersion(rt.ctx, localRoundVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return out, false, nil
	}
	msgs, err := a.Transcript(in.Transcript)
	if err != nil {
		return out, false, err
	}
	lctx := workflow.WithLocalActivityOptions(rt.ctx, activities.LocalModelRoundOptions(activities.ModelRoundSummary(in)))
	err = workflow.ExecuteLocalActivity(lctx, modelRoundLocalName, activities.LocalModelRoundInput{Round: in, Messages: msgs}).Get(lctx, &out)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeNotLocal {
		a.notLocal = true
		return activities.ModelRoundResult{}, false, nil
	}
	return out, true, err
}
