//go:build !nodev

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/wop-dev/wop/internal/devserver"
	"github.com/wop-dev/wop/workflows"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// scrape GETs a /metrics URL and parses the Prometheus text format.
func scrape(t require.TestingT, url string) map[string]*dto.MetricFamily {
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err, "the metrics parse as the Prometheus text format")
	return fams
}

// sample sums the values of family name's series whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		}
	}
	return sum, found
}

// TestMetricsOfAPIAndWorker runs `wop worker` and `wop api` as the production commands
// do, against an embedded Temporal server, drives a pack conversation and an approval
// through the API, and scrapes /metrics of both processes.
func TestMetricsOfAPIAndWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{SearchAttributes: workflows.SearchAttributes})
	require.NoError(t, err)
	defer srv.Stop()
	workerAddr, apiAddr := freeAddr(t), freeAddr(t)
	key := "wop_metrics_test_key"
	collector := newOTLPCollector(t)
	env := envMap(map[string]string{
		"TEMPORAL_ADDRESS": srv.FrontendAddress(), "WOP_PACKS": "../../packs", "WOP_LOG_LEVEL": "error", "WOP_MODEL_PROVIDER": "mock",
		"WOP_API_KEY": key, "WOP_TOKEN_SECRET": "metrics-test-secret", "WOP_SEED_FIXTURES": "true",
		"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL,
	})
	var wg sync.WaitGroup
	var workerErr, apiErr bytes.Buffer
	// The API runs with a context of its own: the test restarts it.
	apiCtx, stopAPI := context.WithCancel(ctx)
	for _, c := range []struct {
		ctx  context.Context
		run  func(context.Context, []string, func(string) string, io.Writer, io.Writer) int
		args []string
		errb *bytes.Buffer
	}{
		{ctx, runWorker, []string{"--health-addr", workerAddr}, &workerErr},
		{apiCtx, runAPI, []string{"--http", apiAddr}, &apiErr},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(c.ctx, c.args, env, io.Discard, c.errb)
		}()
	}
	defer func() { cancel(); wg.Wait() }() // also when a check below fails
	api := "http://" + apiAddr
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, u := range []string{api + "/healthz", "http://" + workerAddr + "/healthz"} {
			resp, err := http.Get(u)
			if assert.NoError(c, err, "worker: %s\napi: %s", workerErr.String(), apiErr.String()) {
				resp.Body.Close()
				assert.Equal(c, 200, resp.StatusCode)
			}
		}
	}, 60*time.Second, 50*time.Millisecond)

	// Every call carries the caller's trace context: the API's spans, the workflow's and
	// the activities' must all join this trace.
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	call := func(method, path, body string) map[string]any {
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, raw)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return m
	}
	status := func(id string) string { return call("GET", "/v1/runs/"+id, "")["status"].(string) }
	waitStatus := func(id, want string) {
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, want, status(id)) }, 30*time.Second, 50*time.Millisecond)
	}
	// A support conversation: two turns, six model rounds, two tool calls.
	chat := call("POST", "/v1/runs", `{"workflowId":"support","inputs":{"message":"Hi, I have a question about my account."}}`)["runId"].(string)
	waitStatus(chat, "waiting-approval")
	call("POST", "/v1/runs/"+chat+"/interrupts/agent", `{"resumeValue":{"text":"It's ACC-12345. What's my balance?"}}`)
	waitStatus(chat, "completed")
	// An approval, approved.
	gate := call("POST", "/v1/runs", `{"workflowId":"conformance-approval"}`)["runId"].(string)
	waitStatus(gate, "waiting-approval")
	// Its signed token is a credential: inspecting the interrupt by token leaves the
	// token out of the span.
	token := call("GET", "/v1/runs/"+gate, "")["interrupt"].(map[string]any)["interruptToken"].(string)
	require.NotEmpty(t, token)
	call("GET", "/v1/interrupts/"+token, "")
	call("POST", "/v1/runs/"+gate+"/interrupts/gate", `{"resumeValue":{"action":"accept"}}`)
	waitStatus(gate, "completed")

	// The worker: the SDK's metrics and the host's, from workflow code and activities.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams := scrape(c, "http://"+workerAddr+"/metrics")
		for _, m := range []struct {
			name   string
			labels map[string]string
			min    float64
		}{
			{"temporal_workflow_task_execution_latency_seconds", nil, 1},
			// The scripted mock's six rounds are local activities (the first one too);
			// the two tool calls are activities.
			{"temporal_activity_execution_latency_seconds", map[string]string{"activity_type": "ToolCall"}, 2},
			{"temporal_local_activity_execution_latency_seconds", map[string]string{"activity_type": "ModelRoundLocal"}, 6},
			{"wop_runs_started_total", map[string]string{"openwop_workflow_id": "support"}, 1},
			{"wop_runs_ended_total", map[string]string{"openwop_workflow_id": "support", "openwop_run_status": "completed"}, 1},
			{"wop_runs_ended_total", map[string]string{"openwop_workflow_id": "conformance-approval", "openwop_run_status": "completed"}, 1},
			{"wop_turns_total", map[string]string{"openwop_workflow_id": "support", "role": "user"}, 2},
			{"wop_turns_total", map[string]string{"openwop_workflow_id": "support", "role": "agent"}, 2},
			{"wop_model_rounds_total", map[string]string{"provider": "mock", "outcome": "ok"}, 6},
			{"wop_model_tokens_total", map[string]string{"provider": "mock", "direction": "input"}, 0},
			// The support pack's tools are answered by its scripted tool_results.
			{"wop_tool_calls_total", map[string]string{"tool": "verify_account", "binding": "mock", "outcome": "ok"}, 1},
			{"wop_tool_calls_total", map[string]string{"tool": "get_balance", "binding": "mock", "outcome": "ok"}, 1},
			{"wop_human_wait_seconds", map[string]string{"waiting_kind": "approval"}, 1},
			{"wop_human_wait_seconds", map[string]string{"waiting_kind": "conversation"}, 1},
			{"go_goroutines", nil, 1},
		} {
			v, ok := sample(fams, m.name, m.labels)
			if assert.True(c, ok, "worker exports %s%v", m.name, m.labels) {
				assert.GreaterOrEqual(c, v, m.min, "%s%v", m.name, m.labels)
			}
		}
		_, apiOnWorker := fams["wop_http_requests_total"]
		assert.False(c, apiOnWorker, "the worker serves no API")
		requireHelp(c, fams)
	}, 20*time.Second, 100*time.Millisecond)

	// The API: its requests by route and status, and its Temporal client's calls.
	fams := scrape(t, api+"/metrics")
	for _, m := range []struct {
		labels map[string]string
		min    float64
	}{
		{map[string]string{"method": "POST", "route": "/v1/runs", "status": "201"}, 2},
		{map[string]string{"method": "GET", "route": "/v1/runs/:runId", "status": "200"}, 2},
		{map[string]string{"method": "POST", "route": "/v1/runs/:runId/interrupts/:nodeId", "status": "200"}, 2},
	} {
		v, ok := sample(fams, "wop_http_requests_total", m.labels)
		assert.True(t, ok, "api exports wop_http_requests_total%v", m.labels)
		assert.GreaterOrEqual(t, v, m.min, fmt.Sprint(m.labels))
	}
	v, ok := sample(fams, "wop_http_request_duration_seconds", map[string]string{"route": "/v1/runs"})
	assert.True(t, ok && v >= 2, "request durations by route")
	v, ok = sample(fams, "temporal_request_total", map[string]string{"operation": "StartWorkflowExecution"})
	assert.True(t, ok && v >= 2, "the API's Temporal client metrics: %v %v", ok, v)
	_, runMetricsOnAPI := fams["wop_runs_started_total"]
	assert.False(t, runMetricsOnAPI, "run metrics come from the worker")

	// What waits on people: an approval and a customer's chat. The API's gauges count
	// them from Temporal, by kind and by who answers.
	waitingGate := call("POST", "/v1/runs", `{"workflowId":"conformance-approval"}`)["runId"].(string)
	waitingChat := call("POST", "/v1/runs", `{"workflowId":"support","inputs":{"message":"Hi, I have a question about my account."}}`)["runId"].(string)
	waitStatus(waitingGate, "waiting-approval")
	waitStatus(waitingChat, "waiting-approval")
	waiting := func(c require.TestingT, url string) {
		fams := scrape(c, url+"/metrics")
		for _, m := range []struct {
			labels map[string]string
			want   float64
		}{
			{map[string]string{"waiting_kind": "approval", "answered_by": "operator"}, 1},
			{map[string]string{"waiting_kind": "conversation", "answered_by": "user"}, 1},
			{map[string]string{"waiting_kind": "conversation", "answered_by": "operator"}, 0},
			{map[string]string{"waiting_kind": "external-event", "answered_by": "operator"}, 0},
		} {
			v, ok := sample(fams, "wop_interrupts_waiting", m.labels)
			assert.True(c, ok, "wop_interrupts_waiting%v", m.labels)
			assert.Equal(c, m.want, v, "wop_interrupts_waiting%v", m.labels)
		}
		v, ok := sample(fams, "wop_interrupts_waiting_age_seconds", map[string]string{"waiting_kind": "approval"})
		assert.True(c, ok && v == 1, "the approval's age is in the histogram")
		_, ok = sample(fams, "wop_interrupts_waiting_oldest_seconds", map[string]string{"waiting_kind": "approval"})
		assert.True(c, ok, "the oldest approval's wait")
		requireHelp(c, fams)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { waiting(c, api) }, 30*time.Second, 500*time.Millisecond)

	// A new API process, which counted nothing itself, serves the same figures.
	stopAPI()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := http.Get(api + "/healthz")
		assert.Error(c, err, "the first API stopped")
	}, 20*time.Second, 50*time.Millisecond)
	api2Addr := freeAddr(t)
	var api2Err bytes.Buffer
	wg.Add(1)
	go func() {
		defer wg.Done()
		runAPI(ctx, []string{"--http", api2Addr}, env, io.Discard, &api2Err)
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) { waiting(c, "http://"+api2Addr) }, 60*time.Second, 500*time.Millisecond, "api: %s", &api2Err)

	// Stopping both processes flushes their spans to the OTLP endpoint.
	cancel()
	wg.Wait()
	spans := collector.spans(traceID)
	for _, name := range []string{
		"POST /v1/runs", "POST /v1/runs/:runId/interrupts/:nodeId", // the API's requests
		"StartWorkflow:OpenWOPRun", "UpdateWorkflow:openwop.resolve-update", // its Temporal calls
		"RunWorkflow:OpenWOPRun", "HandleUpdate:openwop.resolve-update", "RunActivity:ModelRoundLocal", "RunActivity:ToolCall", // the worker (the scripted rounds are local activities)
	} {
		assert.Contains(t, spans, name, "span %s in the caller's trace", name)
	}
	assert.Equal(t, []string{"wop-api", "wop-worker"}, collector.services(), "both processes export")

	// OpenWOP's span attributes: every span about a run names it, its workflow and
	// the protocol; a pack's activities name their node; the spans of the token route
	// name the interrupt.
	byName := map[string][]map[string]string{}
	for _, sp := range collector.spanAttributes(traceID) {
		byName[sp["name"]] = append(byName[sp["name"]], sp)
		if id := sp["temporalWorkflowID"]; id == chat || id == gate {
			assert.Equal(t, id, sp["openwop.run_id"], "%s names its run", sp["name"])
			assert.NotEmpty(t, sp["openwop.workflow_id"], "%s names its workflow", sp["name"])
			assert.Equal(t, "1.0", sp["openwop.protocol_version"], sp["name"])
		}
	}
	has := func(name string, want map[string]string) {
		t.Helper()
		for _, sp := range byName[name] {
			ok := true
			for k, v := range want {
				ok = ok && sp[k] == v
			}
			if ok {
				return
			}
		}
		t.Errorf("no span %s with %v among %v", name, want, byName[name])
	}
	run := func(id, wf string) map[string]string {
		return map[string]string{"openwop.run_id": id, "openwop.workflow_id": wf, "openwop.protocol_version": "1.0"}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	has("POST /v1/runs", with(run(chat, "support"), "openwop.tenant_id", "default"))
	has("POST /v1/runs/:runId/interrupts/:nodeId", with(run(chat, "support"), "openwop.node_id", "agent", "openwop.tenant_id", "default"))
	has("POST /v1/runs/:runId/interrupts/:nodeId", with(run(gate, "conformance-approval"), "openwop.node_id", "gate"))
	has("GET /v1/interrupts/:token", with(run(gate, "conformance-approval"), "openwop.node_id", "gate",
		"openwop.interrupt_kind", "approval", "url.path", "/v1/interrupts/{token}"))
	has("StartWorkflow:OpenWOPRun", run(chat, "support"))
	has("UpdateWorkflow:openwop.resolve-update", run(chat, "support"))
	has("RunWorkflow:OpenWOPRun", with(run(chat, "support"), "openwop.tenant_id", "default"))
	has("HandleUpdate:openwop.resolve-update", run(gate, "conformance-approval"))
	for _, name := range []string{"RunActivity:ModelRoundLocal", "RunActivity:ToolCall"} {
		has(name, with(run(chat, "support"), "openwop.node_id", "agent", "openwop.node_type", "vendor.wop.pack", "openwop.node_attempt", "0"))
	}

	// No secret, and nothing a person wrote, is in any span or resource.
	for _, v := range collector.allValues() {
		for _, secret := range []string{key, "metrics-test-secret", token, "ACC-12345", "question about my account"} {
			assert.NotContains(t, v, secret, "a span attribute holds %q", secret)
		}
	}
}

