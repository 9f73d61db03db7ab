package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

func TestDiscovery(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do("GET", "/.well-known/openwop", "", "")
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	if rec.Header().Get("Cache-Control") == "" {
		t.Error("no Cache-Control")
	}
	validateSchema(t, "capabilities.schema.json", rec.Body.Bytes())
	doc := decode[map[string]any](t, rec.Body.Bytes())
	if doc["conversationPrimitive"] != true {
		t.Errorf("conversationPrimitive not at the root: %v", doc)
	}
	if !strings.HasPrefix(doc["protocolVersion"].(string), "1.") {
		t.Errorf("protocolVersion %v", doc["protocolVersion"])
	}
	lim := doc["limits"].(map[string]any)
	if lim["maxRequestBodyBytes"].(float64) != DefaultMaxRequestBodyBytes {
		t.Errorf("maxRequestBodyBytes = %v", lim["maxRequestBodyBytes"])
	}
	fx := doc["fixtures"].([]any)
	if len(fx) != 3 || fx[0] != "conformance-approval" {
		t.Errorf("fixtures = %v", fx)
	}
	otel, _ := doc["observability"].(map[string]any)["otel"].(map[string]any)
	if fmt.Sprint(otel["exportProtocols"]) != "[http/json http/protobuf grpc]" || otel["attributeNamespace"] != "openwop" {
		t.Errorf("observability record %v", doc["observability"])
	}
	env.expectNotModified(rec.Header().Get("ETag"))
}

func (env *testEnv) expectNotModified(etag string) {
	env.t.Helper()
	if etag == "" {
		env.t.Fatal("no ETag")
	}
	rec := env.do("GET", "/.well-known/openwop", "", "", "If-None-Match", etag)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		env.t.Fatalf("If-None-Match: status %d body %q", rec.Code, rec.Body)
	}
	rec = env.do("GET", "/.well-known/openwop", "", "", "If-None-Match", `"other"`)
	if rec.Code != 200 {
		env.t.Fatalf("non-matching If-None-Match: %d", rec.Code)
	}
}

