package tests

// OpenWOP major 2 over HTTP against the embedded stack, rule by rule of
// ../../shared/spec/openwop-v2-host.md (§1-§6, §9.6), as the public suite's v2 lane
// drives it: every request names OpenWOP-Version: 2.0, run ids are tenant-bound and
// sent percent-encoded, and the answers are checked against the vendored v2 schemas
// (protocol/spec/v2/).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/internal/v2schema"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// v2Dir holds the vendored v2 files.
const v2Dir = "../protocol/spec/v2"

var v2Schemas = v2schema.New(v2Dir + "/schemas")

// v2Validate validates raw against a vendored v2 schema.
func v2Validate(t *testing.T, loc string, raw []byte) {
	t.Helper()
	if err := v2Schemas.Validate(loc, raw); err != nil {
		t.Errorf("does not validate against %s: %v\n%s", loc, err, raw)
	}
}

// v2ValidateEvent validates one v2 event document: the envelope against
// run-event.schema.json and its type against the closed enum. (The vendored schema's
// type is oneOf{enum, vendor pattern}, and every registered type matches the vendor
// pattern too, so the envelope is checked with a vendor type of this host in its place.)
func v2ValidateEvent(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var ev map[string]any
	require.NoError(t, json.Unmarshal(raw, &ev), "event: %s", raw)
	typ, _ := ev["type"].(string)
	if v2, ok := protocol.EventTypeV2(typ); !ok || v2 != typ {
		assert.True(t, protocol.IsVendorEventType(typ), "event type %q is neither a v2 type nor this host's vendor type", typ)
	}
	check := map[string]any{}
	for k, v := range ev {
		check[k] = v
	}
	check["type"] = protocol.Org + ".schema-check"
	b, _ := json.Marshal(check)
	v2Validate(t, "run-event.schema.json", b)
	return ev
}

// v2Call sends a major-2 request (OpenWOP-Version: 2.0, Accept: application/json) with
// key and returns status, headers and body; every answer must name major 2, and an
// error must be the closed v2 envelope with a registered code.
func v2Call(t *testing.T, c *apiClient, key, method, path string, body any, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	h := map[string]string{"Accept": "application/json", "OpenWOP-Version": "2.0"}
	if key != "" {
		h["Authorization"] = "Bearer " + key
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		h[hdr[i]] = hdr[i+1]
	}
	status, rh, raw := c.doRaw(method, path, body, h)
	assert.Equal(t, "2.0", rh.Get("OpenWOP-Version"), "%s %s: the response names major 2", method, path)
	if status >= 400 {
		v2Validate(t, "error-envelope.schema.json", raw)
	}
	return status, rh, raw
}

// v2Code is the error code of a v2 answer.
func v2Code(t *testing.T, raw []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
	return e.Error
}

// v2Path is the path of a bound run id as the suite sends it (encodeURIComponent).
func v2Path(id, suffix string) string { return "/runs/" + url.PathEscape(id) + suffix }

// v2Create starts a run at major 2 and returns its bound id.
func v2Create(t *testing.T, c *apiClient, body map[string]any, hdr ...string) string {
	t.Helper()
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, "/runs", body, hdr...)
	require.Equal(t, http.StatusCreated, status, "POST /runs %v: %s", body, raw)
	var r struct {
		RunID, Status, EventsURL, StatusURL string
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	tenant, opaque, bound := protocol.SplitBoundID(r.RunID)
	require.True(t, bound, "the created runId is tenant-bound: %s", r.RunID)
	require.Equal(t, "default", tenant)
	require.Equal(t, "pending", r.Status)
	assert.True(t, strings.HasSuffix(r.EventsURL, "/runs/default~2F"+opaque+"/events"), "eventsUrl projected: %s", r.EventsURL)
	assert.True(t, strings.HasSuffix(r.StatusURL, "/runs/default~2F"+opaque), "statusUrl projected: %s", r.StatusURL)
	return r.RunID
}

// v2Snapshot reads GET /runs/{id} at major 2, validated against the closed snapshot.
func v2Snapshot(t *testing.T, c *apiClient, id string) (map[string]any, bool) {
	t.Helper()
	status, _, raw := v2Call(t, c, c.Key, http.MethodGet, v2Path(id, ""), nil)
	if status == http.StatusServiceUnavailable {
		return nil, false
	}
	require.Equal(t, http.StatusOK, status, "%s", raw)
	v2Validate(t, "run-snapshot.schema.json", raw)
	var s map[string]any
	require.NoError(t, json.Unmarshal(raw, &s))
	require.Equal(t, id, s["runId"])
	return s, true
}

// v2Wait reads the snapshot until its status is one of want.
func v2Wait(t *testing.T, c *apiClient, id string, want ...string) map[string]any {
	t.Helper()
	return waitFor(t, 30*time.Second, "run "+id+" "+strings.Join(want, "|"), func() map[string]any {
		s, _ := v2Snapshot(t, c, id)
		return s
	}, func(s map[string]any) bool {
		for _, w := range want {
			if s != nil && s["status"] == w {
				return true
			}
		}
		return false
	})
}

// v2Poll reads the run's events with the v2 poll and returns the decoded body.
func v2Poll(t *testing.T, c *apiClient, id, query string) map[string]json.RawMessage {
	t.Helper()
	status, _, raw := v2Call(t, c, c.Key, http.MethodGet, v2Path(id, "/events/poll?timeout=1"+query), nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &body))
	return body
}

// sequencesOf returns the sequences of a v2 events array, validating each event.
func sequencesOf(t *testing.T, raw json.RawMessage) []int64 {
	t.Helper()
	var evs []json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &evs))
	out := []int64{}
	for _, e := range evs {
		ev := v2ValidateEvent(t, e)
		out = append(out, int64(ev["sequence"].(float64)))
	}
	return out
}

