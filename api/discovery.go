package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

const healthTimeout = 3 * time.Second

// discoveryDoc builds the capability document of openwop-host.md §11, the v1
// representation of discovery. Only what the host honours is advertised. It names the
// other major (protocolVersions, preferredVersion; capabilities.md §1), the keys that
// sign the host's certification bundles (signingKeys, the same array as the v2 root),
// and the era every run is created in now, whichever major creates it.
func (s *Server) discoveryDoc() map[string]any {
	fixtures := s.cat.Fixtures()
	if fixtures == nil {
		fixtures = []string{}
	}
	doc := map[string]any{
		"protocolVersion":       "1.0",
		"protocolVersions":      protocol.ProtocolVersions,
		"preferredVersion":      protocol.PreferredVersion,
		"signingKeys":           s.signingKeysDoc(),
		"implementation":        map[string]any{"name": "wop", "version": s.cfg.Version, "vendor": "wop"},
		"engineVersion":         1,
		"eventLogSchemaVersion": protocol.EraV2,
		"supportedTransports":   []string{"rest"},
		"supportedEnvelopes":    []string{"clarification.request"},
		"schemaVersions":        map[string]int{"clarification.request": 1},
		"limits": map[string]any{
			"clarificationRounds": 3, "schemaRounds": 2, "envelopesPerTurn": 5,
			"maxRequestBodyBytes": s.cfg.MaxRequestBodyBytes,
		},
		"conversationPrimitive": true,
		// RFC 0101's roster: conversation.opened names it, off-roster speakers are 422.
		"multiPartyConversation": map[string]any{"supported": true, "maxParticipants": workflows.MaxParticipants},
		"replay": map[string]any{"supported": true, "modes": []string{"replay"},
			// Suppression binds with replay (a fork performs no recorded effect), witnessed
			// by the manifest.
			"sideEffectSuppression": "recorded-outcome", "effectSeamsManifest": EffectSeamsPath},
		"runs":        map[string]any{"pauseResume": map[string]any{"supported": true, "drainPolicies": []string{workflows.DrainCurrentNode, workflows.DrainImmediate}}},
		"streamModes": supportedModes,
		"fixtures":    fixtures,
		// OpenWOP v2's run list family: GET /v1/runs here.
		"runList": map[string]any{"supported": true, "maxPageSize": MaxListPageSize, "filters": listFilters},
		// The PromptPack packs served as workflows (workflowId = pack id).
		"promptPacks": s.packsDoc(),
	}
	if s.webhooksEnabled() {
		doc["webhooks"] = s.webhookDiscovery(false)
	}
	doc["observability"] = s.observabilityDoc()
	return doc
}

// observabilityDoc is the observability record of discovery (OpenWOP observability.md):
// the OTLP transports the host exports spans with (OTEL_EXPORTER_OTLP_PROTOCOL picks
// one), the namespace of its span attributes, the trace context it honours, and where
// its metrics are, when this process serves them. Whether an exporter is configured
// is not said: that is the deployment's, and discovery is public.
func (s *Server) observabilityDoc() map[string]any {
	rec := map[string]any{
		"otel": map[string]any{
			"exportProtocols":    []string{"http/json", "http/protobuf", "grpc"},
			"attributeNamespace": "openwop",
			"traceContext":       []string{"traceparent", "tracestate"},
		},
	}
	if s.cfg.MetricsHandler != nil {
		rec["metrics"] = map[string]any{"format": "prometheus", "path": "/metrics"}
	}
	return rec
}

// packsDoc lists the packs served as workflows for discovery.
func (s *Server) packsDoc() []map[string]string {
	out := []map[string]string{}
	for _, id := range s.cat.PackIDs() {
		if p, ok := s.cat.Pack(id); ok {
			out = append(out, map[string]string{"workflowId": id, "packId": p.ID, "name": p.Name, "version": p.Version})
		}
	}
	return out
}

