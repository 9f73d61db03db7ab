// Package telemetry gives the host's processes their metrics and traces.
//
// Metrics: one Prometheus registry per process, served at /metrics (the API's port; the
// worker's health address), holding the Go runtime and process collectors, the
// Temporal SDK's own metrics (temporal_*) and the host's, prefixed wop_:
//
//	wop_http_requests_total{method,route,status}    API requests (api package)
//	wop_http_request_duration_seconds{method,route}
//	wop_interrupts_waiting{waiting_kind,answered_by} what waits on people now, from
//	wop_interrupts_waiting_oldest_seconds{…}         Temporal visibility (api package)
//	wop_interrupts_waiting_age_seconds{…}
//	wop_runs_started_total{openwop_workflow_id}     recorded by the run workflow through
//	wop_runs_ended_total{openwop_workflow_id,openwop_run_status} the SDK's replay-aware
//	wop_turns_total{openwop_workflow_id,role}       handler, so a replayed task records
//	wop_human_wait_seconds{waiting_kind}            nothing twice (workflows/metrics.go)
//	wop_model_rounds_total{provider,model,outcome}  recorded around the activities
//	wop_model_tokens_total{provider,model,direction} (ActivityMetrics)
//	wop_tool_calls_total{tool,binding,outcome}
//
// The SDK's metrics and the wop_ ones recorded through it go through OpenTelemetry's
// metric SDK and its Prometheus exporter into the same registry; counters gain the
// _total suffix and durations the _seconds suffix there, and the wop_ ones get their
// HELP text from Help. openwop_workflow_id is OpenWOP's workflow id (a pack's is the
// pack id), not a Temporal workflow id, which is a run's id and never a label.
//
// Traces: off unless an OTLP endpoint is configured with the standard variables
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; protocol from
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, http/protobuf by default, http/json or grpc;
// OTEL_TRACES_EXPORTER=none turns them off; OTEL_SERVICE_NAME names the service). Then
// the Temporal SDK's tracing interceptor follows every workflow start, signal, query,
// workflow task and activity, and the API's requests are spans (otelhttp) whose trace
// context a caller may pass in traceparent. Spans about a run carry OpenWOP's openwop.*
// attributes (runspans.go).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/wop-dev/wop/workflows"
)

// DurationBuckets are the histogram buckets (seconds) of every duration the host
// exports: from a fast API call to a person answering days later.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600}

// Help is the HELP text of each wop_ metric recorded through the Temporal SDK's metrics
// handler, by instrument name (the exporter adds _total and _seconds).
var Help = map[string]string{
	workflows.MetricRunsStarted: "Runs started, by OpenWOP workflow id (a pack's workflow id is its pack id).",
	workflows.MetricRunsEnded:   "Runs that ended, by OpenWOP workflow id and final run status (completed, failed, cancelled).",
	workflows.MetricTurns:       "Conversation turns recorded, by OpenWOP workflow id and the turn's role (user, agent, system).",
	workflows.MetricHumanWait: "How long a person took to answer, by waiting kind: an interrupt from its request to its resolution, " +
		"a conversation from the agent's turn to its user's next message.",
	MetricModelRounds: "Model rounds run by this worker, by provider, model and outcome (ok, failed).",
	MetricModelTokens: "Tokens of the model rounds run by this worker, by provider, model and direction (input, output).",
	MetricToolCalls:   "Tool calls run by this worker, by tool, where it ran (binding: http, activity, mcp, go, mock, none) and outcome (ok, error: a result the model reads, failed).",
}

// view gives the instruments their stream: the wop_ ones their HELP text, durations
// (unit s) the host's buckets. One view does both: two matching views would export an
// instrument twice.
func view(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	s := sdkmetric.Stream{Name: i.Name, Description: i.Description, Unit: i.Unit}
	help, named := Help[i.Name]
	if named && s.Description == "" {
		s.Description = help
	}
	seconds := i.Kind == sdkmetric.InstrumentKindHistogram && i.Unit == "s"
	if seconds {
		s.Aggregation = sdkmetric.AggregationExplicitBucketHistogram{Boundaries: DurationBuckets}
	}
	return s, named || seconds
}