// Every registered Echo route is documented and every documented path is routed, for
// each major: /v1/openapi.json holds the /v1 routes and the host's own pages, and
// /openapi.json (major 2) the unversioned protocol routes.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	env := newTestEnv(t)
	docs := map[string]map[string]bool{}
	for _, major := range []string{"1", "2"} {
		path := "/v1/openapi.json"
		if major == "2" {
			path = "/openapi.json"
		}
		rec := env.do("GET", path, "", "")
		if rec.Code != 200 || rec.Header().Get("OpenWOP-Version") != major+".0" {
			t.Fatalf("%s: status %d, OpenWOP-Version %q", path, rec.Code, rec.Header().Get("OpenWOP-Version"))
		}
		var doc struct {
			OpenAPI string                               `json:"openapi"`
			Paths   map[string]map[string]map[string]any `json:"paths"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(doc.OpenAPI, "3.1") {
			t.Errorf("openapi = %q", doc.OpenAPI)
		}
		docs[major] = map[string]bool{}
		for p, ops := range doc.Paths {
			for m := range ops {
				docs[major][strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	routed := map[string]map[string]bool{"1": {}, "2": {}}
	for _, r := range env.srv.e.Routes() {
		p := pathParamEcho(r.Path)
		major := "2"
		if isV1Path(p) || !isProtocolPath(p) || p == DiscoveryPath {
			major = "1"
		}
		if p == DiscoveryPath {
			routed["2"][r.Method+" "+p] = true // one resource, both majors
		}
		if r.Method == "POST" && (p == "/v1/runs/{runId}" || p == "/runs/{runId}") {
			// The colon-verb dispatcher: every verb it serves must be documented.
			verbs := env.srv.verbs
			if major == "2" {
				verbs = env.srv.verbsV2
			}
			for verb := range verbs {
				routed[major]["POST "+p+":"+verb] = true
			}
			continue
		}
		routed[major][r.Method+" "+p] = true
	}
	for major := range routed {
		for k := range routed[major] {
			if !docs[major][k] {
				t.Errorf("route %s is not in the OpenAPI document of major %s", k, major)
			}
		}
		for k := range docs[major] {
			if !routed[major][k] {
				t.Errorf("documented %s (major %s) is not routed", k, major)
			}
		}
	}
	// Each documented path answers something other than Echo's 404/405 when called.
	for major, documented := range docs {
		for k := range documented {
			method, path, _ := strings.Cut(k, " ")
			path = strings.NewReplacer("{runId}", "r_x", "{nodeId}", "n", "{workflowId}", "w", "{token}", "t.x", "{webhookId}", "wh_x").Replace(path)
			rec := env.do(method, path, "", "", "OpenWOP-Version", major)
			if rec.Code == http.StatusMethodNotAllowed || (rec.Code == 404 && strings.Contains(rec.Body.String(), "no route")) {
				t.Errorf("%s %s is not served under major %s: %d %s", method, path, major, rec.Code, rec.Body)
			}
		}
	}
}

func pathParamEcho(p string) string {
	parts := strings.Split(strings.ReplaceAll(p, `\:`, ":"), "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

func TestAuth(t *testing.T) {
	env := newTestEnv(t)
	body := `{"workflowId":"conformance-noop"}`
	env.expectError(env.do("POST", "/v1/runs", "", body), 401, CodeUnauthenticated)
	env.expectError(env.do("POST", "/v1/runs", "hk_definitely_not_a_real_key_12345", body), 401, CodeUnauthenticated)
	env.expectError(env.do("POST", "/v1/runs", "", body, "Authorization", "Basic abc"), 401, CodeUnauthenticated)
	e := env.expectError(env.do("POST", "/v1/runs", lowKey, body), 403, CodeForbidden)
	if e.Details["scopeRequired"] != ScopeRunsCreate {
		t.Errorf("details = %v", e.Details)
	}
	if env.ft.starts != 0 {
		t.Error("a rejected request started a run")
	}
}

// The rate limit is checked before the scopes: a key without the scope that exceeds
// its budget gets 429, not 403.
func TestRateLimitBeforeScopes(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.RateLimitBurst = 2; c.RateLimitPerSecond = 0.5 })
	body := `{"workflowId":"conformance-noop"}`
	env.expectError(env.do("POST", "/v1/runs", lowKey, body), 403, CodeForbidden)
	env.expectError(env.do("POST", "/v1/runs", lowKey, body), 403, CodeForbidden)
	rec := env.do("POST", "/v1/runs", lowKey, body)
	e := env.expectError(rec, 429, CodeRateLimited)
	if rec.Header().Get("Retry-After") != "2" {
		t.Errorf("Retry-After = %q", rec.Header().Get("Retry-After"))
	}
	if e.Details["scope"] != "key" || e.Details["retryAfterMs"] == nil {
		t.Errorf("details = %v", e.Details)
	}
	// Another key has its own bucket; time refills this one.
	env.expectError(env.do("GET", "/v1/runs/r_nope", fullKey, ""), 404, CodeNotFound)
	env.now = env.now.Add(2 * time.Second)
	env.expectError(env.do("POST", "/v1/runs", lowKey, body), 403, CodeForbidden)
}

func TestRoutingErrorsUseEnvelope(t *testing.T) {
	env := newTestEnv(t)
	// Unversioned paths are major 2's (no longer v1's 400): an unknown run is 404 there.
	env.expectError(env.do("GET", "/runs/r_1", fullKey, ""), 404, CodeNotFound)
	env.expectError(env.do("GET", "/v1/nothing-here", fullKey, ""), 404, CodeNotFound)
	env.expectError(env.do("DELETE", "/v1/runs", fullKey, ""), 405, CodeMethodNotAllowed)
	env.expectError(env.do("POST", "/v1/runs/r_1", fullKey, "{}"), 405, CodeMethodNotAllowed)
	env.expectError(env.do("POST", "/v1/runs/r_1:explode", fullKey, "{}"), 404, CodeNotFound)
}

func TestCreateRunValidation(t *testing.T) {
	env := newTestEnv(t, func(c *Config) {
		c.MaxRequestBodyBytes = 256
		c.Guards.MaxTags, c.Guards.MaxMetadataBytes = 3, 20
	})
	cases := []struct {
		name, body, ct string
		status         int
		code, inMsg    string
	}{
		{"unknown workflow", `{"workflowId":"nope"}`, "", 400, CodeValidation, "unknown workflowId"},
		{"missing workflowId", `{}`, "", 400, CodeValidation, "workflowId is required"},
		{"empty body", ``, "", 400, CodeValidation, "body is required"},
		{"required input", `{"workflowId":"conformance-identity"}`, "", 400, CodeValidation, "inputs.payload is required"},
		{"input type", `{"workflowId":"conformance-identity","inputs":{"payload":3}}`, "", 400, CodeValidation, "inputs.payload must be of type object"},
		{"inputs not object", `{"workflowId":"conformance-noop","inputs":[1]}`, "", 400, CodeValidation, "inputs must be a JSON object"},
		{"unknown field", `{"workflowId":"conformance-noop","flavour":1}`, "", 400, CodeValidation, `unknown field "flavour"`},
		{"malformed", `{"workflowId":"conformance-noop",}`, "", 400, CodeValidation, "offset 34"},
		{"truncated", `{"workflowId":"conf`, "", 400, CodeValidation, "malformed JSON"},
		{"wrong type", `{"workflowId":7}`, "", 400, CodeValidation, `field "workflowId" must be a string`},
		{"trailing", `{"workflowId":"conformance-noop"} {}`, "", 400, CodeValidation, "after the JSON object"},
		{"traversal", `{"workflowId":"../etc/passwd"}`, "", 400, CodeValidation, "workflowId"},
		{"content type", `{"workflowId":"conformance-noop"}`, "text/plain", 415, CodeUnsupportedMediaType, "text/plain"},
		{"too large", `{"workflowId":"conformance-noop","metadata":{"x":"` + strings.Repeat("a", 300) + `"}}`, "", 413, CodePayloadTooLarge, "256"},
		{"configurable without schema", `{"workflowId":"conformance-noop","configurable":{"recursionLimit":5}}`, "", 400, CodeValidation, "configurable"},
		{"tenant mismatch", `{"workflowId":"conformance-noop","tenantId":"evil"}`, "", 403, CodeForbidden, "tenantId"},
		{"callbackUrl", `{"workflowId":"conformance-noop","callbackUrl":"http://169.254.169.254/"}`, "", 400, CodeValidation, "callbackUrl needs webhook delivery"},
		{"too many tags", `{"workflowId":"conformance-noop","tags":["a","b","c","d"]}`, "", 400, CodeValidation, "4 tags"},
		{"metadata too large", `{"workflowId":"conformance-noop","metadata":{"x":"0123456789012345678901"}}`, "", 400, CodeValidation, "metadata is 30 bytes"},
		{"duplicate key", `{"workflowId":"conformance-noop","workflowId":"x"}`, "", 400, CodeValidation, "duplicate key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := []string{}
			if tc.ct != "" {
				hdr = []string{"Content-Type", tc.ct}
			}
			rec := env.do("POST", "/v1/runs", fullKey, tc.body, hdr...)
			e := env.expectError(rec, tc.status, tc.code)
			if !strings.Contains(e.Message, tc.inMsg) {
				t.Errorf("message %q does not mention %q", e.Message, tc.inMsg)
			}
		})
	}
	if env.ft.starts != 0 {
		t.Errorf("%d runs started by invalid requests", env.ft.starts)
	}
}

func TestCreateRun(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do("POST", "/v1/runs", fullKey, `{"workflowId":"conformance-identity","inputs":{"payload":{"a":1}},"tags":["x"]}`)
	if rec.Code != 201 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	resp := decode[CreateRunResponse](t, rec.Body.Bytes())
	if !strings.HasPrefix(resp.RunID, "r_") || len(resp.RunID) != 28 || validateID("runId", resp.RunID) != nil {
		t.Errorf("runId %q", resp.RunID)
	}
	if resp.EventsURL != "http://host.test/v1/runs/"+resp.RunID+"/events" || resp.StatusURL != "http://host.test/v1/runs/"+resp.RunID {
		t.Errorf("urls %+v", resp)
	}
	r := env.ft.get(resp.RunID)
	if r == nil {
		t.Fatal("no workflow started")
	}
	if r.opts.ID != resp.RunID || r.opts.TaskQueue != workflows.TaskQueue || r.opts.StaticSummary != `OpenWOP run of conformance-identity · tenant default · inputs {"payload":{"a":1}}` {
		t.Errorf("start options %+v", r.opts)
	}
	if v, ok := r.opts.TypedSearchAttributes.GetKeyword(workflows.SATenant); !ok || v != "default" {
		t.Errorf("WopTenant = %q %v", v, ok)
	}
	if v, _ := r.opts.TypedSearchAttributes.GetKeyword(workflows.SAWorkflowID); v != "conformance-identity" {
		t.Errorf("WopWorkflowId = %q", v)
	}
	if r.input.Owner.Tenant != "default" || r.input.Owner.Principal != "full" || r.input.Owner.Subject == nil || *r.input.Owner.Subject != *protocol.APIKeySubject("default", "full") ||
		r.input.Era != protocol.EraV2 || string(r.input.Inputs) != `{"payload":{"a":1}}` || r.input.RequestDigest != "" {
		t.Errorf("run input %+v", r.input)
	}
	// Two runs get different ids.
	rec2 := env.do("POST", "/v1/runs", fullKey, `{"workflowId":"conformance-noop"}`)
	if decode[CreateRunResponse](t, rec2.Body.Bytes()).RunID == resp.RunID {
		t.Error("run ids repeat")
	}
}