// ---- negotiation and discovery ----

func TestV2VersionNegotiation(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	get := func(path, version string) (int, http.Header, []byte) {
		h := map[string]string{"Accept": "application/json", "Authorization": "Bearer " + c.Key}
		if version != "" {
			h["OpenWOP-Version"] = version
		}
		return c.doRaw(http.MethodGet, path, nil, h)
	}
	bare, bh, braw := get("/.well-known/openwop", "")
	v2, vh, vraw := get("/.well-known/openwop", "2.0")
	require.Equal(t, 200, bare)
	require.Equal(t, 200, v2)
	assert.Equal(t, "1.0", bh.Get("OpenWOP-Version"), "header-less discovery: preferredVersion's major")
	assert.Equal(t, "2.0", vh.Get("OpenWOP-Version"))
	assert.NotEqual(t, string(braw), string(vraw), "the two representations differ")
	for _, v := range []string{"2", "2.5"} {
		status, h, raw := get("/.well-known/openwop", v)
		assert.Equal(t, 200, status)
		assert.Equal(t, "2.0", h.Get("OpenWOP-Version"), "only the major selects")
		assert.Equal(t, string(vraw), string(raw))
	}
	for _, v := range []string{"9", "3.0", "two"} {
		for _, path := range []string{"/.well-known/openwop", "/runs"} {
			status, h, raw := get(path, v)
			require.Equal(t, 406, status, "%s with %s: %s", path, v, raw)
			assert.Equal(t, "2.0", h.Get("OpenWOP-Version"))
			v2Validate(t, "error-envelope.schema.json", raw)
			var e struct {
				Error   string
				Details struct{ ProtocolVersions []string }
			}
			require.NoError(t, json.Unmarshal(raw, &e))
			assert.Equal(t, "protocol_version_unsupported", e.Error)
			assert.Equal(t, []string{"1.0", "2.0"}, e.Details.ProtocolVersions)
		}
	}
	status, h, raw := get("/v1/runs?limit=1", "2.0")
	require.Equal(t, 400, status, "%s", raw)
	assert.Equal(t, "1.0", h.Get("OpenWOP-Version"))
	assert.Equal(t, "protocol_version_mismatch", v2Code(t, raw))
	status, h, _ = get("/v1/runs?limit=1", "1")
	assert.Equal(t, 200, status)
	assert.Equal(t, "1.0", h.Get("OpenWOP-Version"), "every /v1 response names major 1 too")
	status, h, raw = get("/runs?limit=1", "")
	assert.Equal(t, 200, status, "a header-less unversioned request is major 2: %s", raw)
	assert.Equal(t, "2.0", h.Get("OpenWOP-Version"))
	assert.Contains(t, h.Get("Vary"), "OpenWOP-Version")
	status, h, _ = get("/healthz", "9")
	assert.Equal(t, 200, status, "a host page is not negotiated")
	assert.Empty(t, h.Get("OpenWOP-Version"), "and names no protocol")
	// A 304 names its contract.
	for _, tc := range []struct {
		version, etag, want string
	}{{"", bh.Get("ETag"), "1.0"}, {"2.0", vh.Get("ETag"), "2.0"}} {
		hdr := map[string]string{"If-None-Match": tc.etag}
		if tc.version != "" {
			hdr["OpenWOP-Version"] = tc.version
		}
		status, h, raw := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, hdr)
		assert.Equal(t, 304, status)
		assert.Empty(t, raw)
		assert.Equal(t, tc.want, h.Get("OpenWOP-Version"))
	}
	// A malformed body is the host's 400 envelope, with the header.
	for _, path := range []string{"/runs", "/webhooks"} {
		status, h, raw := c.doRaw(http.MethodPost, path, "{", map[string]string{"Authorization": "Bearer " + c.Key, "OpenWOP-Version": "2.0"})
		require.Equal(t, 400, status, "%s: %s", path, raw)
		assert.Equal(t, "2.0", h.Get("OpenWOP-Version"))
		v2Validate(t, "error-envelope.schema.json", raw)
		assert.Equal(t, "validation_error", v2Code(t, raw))
	}
	// An operation this host does not serve is 404 not_found under major 2.
	for _, path := range []string{"/prompts", "/content/settings", "/runs/x/ancestry"} {
		status, _, raw := v2Call(t, c, c.Key, http.MethodGet, path, nil)
		assert.Equal(t, 404, status, path)
		assert.Equal(t, "not_found", v2Code(t, raw), path)
	}
}

