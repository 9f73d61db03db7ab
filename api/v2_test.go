package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// The OpenWOP-Version table (versioning.md §1.3), answered before any handler, and the
// header on every protocol response.
func TestVersionNegotiation(t *testing.T) {
	env := newTestEnv(t)
	for _, tc := range []struct {
		method, path, version string
		key                   string
		status                int
		served                string // OpenWOP-Version of the response ("" = none)
		code                  string
	}{
		{"GET", "/.well-known/openwop", "", "", 200, "1.0", ""},
		{"GET", "/.well-known/openwop", "2", "", 200, "2.0", ""},
		{"GET", "/.well-known/openwop", "2.0", "", 200, "2.0", ""},
		{"GET", "/.well-known/openwop", "2.7", "", 200, "2.0", ""},
		{"GET", "/.well-known/openwop", "1", "", 200, "1.0", ""},
		{"GET", "/.well-known/openwop", "9", "", 406, "2.0", protocol.CodeProtocolVersionUnsupported},
		{"GET", "/.well-known/openwop", "v2", "", 406, "2.0", protocol.CodeProtocolVersionUnsupported},
		{"GET", "/runs/r_nope000000000000000", "", fullKey, 404, "2.0", CodeNotFound},
		{"GET", "/runs/r_nope000000000000000", "1", fullKey, 404, "1.0", CodeNotFound},
		{"GET", "/runs/r_nope000000000000000", "9.1", fullKey, 406, "2.0", protocol.CodeProtocolVersionUnsupported},
		{"GET", "/runs", "", "", 401, "2.0", CodeUnauthenticated},
		{"GET", "/v1/runs/r_nope000000000000000", "", fullKey, 404, "1.0", CodeNotFound},
		{"GET", "/v1/runs/r_nope000000000000000", "1", fullKey, 404, "1.0", CodeNotFound},
		{"GET", "/v1/runs/r_nope000000000000000", "1.4", fullKey, 404, "1.0", CodeNotFound},
		{"GET", "/v1/runs", "2", fullKey, 400, "1.0", protocol.CodeProtocolVersionMismatch},
		{"GET", "/v1/runs", "garbage", fullKey, 400, "1.0", protocol.CodeProtocolVersionMismatch},
		{"GET", "/no/such/thing", "", fullKey, 404, "2.0", CodeNotFound},
		{"DELETE", "/runs", "", fullKey, 404, "2.0", CodeNotFound},
		{"DELETE", "/v1/runs", "", fullKey, 405, "1.0", CodeMethodNotAllowed},
		{"GET", "/openapi.json", "", "", 200, "2.0", ""},
		{"GET", "/v1/openapi.json", "", "", 200, "1.0", ""},
		{"GET", "/healthz", "", "", 200, "", ""},
		{"GET", "/inbox", "", "", 200, "", ""},
	} {
		name := fmt.Sprintf("%s %s [%s]", tc.method, tc.path, tc.version)
		rec := env.do(tc.method, tc.path, tc.key, "", "OpenWOP-Version", tc.version)
		require.Equal(t, tc.status, rec.Code, "%s: %s", name, rec.Body)
		assert.Equal(t, tc.served, rec.Header().Get("OpenWOP-Version"), name)
		if tc.code != "" {
			var e envelope
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), name)
			assert.Equal(t, tc.code, e.Error, name)
			if tc.code == protocol.CodeProtocolVersionUnsupported {
				assert.Equal(t, []any{"1.0", "2.0"}, e.Details["protocolVersions"], "%s: the 406 names the versions served", name)
				expectV2Error(t, rec, 406, tc.code)
			}
		}
		if !strings.HasPrefix(tc.path, "/v1") && tc.served != "" {
			assert.Contains(t, rec.Header().Get("Vary"), "OpenWOP-Version", "%s: the header selects the representation", name)
		}
	}
}