// requireHelp requires a HELP text on every wop_ metric family.
func requireHelp(t require.TestingT, fams map[string]*dto.MetricFamily) {
	n := 0
	for name, f := range fams {
		if strings.HasPrefix(name, "wop_") {
			n++
			assert.NotEmpty(t, f.GetHelp(), "HELP of %s", name)
		}
	}
	assert.NotZero(t, n, "wop_ metrics exported")
}

// otlpCollector is an OTLP/HTTP trace endpoint that keeps what it receives.
type otlpCollector struct {
	URL string
	mu  sync.Mutex
	req []*coltracepb.ExportTraceServiceRequest
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(raw, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.req = append(c.req, &req)
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(ts.Close)
	c.URL = ts.URL
	return c
}

// spans lists the names of the spans received in trace traceID (hex).
func (c *otlpCollector) spans(traceID string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, req := range c.req {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					if hex.EncodeToString(sp.GetTraceId()) == traceID {
						names = append(names, sp.GetName())
					}
				}
			}
		}
	}
	return names
}

// spanAttributes lists the spans received in trace traceID, each as its attributes
// (values as text) plus "name".
func (c *otlpCollector) spanAttributes(traceID string) []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]string
	for _, req := range c.req {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					if hex.EncodeToString(sp.GetTraceId()) != traceID {
						continue
					}
					m := map[string]string{"name": sp.GetName()}
					for _, a := range sp.GetAttributes() {
						m[a.GetKey()] = anyText(a.GetValue())
					}
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// allValues is every attribute value, event attribute, status message and name of
// every span and resource received, as text.
func (c *otlpCollector) allValues() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, req := range c.req {
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				out = append(out, a.GetKey()+"="+anyText(a.GetValue()))
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					out = append(out, sp.GetName(), sp.GetStatus().GetMessage())
					for _, a := range sp.GetAttributes() {
						out = append(out, a.GetKey()+"="+anyText(a.GetValue()))
					}
					for _, ev := range sp.GetEvents() {
						out = append(out, ev.GetName())
						for _, a := range ev.GetAttributes() {
							out = append(out, a.GetKey()+"="+anyText(a.GetValue()))
						}
					}
				}
			}
		}
	}
	return out
}

// anyText renders an OTLP attribute value as text.
func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'f', -1, 64)
	}
	b, _ := protojson.Marshal(v)
	return string(b)
}

// services lists the service.name of every resource that exported spans, sorted.
func (c *otlpCollector) services() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, req := range c.req {
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					seen[a.GetValue().GetStringValue()] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
