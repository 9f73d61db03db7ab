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

	"github.com/wop-dev/wop/workflows"
)

const healthTimeout = 3 * time.Second

// discoveryDoc builds the capability document of openwop-host.md §11. Only what the
// host honours is advertised.
func (s *Server) discoveryDoc() map[string]any {
	fixtures := s.cat.Fixtures()
	if fixtures == nil {
		fixtures = []string{}
	}
	doc := map[string]any{
		"protocolVersion":       "1.0",
		"implementation":        map[string]any{"name": "wop", "version": s.cfg.Version, "vendor": "wop"},
		"engineVersion":         1,
		"eventLogSchemaVersion": 1,
		"supportedTransports":   []string{"rest"},
		"supportedEnvelopes":    []string{"clarification.request"},
		"schemaVersions":        map[string]int{"clarification.request": 1},
		"limits": map[string]any{
			"clarificationRounds": 3, "schemaRounds": 2, "envelopesPerTurn": 5,
			"maxRequestBodyBytes": s.cfg.MaxRequestBodyBytes,
		},
		"conversationPrimitive": true,
		"replay":                map[string]any{"supported": true, "modes": []string{"replay"}},
		"runs":                  map[string]any{"pauseResume": map[string]any{"supported": false}},
		"streamModes":           supportedModes,
		"fixtures":              fixtures,
		// OpenWOP v2's run list family: GET /v1/runs here.
		"runList": map[string]any{"supported": true, "maxPageSize": MaxListPageSize, "filters": listFilters},
		// The PromptPack packs served as workflows (workflowId = pack id).
		"promptPacks": s.packsDoc(),
	}
	if s.webhooksEnabled() {
		doc["webhooks"] = s.webhookDiscovery()
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

func (s *Server) handleDiscovery(c echo.Context) error {
	body, err := json.Marshal(s.discoveryDoc())
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("ETag", etag)
	h.Set("Capabilities-Etag", etag)
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			if t = strings.TrimSpace(t); t == etag || t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return c.NoContent(http.StatusNotModified)
			}
		}
	}
	return c.JSONBlob(http.StatusOK, body)
}

var pathParamRe = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// openAPIDoc describes the routes of the route table as an OpenAPI 3.1 document.
func (s *Server) openAPIDoc() map[string]any {
	paths := map[string]any{}
	for _, r := range s.routes {
		item, _ := paths[r.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.Path] = item
		}
		ok := map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}
		if r.Produces != "" {
			ok = map[string]any{r.Produces: map[string]any{"schema": map[string]any{"type": "string"}}}
		}
		op := map[string]any{
			"summary":     r.Summary,
			"operationId": operationID(r),
			"responses": map[string]any{
				itoa(r.OK): map[string]any{"description": "success", "content": ok},
				"default":  map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}},
			},
		}
		var params []any
		for _, m := range pathParamRe.FindAllStringSubmatch(r.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
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
					"description": "gather frames for up to this many milliseconds into `event: batch` frames (0: none); flushed at once on terminal and suspension events"},
				lastSequenceParam, afterSequenceParam)
		case "/v1/runs/{runId}/events/poll":
			params = append(params, lastSequenceParam, afterSequenceParam,
				map[string]any{"name": "timeout", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 60}})
		}
		if r.Method == http.MethodPost && r.Scopes != nil {
			params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "schema": map[string]any{"type": "string", "maxLength": 255}})
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
				"ResolveRequest":          obj(map[string]any{"resumeValue": anyv}),
				"ResolveInterruptRequest": obj(map[string]any{"nodeId": str, "interruptId": str, "resumeValue": anyv}, "nodeId"),
				"ApprovalDecision":        map[string]any{"type": "object", "required": []string{"action"}, "properties": map[string]any{"action": str}},
				"ForkRequest":             obj(map[string]any{"mode": map[string]any{"enum": []string{"replay", "branch"}}, "fromSeq": map[string]any{"type": "integer", "minimum": 0}, "runOptionsOverlay": objv}, "mode"),
				"RegisterWebhookRequest": obj(map[string]any{"url": map[string]any{"type": "string", "format": "uri"},
					"events":   map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"enum": workflows.WebhookEventTypes}},
					"tenantId": str, "tags": map[string]any{"type": "array", "items": str}}, "url", "events"),
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

func (s *Server) handleOpenAPI(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	return c.JSON(http.StatusOK, s.openAPIDoc())
}

// The cursor parameters of the JSON and poll event reads. Both answer one page of
// bounded size; hasMore says more events follow it.
var (
	lastSequenceParam = map[string]any{"name": "lastSequence", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 0},
		"description": "events after this sequence (0: from sequence 0) — JSON (Accept: application/json) and poll"}
	afterSequenceParam = map[string]any{"name": "afterSequence", "in": "query", "schema": map[string]any{"type": "integer", "minimum": -1},
		"description": "events strictly after this sequence (-1: from the start); wins over lastSequence"}
)
