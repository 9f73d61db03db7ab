package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/wop-dev/wop/internal/telemetry"
)

// startTelemetry builds the process's metrics registry and, when OTEL_EXPORTER_OTLP_*
// configures an endpoint, its trace exporter (internal/telemetry). handler serves
// /metrics, or is nil when WOP_METRICS=false. stop flushes traces on exit.
func startTelemetry(ctx context.Context, service string, env func(string) string, logger *slog.Logger) (tel *telemetry.Telemetry, handler http.Handler, stop func(), err error) {
	serve, err := envBool(env, "WOP_METRICS", true)
	if err != nil {
		return nil, nil, nil, err
	}
	tel, err = telemetry.New(ctx, telemetry.Options{Service: service, Getenv: env, Logger: logger})
	if err != nil {
		return nil, nil, nil, err
	}
	if serve {
		handler = tel.Handler()
	}
	if tel.Tracing() {
		logger.Info("Exporting traces over OTLP", "service", service)
	}
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			logger.Warn("Telemetry shutdown", "error", err)
		}
	}
	return tel, handler, stop, nil
}