// Discovery is one resource: the v1 document with its three added keys by default,
// the closed v2 root under major 2; each with its own ETag and a 304 carrying the
// header.
func TestDiscoveryRepresentations(t *testing.T) {
	env := newTestEnv(t)
	v1 := env.do("GET", "/.well-known/openwop", "", "")
	v2 := env.do("GET", "/.well-known/openwop", "", "", "OpenWOP-Version", "2.0")
	require.Equal(t, 200, v1.Code)
	require.Equal(t, 200, v2.Code)
	assert.NotEqual(t, v1.Body.String(), v2.Body.String())
	var d1, d2 map[string]any
	require.NoError(t, json.Unmarshal(v1.Body.Bytes(), &d1))
	require.NoError(t, json.Unmarshal(v2.Body.Bytes(), &d2))
	for _, d := range []map[string]any{d1, d2} {
		assert.Equal(t, []any{"1.0", "2.0"}, d["protocolVersions"])
		assert.Equal(t, "1.0", d["preferredVersion"], "while v1 is listed, preferredVersion is the 1.x")
		assert.Equal(t, float64(3), d["eventLogSchemaVersion"], "the era of new runs")
		assert.Equal(t, []any{}, d["signingKeys"])
		assert.Equal(t, "openwop", d["observability"].(map[string]any)["otel"].(map[string]any)["attributeNamespace"], "both roots carry the observability record")
	}
	assert.Equal(t, "1.0", d1["protocolVersion"], "the v1 document is the v1 document")
	assert.NotNil(t, d1["supportedEnvelopes"])
	assert.NotEmpty(t, v1.Header().Get("Capabilities-Etag"))
	assert.Empty(t, v2.Header().Get("Capabilities-Etag"), "v2 removed Capabilities-Etag")
	for _, k := range []string{"protocolVersion", "supportedTransports", "streamModes", "promptPacks", "runs", "supportedEnvelopes", "schemaVersions"} {
		assert.NotContains(t, d2, k, "the closed v2 root has no %s", k)
	}
	assert.Contains(t, d2["extensions"], "wop.host")
	for _, rec := range []struct {
		version string
		etag    string
	}{{"", v1.Header().Get("ETag")}, {"2", v2.Header().Get("ETag")}} {
		require.NotEmpty(t, rec.etag)
		nm := env.do("GET", "/.well-known/openwop", "", "", "OpenWOP-Version", rec.version, "If-None-Match", rec.etag)
		assert.Equal(t, 304, nm.Code)
		assert.Empty(t, nm.Body.String())
		assert.Equal(t, map[string]string{"": "1.0", "2": "2.0"}[rec.version], nm.Header().Get("OpenWOP-Version"), "a 304 names its contract too")
	}
	assert.NotEqual(t, v1.Header().Get("ETag"), v2.Header().Get("ETag"))
}

// Runs created at v2 carry tenant-bound ids and projected links; every spelling of a
// bound id reads the run; a foreign tenant segment is 403 before any lookup.
func TestBoundRunIDs(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do("POST", "/runs", fullKey, `{"workflowId":"conformance-noop"}`)
	require.Equal(t, 201, rec.Code, "%s", rec.Body)
	var created CreateRunResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &created))
	tenant, opaque, bound := protocol.SplitBoundID(created.RunID)
	require.True(t, bound, created.RunID)
	assert.Equal(t, "default", tenant)
	require.NotNil(t, env.ft.get(opaque), "the Temporal workflow id is the opaque part")
	assert.Equal(t, "http://host.test/runs/default~2F"+opaque+"/events", created.EventsURL)
	assert.Equal(t, "http://host.test/runs/default~2F"+opaque, created.StatusURL)

	for _, seg := range []string{"default~2F" + opaque, "default%2F" + opaque, "default~2f" + opaque, opaque} {
		got := env.do("GET", "/runs/"+seg, fullKey, "")
		require.Equal(t, 200, got.Code, "%s: %s", seg, got.Body)
		validateV2(t, "run-snapshot.schema.json", got.Body.Bytes())
		var snap map[string]any
		require.NoError(t, json.Unmarshal(got.Body.Bytes(), &snap))
		assert.Equal(t, created.RunID, snap["runId"], "%s: the response names the run bound", seg)
	}
	// A v1 read of the same run: the bare id, no v2 fields.
	got := env.do("GET", "/v1/runs/"+opaque, fullKey, "")
	require.Equal(t, 200, got.Code)
	var v1 map[string]any
	require.NoError(t, json.Unmarshal(got.Body.Bytes(), &v1))
	assert.Equal(t, opaque, v1["runId"])
	assert.NotContains(t, v1, "eventLogSchemaVersion")
	assert.Equal(t, map[string]any{"tenant": "default", "principal": "full"}, v1["owner"])

	// Another tenant's segment: refused before the run is looked up, whether or not it
	// exists; an existing run of another tenant under a bare id is not found.
	for _, seg := range []string{"tenant-b~2F" + opaque, "tenant-b%2Fr_doesnotexist0000000000000", "tenant-b~2Fr_doesnotexist0000000000000"} {
		expectV2Error(t, env.do("GET", "/runs/"+seg, fullKey, ""), 403, protocol.CodeIDTenantMismatch)
		expectV2Error(t, env.do("GET", "/runs/"+seg+"/events/poll?timeout=1", fullKey, ""), 403, protocol.CodeIDTenantMismatch)
	}
	expectV2Error(t, env.do("GET", "/runs/"+opaque, otherKey, ""), 404, CodeNotFound)
	expectV2Error(t, env.do("GET", "/runs/default~2"+opaque, fullKey, ""), 400, CodeValidation)
	expectV2Error(t, env.do("GET", "/runs/default~2F", fullKey, ""), 400, CodeValidation)
	expectV2Error(t, env.do("GET", "/runs/bad%20tenant~2F"+opaque, fullKey, ""), 400, CodeValidation)
}

