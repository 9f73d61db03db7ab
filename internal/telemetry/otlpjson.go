package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// jsonTraceClient exports spans over OTLP/HTTP with the JSON encoding
// (OTEL_EXPORTER_OTLP_PROTOCOL=http/json), which OpenWOP's observability profile
// requires of a host beside http/protobuf, and which the OpenTelemetry Go exporters
// do not offer. The JSON is protobuf's JSON mapping with OTLP's two exceptions: trace
// and span ids are hex, not base64, and enums are numbers.
type jsonTraceClient struct {
	url      string
	headers  http.Header
	gzip     bool
	http     *http.Client
	maxReply int64
}

var _ otlptrace.Client = (*jsonTraceClient)(nil)

// newJSONTraceClient reads the headers, compression and timeout from env the way the
// OTLP exporter specification names them (the traces variable before the general one).
func newJSONTraceClient(endpoint string, env func(string) string) (*jsonTraceClient, error) {
	pick := func(name string) string {
		if v := env("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return v
		}
		return env("OTEL_EXPORTER_OTLP_" + name)
	}
	c := &jsonTraceClient{url: endpoint, headers: http.Header{}, maxReply: 1 << 20}
	if raw := pick("HEADERS"); raw != "" {
		for _, kv := range strings.Split(raw, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %q is not key=value", strings.TrimSpace(kv))
			}
			value, err := url.QueryUnescape(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: header %s: %w", strings.TrimSpace(k), err)
			}
			c.headers.Set(strings.TrimSpace(k), value)
		}
	}
	switch comp := pick("COMPRESSION"); comp {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION=%q: want gzip or none", comp)
	}
	timeout := 10 * time.Second
	if raw := pick("TIMEOUT"); raw != "" {
		var ms int64
		if _, err := fmt.Sscan(raw, &ms); err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT=%q: want milliseconds", raw)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	c.http = &http.Client{Timeout: timeout}
	return c, nil
}

func (c *jsonTraceClient) Start(context.Context) error { return nil }
func (c *jsonTraceClient) Stop(context.Context) error  { return nil }

// UploadTraces posts one ExportTraceServiceRequest.
func (c *jsonTraceClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := otlpJSON(&coltracepb.ExportTraceServiceRequest{ResourceSpans: spans})
	if err != nil {
		return err
	}
	if c.gzip {
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return err
		}
		body = zb.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("OTLP http/json export to %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, c.maxReply))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("OTLP http/json export to %s answered %s: %.200s", c.url, resp.Status, reply)
	}
	return nil
}

// otlpJSON encodes an export request in OTLP's JSON: protojson with enums as numbers,
// then every traceId, spanId and parentSpanId turned from base64 into hex.
func otlpJSON(req *coltracepb.ExportTraceServiceRequest) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode OTLP spans: %w", err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if err := hexIDs(doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// hexIDs rewrites, anywhere in v, the id fields OTLP's JSON spells in hex.
func hexIDs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return fmt.Errorf("encode OTLP spans: %s %q is not base64: %w", k, s, err)
				}
				v[k] = hex.EncodeToString(b)
				continue
			}
			if err := hexIDs(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := hexIDs(x); err != nil {
				return err
			}
		}
	}
	return nil
}