// discoveryV2 builds the closed v2 root (capabilities.md §3; digest §2.3). A family
// record's presence is the claim, so only families whose v2 behaviour is built and
// tested are listed: limits, runList, eventLog, conversationPrimitive, interrupt (ow2
// tokens, approversList on every surface, RFC 0223), replay (replay forks with
// side-effect suppression, replay_source_missing and fork_point_invalid, the
// effect-seam manifest), idempotency (the v2 key grammar and per-endpoint records,
// the effect ledger; one region), the api-key auth lane and, on a host with a webhook
// key, webhooks (the v2 body, both signature schemes, the dead-letter read:
// webhooksRecord). Everything else the host says of itself is under
// extensions["wop.host"].
func (s *Server) discoveryV2() map[string]any {
	fixtures := s.cat.Fixtures()
	if fixtures == nil {
		fixtures = []string{}
	}
	record := func(witness string, facets map[string]any) map[string]any {
		r := map[string]any{"status": "experimental", "since": protocol.Version2, "until": "2.1", "witness": witness}
		for k, v := range facets {
			r[k] = v
		}
		return r
	}
	host := map[string]any{
		"streamModes": supportedModes, "promptPacks": s.packsDoc(), "runListFilters": listFilters,
		"pathSpaces": map[string]string{protocol.Version1: "/v1", protocol.Version2: "/"},
	}
	if s.webhooksEnabled() {
		host["webhooks"] = s.webhookDiscovery(true)
	}
	if r := s.relaxationsDoc(); r != nil {
		host["relaxations"] = r
	}
	doc := map[string]any{
		"protocolVersions":      protocol.ProtocolVersions,
		"preferredVersion":      protocol.PreferredVersion,
		"implementation":        map[string]any{"name": "wop", "version": s.cfg.Version, "vendor": "wop"},
		"engineVersion":         protocol.EngineVersion,
		"eventLogSchemaVersion": protocol.EraV2,
		"signingKeys":           s.signingKeysDoc(),
		"observability":         s.observabilityDoc(), // a metadata key of the closed root, as at v1
		"fixtures":              fixtures,
		"extensions":            map[string]any{hostExtension: host},
		"limits": map[string]any{"status": "stable", "since": protocol.Version2, "witness": "witnessable-gated",
			"clarificationRounds": 3, "schemaRounds": 2, "envelopesPerTurn": 5, "maxRequestBodyBytes": s.cfg.MaxRequestBodyBytes},
		"runList":               record("witnessable-gated", map[string]any{"maxPageSize": MaxListPageSize, "filters": []string{"workflowId", "status"}}),
		"eventLog":              record("claims-check", nil),
		"conversationPrimitive": record("claims-check", nil),
		// Agent turns carry agent.model{provider, model} (workflows/turnparts.go).
		"conversationTurnModelProvenance": record("claims-check", nil),
		"multiPartyConversation":          record("claims-check", map[string]any{"maxParticipants": workflows.MaxParticipants}),
		// ow2 tokens; approversList binds on every surface, and only principals are
		// references it binds (no group or role refs); RFC 0223's reject and timeout.
		"interrupt": record("witnessable-gated", map[string]any{"tokenAlgs": []string{"hs256"}, "refKinds": []string{"principal"}}),
		// Suppression binds with the record (no sideEffectSuppression flag at v2); the
		// modes are replay.md's (the facet file's fork|branch|rerun disagrees, §12.2).
		"replay": record("witnessable-gated", map[string]any{"modes": []string{"replay"}, "effectSeamsManifest": EffectSeamsPath}),
		// One Temporal namespace holds every record: no cross-region claim.
		"idempotency": record("witnessable-gated", map[string]any{"crossRegion": "single-region"}),
		"auth": record("seam-gated", map[string]any{"lanes": []any{map[string]any{
			"lane": protocol.LaneAPIKey, "issuers": []string{protocol.IssuerAPIKey},
			"revocation": "next-request", "minimumAssurance": "bearer"}}}),
	}
	if s.webhooksEnabled() {
		doc["webhooks"] = s.webhooksRecord(record)
	}
	return doc
}