func TestIdempotency(t *testing.T) {
	env := newTestEnv(t)
	body := `{"workflowId":"conformance-idempotent","inputs":{"nonce":"abc-123"}}`
	first := env.do("POST", "/v1/runs", fullKey, body, "Idempotency-Key", "k-1")
	if first.Code != 201 || first.Header().Get(HeaderIdempotentReplay) != "" {
		t.Fatalf("first: %d %v", first.Code, first.Header())
	}
	runID := decode[CreateRunResponse](t, first.Body.Bytes()).RunID
	if env.ft.get(runID).input.RequestDigest == "" {
		t.Fatal("no request digest in the run input")
	}
	// Same body, keys reordered and spaced differently: the same request.
	second := env.do("POST", "/v1/runs", fullKey, `{ "inputs": {"nonce":"abc-123"}, "workflowId":"conformance-idempotent" }`, "Idempotency-Key", "k-1")
	// The replay is the original response: 201 and the same body.
	if second.Code != 201 || second.Header().Get(HeaderIdempotentReplay) != "true" || second.Body.String() != first.Body.String() {
		t.Fatalf("second: %d %v %s (first %s)", second.Code, second.Header(), second.Body, first.Body)
	}
	// Different body under the same key.
	third := env.do("POST", "/v1/runs", fullKey, `{"workflowId":"conformance-idempotent","inputs":{"nonce":"DIFFERENT"}}`, "Idempotency-Key", "k-1")
	env.expectError(third, 409, CodeIdempotencyMismatch)
	if strings.Contains(third.Body.String(), "runId") || strings.Contains(third.Body.String(), runID) {
		t.Errorf("409 leaks the run: %s", third.Body)
	}
	// The same key in another tenant is another run.
	other := env.do("POST", "/v1/runs", otherKey, body, "Idempotency-Key", "k-1")
	if other.Code != 201 || decode[CreateRunResponse](t, other.Body.Bytes()).RunID == runID {
		t.Errorf("cross-tenant key collision: %d %s", other.Code, other.Body)
	}
	if env.ft.starts != 2 {
		t.Errorf("starts = %d, want 2", env.ft.starts)
	}
}

func TestGetRun(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", WorkflowID: "conformance-approval", Status: "waiting-approval",
		CurrentNodeID: "gate", RequestDigest: "sha256:secret",
		Interrupt: &workflows.PendingInterrupt{NodeID: "gate", InterruptID: "int_1", Kind: "approval", Key: "r_1:gate:0", RequestedAt: "2026-01-01T00:00:00Z"}}})
	rec := env.do("GET", "/v1/runs/r_1", fullKey, "")
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	validateSchema(t, "run-snapshot.schema.json", rec.Body.Bytes())
	snap := decode[workflows.Snapshot](t, rec.Body.Bytes())
	if snap.Interrupt == nil || snap.Interrupt.InterruptToken == "" || snap.Interrupt.CallbackURL != "http://host.test/v1/interrupts/"+snap.Interrupt.InterruptToken {
		t.Errorf("interrupt %+v", snap.Interrupt)
	}
	if snap.RequestDigest != "" {
		t.Error("request digest served")
	}
	// Tenant isolation: the other tenant sees a 404 exactly like an unknown run.
	a := env.expectError(env.do("GET", "/v1/runs/r_1", otherKey, ""), 404, CodeNotFound)
	b := env.expectError(env.do("GET", "/v1/runs/r_2", otherKey, ""), 404, CodeNotFound)
	if strings.ReplaceAll(a.Message, "r_1", "") != strings.ReplaceAll(b.Message, "r_2", "") {
		t.Errorf("messages differ: %q vs %q", a.Message, b.Message)
	}
	env.expectError(env.do("GET", "/v1/runs/openwop-conformance-this-run-id-does-not-exist", fullKey, ""), 404, CodeNotFound)
	for _, bad := range []string{"/v1/runs/..%2F..%2Fetc", "/v1/runs/a%20b", "/v1/runs/" + strings.Repeat("x", 300), "/v1/runs/%2E%2E"} {
		env.expectError(env.do("GET", bad, fullKey, ""), 400, CodeValidation)
	}
}

