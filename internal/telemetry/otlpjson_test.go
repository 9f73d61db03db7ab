package telemetry

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A span exported with OTEL_EXPORTER_OTLP_PROTOCOL=http/json arrives as OTLP's JSON: a
// POST of application/json to /v1/traces with the configured headers, ids in hex and
// the span kind a number.
func TestTracesExportOverHTTPJSON(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []map[string]any
		hdr    http.Header
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rd = zr
		}
		var doc map[string]any
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(rd).Decode(&doc) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies, hdr = append(bodies, doc), r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer sink.Close()

	tel, err := New(context.Background(), Options{Service: "wop-test", Getenv: envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
		"OTEL_EXPORTER_OTLP_HEADERS": "x-team=wop%20ops", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"})})
	require.NoError(t, err)
	require.True(t, tel.Tracing())
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "openwop.run")
	traceID := span.SpanContext().TraceID().String()
	span.End()
	require.NoError(t, tel.Shutdown(context.Background()), "the shutdown flushes the span")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, bodies, "the sink received the export")
	assert.Equal(t, "wop ops", hdr.Get("X-Team"), "headers from OTEL_EXPORTER_OTLP_HEADERS, URL-decoded")
	sp := bodies[0]["resourceSpans"].([]any)[0].(map[string]any)["scopeSpans"].([]any)[0].(map[string]any)["spans"].([]any)[0].(map[string]any)
	assert.Equal(t, "openwop.run", sp["name"])
	assert.Equal(t, traceID, sp["traceId"], "trace ids are hex in OTLP's JSON")
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{16}$`), sp["spanId"])
	assert.IsType(t, float64(0), sp["kind"], "enums are numbers")
}

func TestHTTPJSONExportSaysWhatTheCollectorAnswered(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "quota exceeded", http.StatusTooManyRequests)
	}))
	defer sink.Close()
	c, err := newJSONTraceClient(sink.URL+"/v1/traces", envOf(nil))
	require.NoError(t, err)
	err = c.UploadTraces(context.Background(), nil)
	require.ErrorContains(t, err, "429")
	require.ErrorContains(t, err, "quota exceeded")

	_, err = newJSONTraceClient(sink.URL, envOf(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}))
	require.ErrorContains(t, err, "not key=value")
}
