package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/wop-dev/wop/internal/telemetry"
	"github.com/wop-dev/wop/protocol"
)

// httpMetrics are the API's wop_http_* metrics, labelled by the route pattern (never
// the URL: run ids and tokens would make a series per request).
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// earlier counts the reads of a run's closed executions by kind (segments.go).
	earlier *prometheus.CounterVec
}

// DurationBuckets are the buckets (seconds) of wop_http_request_duration_seconds.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wop_http_requests_total", Help: "API requests by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wop_http_request_duration_seconds", Help: "API request durations by method and route pattern (streams last as long as they are open).",
			Buckets: DurationBuckets,
		}, []string{"method", "route"}),
		earlier: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wop_events_earlier_reads_total",
			Help: "Reads of a run's closed executions for its older events: records (events decoded from its history), links (its start event, to find an older execution), query (a query, which makes a worker replay it: executions that did not record their events).",
		}, []string{"read"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.earlier} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			// A second API in one process (a restart of the dev stack's) counts on.
			switch c {
			case m.requests:
				m.requests = are.ExistingCollector.(*prometheus.CounterVec)
			case m.duration:
				m.duration = are.ExistingCollector.(*prometheus.HistogramVec)
			case m.earlier:
				m.earlier = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return m, nil
}

// routeKey is where dispatchVerb records the colon verb's route pattern.
const routeKey = "wop.route"

// routeOf is the route pattern of the request, "unmatched" for none.
func routeOf(c echo.Context) string {
	if r, ok := c.Get(routeKey).(string); ok {
		return r
	}
	if p := c.Path(); p != "" {
		return p
	}
	return "unmatched"
}

// observe is the outermost middleware: it counts the request once its response is
// written (the request logger renders errors before returning them) and names the
// request's span after the route, with OpenWOP's attributes of the run it is about.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		span := trace.SpanFromContext(c.Request().Context())
		var note *spanRun
		if span.IsRecording() {
			note = &spanRun{}
			c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), spanRunKey{}, note)))
		}
		err := next(c)
		route := routeOf(c)
		if note != nil {
			span.SetName(c.Request().Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
			span.SetAttributes(s.spanAttributes(c, note)...)
		}
		if s.metrics != nil {
			status := c.Response().Status
			if !c.Response().Committed && err != nil {
				status = s.toAPIError(err, c).Status
			}
			s.metrics.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
			s.metrics.duration.WithLabelValues(c.Request().Method, route).Observe(time.Since(start).Seconds())
		}
		return err
	}
}

// traced wraps h in an otelhttp span per request when a tracer provider is set; the
// caller's traceparent becomes the span's parent. A signed interrupt token is a
// credential and travels in the path of the token routes, which otelhttp records
// (url.path): the span sees those paths with the token replaced by {token}, and the
// handler the request as it came.
func (s *Server) traced(h http.Handler) http.Handler {
	if s.cfg.TracerProvider == nil {
		return h
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, ok := r.Context().Value(realURLKey{}).(*url.URL); ok {
			r.URL = u
		}
		h.ServeHTTP(w, r)
	})
	traced := otelhttp.NewHandler(inner, "wop-api", otelhttp.WithTracerProvider(s.cfg.TracerProvider),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if red, ok := redactTokenPath(r.URL.EscapedPath()); ok {
			shown := *r.URL
			shown.Path, shown.RawPath, shown.RawQuery = red, "", ""
			r = r.WithContext(context.WithValue(r.Context(), realURLKey{}, r.URL))
			r.URL = &shown
		}
		traced.ServeHTTP(w, r)
	})
}

// realURLKey holds the URL of a request whose span sees a redacted one.
type realURLKey struct{}

// redactTokenPath replaces the token of a token route's path (/v1/interrupts/{token},
// and major 2's /interrupts/{token}) with "{token}".
func redactTokenPath(p string) (string, bool) {
	for _, prefix := range []string{"/v1/interrupts/", "/interrupts/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" {
			return prefix + "{token}", true
		}
	}
	return "", false
}

// spanRunKey holds a request's spanRun in its context.
type spanRunKey struct{}

// spanRun is what a request's handlers learned of the run the request is about, for
// its span: a created or forked run (startRun), a token's run and interrupt
// (tokenTarget). Requests about many runs (listings) note none.
type spanRun struct {
	mu                                        sync.Mutex
	runID, nodeID, interruptKind, interruptID string
	forkSource                                string
}

// noteSpanRun records the run a request is about, when the request is traced.
func noteSpanRun(ctx context.Context, f func(*spanRun)) {
	if n, ok := ctx.Value(spanRunKey{}).(*spanRun); ok {
		n.mu.Lock()
		f(n)
		n.mu.Unlock()
	}
}

// spanAttributes are OpenWOP's attributes of a request's span: the protocol version
// and the caller's tenant, and for a request about one run the run's (its id from the
// path or the handlers, its workflow id as this process knows it) and the node's.
func (s *Server) spanAttributes(c echo.Context, n *spanRun) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String(telemetry.AttrProtocolVersion, protocol.VersionOf(majorOf(c)))}
	if p := principalOf(c); p != nil {
		attrs = append(attrs, attribute.String(telemetry.AttrTenantID, p.Tenant))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	runID, nodeID := n.runID, n.nodeID
	if runID == "" {
		runID = pathIDForLog(c, "runId")
	}
	if nodeID == "" {
		if id := c.Param("nodeId"); validateID("nodeId", id) == nil {
			nodeID = id
		}
	}
	if runID == "" {
		return attrs
	}
	for _, a := range telemetry.RunAttributes(runID) {
		if a.Key != telemetry.AttrTenantID && a.Key != telemetry.AttrProtocolVersion {
			attrs = append(attrs, a)
		}
	}
	if nodeID != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrNodeID, nodeID))
	}
	if n.interruptID != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrInterruptKind, n.interruptKind), attribute.String(telemetry.AttrInterruptID, n.interruptID))
	}
	if n.forkSource != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrReplaySource, n.forkSource), attribute.String(telemetry.AttrReplayMode, "replay"))
	}
	return attrs
}

// Kinds of wop_events_earlier_reads_total.
const (
	earlierRecords = "records"
	earlierLinks   = "links"
	earlierQuery   = "query"
)

// countEarlier counts one read of a closed execution.
func (s *Server) countEarlier(read string) {
	if s.metrics != nil {
		s.metrics.earlier.WithLabelValues(read).Inc()
	}
}

func (s *Server) handleMetrics(c echo.Context) error {
	if s.cfg.MetricsHandler == nil {
		return notFound("metrics are not served by this process")
	}
	s.cfg.MetricsHandler.ServeHTTP(c.Response(), c.Request())
	return nil
}