// Options configure New.
type Options struct {
	// Service names the process in traces ("wop-api", "wop-worker", "wop");
	// OTEL_SERVICE_NAME overrides it.
	Service string
	// Getenv reads the OTEL_* variables; nil reads none (traces off).
	Getenv func(string) string
	// Logger receives export errors. Nil discards them.
	Logger *slog.Logger
}

// Telemetry is a process's metrics registry and, when configured, its tracer.
type Telemetry struct {
	// Registry holds every metric the process exports.
	Registry *prometheus.Registry
	meters   *sdkmetric.MeterProvider
	tracers  *sdktrace.TracerProvider // nil: traces off
	temporal client.MetricsHandler
	tracing  interceptor.Interceptor
	log      *slog.Logger
}

// New builds the process's telemetry. It starts no goroutine of its own beyond the
// trace exporter's; Shutdown flushes and stops it.
func New(ctx context.Context, o Options) (*Telemetry, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	t := &Telemetry{Registry: prometheus.NewRegistry(), log: o.Logger}
	t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(t.Registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(view))
	t.temporal = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                t.meters.Meter("go.temporal.io/sdk"),
		UseMonotonicCounters: true,
		OnError:              func(err error) { o.Logger.Warn("Temporal SDK metric not recorded", "error", err) },
	})
	if err := t.startTracing(ctx, o); err != nil {
		return nil, err
	}
	return t, nil
}

// startTracing builds the tracer provider when an OTLP endpoint is configured.
func (t *Telemetry) startTracing(ctx context.Context, o Options) error {
	env := func(name string) string { return strings.TrimSpace(o.Getenv(name)) }
	if strings.EqualFold(env("OTEL_TRACES_EXPORTER"), "none") ||
		env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil
	}
	protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	// The endpoint comes from Getenv (the traces one as given, the general one plus the
	// signal's path, as the OTLP specification says); the exporters read the headers,
	// TLS, compression and timeout variables from the environment themselves.
	base, full := strings.TrimRight(env("OTEL_EXPORTER_OTLP_ENDPOINT"), "/"), env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	var client otlptrace.Client
	switch protocol {
	case "", "http/protobuf":
		if full == "" {
			full = base + "/v1/traces"
		}
		client = otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(full))
	case "http/json":
		if full == "" {
			full = base + "/v1/traces"
		}
		jc, err := newJSONTraceClient(full, env)
		if err != nil {
			return err
		}
		client = jc
	case "grpc":
		if full == "" {
			full = base
		}
		client = otlptracegrpc.NewClient(otlptracegrpc.WithEndpointURL(full))
	default:
		return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: this host exports traces over http/protobuf, http/json or grpc", protocol)
	}

	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return fmt.Errorf("OTLP trace exporter: %w", err)
	}
	service := env("OTEL_SERVICE_NAME")
	if service == "" {
		service = o.Service
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return fmt.Errorf("trace resource: %w", err)
	}
	t.tracers = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { t.log.Warn("OpenTelemetry", "error", err) }))
	tr, err := temporalotel.NewTracer(temporalotel.TracerOptions{Tracer: t.tracers.Tracer("go.temporal.io/sdk")})
	if err != nil {
		return fmt.Errorf("build the Temporal tracing interceptor: %w", err)
	}
	t.tracing = interceptor.NewTracingInterceptor(runTracer{tr})
	return nil
}

// TracerProvider is the tracer provider, or nil when traces are off.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil || t.tracers == nil {
		return nil
	}
	return t.tracers
}

// Tracing reports whether traces are exported.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracers != nil }

// ClientOptions adds the Temporal SDK metrics handler and the interceptors (traces when
// on, the wop_ activity metrics) to Temporal client options. Workers built from the
// client use them too.
func (t *Telemetry) ClientOptions(o *client.Options) {
	if t == nil {
		return
	}
	o.MetricsHandler = t.temporal
	if t.tracing != nil {
		// RunSpans runs first: it records what a span is about before the tracing
		// interceptor starts it.
		o.Interceptors = append(o.Interceptors, &RunSpans{}, t.tracing)
	}
	o.Interceptors = append(o.Interceptors, &ActivityMetrics{})
}

// Handler serves the registry in the Prometheus text format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{Registry: t.Registry})
}

// Shutdown flushes the metric and trace pipelines.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tracers != nil {
		errs = append(errs, t.tracers.Shutdown(ctx))
	}
	errs = append(errs, t.meters.Shutdown(ctx))
	return errors.Join(errs...)
}