// SigningKey is a public key the host signs its certification bundles with, published
// in discovery's signingKeys[] (RFC 0168 §E.2).
type SigningKey struct {
	KeyID string
	// PublicKey is the raw 32-byte Ed25519 public key.
	PublicKey []byte
	// RetiredAt, when set, is when the key stopped signing; it stays listed.
	RetiredAt time.Time
}

// signingKeysDoc is signingKeys[]: each key base64url without padding (43 characters).
func (s *Server) signingKeysDoc() []map[string]string {
	out := []map[string]string{}
	for _, k := range s.cfg.SigningKeys {
		e := map[string]string{"keyId": k.KeyID, "alg": "ed25519", "publicKey": b64.EncodeToString(k.PublicKey), "use": "certification-bundle"}
		if !k.RetiredAt.IsZero() {
			e["retiredAt"] = k.RetiredAt.UTC().Format(time.RFC3339)
		}
		out = append(out, e)
	}
	return out
}

// handleDiscovery serves the one discovery resource in the representation of the
// request's major: the v1 document, or the closed v2 root. Each has its own ETag; only
// the v1 one carries Capabilities-Etag, which v2 removed.
func (s *Server) handleDiscovery(c echo.Context) error {
	doc := s.discoveryDoc()
	if isV2(c) {
		doc = s.discoveryV2()
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("ETag", etag)
	if !isV2(c) {
		h.Set("Capabilities-Etag", etag)
	}
	if etagMatches(c.Request().Header.Get("If-None-Match"), etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.JSONBlob(http.StatusOK, body)
}

// etagMatches reports whether an If-None-Match value names etag (or "*").
func etagMatches(inm, etag string) bool {
	if inm == "" {
		return false
	}
	for _, t := range strings.Split(inm, ",") {
		if t = strings.TrimSpace(t); t == etag || t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

var pathParamRe = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// v2OperationIDs are the operationIds of spec/v2/path-manifest.json for the routes
// served under major 2, by v1 method and path.
var v2OperationIDs = map[string]string{
	"GET /.well-known/openwop":                  "getCapabilities",
	"GET /v1/openapi.json":                      "getOpenApiSpec",
	"GET /v1/workflows/{workflowId}":            "getWorkflow",
	"GET /v1/runs":                              "listRuns",
	"POST /v1/runs":                             "createRun",
	"GET /v1/runs/{runId}":                      "getRun",
	"POST /v1/runs/{runId}/cancel":              "cancelRun",
	"GET /v1/runs/{runId}/events":               "streamRunEvents",
	"GET /v1/runs/{runId}/events/poll":          "pollRunEvents",
	"POST /v1/runs/{runId}/interrupts/{nodeId}": "resolveInterruptByRun",
	"GET /v1/interrupts/{token}":                "inspectInterruptByToken",
	"POST /v1/interrupts/{token}":               "resolveInterruptByToken",
	"POST /v1/runs/{runId}:fork":                "forkRun",
	"GET /v1/runs/{runId}/effects":              "getRunEffects",
	"GET /v1" + EffectSeamsPath:                 "getEffectSeamManifest",
	"POST /v1/webhooks":                         "registerWebhook",
	"DELETE /v1/webhooks/{webhookId}":           "unregisterWebhook",
	"GET /v1/webhooks/{webhookId}/dead-letters": "listWebhookDeadLetters",
	"POST /v1/runs:bulk-cancel":                 "bulkCancelRuns",
	"POST /v1/runs/{runId}:pause":               "pauseRun",
	"POST /v1/runs/{runId}:resume":              "resumeRun",
}

// openAPIFor is the OpenAPI 3.1 document of one major: v1's /v1/ routes, or v2's
// unversioned operations (the path manifest's rows this host serves), each request
// taking OpenWOP-Version, tenant-bound path ids and v2's bodies.
func (s *Server) openAPIFor(major int) map[string]any {
	v2 := major == protocol.Major2
	paths := map[string]any{}
	for _, r := range s.routes {
		path := r.Path
		if v2 {
			if !r.V2 && r.Path != DiscoveryPath {
				continue
			}
			path = r.v2Path()
		}
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		ok := map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
		if r.Produces != "" {
			ok = map[string]any{r.Produces: map[string]any{"schema": map[string]any{"type": "string"}}}
		}
		opID := operationID(r)
		if v2 {
			opID = v2OperationIDs[r.Method+" "+r.Path]
		}
		op := map[string]any{
			"summary":     r.Summary,
			"operationId": opID,
			"responses": map[string]any{
				itoa(r.OK): map[string]any{"description": "success", "content": ok},
				"default":  map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}},
			},
		}
		var params []any
		for _, m := range pathParamRe.FindAllStringSubmatch(r.Path, -1) {
			param := map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}}
			if v2 && (m[1] == "runId" || m[1] == "webhookId") {
				param["description"] = "tenant-bound id <tenantId>/<id>, projected into one segment (each byte outside [A-Za-z0-9._-] as ~HH: acme~2Fr_01…) or percent-encoded; a bare id is read in the caller's tenant"
			}
			params = append(params, param)
		}
		if v2 && r.Path != DiscoveryPath {
			params = append(params, map[string]any{"name": protocol.HeaderVersion, "in": "header", "schema": map[string]any{"type": "string", "pattern": "^(0|[1-9][0-9]*)(\\.(0|[1-9][0-9]*))?$"},
				"description": "the major to serve (2, or 1 for v1's shapes on this path); absent: 2"})
		}
		listParams := func(extra ...map[string]any) []any {
			out := []any{
				map[string]any{"name": "limit", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": MaxListPageSize}},
				map[string]any{"name": "cursor", "in": "query", "schema": map[string]any{"type": "string"}, "description": "nextCursor of the previous page"},
			}
			for _, e := range extra {
				out = append(out, e)
			}
			return out
		}
		query := func(name, desc string) map[string]any {
			return map[string]any{"name": name, "in": "query", "schema": map[string]any{"type": "string"}, "description": desc}
		}
		waiting := query("waiting", "waits on: any, "+strings.Join(workflows.WaitingKinds, ", "))
		switch r.Method + " " + r.Path {
		case "GET /v1/runs":
			params = append(params, listParams(
				query("status", "run statuses, comma-separated"), query("workflowId", "exact workflow id"),
				query("packId", "exact pack id"), waiting,
				query("createdAfter", "RFC 3339 time"), query("createdBefore", "RFC 3339 time"))...)
		case "GET /v1/interrupts":
			params = append(params, listParams(waiting, query("answeredBy",
				"whose work: operator (default: approvals, questions, decisions, conversations staff answer), user (conversations waiting for their end user), any"))...)
		}
		switch r.Path {
		case "/v1/runs/{runId}/events":
			params = append(params,
				map[string]any{"name": "streamMode", "in": "query", "schema": map[string]any{"type": "string"}, "description": "values|updates|messages|debug, comma-combinable except values"},
				map[string]any{"name": "Last-Event-ID", "in": "header", "schema": map[string]any{"type": "string"}},
				map[string]any{"name": "bufferMs", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 0, "maximum": MaxBufferMs},
					"description": "gather frames for up to this many milliseconds into `event: batch` frames (0: none); flushed at once on terminal and suspension events"})
			if v2 {
				params = append(params, afterSequenceParamV2)
			} else {
				params = append(params, lastSequenceParam, afterSequenceParam)
			}
		case "/v1/runs/{runId}/events/poll":
			if v2 {
				params = append(params, afterSequenceParamV2)
			} else {
				params = append(params, lastSequenceParam, afterSequenceParam)
			}
			params = append(params, map[string]any{"name": "timeout", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 60}})
		}
		if r.Method == http.MethodPost && (r.Scopes != nil || v2 && r.Token) {
			key := map[string]any{"name": "Idempotency-Key", "in": "header", "schema": map[string]any{"type": "string", "maxLength": 255}}
			if v2 {
				key["schema"] = map[string]any{"type": "string", "pattern": "^[A-Za-z0-9._~-]{22,128}$"}
			}
			params = append(params, key)
		}
		if params != nil {
			op["parameters"] = params
		}
		if r.Accepted {
			op["responses"].(map[string]any)["202"] = map[string]any{"description": "queued: the run has not decided within the resolve wait; repeat with the idempotencyKey to learn the outcome",
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
		}
		if r.Scopes != nil {
			op["security"] = []any{map[string]any{"bearer": r.Scopes}}
		} else {
			op["security"] = []any{}
		}
		if r.Body != "" {
			op["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + r.Body}}}}
		}
		item[strings.ToLower(r.Method)] = op
	}
	if v2 {
		return s.openAPIV2Document(paths)
	}
	obj := func(props map[string]any, required ...string) map[string]any {
		m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if required != nil {
			m["required"] = required
		}
		return m
	}
	anyv := map[string]any{}
	str := map[string]any{"type": "string"}
	objv := map[string]any{"type": "object"}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "wop OpenWOP v1 host", "version": s.cfg.Version},
		"paths":   paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{
				"Error": obj(map[string]any{"error": str, "message": str, "details": objv}, "error", "message"),
				"CreateRunRequest": obj(map[string]any{"workflowId": str, "inputs": objv, "tenantId": str, "scopeId": str,
					"callbackUrl":  map[string]any{"type": "string", "description": "refused (400): this host delivers no webhooks"},
					"configurable": objv, "metadata": map[string]any{"type": "object", "description": "at most 16 KiB"},
					"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string", "minLength": 1, "maxLength": 256}, "maxItems": 64}}, "workflowId"),
				"CancelRequest":           obj(map[string]any{"reason": str}),
				"PauseRequest":            obj(map[string]any{"reason": str, "drainPolicy": map[string]any{"enum": []string{workflows.DrainCurrentNode, workflows.DrainImmediate}, "default": workflows.DrainCurrentNode}}),
				"ResumeRequest":           obj(map[string]any{"reason": str}),
				"BulkCancelRequest":       obj(map[string]any{"runIds": map[string]any{"type": "array", "minItems": 1, "maxItems": MaxBulkCancelRunIDs, "items": str}, "reason": str}, "runIds"),
				"ResolveRequest":          obj(map[string]any{"resumeValue": anyv}),
				"ResolveInterruptRequest": obj(map[string]any{"nodeId": str, "interruptId": str, "resumeValue": anyv}, "nodeId"),
				"ApprovalDecision":        map[string]any{"type": "object", "required": []string{"action"}, "properties": map[string]any{"action": str}},
				"ForkRequest":             obj(map[string]any{"mode": map[string]any{"enum": []string{"replay", "branch"}}, "fromSeq": map[string]any{"type": "integer", "minimum": 0}, "runOptionsOverlay": objv, "inputs": objv}, "mode"),
				"Payloads": obj(map[string]any{"payloads": map[string]any{"type": "array", "items": map[string]any{
					"type": "object", "description": "a Temporal payload in protobuf JSON: metadata values and data are base64",
					"properties": map[string]any{"metadata": map[string]any{"type": "object", "additionalProperties": str}, "data": str}}}}, "payloads"),
				"RegisterWebhookRequest": obj(map[string]any{"url": map[string]any{"type": "string", "format": "uri"},
					"events":   map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"enum": workflows.WebhookEventTypesV1}},
					"tenantId": str, "tags": map[string]any{"type": "array", "items": str}}, "url", "events"),
			},
		},
	}
}

