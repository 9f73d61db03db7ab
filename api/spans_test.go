package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wop-dev/wop/internal/telemetry"
	"github.com/wop-dev/wop/workflows"
)

// TestRequestSpansNameTheirRun: a request about a run has OpenWOP's run attributes on
// its span (the workflow id learned from the run's snapshot), and a token route's
// span shows the path without the token.
func TestRequestSpansNameTheirRun(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	env := newTestEnv(t, func(c *Config) { c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)) })
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_span1", WorkflowID: "conformance-approval", Status: "waiting-approval"}})
	require.Equal(t, 200, env.do("GET", "/v1/runs/r_span1", fullKey, "").Code)
	env.do("GET", "/v1/interrupts/not.a-real-token", "", "")
	// The same under major 2: the bound id's run, major 2's version, the token hidden.
	require.Equal(t, 200, env.do("GET", "/runs/default~2Fr_span1", fullKey, "").Code)
	env.do("GET", "/interrupts/not.a-real-v2-token", "", "")

	spans := map[string]map[string]string{}
	for _, sp := range rec.Ended() {
		attrs := map[string]string{}
		for _, a := range sp.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		spans[sp.Name()] = attrs
	}
	runV2 := spans["GET /runs/:runId"]
	require.NotNil(t, runV2, "%v", spans)
	assert.Equal(t, "r_span1", runV2[telemetry.AttrRunID])
	assert.Equal(t, "conformance-approval", runV2[telemetry.AttrWorkflowID])
	assert.Equal(t, "2.0", runV2[telemetry.AttrProtocolVersion])
	tokV2 := spans["GET /interrupts/:token"]
	require.NotNil(t, tokV2, "%v", spans)
	assert.Equal(t, "/interrupts/{token}", tokV2["url.path"])
	for k, v := range tokV2 {
		assert.False(t, strings.Contains(v, "not.a-real-v2-token"), "%s holds the token", k)
	}
	run := spans["GET /v1/runs/:runId"]
	require.NotNil(t, run, "%v", spans)
	assert.Equal(t, "r_span1", run[telemetry.AttrRunID])
	assert.Equal(t, "conformance-approval", run[telemetry.AttrWorkflowID])
	assert.Equal(t, "default", run[telemetry.AttrTenantID])
	assert.Equal(t, telemetry.ProtocolVersion, run[telemetry.AttrProtocolVersion])
	tok := spans["GET /v1/interrupts/:token"]
	require.NotNil(t, tok, "%v", spans)
	assert.Equal(t, "/v1/interrupts/{token}", tok["url.path"])
	for k, v := range tok {
		assert.False(t, strings.Contains(v, "not.a-real-token"), "%s holds the token", k)
	}
}

// TestSpansNameDiscoverysProtocolVersion: spans name the protocol version discovery
// advertises.
func TestSpansNameDiscoverysProtocolVersion(t *testing.T) {
	env := newTestEnv(t)
	disc := decode[map[string]any](t, env.do("GET", "/.well-known/openwop", "", "").Body.Bytes())
	assert.Equal(t, disc["protocolVersion"], telemetry.ProtocolVersion)
}