func TestCancel(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_done", Status: "completed"}})
	running := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_run", Status: "running"},
		onSignal: func(r *fakeRun, name string, _ any) {
			if name == workflows.CancelSignal {
				r.snap.Status = protocol.StatusCancelled
			}
		}})
	rec := env.do("POST", "/v1/runs/r_done/cancel", fullKey, "{}")
	if rec.Code != 200 || decode[map[string]string](t, rec.Body.Bytes())["status"] != "completed" {
		t.Fatalf("cancel finished run: %d %s", rec.Code, rec.Body)
	}
	rec = env.do("POST", "/v1/runs/r_run:cancel", fullKey, `{"reason":"conformance-cleanup"}`)
	if rec.Code != 200 || decode[map[string]string](t, rec.Body.Bytes())["status"] != "cancelled" {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	if len(running.signals) != 1 || running.signals[0].(workflows.CancelRequest).Reason != "conformance-cleanup" {
		t.Errorf("signals %+v", running.signals)
	}
	env.expectError(env.do("POST", "/v1/runs/r_run/cancel", fullKey, `{"why":1}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_run/cancel", otherKey, `{}`), 404, CodeNotFound)
	env.expectError(env.do("POST", "/v1/runs/r_run/cancel", lowKey, `{}`), 403, CodeForbidden)
}

func noopEvents(runID string) []workflows.Event {
	return []workflows.Event{
		ev(runID, 0, "run.started", `{"workflowId":"conformance-noop","inputs":{"k":1}}`),
		ev(runID, 1, "node.started", `{"nodeId":"a","typeId":"core.noop"}`),
		ev(runID, 2, "node.completed", `{"nodeId":"a"}`),
		ev(runID, 3, "run.completed", `{}`),
	}
}

func TestEventsJSONAndPoll(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "completed"}, events: noopEvents("r_1")})
	rec := env.do("GET", "/v1/runs/r_1/events", fullKey, "", "Accept", "application/json")
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	resp := decode[EventsResponse](t, rec.Body.Bytes())
	if len(resp.Events) != 4 || !resp.IsComplete {
		t.Fatalf("events %+v", resp)
	}
	for _, e := range resp.Events {
		validateSchema(t, "run-event.schema.json", mustJSON(e))
	}
	for _, q := range []struct {
		query string
		n     int
	}{{"", 4}, {"?lastSequence=0", 4}, {"?lastSequence=1", 2}, {"?lastSequence=3&timeout=1", 0}} {
		rec := env.do("GET", "/v1/runs/r_1/events/poll"+q.query, fullKey, "")
		got := decode[EventsResponse](t, rec.Body.Bytes())
		if rec.Code != 200 || len(got.Events) != q.n || !got.IsComplete {
			t.Errorf("poll%s: %d %d events complete=%v", q.query, rec.Code, len(got.Events), got.IsComplete)
		}
	}
	env.expectError(env.do("GET", "/v1/runs/r_1/events/poll?timeout=99", fullKey, ""), 400, CodeValidation)
	env.expectError(env.do("GET", "/v1/runs/r_1/events/poll?lastSequence=-2", fullKey, ""), 400, CodeValidation)
	env.expectError(env.do("GET", "/v1/runs/r_1/events/poll", otherKey, ""), 404, CodeNotFound)
	env.expectError(env.do("GET", "/v1/runs/r_x/events/poll", fullKey, ""), 404, CodeNotFound)
}

func TestPollRetriesQueriesTemporalDidNotAnswerInTime(t *testing.T) {
	env := newTestEnv(t)
	run := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "completed"}, events: noopEvents("r_1"), eventsTimeouts: 2})
	rec := env.do("GET", "/v1/runs/r_1/events/poll?timeout=5", fullKey, "")
	if rec.Code != 200 {
		t.Fatalf("poll after two query timeouts: %d %s", rec.Code, rec.Body)
	}
	if got := decode[EventsResponse](t, rec.Body.Bytes()); len(got.Events) != 4 || !got.IsComplete {
		t.Fatalf("poll after two query timeouts: %+v", got)
	}
	if run.eventsTimeouts != 0 {
		t.Fatalf("the poll gave up before the query answered (%d timeouts left)", run.eventsTimeouts)
	}
	// A one-shot read does not wait: it reports the timeout as 503, never as a 500.
	env.ft.get("r_1").eventsTimeouts = 1
	env.expectError(env.do("GET", "/v1/runs/r_1/events", fullKey, "", "Accept", "application/json"), 503, CodeUnavailable)
}

func TestResolveAsksAgainWhenTemporalDidNotAnswerInTime(t *testing.T) {
	env := newTestEnv(t)
	r := env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: "r_1", WorkflowID: "conformance-approval", Status: "waiting-approval", CurrentNodeID: "gate",
			Interrupt: &workflows.PendingInterrupt{NodeID: "gate", InterruptID: "int_1", Kind: "approval", RequestedAt: "2026-01-01T00:00:00Z"}},
		check:         workflows.ResolveCheck{OK: true, RunStatus: "running"},
		checkTimeouts: 2,
	})
	rec := env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	if rec.Code != 200 || r.checkTimeouts != 0 || len(r.signals) != 1 {
		t.Fatalf("resolve after two validation timeouts: %d %s (timeouts left %d, signals %d)", rec.Code, rec.Body, r.checkTimeouts, len(r.signals))
	}
}

// TestResolveAsksAgainWhenTheQueryWasCancelled: a validation query handed to the poll
// of a worker that is stopping comes back Canceled from the server; the resolve asks
// again (the next worker answers) instead of answering 500.
func TestResolveAsksAgainWhenTheQueryWasCancelled(t *testing.T) {
	env := newTestEnv(t)
	r := env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: "r_1", WorkflowID: "conformance-approval", Status: "waiting-approval", CurrentNodeID: "gate",
			Interrupt: &workflows.PendingInterrupt{NodeID: "gate", InterruptID: "int_1", Kind: "approval", RequestedAt: "2026-01-01T00:00:00Z"}},
		check:        workflows.ResolveCheck{OK: true, RunStatus: "running"},
		checkCancels: 1,
	})
	rec := env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	if rec.Code != 200 || r.checkCancels != 0 || len(r.signals) != 1 {
		t.Fatalf("resolve after a cancelled validation query: %d %s (cancels left %d, signals %d)", rec.Code, rec.Body, r.checkCancels, len(r.signals))
	}
}

func TestStreamModeValidatedFirst(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "completed"}, events: noopEvents("r_1")})
	for _, accept := range []string{"text/event-stream", "application/json"} {
		e := env.expectError(env.do("GET", "/v1/runs/r_1/events?streamMode=does-not-exist", fullKey, "", "Accept", accept), 400, CodeUnsupportedStreamMode)
		sup, _ := e.Details["supported"].([]any)
		if len(sup) != 4 {
			t.Errorf("supported = %v", e.Details)
		}
	}
	env.expectError(env.do("GET", "/v1/runs/r_1/events?streamMode=values,debug", fullKey, ""), 400, CodeUnsupportedStreamMode)
}

type sseFrame struct {
	id, event, data string
}

func parseSSE(t *testing.T, body string) (frames []sseFrame, comments int) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseFrame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur != (sseFrame{}) {
				frames = append(frames, cur)
			}
			cur = sseFrame{}
		case strings.HasPrefix(line, ":"):
			comments++
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return frames, comments
}

func TestSSE(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "completed"}, events: noopEvents("r_1")})
	types := func(fs []sseFrame) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.id+":"+f.event)
		}
		return out
	}
	cases := []struct {
		query, lastID string
		want          []string
	}{
		{"", "", []string{"0:run.started", "2:node.completed", "3:run.completed"}},
		{"?streamMode=updates", "", []string{"0:run.started", "2:node.completed", "3:run.completed"}},
		{"?streamMode=debug", "", []string{"0:run.started", "1:node.started", "2:node.completed", "3:run.completed"}},
		{"?streamMode=messages", "", nil},
		{"?streamMode=debug", "1", []string{"2:node.completed", "3:run.completed"}},
		{"?streamMode=debug", "3", nil},
		// values: one snapshot of the finished run, its id the last sequence, never repeated.
		{"?streamMode=values", "", []string{"3:state.snapshot"}},
		{"?streamMode=values", "1", []string{"3:state.snapshot"}},
	}
	for _, tc := range cases {
		rec := env.do("GET", "/v1/runs/r_1/events"+tc.query, fullKey, "", "Last-Event-ID", tc.lastID)
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: %d %v", tc.query, rec.Code, rec.Header())
		}
		frames, _ := parseSSE(t, rec.Body.String())
		if got := types(frames); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s Last-Event-ID=%s: frames %v, want %v", tc.query, tc.lastID, got, tc.want)
		}
		for _, f := range frames {
			if f.event == "state.snapshot" {
				// values mode: the payload is a RunSnapshot (state.snapshot is not in
				// the v1 RunEventType enum).
				validateSchema(t, "run-snapshot.schema.json", decode[workflows.Event](t, []byte(f.data)).Payload)
				continue
			}
			validateSchema(t, "run-event.schema.json", []byte(f.data))
		}
	}
	env.expectError(env.do("GET", "/v1/runs/r_1/events", fullKey, "", "Last-Event-ID", "abc"), 400, CodeValidation)
}

func TestResolve(t *testing.T) {
	env := newTestEnv(t)
	pending := func(id string) *fakeRun {
		return env.ft.add(&fakeRun{
			snap: workflows.Snapshot{RunID: id, WorkflowID: "conformance-approval", Status: "waiting-approval", CurrentNodeID: "gate",
				Interrupt: &workflows.PendingInterrupt{NodeID: "gate", InterruptID: "int_1", Kind: "approval", RequestedAt: "2026-01-01T00:00:00Z"}},
			check: workflows.ResolveCheck{OK: true, RunStatus: "running"},
		})
	}
	r := pending("r_1")
	rec := env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if got := decode[map[string]string](t, rec.Body.Bytes()); got["runId"] != "r_1" || got["nodeId"] != "gate" || got["status"] != "running" {
		t.Errorf("body %v", got)
	}
	req := r.signals[0].(workflows.ResolveRequest)
	if req.NodeID != "gate" || string(req.ResumeValue) != `{"action":"accept"}` || req.ResolvedBy != "full" || req.Via != "rest" ||
		req.ReceivedAtMs != env.now.UnixMilli() || !strings.HasPrefix(req.RequestID, "idem-") || req.Caller != "full" || req.Delegate {
		t.Errorf("signal %+v", req)
	}
	// Aliases.
	rec = env.do("POST", "/v1/runs/r_1:resolveInterrupt", fullKey, `{"nodeId":"gate","resumeValue":{"action":"accept"}}`)
	if rec.Code != 200 {
		t.Fatalf("alias: %d %s", rec.Code, rec.Body)
	}
	rec = env.do("POST", "/v1/runs/r_1/approvals/gate", fullKey, `{"action":"accept","comment":"ok"}`)
	if rec.Code != 200 || string(r.signals[2].(workflows.ResolveRequest).ResumeValue) != `{"action":"accept","comment":"ok"}` {
		t.Fatalf("legacy: %d %s", rec.Code, rec.Body)
	}
	// Bare RFC 0005 ConversationResolve and PromptPack event bodies become the resume value.
	rec = env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"operation":"close","outcome":{"ok":true}}`)
	if rec.Code != 200 || string(r.signals[3].(workflows.ResolveRequest).ResumeValue) != `{"operation":"close","outcome":{"ok":true}}` {
		t.Fatalf("conversation resolve: %d %s", rec.Code, rec.Body)
	}
	rec = env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"event":"approved","context":"fine"}`)
	if rec.Code != 200 {
		t.Fatalf("event injection: %d %s", rec.Code, rec.Body)
	}
	// The same Idempotency-Key again is the same request: answered with its outcome,
	// not signalled again.
	first := env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":1}`, "Idempotency-Key", "i-1")
	again := env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":1}`, "Idempotency-Key", "i-1")
	if first.Code != 200 || again.Code != 200 || again.Body.String() != first.Body.String() || again.Header().Get(HeaderIdempotentReplay) != "true" || len(r.signals) != 6 {
		t.Errorf("idempotent resolve: %d %s / %d %s, %d signals", first.Code, first.Body, again.Code, again.Body, len(r.signals))
	}
	// A request the run refused is answered with the run's refusal (the check passed
	// before the signal, a concurrent resolve won meanwhile).
	r.onSignal = func(r *fakeRun, _ string, arg any) {
		req := arg.(workflows.ResolveRequest)
		r.outcomes[req.RequestID] = workflows.ResolveOutcome{RequestID: req.RequestID, Status: 409, Code: CodeInterruptResolved, Message: "the interrupt was resolved by another request"}
	}
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"reject"}}`), 409, CodeInterruptResolved)
	r.onSignal = nil

	// The workflow's check decides the error.
	r.check = workflows.ResolveCheck{Status: 404, Code: CodeInterruptNotFound, Message: "no interrupt pending at node \"no-such-node\""}
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/no-such-node", fullKey, `{"resumeValue":{"action":"accept"}}`), 404, CodeInterruptNotFound)
	r.check = workflows.ResolveCheck{Status: 400, Code: CodeValidation, Message: "action \"maybe\" is not offered", Details: json.RawMessage(`{"allowed":["accept","reject"]}`)}
	e := env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"maybe"}}`), 400, CodeValidation)
	if e.Details["allowed"] == nil {
		t.Errorf("details %v", e.Details)
	}
	r.check = workflows.ResolveCheck{Status: 409, Code: CodeInterruptResolved, Message: "already resolved"}
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)
	n := len(r.signals)

	// Input errors never reach the workflow.
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{"resumeValue":1,"x":2}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, `{}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, ``), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/..", fullKey, `{"resumeValue":1}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_1/approvals/gate", fullKey, `{"comment":"no action"}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_1:resolveInterrupt", fullKey, `{"resumeValue":1}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", lowKey, `{"resumeValue":1}`), 403, CodeForbidden)
	env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", otherKey, `{"resumeValue":1}`), 404, CodeNotFound)
	env.expectError(env.do("POST", "/v1/runs/r_404/interrupts/gate", fullKey, `{"resumeValue":1}`), 404, CodeNotFound)
	if len(r.signals) != n {
		t.Errorf("invalid requests signalled the run")
	}
	// A cancelled run's interrupts are void.
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_c", Status: "cancelled"}, check: workflows.ResolveCheck{OK: true}})
	env.expectError(env.do("POST", "/v1/runs/r_c/interrupts/gate", fullKey, `{"resumeValue":1}`), 409, CodeInterruptResolved)
}

func TestInterruptTokens(t *testing.T) {
	env := newTestEnv(t)
	run := env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: "r_1", WorkflowID: "conformance-interrupt-external-event", Status: "waiting-external", CurrentNodeID: "wait",
			Interrupt: &workflows.PendingInterrupt{NodeID: "wait", InterruptID: "int_7", Kind: "external-event", RequestedAt: "2026-01-01T00:00:00Z",
				Data: json.RawMessage(`{"eventType":"order.updated","correlation":{"orderId":"fixture-order-1"}}`)}},
		check: workflows.ResolveCheck{OK: true, RunStatus: "running"},
		onSignal: func(r *fakeRun, name string, _ any) {
			if name == workflows.ResolveSignal {
				r.snap.Interrupt, r.snap.Status = nil, "running"
			}
		},
	})
	snap := decode[workflows.Snapshot](t, env.do("GET", "/v1/runs/r_1", fullKey, "").Body.Bytes())
	tok := snap.Interrupt.InterruptToken
	// Stable across reads.
	if again := decode[workflows.Snapshot](t, env.do("GET", "/v1/runs/r_1", fullKey, "").Body.Bytes()); again.Interrupt.InterruptToken != tok {
		t.Error("token changes between reads")
	}
	// Inspect, no auth header needed.
	rec := env.do("GET", "/v1/interrupts/"+tok, "", "")
	if rec.Code != 200 {
		t.Fatalf("inspect: %d %s", rec.Code, rec.Body)
	}
	if got := decode[map[string]any](t, rec.Body.Bytes()); got["interruptId"] != "int_7" || got["kind"] != "external-event" {
		t.Errorf("inspect body %v", got)
	}
	// Malformed, unknown, tampered.
	env.expectError(env.do("GET", "/v1/interrupts/!!!not-a-valid-token!!!", "", ""), 400, CodeValidation)
	env.expectError(env.do("GET", "/v1/interrupts/tok_c29tZXRoaW5nLXJhbmRvbQ", "", ""), 404, CodeInterruptNotFound)
	env.expectError(env.do("POST", "/v1/interrupts/tok_c29tZXRoaW5nLXJhbmRvbQ", "", `{"correlation":{"orderId":"x"}}`), 404, CodeInterruptNotFound)
	// ow2.hs256.<kid>.<payload>.<mac>
	if parts := strings.Split(tok, "."); len(parts) != 5 || parts[0] != "ow2" || parts[1] != "hs256" || parts[2] != "k1" {
		t.Fatalf("token %q is not of the ow2 grammar", tok)
	}
	cut := strings.LastIndexByte(tok, '.')
	signed, sig := tok[:cut], tok[cut+1:]
	forged := env.srv.tokens.sign(tokenClaims{RunID: "r_1", NodeID: "wait", InterruptID: "int_7", Exp: env.now.Add(time.Hour).Unix(), Intent: IntentResolve})
	forgedSig := forged[strings.LastIndexByte(forged, '.')+1:]
	if forgedSig == sig {
		t.Fatal("different claims, same MAC")
	}
	env.expectError(env.do("POST", "/v1/interrupts/"+signed+"."+forgedSig, "", `{"resumeValue":{}}`), 404, CodeInterruptNotFound)
	env.expectError(env.do("POST", "/v1/interrupts/"+signed[:len(signed)-2]+"AA."+sig, "", `{"resumeValue":{}}`), 404, CodeInterruptNotFound)
	// The MAC covers the algorithm and the kid: neither can be swapped.
	env.expectError(env.do("GET", "/v1/interrupts/"+strings.Replace(tok, "ow2.hs256.", "ow2.hs512.", 1), "", ""), 404, CodeInterruptNotFound)
	env.expectError(env.do("GET", "/v1/interrupts/"+strings.Replace(tok, ".k1.", ".k0.", 1), "", ""), 404, CodeInterruptNotFound)
	other := newTokenSigner("k1", []byte("another secret"), nil).sign(tokenClaims{RunID: "r_1", NodeID: "wait", InterruptID: "int_7", Exp: env.now.Add(time.Hour).Unix(), Intent: IntentResolve})
	env.expectError(env.do("POST", "/v1/interrupts/"+other, "", `{"resumeValue":{}}`), 404, CodeInterruptNotFound)
	// Inspect-only tokens cannot resolve.
	inspect := env.srv.tokens.sign(tokenClaims{RunID: "r_1", NodeID: "wait", InterruptID: "int_7", Exp: env.now.Add(time.Hour).Unix(), Intent: IntentInspect})
	env.expectError(env.do("POST", "/v1/interrupts/"+inspect, "", `{"resumeValue":{}}`), 403, CodeForbidden)
	// Expired.
	expired := env.srv.tokens.sign(tokenClaims{RunID: "r_1", NodeID: "wait", InterruptID: "int_7", Exp: env.now.Add(-time.Second).Unix(), Intent: IntentResolve})
	env.expectError(env.do("POST", "/v1/interrupts/"+expired, "", `{"resumeValue":{}}`), 410, CodeInterruptExpired)
	if len(run.signals) != 0 {
		t.Fatal("a bad token reached the workflow")
	}
	// Correlation mismatch: the workflow's check answers 422.
	run.check = workflows.ResolveCheck{Status: 422, Code: CodeValidation, Message: "correlation orderId mismatch"}
	env.expectError(env.do("POST", "/v1/interrupts/"+tok, "", `{"resumeValue":{"orderId":"different-order"}}`), 422, CodeValidation)
	// Resolve, then replay.
	run.check = workflows.ResolveCheck{OK: true, RunStatus: "running"}
	rec = env.do("POST", "/v1/interrupts/"+tok, "", `{"resumeValue":{"orderId":"fixture-order-1","status":"completed"}}`)
	if rec.Code != 200 {
		t.Fatalf("token resolve: %d %s", rec.Code, rec.Body)
	}
	req := run.signals[0].(workflows.ResolveRequest)
	if req.InterruptID != "int_7" || req.NodeID != "wait" || req.Via != "token" || req.ResolvedBy != "full" || req.Caller != "full" {
		t.Errorf("signal %+v", req)
	}
	env.expectError(env.do("POST", "/v1/interrupts/"+tok, "", `{"resumeValue":{"orderId":"fixture-order-1"}}`), 409, CodeInterruptResolved)
	env.expectError(env.do("GET", "/v1/interrupts/"+tok, "", ""), 409, CodeInterruptResolved)
	if len(run.signals) != 1 {
		t.Error("replayed token reached the workflow")
	}
}

func TestTokenRotation(t *testing.T) {
	old := newTokenSigner("k0", []byte("old"), nil)
	tok := old.sign(tokenClaims{RunID: "r", NodeID: "n", InterruptID: "i", Exp: 100, Intent: IntentResolve})
	cur := newTokenSigner("k1", []byte("new"), map[string][]byte{"k0": []byte("old")})
	if _, err := cur.verify(tok, time.Unix(50, 0)); err != nil {
		t.Errorf("old-key token rejected: %v", err)
	}
	if _, err := newTokenSigner("k1", []byte("new"), nil).verify(tok, time.Unix(50, 0)); err != errTokenUnknown {
		t.Errorf("retired key accepted: %v", err)
	}
	if _, err := cur.verify(tok, time.Unix(100, 0)); err != errTokenExpired {
		t.Errorf("expiry: %v", err)
	}
}

func TestFork(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_src", WorkflowID: "conformance-noop", Status: "completed", Tags: []string{"t"}}, events: noopEvents("r_src")})
	env.expectError(env.do("POST", "/v1/runs/r_src:fork", fullKey, `{"mode":"branch","fromSeq":1}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_src:fork", fullKey, `{"mode":"replay","runOptionsOverlay":{"x":1}}`), 400, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_src:fork", fullKey, `{"mode":"replay","fromSeq":9}`), 422, CodeValidation)
	env.expectError(env.do("POST", "/v1/runs/r_src:fork", otherKey, `{"mode":"replay"}`), 404, CodeNotFound)
	env.expectError(env.do("POST", "/v1/runs/r_src:fork", lowKey, `{"mode":"replay"}`), 403, CodeForbidden)
	rec := env.do("POST", "/v1/runs/r_src:fork", fullKey, `{"mode":"replay"}`)
	if rec.Code != 201 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	got := decode[map[string]any](t, rec.Body.Bytes())
	if got["sourceRunId"] != "r_src" || got["mode"] != "replay" || got["fromSeq"].(float64) != 0 {
		t.Errorf("body %v", got)
	}
	r := env.ft.get(got["runId"].(string))
	if r.input.Fork == nil || r.input.Fork.SourceRunID != "r_src" || len(r.input.Fork.Events) != 4 || string(r.input.Inputs) != `{"k":1}` {
		t.Errorf("fork input %+v", r.input)
	}
	if !strings.Contains(r.opts.StaticSummary, "fork of r_src") {
		t.Errorf("summary %q", r.opts.StaticSummary)
	}
}

