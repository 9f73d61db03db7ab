package telemetry

import (
	"cmp"
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
)

// Names of the metrics ActivityMetrics records (through the activity's metrics handler,
// so they carry the SDK's namespace and task queue tags too).
const (
	MetricModelRounds = "wop_model_rounds"
	MetricModelTokens = "wop_model_tokens"
	MetricToolCalls   = "wop_tool_calls"
)

// ActivityMetrics is a worker interceptor that counts model rounds, their tokens and
// tool calls from the activities' inputs and results: the activities themselves stay
// free of metric code. Set it on the Temporal client (ClientOptions does) and every
// worker of the client uses it.
type ActivityMetrics struct {
	interceptor.InterceptorBase
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (*ActivityMetrics) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &activityMetrics{}
	a.Next = next
	return a
}

type activityMetrics struct {
	interceptor.ActivityInboundInterceptorBase
}

// toolBinding is implemented by a tool call result that knows where the tool ran (an
// HTTP endpoint, a Temporal activity, an MCP server, ...).
type toolBinding interface{ ToolBinding() string }

func (a *activityMetrics) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	var input any
	if len(in.Args) > 0 {
		input = in.Args[0]
	}
	m := activity.GetMetricsHandler(ctx)
	switch activity.GetInfo(ctx).ActivityType.Name {
	case "ModelRound", "ModelRoundLocal":
		if isNotLocal(err) {
			break // a local round refused: the workflow runs it as the ModelRound activity
		}
		provider, model, outcome := "", "", "ok"
		switch mi := input.(type) {
		case convo.ModelRoundInput:
			provider = mi.Provider
		case activities.LocalModelRoundInput:
			provider = mi.Round.Provider
		}
		if r, ok := res.(*convo.ModelRoundResult); ok && r != nil && err == nil {
			provider, model = r.Provider, r.Model
			tags := map[string]string{"provider": provider, "model": model}
			m.WithTags(withKV(tags, "direction", "input")).Counter(MetricModelTokens).Inc(int64(r.Usage.InputTokens))
			m.WithTags(withKV(tags, "direction", "output")).Counter(MetricModelTokens).Inc(int64(r.Usage.OutputTokens))
		}
		if err != nil {
			outcome = "failed"
		}
		m.WithTags(map[string]string{"provider": cmp.Or(provider, "unknown"), "model": cmp.Or(model, "unknown"), "outcome": outcome}).Counter(MetricModelRounds).Inc(1)
	case "ToolCall":
		tool, binding, outcome := "", "", "ok"
		if ti, ok := input.(convo.ToolCallInput); ok {
			tool = ti.Tool
		}
		switch r := res.(type) {
		case *convo.ToolCallResult:
			if r != nil && r.IsError {
				outcome = "error"
			}
		}
		if b, ok := res.(toolBinding); ok {
			binding = b.ToolBinding()
		}
		if err != nil {
			outcome = "failed"
		}
		m.WithTags(map[string]string{"tool": cmp.Or(tool, "unknown"), "binding": cmp.Or(binding, "none"), "outcome": outcome}).Counter(MetricToolCalls).Inc(1)
	}
	return res, err
}

func withKV(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// isNotLocal reports whether err is ModelRoundLocal's refusal of a provider that is not
// the scripted mock.
func isNotLocal(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeNotLocal
}