// The v2 root, checked as the suite's v2-capabilities-root-closed does: the closed root
// (its metadata keys, the family records and their facets, extensions and signingKeys)
// and the same document with an unknown key, a dotted key, the v1 wrapper or profiles[]
// refused. capabilities.schema.json itself (340 000 characters) is not among the
// vendored files; rootSchema states the parts of it this host's root uses, taken from
// that schema and spec/v2/declaration.json, with the vendored facet schemas of the
// families it names.
func TestV2DiscoveryRootClosed(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	status, h, raw := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, map[string]string{"OpenWOP-Version": "2.0"})
	require.Equal(t, 200, status)
	assert.NotEmpty(t, h.Get("ETag"))
	assert.Empty(t, h.Get("Capabilities-Etag"))
	sch, err := v2Schemas.CompileSchema("https://wop.test/v2-root.schema.json", rootSchema(t))
	require.NoError(t, err)
	validate := func(doc map[string]any) error {
		b, _ := json.Marshal(doc)
		v, err := jsonUnmarshalAny(b)
		require.NoError(t, err)
		return sch.Validate(v)
	}
	var root map[string]any
	require.NoError(t, json.Unmarshal(raw, &root))
	require.NoError(t, validate(root), "%s", raw)
	assert.Equal(t, float64(3), root["eventLogSchemaVersion"])
	assert.Equal(t, "1.0", root["preferredVersion"])
	assert.Equal(t, map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated",
		"tokenAlgs": []any{"hs256"}, "refKinds": []any{"principal"}}, root["interrupt"], "the interrupt record")
	assert.Equal(t, map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated",
		"modes": []any{"replay"}, "effectSeamsManifest": "/host/effect-seams"}, root["replay"], "the replay record")
	assert.Equal(t, map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated",
		"crossRegion": "single-region"}, root["idempotency"], "the idempotency record")
	assert.Equal(t, map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated",
		"signatureAlgorithms": []any{"v1", "standard-webhooks-1"}, "deadLetter": map[string]any{"retentionDays": float64(30), "maxPageSize": float64(100)}},
		root["webhooks"], "the webhooks record")
	assert.Equal(t, []any{"v1", "standard-webhooks-1"}, root["extensions"].(map[string]any)["wop.host"].(map[string]any)["webhooks"].(map[string]any)["signatureAlgorithms"])
	for name, injected := range map[string]map[string]any{
		"unknown key": {"openwopConformanceUnknownRootKey": map[string]any{"status": "stable", "since": "2.0", "witness": "claims-check"}},
		"dotted key":  {"host.replay": map[string]any{"status": "stable", "since": "2.0", "witness": "claims-check"}},
		"wrapper":     {"capabilities": map[string]any{}},
		"profiles":    {"profiles": []string{"openwop-discovery-core"}},
		"until on a stable record": {"limits": map[string]any{"status": "stable", "since": "2.0", "until": "2.1", "witness": "witnessable-gated",
			"clarificationRounds": 3, "schemaRounds": 2, "envelopesPerTurn": 5}},
		"no until on an experimental record":   {"eventLog": map[string]any{"status": "experimental", "since": "2.0", "witness": "claims-check"}},
		"a facet the family lacks":             {"runList": map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated", "supported": true}},
		"a replay record without its manifest": {"replay": map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated", "modes": []string{"replay"}}},
		"v1's suppression flag on replay": {"replay": map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated",
			"modes": []string{"replay"}, "effectSeamsManifest": "/host/effect-seams", "sideEffectSuppression": "recorded-outcome"}},
		"an unknown cross-region claim": {"idempotency": map[string]any{"status": "experimental", "since": "2.0", "until": "2.1", "witness": "witnessable-gated", "crossRegion": "global"}},
	} {
		doc := map[string]any{}
		for k, v := range root {
			doc[k] = v
		}
		for k, v := range injected {
			doc[k] = v
		}
		assert.Error(t, validate(doc), "the closed root refuses %s", name)
	}
	// The profiles the document satisfies (spec/v2/profiles.json): discovery-core's
	// predicate holds, and core-standard's (interrupt, replay, webhooks, idempotency,
	// eventLog) on a host with a webhook key.
	pb, err := os.ReadFile(v2Dir + "/profiles.json")
	require.NoError(t, err)
	var profiles struct {
		Profiles []struct {
			ID        string `json:"id"`
			Predicate struct {
				Families, Metadata []string
			} `json:"predicate"`
		} `json:"profiles"`
	}
	require.NoError(t, json.Unmarshal(pb, &profiles))
	holds := map[string]bool{}
	for _, p := range profiles.Profiles {
		ok := true
		for _, k := range append(p.Predicate.Families, p.Predicate.Metadata...) {
			ok = ok && root[k] != nil
		}
		holds[p.ID] = ok
	}
	assert.True(t, holds["openwop-discovery-core"])
	assert.True(t, holds["openwop-core-standard"])

	// The v1 document carries the three added keys and the era of new runs.
	status, _, raw = c.doRaw(http.MethodGet, "/.well-known/openwop", nil, nil)
	require.Equal(t, 200, status)
	var v1 map[string]any
	require.NoError(t, json.Unmarshal(raw, &v1))
	assert.Equal(t, root["protocolVersions"], v1["protocolVersions"])
	assert.Equal(t, root["preferredVersion"], v1["preferredVersion"])
	assert.Equal(t, root["signingKeys"], v1["signingKeys"])
	assert.Equal(t, float64(3), v1["eventLogSchemaVersion"])
}