// The v2 create body: closed, v2's run options, a configurable this host honours or
// refuses by name, and the Idempotency-Key grammar with one record per endpoint.
func TestCreateRunV2Body(t *testing.T) {
	env := newTestEnv(t)
	tooMany := make([]string, 101)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("t%d", i)
	}
	many, _ := json.Marshal(tooMany)
	for _, tc := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","tags":` + string(many) + `}`, "tags"},
		{`{"workflowId":"conformance-noop","tags":["` + strings.Repeat("y", 257) + `"]}`, "tags[0]"},
		{`{"workflowId":"conformance-noop","conformanceUnknownRootKey":1}`, "conformanceUnknownRootKey"},
		{`{"workflowId":"conformance-noop","configurable":{"recursionLimit":5}}`, "configurable.version"},
		{`{"workflowId":"conformance-noop","configurable":{"version":1,"bogus":{}}}`, "configurable.bogus"},
		{`{"workflowId":"conformance-noop","configurable":{"version":1,"run":{"typo":1}}}`, "configurable.run.typo"},
		{`{"workflowId":"conformance-noop","configurable":{"version":1,"run":{"runTimeoutMs":60000}}}`, "configurable.run.runTimeoutMs"},
		{`{"workflowId":"conformance-noop","configurable":{"version":1,"extensions":{"acme":{}}}}`, "configurable.extensions.acme"},
		{`{"workflowId":"conformance-noop","configurable":{"version":1,"extensions":{"wop":{"x":1}}}}`, "configurable.extensions.wop"},
		{`{"workflowId":"conformance-noop","mode":"eval"}`, "mode"},
		{`{"workflowId":"conformance-noop","agentId":"a"}`, "agentId"},
	} {
		e := expectV2Error(t, env.do("POST", "/runs", fullKey, tc.body), 400, CodeValidation)
		assert.Equal(t, tc.field, e.Details["field"], tc.body)
	}
	odd := []string{"has space", "emoji 🚀", "slash/colon:pipe|", "", strings.Repeat("x", 256), strings.Repeat("é", 256)}
	body, _ := json.Marshal(map[string]any{"workflowId": "conformance-noop", "tags": odd, "metadata": map[string]any{"n": 0},
		"configurable": map[string]any{"version": 1, "run": map[string]any{}, "extensions": map[string]any{"wop": map[string]any{}}}})
	rec := env.do("POST", "/runs", fullKey, string(body))
	require.Equal(t, 201, rec.Code, "odd-format tags are never refused on format: %s", rec.Body)
	var created CreateRunResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &created))
	_, opaque, _ := protocol.SplitBoundID(created.RunID)
	assert.Equal(t, odd, env.ft.get(opaque).input.Tags)
	assert.Equal(t, protocol.EraV2, env.ft.get(opaque).input.Era)

	expectV2Error(t, env.do("POST", "/runs", fullKey, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", "short"), 400, protocol.CodeIdempotencyKeyInvalid)
	expectV2Error(t, env.do("POST", "/runs", fullKey, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", strings.Repeat("k", 21)+"!"), 400, protocol.CodeIdempotencyKeyInvalid)
	starts := env.ft.starts
	key := "3q2-7wEv4dJHZ1pQ0sH9Lw"
	a := env.do("POST", "/runs", fullKey, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", key)
	require.Equal(t, 201, a.Code, "%s", a.Body)
	again := env.do("POST", "/runs", fullKey, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", key)
	require.Equal(t, 201, again.Code)
	assert.Equal(t, "true", again.Header().Get("OpenWOP-Idempotent-Replay"))
	assert.Equal(t, a.Body.String(), again.Body.String())
	v1 := env.do("POST", "/v1/runs", fullKey, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", key)
	require.Equal(t, 201, v1.Code)
	assert.Empty(t, v1.Header().Get("OpenWOP-Idempotent-Replay"), "/v1/runs and /runs are two endpoints: the key starts another run there")
	assert.Equal(t, starts+2, env.ft.starts)
	expectV2Error(t, env.do("POST", "/runs", fullKey, `{"workflowId":"conformance-identity","inputs":{"payload":{}}}`, "Idempotency-Key", key), 409, CodeIdempotencyMismatch)
}

// Cancel: v2 refuses a terminal run 409 run_terminal, v1 answers its status.
func TestCancelTerminalPerMajor(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_done0000000000000000", WorkflowID: "conformance-noop", Status: protocol.StatusCompleted,
		Owner: workflows.Owner{Tenant: "default"}}})
	rec := env.do("POST", "/v1/runs/r_done0000000000000000/cancel", fullKey, "")
	require.Equal(t, 200, rec.Code)
	assert.JSONEq(t, `{"runId":"r_done0000000000000000","status":"completed"}`, rec.Body.String())
	e := expectV2Error(t, env.do("POST", "/runs/default~2Fr_done0000000000000000/cancel", fullKey, `{}`), 409, protocol.CodeRunTerminal)
	assert.Equal(t, "completed", e.Details["runStatus"])
}

// The v2 poll: exactly five keys, the exclusive cursor, v1's cursor refused.
func TestPollV2(t *testing.T) {
	env := newTestEnv(t)
	r := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_poll000000000000000", WorkflowID: "conformance-noop", Status: protocol.StatusCompleted,
		Owner: workflows.Owner{Tenant: "default"}, LastSequence: 2}})
	r.events = []workflows.Event{ev(r.snap.RunID, 0, "run.started", `{"workflowId":"conformance-noop","engineVersion":"wop/1","owner":{"tenant":"default","principal":"full"}}`),
		ev(r.snap.RunID, 1, "agent.tool-called", `{"callId":"c1"}`), ev(r.snap.RunID, 2, "run.completed", "")}
	path := "/runs/default~2Fr_poll000000000000000/events/poll?timeout=1"
	rec := env.do("GET", path, fullKey, "")
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	keys := []string{}
	for k := range body {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"runId", "events", "lastSequence", "status", "isTerminal"}, keys)
	assert.JSONEq(t, `"default/r_poll000000000000000"`, string(body["runId"]))
	assert.JSONEq(t, `2`, string(body["lastSequence"]))
	assert.JSONEq(t, `"completed"`, string(body["status"]))
	assert.JSONEq(t, `true`, string(body["isTerminal"]))
	var evs []map[string]any
	require.NoError(t, json.Unmarshal(body["events"], &evs))
	require.Len(t, evs, 3)
	for _, e := range evs {
		b, _ := json.Marshal(e)
		validateEventV2(t, b)
		assert.Equal(t, "default/r_poll000000000000000", e["runId"])
		assert.Equal(t, float64(1), e["schemaVersion"])
	}
	started := evs[0]["payload"].(map[string]any)
	assert.Equal(t, float64(1), started["engineVersion"], "an integer at v2")
	assert.Equal(t, map[string]any{"tenant": "default", "subject": map[string]any{"issuer": "urn:openwop:legacy", "subjectId": "full",
		"tenant": "default", "lane": "api-key", "kind": "user"}}, started["owner"], "a run without a subject reads with the legacy stamp")
	assert.Equal(t, "agent.tool-called", evs[1]["type"])

	rec = env.do("GET", path+"&afterSequence=0", fullKey, "")
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.NoError(t, json.Unmarshal(body["events"], &evs))
	require.Len(t, evs, 2)
	assert.Equal(t, float64(1), evs[0]["sequence"])
	rec = env.do("GET", path+"&afterSequence=1000", fullKey, "")
	require.Equal(t, 200, rec.Code)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	assert.JSONEq(t, `[]`, string(body["events"]), "past the end: an empty page")
	expectV2Error(t, env.do("GET", path+"&lastSequence=1", fullKey, ""), 400, CodeValidation)

	// v1 is served v1's names back, and its poll shape.
	rec = env.do("GET", "/v1/runs/r_poll000000000000000/events/poll?timeout=1", fullKey, "")
	require.Equal(t, 200, rec.Code)
	var v1 EventsResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v1))
	assert.Equal(t, []string{"run.started", "agent.toolCalled", "run.completed"}, []string{v1.Events[0].Type, v1.Events[1].Type, v1.Events[2].Type})
	assert.True(t, v1.IsComplete)
}

