package activities

// ConformanceEffect is the effect of the conformance node core.conformance.side-effect
// (workflows/effectnode.go): a real, if small, effect on purpose, so a replay fork that
// performed it would show in the run's effect ledger and the worker's log. It logs the
// effect and answers the effect's key.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
)

// ConformanceEffectInput names one execution of the node.
type ConformanceEffectInput struct {
	RunID   string `json:"runId"`
	NodeID  string `json:"nodeId"`
	Ordinal int    `json:"ordinal"`
}

// ConformanceEffectResult is the effect's key: the same for every attempt of the
// execution.
type ConformanceEffectResult struct {
	EffectKey string `json:"effectKey"`
}

// ConformanceEffectOptions are the activity options of ConformanceEffect.
func ConformanceEffectOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retryPolicy(time.Second, 4*time.Second, 3)}
}

// ConformanceEffect performs the node's effect.
func (a *Activities) ConformanceEffect(ctx context.Context, in ConformanceEffectInput) (*ConformanceEffectResult, error) {
	sum := sha256.Sum256(fmt.Appendf(nil, "openwop:conformance-effect\x00%s\x00%s\x00%d", in.RunID, in.NodeID, in.Ordinal))
	key := hex.EncodeToString(sum[:16])
	a.logger.Info("Conformance side effect performed", "runId", in.RunID, "nodeId", in.NodeID, "ordinal", in.Ordinal,
		"effectKey", key, "attempt", activity.GetInfo(ctx).Attempt)
	return &ConformanceEffectResult{EffectKey: key}, nil
}