// rootSchema is the closed v2 root as far as this host's document goes (see
// TestV2DiscoveryRootClosed).
func rootSchema(t *testing.T) []byte {
	t.Helper()
	facet := func(name string) map[string]any {
		b, err := os.ReadFile(v2Dir + "/facets/" + name + ".schema.json")
		require.NoError(t, err)
		var f map[string]any
		require.NoError(t, json.Unmarshal(b, &f))
		delete(f, "$comment")
		return f
	}
	version := map[string]any{"type": "string", "pattern": `^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`}
	family := func(facets map[string]any, required ...string) map[string]any {
		props := map[string]any{"status": true, "since": true, "until": true, "witness": true}
		for k, v := range facets {
			props[k] = v
		}
		f := map[string]any{"allOf": []any{map[string]any{"$ref": "#/$defs/record"}}, "properties": props, "unevaluatedProperties": false}
		if len(required) > 0 {
			f["required"] = required
		}
		return f
	}
	withFacets := func(name string) map[string]any {
		f := facet(name)
		props, _ := f["properties"].(map[string]any)
		if name == "replay" {
			// The stored facet's modes (fork|branch|rerun) disagree with replay.md's and
			// the reference host's (replay|branch); the host speaks replay.md's (digest §12.2).
			props["modes"] = map[string]any{"type": "array", "items": map[string]any{"enum": []string{"replay", "branch"}}}
		}
		req, _ := f["required"].([]any)
		rs := []string{}
		for _, r := range req {
			rs = append(rs, r.(string))
		}
		return family(props, rs...)
	}
	integer := func(min int) map[string]any { return map[string]any{"type": "integer", "minimum": min} }
	schema := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object", "additionalProperties": false, "required": []string{"protocolVersions", "preferredVersion"},
		"$defs": map[string]any{"record": map[string]any{
			"type": "object", "required": []string{"status", "since", "witness"},
			"properties": map[string]any{
				"status":  map[string]any{"enum": []string{"stable", "experimental", "deprecated"}},
				"since":   version,
				"until":   map[string]any{"type": "string", "pattern": `^((0|[1-9][0-9]*)\.(0|[1-9][0-9]*)|\d{4}-\d{2}-\d{2})$`},
				"witness": map[string]any{"enum": []string{"witnessable-unaided", "witnessable-gated", "seam-gated", "claims-check", "negative-existence"}},
			},
			"allOf": []any{
				map[string]any{"if": map[string]any{"properties": map[string]any{"status": map[string]any{"const": "stable"}}}, "then": map[string]any{"not": map[string]any{"required": []string{"until"}}}},
				map[string]any{"if": map[string]any{"properties": map[string]any{"status": map[string]any{"enum": []string{"experimental", "deprecated"}}}}, "then": map[string]any{"required": []string{"until"}}},
			},
		}},
		"properties": map[string]any{
			// Metadata keys (declaration.json "metadata").
			"protocolVersion":  version,
			"protocolVersions": map[string]any{"type": "array", "minItems": 1, "uniqueItems": true, "items": version},
			"preferredVersion": version,
			"extensions": map[string]any{"type": "object", "additionalProperties": false,
				"patternProperties": map[string]any{`^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9]*(-[a-z0-9]+)*$`: map[string]any{"type": "object"}}},
			"implementation": map[string]any{"type": "object", "additionalProperties": false,
				"properties": map[string]any{"name": map[string]any{"type": "string"}, "version": map[string]any{"type": "string"}, "vendor": map[string]any{"type": "string"}, "url": map[string]any{"type": "string"}}},
			"engineVersion":         integer(0),
			"eventLogSchemaVersion": integer(2),
			"configurable":          map[string]any{"$ref": v2schema.Base + "configurable.schema.json"},
			"observability":         map[string]any{"type": "object"},
			"minClientVersion":      version,
			"runtimeCapabilities":   map[string]any{"type": "array", "uniqueItems": true, "items": map[string]any{"type": "string", "minLength": 1}},
			"testing":               map[string]any{"type": "object"},
			"conformance":           map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"mockAgent": map[string]any{"type": "boolean"}, "certificationBundleUrl": map[string]any{"type": "string"}, "seamsProfile": map[string]any{"const": "openwop-conformance-seams-v2"}}},
			"fixtures":              map[string]any{"type": "array", "uniqueItems": true, "items": map[string]any{"type": "string", "minLength": 1}},
			"compliance":            map[string]any{"type": "object"},
			"discovery":             map[string]any{"type": "object"},
			"signingKeys": map[string]any{"type": "array", "items": map[string]any{"type": "object", "additionalProperties": false,
				"required": []string{"keyId", "alg", "publicKey"},
				"properties": map[string]any{"keyId": map[string]any{"type": "string", "pattern": `^[A-Za-z0-9._~-]{1,128}$`}, "alg": map[string]any{"const": "ed25519"},
					"publicKey": map[string]any{"type": "string", "pattern": `^[A-Za-z0-9_-]{43}$`}, "use": map[string]any{"enum": []string{"certification-bundle"}},
					"retiredAt": map[string]any{"type": "string"}}}},
			// The families this host may advertise, with their facets.
			"limits": family(map[string]any{"clarificationRounds": integer(0), "schemaRounds": integer(0), "envelopesPerTurn": integer(0),
				"maxNodeExecutions": integer(1), "maxRunDurationMs": integer(1000), "maxLoopIterations": integer(1), "maxBudgetTokens": integer(1),
				"maxBudgetCostUsd": map[string]any{"type": "number", "minimum": 0}, "maxRequestBodyBytes": integer(1)},
				"clarificationRounds", "schemaRounds", "envelopesPerTurn"),
			"runList": family(map[string]any{"maxPageSize": integer(1), "filters": map[string]any{"type": "array", "uniqueItems": true,
				"items": map[string]any{"enum": []string{"workflowId", "status"}}}}),
			"eventLog":              family(map[string]any{"crossEngineOrdering": true}),
			"conversationPrimitive": family(nil),
			// RFC 0109: a host that stamps agent.model on turns advertises it.
			"conversationTurnModelProvenance": family(nil),
			"multiPartyConversation":          family(map[string]any{"maxParticipants": integer(2)}),
			"auth": family(map[string]any{"lanes": map[string]any{"type": "array", "minItems": 1, "items": map[string]any{
				"type": "object", "required": []string{"lane", "issuers", "revocation", "minimumAssurance"},
				"properties": map[string]any{"lane": map[string]any{"enum": []string{"api-key", "oauth2", "oidc", "mtls", "saml", "scim", "ldap", "workload", "session", "anonymous"}},
					"issuers":          map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "string", "minLength": 1}},
					"revocation":       map[string]any{"type": "string"},
					"minimumAssurance": map[string]any{"enum": []string{"bearer", "sender-constrained", "key-bound"}}}}},
				"subjectLinkKey": map[string]any{"enum": []string{"opaque-idp", "configured-immutable"}}}, "lanes"),
			"interrupt": withFacets("interrupt"),
			"replay":    withFacets("replay"),
			"webhooks":  withFacets("webhooks"),
			// capabilities.schema.json's idempotency (RFC 0036): the categorical claim.
			"idempotency": family(map[string]any{"crossRegion": map[string]any{"enum": []string{"single-region", "best-effort", "strict"}}}),
		},
	}
	b, err := json.Marshal(schema)
	require.NoError(t, err)
	return b
}