// The projection per reader, event by event.
func TestEventProjection(t *testing.T) {
	w := wire{major: protocol.Major2, tenant: "acme"}
	withSubject := workflows.Event{EventID: "evt-r_1234567890abcdef-0", RunID: "r_1234567890abcdef", Type: "run.started", Sequence: 0, Timestamp: "2026-01-01T00:00:00.000Z",
		Payload: json.RawMessage(`{"workflowId":"w","engineVersion":"wop/1","owner":{"tenant":"acme","principal":"k","subject":{"issuer":"urn:wop:api-key","subjectId":"k","tenant":"acme","lane":"api-key","kind":"user"}}}`)}
	d, err := w.eventV2(&withSubject)
	require.NoError(t, err)
	assert.JSONEq(t, `{"workflowId":"w","engineVersion":1,"owner":{"tenant":"acme","subject":{"issuer":"urn:wop:api-key","subjectId":"k","tenant":"acme","lane":"api-key","kind":"user"}}}`, string(d.Payload))
	v1, err := eventV1(withSubject)
	require.NoError(t, err)
	assert.JSONEq(t, `{"workflowId":"w","engineVersion":"wop/1","owner":{"tenant":"acme","principal":"k"}}`, string(v1.Payload), "v1 never carried the subject")

	failed := workflows.Event{EventID: "evt-r_1234567890abcdef-3", RunID: "r_1234567890abcdef", Type: "node.failed", Sequence: 3, Timestamp: "t",
		Payload: json.RawMessage(`{"nodeId":"n","error":{"code":"budget_exhausted","message":"out"},"attempts":1}`)}
	d, err = w.eventV2(&failed)
	require.NoError(t, err)
	assert.JSONEq(t, `{"nodeId":"n","error":{"code":"wop.budget_exhausted","message":"out"},"attempts":1}`, string(d.Payload))

	stalled := workflows.Event{EventID: "evt-r_1234567890abcdef-5", RunID: "r_1234567890abcdef", Type: "workflow.stalled", Sequence: 5, Timestamp: "t",
		Payload: json.RawMessage(`{"lastNodeId":"desk","reason":"model-unavailable","error":{"code":"model_unavailable","message":"503","retryable":true}}`)}
	d, err = w.eventV2(&stalled)
	require.NoError(t, err)
	assert.JSONEq(t, `{"lastNodeId":"desk","reason":"model-unavailable","error":{"code":"wop.model_unavailable","message":"503","retryable":true}}`, string(d.Payload),
		"an outage's code is this host's vendor code at v2, the error's other members kept")
	v1, err = eventV1(stalled)
	require.NoError(t, err)
	assert.Equal(t, stalled, v1, "a v1 reader gets the event as stored")

	snap := w.snapshotV2(&workflows.Snapshot{RunID: "r_1234567890abcdef", Status: protocol.StatusRunning, Owner: workflows.Owner{Tenant: "acme"},
		Stalled: &workflows.Stall{Kind: "model", Provider: "p", NodeID: "desk", LastError: &protocol.RunError{Code: "model_unavailable", Message: "503"}}})
	ext := snap["extensions"].(map[string]any)[hostExtension].(map[string]any)
	require.IsType(t, workflows.Stall{}, ext["stalled"], "a stalled run says so at v2 too, under the host's extension")
	assert.Equal(t, "wop.model_unavailable", ext["stalled"].(workflows.Stall).LastError.Code)

	child := workflows.Event{EventID: "evt-r_1234567890abcdef-4", RunID: "r_1234567890abcdef", Type: "node.completed", Sequence: 4, Timestamp: "t",
		Payload: json.RawMessage(`{"nodeId":"sub","outputs":{"childRunId":"r_1234567890abcdef.sub.0","variables":{}},"interruptId":"int_0123456789abcdef"}`)}
	d, err = w.eventV2(&child)
	require.NoError(t, err)
	assert.JSONEq(t, `{"nodeId":"sub","outputs":{"childRunId":"acme/r_1234567890abcdef.sub.0","variables":{}},"interruptId":"acme/int_0123456789abcdef"}`, string(d.Payload))

	for stored, want := range map[string][2]string{"agent.toolReturned": {"agent.tool-returned", "agent.toolReturned"}, "agent.tool-returned": {"agent.tool-returned", "agent.toolReturned"}} {
		e := workflows.Event{EventID: "evt-x-0000000000001", RunID: "r_1", Type: stored, Payload: json.RawMessage(`{}`)}
		d, err := w.eventV2(&e)
		require.NoError(t, err)
		assert.Equal(t, want[0], d.Type, "a v2 reader, stored %s", stored)
		back, err := eventV1(e)
		require.NoError(t, err)
		assert.Equal(t, want[1], back.Type, "a v1 reader, stored %s", stored)
	}
	bad := workflows.Event{EventID: "evt-x-0000000000002", RunID: "r_1", Type: "acme.secret-thing", Payload: json.RawMessage(`{}`)}
	_, err = w.eventV2(&bad)
	var ae *Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, protocol.CodeEventTypeUnmapped, ae.Code, "an unregistered type is never served at v2")
	kept, err := eventV1(bad)
	require.NoError(t, err)
	assert.Equal(t, "acme.secret-thing", kept.Type, "v1 serves what it always served")
	mine := workflows.Event{EventID: "evt-x-0000000000003", RunID: "r_1", Type: "wop.turn-held", Payload: json.RawMessage(`{}`)}
	d, err = w.eventV2(&mine)
	require.NoError(t, err)
	assert.Equal(t, "wop.turn-held", d.Type)

	page := []workflows.Event{{Type: "run.started", Payload: json.RawMessage(`{"workflowId":"w"}`)}}
	same, err := eventsV1(page)
	require.NoError(t, err)
	assert.Same(t, &page[0], &same[0], "a page with nothing to change is served as it is")
}