func TestGetWorkflowAndHealth(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do("GET", "/v1/workflows/conformance-identity", fullKey, "")
	if rec.Code != 200 {
		t.Fatalf("%d", rec.Code)
	}
	validateSchema(t, "workflow-definition.schema.json", rec.Body.Bytes())
	env.expectError(env.do("GET", "/v1/workflows/nope", fullKey, ""), 404, CodeNotFound)
	env.expectError(env.do("GET", "/v1/workflows/conformance-identity", "", ""), 401, CodeUnauthenticated)
	if rec := env.do("GET", "/healthz", "", ""); rec.Code != 200 {
		t.Errorf("healthz %d", rec.Code)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{"WOP_API_KEY": "k", "WOP_TOKEN_SECRET": "s", "WOP_MAX_BODY_BYTES": "2048", "WOP_TOKEN_TTL": "1h"}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.MaxRequestBodyBytes != 2048 || cfg.TokenTTL != time.Hour || len(cfg.Keys) != 1 {
		t.Fatalf("%+v %v", cfg, err)
	}
	env["WOP_MAX_BODY_BYTES"] = "lots"
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Error("bad number accepted")
	}
	delete(env, "WOP_MAX_BODY_BYTES")
	delete(env, "WOP_TOKEN_SECRET")
	if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Error("missing token secret accepted")
	}
}