func jsonUnmarshalAny(b []byte) (any, error) {
	var v any
	err := json.Unmarshal(b, &v)
	return v, err
}

// ---- ids, era, snapshot, cancel, poll ----

// A run created at v2: bound id, projected links, its snapshot the closed v2 one with
// era 3 equal to discovery's and its owner's subject; readable at v2 by every spelling
// of its id; a foreign tenant segment is 403 id_tenant_mismatch before any lookup, and
// a run of another tenant under a bare id is not found.
func TestV2RunIdentity(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	c2, _, other := lowScopeAPI(t, c)
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-noop"})
	s := v2Wait(t, c, id, "completed")
	assert.Equal(t, float64(3), s["eventLogSchemaVersion"], "a run created now is era 3, as discovery says")
	assert.Equal(t, float64(1), s["engineVersion"])
	assert.Equal(t, map[string]any{"tenant": "default", "subject": map[string]any{"issuer": "urn:wop:api-key", "subjectId": "test",
		"tenant": "default", "lane": "api-key", "kind": "user"}}, s["owner"])
	_, opaque, _ := protocol.SplitBoundID(id)
	for _, path := range []string{"/runs/default~2F" + opaque, "/runs/default%2F" + opaque, "/runs/" + opaque} {
		status, _, raw := v2Call(t, c, c.Key, http.MethodGet, path, nil)
		require.Equal(t, 200, status, "%s: %s", path, raw)
		assert.Equal(t, id, cfObj(t, raw)["runId"], "%s names the run bound", path)
	}
	// A run created at v1 comes back bound at v2.
	v1id := createRun(t, c, "conformance-noop", nil)
	waitCompleted(t, c, v1id)
	status, _, raw := v2Call(t, c, c.Key, http.MethodGet, "/runs/"+v1id, nil)
	require.Equal(t, 200, status, "%s", raw)
	assert.Equal(t, "default/"+v1id, cfObj(t, raw)["runId"])
	v1snap := cfObj(t, snapshotJSON(t, c, v1id))
	assert.Equal(t, v1id, v1snap["runId"], "and bare at v1")
	assert.NotContains(t, v1snap, "eventLogSchemaVersion", "v1's snapshot is v1's")

	// Another tenant: the key of tenant-b reading default's run.
	for _, path := range []string{"/runs/default~2F" + opaque, "/runs/default%2F" + opaque + "/events/poll?timeout=1", "/runs/default~2F" + opaque + "/events"} {
		status, _, raw := v2Call(t, c2, other, http.MethodGet, path, nil)
		assert.Equal(t, 403, status, "%s: %s", path, raw)
		assert.Equal(t, "id_tenant_mismatch", v2Code(t, raw))
	}
	status, _, raw = v2Call(t, c2, other, http.MethodPost, "/runs/default~2F"+opaque+"/cancel", map[string]any{})
	assert.Equal(t, 403, status, "%s", raw)
	status, _, raw = v2Call(t, c2, other, http.MethodGet, "/runs/"+opaque, nil)
	assert.Equal(t, 404, status, "a bare id reads in the caller's own tenant: %s", raw)
	assert.Equal(t, "not_found", v2Code(t, raw))
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, "/runs/tenant-b~2Fforeignopaque0123456789abcdef", nil)
	assert.Equal(t, 403, status, "refused before the lookup, whether the run exists or not: %s", raw)
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, "/runs/default~2Fopenwopconformanceunknown0001", nil)
	assert.Equal(t, 404, status, "%s", raw)
	status, _, _ = v2Call(t, c, c.Key, http.MethodGet, "/runs/default~2", nil)
	assert.Equal(t, 400, status, "a ~ without two hex digits")

	// cancel of the terminal run: 409 run_terminal at v2, v1's 200 at v1.
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/cancel"), map[string]any{})
	require.Equal(t, 409, status, "%s", raw)
	assert.Equal(t, "run_terminal", v2Code(t, raw))
	assert.Equal(t, 200, cfCancel(t, c, opaque))

	// listRuns: full v2 snapshots of the caller's tenant, bound ids, a foreign cursor refused.
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, "/runs?limit=100&workflowId=conformance-noop", nil)
	require.Equal(t, 200, status, "%s", raw)
	v2Validate(t, "run-list-response.schema.json", raw)
	var list struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(raw, &list))
	found := map[string]bool{}
	for _, r := range list.Runs {
		found[r["runId"].(string)] = true
		assert.True(t, strings.HasPrefix(r["runId"].(string), "default/"))
		assert.Equal(t, "conformance-noop", r["workflowId"])
	}
	assert.True(t, found[id] && found["default/"+v1id], "the runs the caller just created are listed")
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, "/runs?cursor=openwop-conformance-not-a-cursor", nil)
	assert.Equal(t, 400, status)
	assert.Equal(t, "validation_error", v2Code(t, raw))
}

