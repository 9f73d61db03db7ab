package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
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
// request's span after the route.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		route := routeOf(c)
		if span := trace.SpanFromContext(c.Request().Context()); span.IsRecording() {
			span.SetName(c.Request().Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
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
// caller's traceparent becomes the span's parent.
func (s *Server) traced(h http.Handler) http.Handler {
	if s.cfg.TracerProvider == nil {
		return h
	}
	return otelhttp.NewHandler(h, "wop-api", otelhttp.WithTracerProvider(s.cfg.TracerProvider),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
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