func TestRunIDs(t *testing.T) {
	now := time.Unix(1700000000, 0)
	a, b := newRunID(now), newRunID(now.Add(time.Millisecond))
	if len(a) != 28 || a >= b {
		t.Errorf("ids %q %q not time-ordered", a, b)
	}
	ids := []string{newRunID(now), newRunID(now), newRunID(now)}
	sort.Strings(ids)
	if ids[0] == ids[1] || ids[1] == ids[2] {
		t.Error("random part repeats")
	}
}

// Secrets never reach the request log; 5xx answers carry a correlation id, not the cause.
func TestLoggingAndInternalErrors(t *testing.T) {
	var logs strings.Builder
	env := newTestEnv(t)
	env.srv.log = slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "completed"}})
	env.do("GET", "/v1/runs/r_1", fullKey, "", "Idempotency-Key", "idem-secret-value")
	env.do("POST", "/v1/runs", fullKey, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", "idem-secret-value")
	env.do("GET", "/v1/interrupts/"+env.srv.tokens.sign(tokenClaims{RunID: "r_1", NodeID: "n", InterruptID: "i", Exp: 1}), "", "")

	env.ft.mu.Lock()
	env.ft.runs["r_boom"] = nil // the fake answers a nil run with a Go error
	env.ft.mu.Unlock()
	rec := env.do("GET", "/v1/runs/r_boom", fullKey, "")
	e := env.expectError(rec, 500, CodeInternal)
	corr, _ := e.Details["correlationId"].(string)
	if corr == "" || strings.Contains(e.Message, "nil run") {
		t.Errorf("500 envelope %+v", e)
	}
	out := logs.String()
	for _, secret := range []string{fullKey, "idem-secret-value", "eyJ"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, corr) || !strings.Contains(out, "nil run") || !strings.Contains(out, "route=/v1/runs/:runId") {
		t.Errorf("log lacks the correlation id, cause or route:\n%s", out)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Request bodies every reader reads the same way: UTF-8, unique keys, bounded nesting;
// each refusal names the field.
func TestDecodeStrictRefusesAmbiguousJSON(t *testing.T) {
	deep := `{"resumeValue":` + strings.Repeat(`{"a":`, MaxJSONDepth) + `1` + strings.Repeat(`}`, MaxJSONDepth) + `}`
	ok := `{"resumeValue":` + strings.Repeat(`[`, MaxJSONDepth-1) + strings.Repeat(`]`, MaxJSONDepth-1) + `}`
	for _, tc := range []struct{ name, body, field string }{
		{"invalid utf-8", "{\"resumeValue\":{\"turn\":{\"content\":\"\xff\xfe\"}}}", "resumeValue.turn.content"},
		{"invalid utf-8 key", "{\"resumeValue\":{\"\xff\":1}}", "resumeValue.\uFFFD"},
		{"lone surrogate", `{"resumeValue":{"text":"\ud800"}}`, "resumeValue.text"},
		{"low surrogate first", `{"resumeValue":["ok","\udc00\ud800"]}`, "resumeValue[1]"},
		{"duplicate key", `{"resumeValue":{"turn":{"messageId":"a","messageId":"b"}}}`, "resumeValue.turn.messageId"},
		{"duplicate top key", `{"workflowId":"a","workflowId":"b"}`, "workflowId"},
		{"too deep", deep, "resumeValue" + strings.Repeat(".a", MaxJSONDepth-1)},
		{"beyond a double", `{"resumeValue":{"amount":1e400}}`, "resumeValue.amount"},
		{"far beyond a double", `{"inputs":{"n":[1,-1e1000000000]}}`, "inputs.n[1]"},
		{"40-digit integer", `{"resumeValue":{"editedArtifactData":{"arguments":{"id":1234567890123456789012345678901234567890}}}}`, "resumeValue.editedArtifactData.arguments.id"},
		{"2^53", `{"n":9007199254740992}`, "n"},
		{"a number as the body", `1e999`, "(body)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			err := decodeStrict([]byte(tc.body), &v)
			var ae *Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != CodeValidation {
				t.Fatalf("err = %v", err)
			}
			if f := ae.Details["field"]; f != tc.field {
				t.Errorf("field = %q, want %q (%s)", f, tc.field, ae.Message)
			}
		})
	}
	var v any
	for _, body := range []string{ok, `{"resumeValue":"\ud83d\ude00 é \\u \"q\""}`, `{"a":{"x":1},"b":{"x":1}}`,
		`{"n":[9007199254740991,-9007199254740991,1.7e308,1e-400,12345678901234567890.5,"1234567890123456789012345678901234567890"]}`} {
		if err := decodeStrict([]byte(body), &v); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	// Over HTTP: the envelope names the field and nothing reaches the run.
	env := newTestEnv(t)
	r := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_1", Status: "waiting-approval"}, check: workflows.ResolveCheck{OK: true}})
	e := env.expectError(env.do("POST", "/v1/runs/r_1/interrupts/gate", fullKey, "{\"resumeValue\":{\"text\":\"\xff\"}}"), 400, CodeValidation)
	if e.Details["field"] != "resumeValue.text" || len(r.signals) != 0 {
		t.Errorf("details %v, %d signals", e.Details, len(r.signals))
	}
}

// A resolve is answered with the run's recorded outcome; without one in time, 202
// queued with the key that learns it later; a run that ends without applying it, 410.
func TestResolveAnswersTheRunsOutcome(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Guards.ResolveWait = 300 * time.Millisecond })
	r := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_q", Status: "waiting-approval"},
		check: workflows.ResolveCheck{OK: true, RunStatus: "running"}, noOutcome: true, open: true})
	rec := env.do("POST", "/v1/runs/r_q/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`)
	if rec.Code != 202 {
		t.Fatalf("no outcome in time: %d %s", rec.Code, rec.Body)
	}
	q := decode[map[string]string](t, rec.Body.Bytes())
	if q["status"] != "queued" || q["idempotencyKey"] == "" || q["requestId"] != r.signals[0].(workflows.ResolveRequest).RequestID {
		t.Fatalf("202 body %v", q)
	}
	// The run applies it later; the same request again (its key) learns that, sends nothing.
	env.ft.mu.Lock()
	r.outcomes = map[string]workflows.ResolveOutcome{q["requestId"]: {RequestID: q["requestId"], Applied: true, RunStatus: "running"}}
	env.ft.mu.Unlock()
	rec = env.do("POST", "/v1/runs/r_q/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`, "Idempotency-Key", q["idempotencyKey"])
	if rec.Code != 200 || rec.Header().Get(HeaderIdempotentReplay) != "true" || len(r.signals) != 1 {
		t.Fatalf("repeat: %d %s (%d signals)", rec.Code, rec.Body, len(r.signals))
	}
	// A run that ends (its workflow closed) without applying the request: 410.
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_e", Status: "waiting-approval"},
		check: workflows.ResolveCheck{OK: true}, noOutcome: true,
		onSignal: func(r *fakeRun, _ string, _ any) { r.snap.Status = "cancelled" }})
	env.expectError(env.do("POST", "/v1/runs/r_e/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)
	// A workflow Temporal closes without the run's terminal event (terminated): 410 that
	// says so, not the status the run last had.
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_k", Status: "waiting-approval"},
		check: workflows.ResolveCheck{OK: true}, noOutcome: true})
	e := env.expectError(env.do("POST", "/v1/runs/r_k/interrupts/gate", fullKey, `{"resumeValue":{"action":"accept"}}`), 409, CodeInterruptResolved)
	if !strings.Contains(e.Message, "closed by Temporal") {
		t.Errorf("message %q", e.Message)
	}
}