// The poll at v2 (events.md §Poll) and the JSON read.
func TestV2PollCursor(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-noop"})
	v2Wait(t, c, id, "completed")
	body := v2Poll(t, c, id, "")
	keys := []string{}
	for k := range body {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"runId", "events", "lastSequence", "status", "isTerminal"}, keys)
	assert.JSONEq(t, strconv.Quote(id), string(body["runId"]))
	assert.JSONEq(t, `"completed"`, string(body["status"]))
	assert.JSONEq(t, `true`, string(body["isTerminal"]))
	all := sequencesOf(t, body["events"])
	require.NotEmpty(t, all)
	assert.Equal(t, int64(0), all[0], "omitted cursor: from the first event")
	var last int64
	require.NoError(t, json.Unmarshal(body["lastSequence"], &last))
	assert.Equal(t, all[len(all)-1], last)
	after := v2Poll(t, c, id, "&afterSequence=0")
	assert.Equal(t, all[1:], sequencesOf(t, after["events"]), "afterSequence is exclusive")
	past := v2Poll(t, c, id, fmt.Sprintf("&afterSequence=%d", last+1000))
	assert.JSONEq(t, `[]`, string(past["events"]))
	status, _, raw := v2Call(t, c, c.Key, http.MethodGet, v2Path(id, "/events/poll?timeout=1&lastSequence=2"), nil)
	assert.Equal(t, 400, status, "v1's cursor stays on /v1: %s", raw)

	// The JSON read of the log: { events: [...] } of v2 events.
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, v2Path(id, "/events"), nil)
	require.Equal(t, 200, status)
	var read struct {
		Events json.RawMessage `json:"events"`
	}
	require.NoError(t, json.Unmarshal(raw, &read))
	assert.Equal(t, all, sequencesOf(t, read.Events))
}

// SSE at v2: v2 frame names and documents, Last-Event-ID an exclusive cursor read
// after authorization.
func TestV2SSELastEventID(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	c2, _, other := lowScopeAPI(t, c)
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-noop"})
	v2Wait(t, c, id, "completed")
	v2h := map[string]string{"OpenWOP-Version": "2.0"}
	path := v2Path(id, "/events?streamMode=debug")
	full := openStream(t, c, path, v2h)
	require.Equal(t, 200, full.Status)
	assert.Equal(t, "2.0", full.Header.Get("OpenWOP-Version"), "an event stream names its major")
	frames, closed := full.rest(10*time.Second, nil)
	require.True(t, closed, "the server closes after the terminal event")
	require.NotEmpty(t, frames)
	seqs := []int64{}
	for _, f := range frames {
		ev := v2ValidateEvent(t, []byte(f.Data))
		assert.Equal(t, ev["type"], f.Event, "the frame's name is the event's v2 type")
		assert.Equal(t, id, ev["runId"])
		n, err := strconv.ParseInt(f.ID, 10, 64)
		require.NoError(t, err)
		seqs = append(seqs, n)
	}
	first, last := seqs[0], seqs[len(seqs)-1]
	resume := func(cursor string) ([]int64, bool) {
		hdr := map[string]string{"OpenWOP-Version": "2.0", "Last-Event-ID": cursor}
		s := openStream(t, c, path, hdr)
		require.Equal(t, 200, s.Status, "Last-Event-ID %s", cursor)
		got, closed := s.rest(10*time.Second, nil)
		out := []int64{}
		for _, f := range got {
			n, _ := strconv.ParseInt(f.ID, 10, 64)
			out = append(out, n)
		}
		return out, closed
	}
	got, closed := resume(strconv.FormatInt(first, 10))
	assert.Equal(t, seqs[1:], got, "resumes at the next sequence and never re-emits the cursor")
	assert.True(t, closed)
	for _, cursor := range []string{strconv.FormatInt(last, 10), strconv.FormatInt(last+1000, 10)} {
		got, closed = resume(cursor)
		assert.Empty(t, got, "at or past the end of a terminal run: no frame (cursor %s)", cursor)
		assert.True(t, closed, "and the server closes")
	}
	bad := openStream(t, c, path, map[string]string{"OpenWOP-Version": "2.0", "Last-Event-ID": "abc"})
	assert.Equal(t, 400, bad.Status)
	assert.Equal(t, "validation_error", v2Code(t, bad.Body))

	// Authorization first: the cursor never changes the answer for a run the caller
	// cannot read.
	_, opaque, _ := protocol.SplitBoundID(id)
	for _, tc := range []struct {
		c    *apiClient
		key  string
		path string
	}{
		{c, c.Key, "/runs/default~2Fopenwopconformanceunknown0002/events?streamMode=debug"},
		{c, c.Key, "/runs/openwop-conformance-foreign-tenant~2Fforeignopaque0123456789abcdef/events?streamMode=debug"},
		{c2, other, "/runs/" + opaque + "/events?streamMode=debug"},
		{c2, other, path},
	} {
		cl := *tc.c
		cl.Key = tc.key
		var answers []string
		for _, cursor := range []string{"", "0", "1000"} {
			h := map[string]string{"OpenWOP-Version": "2.0"}
			if cursor != "" {
				h["Last-Event-ID"] = cursor
			}
			s := openStream(t, &cl, tc.path, h)
			require.NotEqual(t, 200, s.Status, "%s is not streamed to this caller", tc.path)
			answers = append(answers, fmt.Sprintf("%d %s", s.Status, v2Code(t, s.Body)))
		}
		assert.Equal(t, []string{answers[0], answers[0], answers[0]}, answers, "%s: the same answer with and without Last-Event-ID", tc.path)
	}
}

// Cancel at v2 of a running run: 200 cancelling|cancelled, run.cancelled in the log.
func TestV2CancelRunning(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-cancellable", "inputs": map[string]any{"delayMs": 15000}})
	v2Wait(t, c, id, "running")
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/cancel"), map[string]any{"reason": "e2e"})
	require.Equal(t, 200, status, "%s", raw)
	body := cfObj(t, raw)
	assert.Equal(t, id, body["runId"])
	assert.Contains(t, []any{"cancelling", "cancelled"}, body["status"])
	v2Wait(t, c, id, "cancelled")
	types := []string{}
	var evs []map[string]any
	require.NoError(t, json.Unmarshal(v2Poll(t, c, id, "")["events"], &evs))
	for _, e := range evs {
		types = append(types, e["type"].(string))
	}
	assert.Contains(t, types, "run.cancelled")
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/cancel"), map[string]any{})
	assert.Equal(t, 409, status)
	assert.Equal(t, "run_terminal", v2Code(t, raw))
}

