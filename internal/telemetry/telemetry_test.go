package telemetry

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/workflows"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestTracesAreOffWithoutAnEndpoint(t *testing.T) {
	for _, env := range []map[string]string{
		nil,
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"},
	} {
		tel, err := New(context.Background(), Options{Service: "wop-test", Getenv: envOf(env)})
		require.NoError(t, err)
		assert.False(t, tel.Tracing())
		assert.Nil(t, tel.TracerProvider())
		var o client.Options
		tel.ClientOptions(&o)
		assert.NotNil(t, o.MetricsHandler)
		require.Len(t, o.Interceptors, 1, "only the activity metrics")
		require.NoError(t, tel.Shutdown(context.Background()))
	}
}

func TestTracesOnWithAnEndpoint(t *testing.T) {
	tel, err := New(context.Background(), Options{Service: "wop-test", Getenv: envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})})
	require.NoError(t, err)
	assert.True(t, tel.Tracing())
	var o client.Options
	tel.ClientOptions(&o)
	assert.Len(t, o.Interceptors, 3, "run spans, tracing and activity metrics")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = tel.Shutdown(ctx)

	_, err = New(context.Background(), Options{Getenv: envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"})})
	require.ErrorContains(t, err, "http/protobuf, http/json or grpc")
}

func TestHandlerServesTheTemporalMetricsInPrometheusFormat(t *testing.T) {
	tel, err := New(context.Background(), Options{})
	require.NoError(t, err)
	var o client.Options
	tel.ClientOptions(&o)
	o.MetricsHandler.WithTags(map[string]string{"waiting_kind": "approval"}).Timer("wop_human_wait").Record(90e9)
	o.MetricsHandler.Counter("wop_runs_started").Inc(2)
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	assert.Contains(t, body, "wop_runs_started_total 2")
	assert.Contains(t, body, `wop_human_wait_seconds_bucket{waiting_kind="approval",le="300"} 1`)
	assert.Contains(t, body, `wop_human_wait_seconds_bucket{waiting_kind="approval",le="60"} 0`)
	assert.True(t, strings.Contains(body, "go_goroutines"))
}

// TestEveryWopMetricHasHelp records each wop_ metric once, as the workflow and the
// activity interceptor do, and requires a HELP text for each, the buckets of the
// durations, and one family per metric.
func TestEveryWopMetricHasHelp(t *testing.T) {
	tel, err := New(context.Background(), Options{})
	require.NoError(t, err)
	var o client.Options
	tel.ClientOptions(&o)
	h := o.MetricsHandler
	for name := range Help {
		switch name {
		case workflows.MetricHumanWait:
			h.WithTags(map[string]string{workflows.LabelWaitingKind: "approval"}).Timer(name).Record(2e9)
		default:
			h.Counter(name).Inc(1)
		}
	}
	fams, err := tel.Registry.Gather()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "wop_") {
			continue
		}
		seen[f.GetName()] = true
		assert.NotEmpty(t, f.GetHelp(), "HELP of %s", f.GetName())
		if f.GetName() == "wop_human_wait_seconds" {
			assert.Len(t, f.GetMetric()[0].GetHistogram().GetBucket(), len(DurationBuckets), "the host's buckets")
		}
	}
	for _, want := range []string{"wop_runs_started_total", "wop_runs_ended_total", "wop_turns_total", "wop_human_wait_seconds",
		"wop_model_rounds_total", "wop_model_tokens_total", "wop_tool_calls_total"} {
		assert.True(t, seen[want], "%s exported", want)
	}
	assert.Len(t, seen, len(Help), "one family per metric: %v", seen)
}