// A token never grants more than the key of the reader it was served to: a key without
// approvals:respond gets inspect-only tokens; a conversation token names its turn.
func TestTokensFollowTheReader(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{
		snap: workflows.Snapshot{RunID: "r_t", Status: "waiting-approval",
			Interrupt: &workflows.PendingInterrupt{NodeID: "convo", InterruptID: "int_c", Kind: "conversation.exchange", RequestedAt: "2025-01-01T00:00:00Z",
				Data: json.RawMessage(`{"conversationId":"r_t:convo:0","turnIndex":3}`)}},
		check: workflows.ResolveCheck{OK: true, RunStatus: "waiting-approval"},
	})
	read := func(key string) tokenClaims {
		snap := decode[workflows.Snapshot](t, env.do("GET", "/v1/runs/r_t", key, "").Body.Bytes())
		cl, err := env.srv.tokens.verify(snap.Interrupt.InterruptToken, env.now)
		if err != nil {
			t.Fatalf("served token does not verify (requested long before the TTL): %v", err)
		}
		return *cl
	}
	full, low := read(fullKey), read(lowKey)
	if full.Intent != IntentResolve || full.Sub != "full" || full.Turn == nil || *full.Turn != 3 || full.Exp != env.now.Add(DefaultTokenTTL).Unix() {
		t.Errorf("full reader's token %+v", full)
	}
	if low.Intent != IntentInspect || low.Sub != "low" {
		t.Errorf("read-only reader's token %+v", low)
	}
}
