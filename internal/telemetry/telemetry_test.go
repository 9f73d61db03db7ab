package telemetry

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
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
	assert.Len(t, o.Interceptors, 2, "tracing and activity metrics")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = tel.Shutdown(ctx)

	_, err = New(context.Background(), Options{Getenv: envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})})
	require.ErrorContains(t, err, "http/protobuf or grpc")
}

func TestHandlerServesTheTemporalMetricsInPrometheusFormat(t *testing.T) {
	tel, err := New(context.Background(), Options{})
	require.NoError(t, err)
	var o client.Options
	tel.ClientOptions(&o)
	o.MetricsHandler.WithTags(map[string]string{"kind": "approval"}).Timer("wop_human_wait").Record(90e9)
	o.MetricsHandler.Counter("wop_runs_started").Inc(2)
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	assert.Contains(t, body, "wop_runs_started_total 2")
	assert.Contains(t, body, `wop_human_wait_seconds_bucket{kind="approval",le="300"} 1`)
	assert.Contains(t, body, `wop_human_wait_seconds_bucket{kind="approval",le="60"} 0`)
	assert.True(t, strings.Contains(body, "go_goroutines"))
}
