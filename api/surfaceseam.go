package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// SurfaceSeamPath is the two-tenant seam (RFC 0093 §A.3): it performs one operation of
// a tenant-scoped surface in the tenant the request names, so that a conformance run
// holding one key can show that what one tenant registers another does not see. Like
// the durability seams it is test infrastructure, mounted only with
// Config.ConformanceSeams (the boot flag --conformance-seams), absent from the route
// table, the OpenAPI document and discovery.
const SurfaceSeamPath = "/v1/host/sample/test/surface"

// surfaceSeamRequest is the seam's body: {tenantId, surface, op, args}.
type surfaceSeamRequest struct {
	TenantID string          `json:"tenantId"`
	Surface  string          `json:"surface"`
	Op       string          `json:"op"`
	Args     json.RawMessage `json:"args"`
}

// surfaceSeamOps are the operations of the webhooks surface, each served by the
// handler of the protocol route it stands for.
var surfaceSeamOps = []string{"register", "list", "unregister"}

// handleSurfaceSeam runs op of the webhooks surface as the caller's key acting in
// tenantId: the same handler, the same checks (the egress guard on a registered URL
// among them) and the same dispatcher as POST /v1/webhooks, GET /v1/webhooks and
// DELETE /v1/webhooks/{webhookId}, with only the principal's tenant replaced. It
// answers 200 with the operation's body ({} for unregister); a refusal is the
// operation's own error.
func (s *Server) handleSurfaceSeam(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		return badRequest("request body is required: {\"tenantId\", \"surface\": \"webhooks\", \"op\", \"args\"}")
	}
	var req surfaceSeamRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := validateID("tenantId", req.TenantID); err != nil {
		return err
	}
	if req.Surface != "webhooks" {
		return badRequest("surface %q is not served by this seam; it serves \"webhooks\"", req.Surface).with("field", "surface")
	}
	args := bytes.TrimSpace(req.Args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return badRequest("args must be a JSON object").with("field", "args")
	}
	method, path, handler := http.MethodPost, "/v1/webhooks", s.handleRegisterWebhook
	var params []string
	switch req.Op {
	case "register":
	case "list":
		method, handler, args = http.MethodGet, s.handleListWebhooks, nil
	case "unregister":
		var a struct {
			WebhookID string `json:"webhookId"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return badRequest("args: %v", err).with("field", "args")
		}
		if err := validateID("args.webhookId", a.WebhookID); err != nil {
			return err
		}
		method, path, handler, args, params = http.MethodDelete, "/v1/webhooks/"+a.WebhookID, s.handleDeleteWebhook, nil, []string{a.WebhookID}
	default:
		return badRequest("op %q is not an operation of the webhooks surface; it has %v", req.Op, surfaceSeamOps).with("field", "op")
	}
	inner, err := http.NewRequestWithContext(c.Request().Context(), method, path, bytes.NewReader(args))
	if err != nil {
		return err
	}
	if args != nil {
		inner.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	out := &capturedResponse{header: http.Header{}}
	ic := s.e.NewContext(inner, out)
	if params != nil {
		ic.SetParamNames("webhookId")
		ic.SetParamValues(params...)
	}
	p := *principalOf(c)
	p.Tenant = req.TenantID
	ic.Set(principalKey, &p)
	if err := handler(ic); err != nil {
		return err
	}
	if out.body.Len() == 0 {
		return c.JSON(http.StatusOK, map[string]any{})
	}
	return c.JSONBlob(http.StatusOK, out.body.Bytes())
}

// capturedResponse keeps what a handler the seam calls writes.
type capturedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *capturedResponse) Header() http.Header         { return r.header }
func (r *capturedResponse) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *capturedResponse) WriteHeader(status int)      { r.status = status }