// v2 answers carry registered codes and statuses, and no retry timing in details.
func TestErrorsPerMajor(t *testing.T) {
	expired := "wop_expired_key"
	env := newTestEnv(t, func(c *Config) {
		c.Keys = append(c.Keys, Key{ID: "old", Secret: expired, Tenant: "default", Scopes: AllScopes, ExpiresAt: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)},
			Key{ID: "gone", Secret: "wop_revoked_key", Tenant: "default", Scopes: AllScopes, Revoked: true})
		c.RateLimitBurst, c.RateLimitPerSecond = 1, 0.001
	})
	rec := env.do("GET", "/v1/runs/r_nope000000000000000", expired, "")
	assert.Equal(t, 401, rec.Code)
	assert.Contains(t, rec.Body.String(), `"key_expired"`)
	expectV2Error(t, env.do("GET", "/runs/r_nope000000000000000", expired, ""), 401, CodeUnauthenticated)
	expectV2Error(t, env.do("GET", "/runs/r_nope000000000000000", "wop_revoked_key", ""), 401, "credential_revoked")
	env.do("GET", "/runs/r_nope000000000000000", fullKey, "")
	limited := env.do("GET", "/runs/r_nope000000000000000", fullKey, "")
	expectV2Error(t, limited, 429, CodeRateLimited)
	assert.NotEmpty(t, limited.Header().Get("Retry-After"))
}