// TestV2BulkCancel: POST /runs:bulk-cancel at major 2 over HTTP, with a waiting run, a
// foreign tenant's id and a run that has ended: 200, the results in request order,
// the live run cancelled, the others refused each with its own v2 code.
func TestV2BulkCancel(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	live := v2Create(t, c, map[string]any{"workflowId": "conformance-approval"})
	v2Wait(t, c, live, "waiting-approval")
	done := v2Create(t, c, map[string]any{"workflowId": "conformance-noop"})
	v2Wait(t, c, done, "completed")
	_, opaque, _ := protocol.SplitBoundID(live)
	foreign := "tenant-b/" + opaque
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, "/runs:bulk-cancel", map[string]any{"runIds": []string{live, foreign, done}, "reason": "e2e"})
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var body struct {
		Results []struct {
			RunID  string         `json:"runId"`
			OK     bool           `json:"ok"`
			Status string         `json:"status"`
			Error  map[string]any `json:"error"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(raw, &body), "%s", raw)
	require.Len(t, body.Results, 3)
	assert.Equal(t, live, body.Results[0].RunID)
	assert.True(t, body.Results[0].OK, "%s", raw)
	assert.Contains(t, []string{"cancelling", "cancelled"}, body.Results[0].Status)
	for i, code := range map[int]string{1: "id_tenant_mismatch", 2: "run_terminal"} {
		e, _ := json.Marshal(body.Results[i].Error)
		v2Validate(t, "error-envelope.schema.json", e)
		assert.Equal(t, code, body.Results[i].Error["error"], "entry %d: %s", i, e)
	}
	v2Wait(t, c, live, "cancelled")
	s, _ := v2Snapshot(t, c, done)
	assert.Equal(t, "completed", s["status"], "the ended run is left as it was")
}

// Resolving an interrupt whose run ended is 409 interrupt_already_resolved on v2's
// surfaces (one code per state); an unknown run is 404.
func TestV2ResolveAfterTheRunEnded(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	resolve := func(id string) (int, string) {
		status, _, raw := v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/interrupts/gate"), map[string]any{"resumeValue": map[string]any{"action": "accept"}})
		if status >= 400 {
			return status, v2Code(t, raw)
		}
		return status, ""
	}
	cancelled := v2Create(t, c, map[string]any{"workflowId": "conformance-approval"})
	v2Wait(t, c, cancelled, "waiting-approval")
	status, _, _ := v2Call(t, c, c.Key, http.MethodPost, v2Path(cancelled, "/cancel"), map[string]any{})
	require.Equal(t, 200, status)
	v2Wait(t, c, cancelled, "cancelled")
	st, code := resolve(cancelled)
	assert.Equal(t, []any{409, "interrupt_already_resolved"}, []any{st, code}, "after a cancel")

	completed := v2Create(t, c, map[string]any{"workflowId": "conformance-approval"})
	v2Wait(t, c, completed, "waiting-approval")
	st, _ = resolve(completed)
	require.Equal(t, 200, st)
	v2Wait(t, c, completed, "completed")
	st, code = resolve(completed)
	assert.Equal(t, []any{409, "interrupt_already_resolved"}, []any{st, code}, "after completion")
	st, code = resolve("default/openwopconformanceunknown" + randomHex(4))
	assert.Equal(t, []any{404, "not_found"}, []any{st, code})
}

// Run options and the Idempotency-Key at v2.
func TestV2RunOptionsAndIdempotencyKey(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	odd := []string{"has space", "emoji 🚀", "slash/colon:pipe|", "UPPER-and_under", strings.Repeat("x", 256)}
	meta := map[string]any{"nested": map[string]any{"a": float64(1), "b": []any{float64(1), "2", nil, true}}, "s": "unicode ∞ ok", "n": float64(0)}
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-noop", "tags": odd, "metadata": meta})
	s := v2Wait(t, c, id, "completed")
	tags := []string{}
	for _, tg := range s["tags"].([]any) {
		tags = append(tags, tg.(string))
	}
	assert.Equal(t, odd, tags, "tags come back unchanged")
	assert.Equal(t, meta, s["metadata"])
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, body := range []map[string]any{
		{"workflowId": "conformance-noop", "tags": many},
		{"workflowId": "conformance-noop", "tags": []string{strings.Repeat("y", 257)}},
		{"workflowId": "conformance-noop", "conformanceUnknownRootKey": 1},
		{"workflowId": "conformance-noop", "configurable": map[string]any{"version": 1, "run": map[string]any{"runTimeoutMs": 60000}}},
	} {
		status, _, raw := v2Call(t, c, c.Key, http.MethodPost, "/runs", body)
		assert.Equal(t, 400, status, "%v: %s", body, raw)
		assert.Equal(t, "validation_error", v2Code(t, raw))
	}
	key := randomHex(11) // 22 characters, 88 bits shown; the grammar counts characters
	first := v2Create(t, c, map[string]any{"workflowId": "conformance-noop"}, "Idempotency-Key", key)
	status, h, raw := v2Call(t, c, c.Key, http.MethodPost, "/runs", map[string]any{"workflowId": "conformance-noop"}, "Idempotency-Key", key)
	require.Equal(t, 201, status, "%s", raw)
	assert.Equal(t, "true", h.Get("OpenWOP-Idempotent-Replay"))
	assert.Equal(t, first, cfObj(t, raw)["runId"])
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, "/runs", map[string]any{"workflowId": "conformance-noop"}, "Idempotency-Key", "short")
	assert.Equal(t, 400, status)
	assert.Equal(t, "idempotency_key_invalid", v2Code(t, raw))
}

// ---- one stored log, two vocabularies ----

// v2Events reads a run's whole log at major 2 (the JSON read) and returns its events.
func v2Events(t *testing.T, c *apiClient, id string) []map[string]any {
	t.Helper()
	status, _, raw := v2Call(t, c, c.Key, http.MethodGet, v2Path(id, "/events"), nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var read struct {
		Events []json.RawMessage `json:"events"`
	}
	require.NoError(t, json.Unmarshal(raw, &read))
	out := []map[string]any{}
	for _, e := range read.Events {
		out = append(out, v2ValidateEvent(t, e))
	}
	return out
}

func v2Types(evs []map[string]any) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

func count(list []string, v string) int {
	n := 0
	for _, s := range list {
		if s == v {
			n++
		}
	}
	return n
}

// A run created now is era 3 and stores the types v2 renamed under their v2 names; a
// run created before the era key is era 2 and stores v1 names. Each reader is served
// its own major's names from the one log, and nothing is rewritten.
func TestV2OneLogTwoVocabularies(t *testing.T) {
	t.Parallel()
	c := startStack(t)

	// Era 3: a support conversation (four tool calls) created through /v1.
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, c, id, 1, "waiting-approval")
	sayTo(t, c, id, "It's ACC-12345. What's my balance?")
	waitCompleted(t, c, id)
	stored := types(wfEvents(t, c.Stack, id))
	assert.Equal(t, 4, count(stored, "agent.tool-called"), "the log of an era-3 run is written in v2 vocabulary")
	assert.Zero(t, count(stored, "agent.toolCalled"))
	v1 := types(events(t, c, id))
	assert.Equal(t, 4, count(v1, "agent.toolCalled"), "a v1 reader gets v1's names back")
	assert.Equal(t, 4, count(v1, "agent.toolReturned"))
	assert.Zero(t, count(v1, "agent.tool-called"))
	v2evs := v2Events(t, c, id)
	v2 := v2Types(v2evs)
	assert.Equal(t, 4, count(v2, "agent.tool-called"))
	assert.Equal(t, 4, count(v2, "agent.tool-returned"))
	assert.Zero(t, count(v2, "agent.toolCalled"))
	require.Equal(t, len(v1), len(v2), "one log")
	started := v2evs[0]["payload"].(map[string]any)
	assert.Equal(t, map[string]any{"tenant": "default", "subject": map[string]any{"issuer": "urn:wop:api-key", "subjectId": "test",
		"tenant": "default", "lane": "api-key", "kind": "user"}}, started["owner"], "run.started echoes the owner")
	s, _ := v2Snapshot(t, c, "default/"+id)
	assert.Equal(t, float64(3), s["eventLogSchemaVersion"])
	assert.Equal(t, s["owner"], started["owner"])
	replayHistory(t, c, id, "pack-support-era3-records")

	// v2's SSE frames carry the v2 names too.
	stream := openStream(t, c, v2Path("default/"+id, "/events?streamMode=debug"), map[string]string{"OpenWOP-Version": "2.0"})
	frames, closed := stream.rest(10*time.Second, nil)
	require.True(t, closed)
	assert.Equal(t, v2, frameNames(frames))

	// Era 2: a run started the way the host started runs before the era key (no era, no
	// subject in its input).
	old := "r_era2" + randomHex(11)
	in, err := c.Stack.Catalog().NewRunInput(workflowsRunRequest(old, "support", `{"message":"Hi, I have a question about my account."}`))
	require.NoError(t, err)
	require.Zero(t, in.Era)
	ctxStart(t, c, old, in)
	waitRounds(t, c, old, 1, "waiting-approval")
	sayTo(t, c, old, "It's ACC-12345. What's my balance?")
	waitCompleted(t, c, old)
	stored = types(wfEvents(t, c.Stack, old))
	assert.Equal(t, 4, count(stored, "agent.toolCalled"), "an era-2 run writes v1 vocabulary for its whole life")
	assert.Zero(t, count(stored, "agent.tool-called"))
	assert.Equal(t, stored, types(events(t, c, old)), "and a v1 reader reads it as stored")
	v2old := v2Types(v2Events(t, c, "default/"+old))
	assert.Equal(t, 4, count(v2old, "agent.tool-called"), "a v2 reader gets it translated through the codemap")
	assert.Zero(t, count(v2old, "agent.toolCalled"))
	assert.Equal(t, v2, v2old, "the same conversation reads the same at v2 in either era")
	s, _ = v2Snapshot(t, c, "default/"+old)
	assert.Equal(t, float64(2), s["eventLogSchemaVersion"], "absent reads as 2, never backfilled")
	assert.Equal(t, "urn:openwop:legacy", s["owner"].(map[string]any)["subject"].(map[string]any)["issuer"], "a run without a subject reads with the legacy stamp")
}

// workflowsRunRequest is the request of a run as the host built it before the era key:
// tenant default, principal test, no era, no subject.
func workflowsRunRequest(id, workflowID, inputs string) workflows.RunRequest {
	return workflows.RunRequest{RunID: id, WorkflowID: workflowID, Inputs: json.RawMessage(inputs), Owner: workflows.Owner{Tenant: "default", Principal: "test"}}
}

// ctxStart starts the run workflow of in directly on Temporal.
func ctxStart(t *testing.T, c *apiClient, id string, in *workflows.RunInput) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Stack.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunWorkflowName, *in)
	require.NoError(t, err)
}