// openAPIV2Document wraps v2's paths with v2's schemas.
func (s *Server) openAPIV2Document(paths map[string]any) map[string]any {
	obj := func(props map[string]any, required ...string) map[string]any {
		m := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if required != nil {
			m["required"] = required
		}
		return m
	}
	str := map[string]any{"type": "string"}
	objv := map[string]any{"type": "object"}
	anyv := map[string]any{}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "wop OpenWOP v2 host", "version": s.cfg.Version,
			"description": "Major 2 of the OpenWOP REST protocol on unversioned paths, beside major 1 under /v1/ (GET /v1/openapi.json). Every response carries OpenWOP-Version."},
		"servers": []any{map[string]any{"url": "/"}},
		"paths":   paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
			"schemas": map[string]any{
				"Error": obj(map[string]any{"error": map[string]any{"type": "string", "description": "a code of the v2 registry (spec/v2/errors.json), or wop.<code>"},
					"message": str, "details": objv}, "error", "message"),
				"CreateRunRequest": obj(map[string]any{"workflowId": str, "inputs": objv, "tenantId": str, "scopeId": str, "callbackUrl": str,
					"residency": anyv, "mode": str, "evalSuiteRef": anyv, "agentId": str,
					"configurable": obj(map[string]any{"version": map[string]any{"const": 1}, "run": objv, "ai": objv, "distillation": objv, "budget": objv,
						"extensions": map[string]any{"type": "object", "additionalProperties": objv}}, "version"),
					"tags":     map[string]any{"type": "array", "maxItems": maxTagsV2, "items": map[string]any{"type": "string", "maxLength": maxTagCharsV2}},
					"metadata": map[string]any{"type": "object", "description": "free-form, at most 16 KiB"}}, "workflowId"),
				"CancelRequest":  obj(map[string]any{"reason": str}),
				"ResolveRequest": obj(map[string]any{"resumeValue": anyv}),
				"ForkRequest":    obj(map[string]any{"mode": map[string]any{"enum": []string{"replay", "branch"}}, "fromSeq": map[string]any{"type": "integer", "minimum": 0}, "runOptionsOverlay": objv, "inputs": objv}, "mode"),
				"RegisterWebhookRequest": obj(map[string]any{"url": map[string]any{"type": "string", "format": "uri"},
					"events": map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"enum": workflows.WebhookEventTypes}},
					"secret": map[string]any{"type": "string", "pattern": "^[!-~]+$", "minLength": minSuppliedSecret, "maxLength": maxSuppliedSecret,
						"description": "the subscriber's own secret, never echoed: with signatureAlgorithms [\"v1\", \"standard-webhooks-1\"] a Standard Webhooks whsec_ secret (24 to 64 bytes), else 24 to 94 printable ASCII characters that sign v1; without it the host generates one and returns it in the 201"},
					"tags": map[string]any{"type": "array", "items": str},
					"signatureAlgorithms": map[string]any{"type": "array", "minItems": 1, "contains": map[string]any{"const": webhookSchemesV2[0]}, "uniqueItems": true,
						"items": map[string]any{"enum": webhookSchemesV2}}}, "url", "events"),
			},
		},
	}
}

func operationID(r route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Method))
	up := true
	for _, ch := range r.Path {
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
			if up && ch >= 'a' && ch <= 'z' {
				ch -= 'a' - 'A'
			}
			b.WriteRune(ch)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// handleOpenAPI serves the OpenAPI document of the request's major: GET
// /v1/openapi.json v1's, GET /openapi.json v2's (v1's with OpenWOP-Version: 1).
func (s *Server) handleOpenAPI(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return c.JSON(http.StatusOK, s.openAPIFor(majorOf(c)))
}

// The cursor parameters of the JSON and poll event reads. Both answer one page of
// bounded size; hasMore says more events follow it.
var (
	lastSequenceParam = map[string]any{"name": "lastSequence", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 0},
		"description": "events after this sequence (0: from sequence 0) — JSON (Accept: application/json) and poll"}
	afterSequenceParam = map[string]any{"name": "afterSequence", "in": "query", "schema": map[string]any{"type": "integer", "minimum": -1},
		"description": "events strictly after this sequence (-1: from the start); wins over lastSequence"}
	afterSequenceParamV2 = map[string]any{"name": "afterSequence", "in": "query", "schema": map[string]any{"type": "integer", "minimum": -1},
		"description": "events strictly after this sequence; absent: from the first event"}
)