// The v2 OpenAPI document names the manifest's operations on unversioned paths.
func TestOpenAPIV2(t *testing.T) {
	env := newTestEnv(t)
	rec := env.do("GET", "/openapi.json", "", "")
	require.Equal(t, 200, rec.Code)
	var doc struct {
		Info  map[string]any                       `json:"info"`
		Paths map[string]map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	assert.Contains(t, doc.Info["title"], "v2")
	for p, ops := range doc.Paths {
		assert.False(t, strings.HasPrefix(p, "/v1"), "%s is a v1 path", p)
		for m, op := range ops {
			assert.NotEmpty(t, op["operationId"], "%s %s", m, p)
		}
	}
	assert.Equal(t, "createRun", doc.Paths["/runs"]["post"]["operationId"])
	assert.Equal(t, "forkRun", doc.Paths["/runs/{runId}:fork"]["post"]["operationId"])
	v1 := env.do("GET", "/openapi.json", "", "", "OpenWOP-Version", "1")
	require.Equal(t, 200, v1.Code)
	assert.Equal(t, "1.0", v1.Header().Get("OpenWOP-Version"))
	assert.Equal(t, env.do("GET", "/v1/openapi.json", "", "").Body.String(), v1.Body.String(), "major 1 on the unversioned path is v1's document")
}
