package api

// The codec endpoint: Temporal's remote codec protocol (POST /codec/encode and
// /codec/decode, a JSON body {"payloads": [...]} answered in kind), which the Temporal UI
// and CLI call to show the payloads the host sealed (package payloadcodec). Decoding
// shows any run's content, whatever its tenant, so it is an operator's right: a key
// with the payloads:codec scope, which "all" does not grant. Browsers reach it from the
// origins of Config.CodecCORSOrigins; wop dev also opens it, without a key, to its own
// embedded UI's origin (Config.CodecUIOrigin), whose browser has no key to send.

import (
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// codecPathPrefix starts the codec routes.
const codecPathPrefix = "/codec/"

// codecHeaders are the request headers the Temporal UI sends to a codec endpoint.
const codecHeaders = "Authorization, Content-Type, X-Namespace"

// codecOrigin is the request's Origin when the codec endpoint answers it, or "".
func (s *Server) codecOrigin(c echo.Context) string {
	o := c.Request().Header.Get(echo.HeaderOrigin)
	if o == "" {
		return ""
	}
	if o == s.cfg.CodecUIOrigin || slices.Contains(s.cfg.CodecCORSOrigins, o) {
		return o
	}
	return ""
}

// allowCodecOrigin sets the CORS headers for an origin the endpoint answers.
func (s *Server) allowCodecOrigin(c echo.Context) {
	if o := s.codecOrigin(c); o != "" {
		h := c.Response().Header()
		h.Set(echo.HeaderAccessControlAllowOrigin, o)
		h.Add(echo.HeaderVary, echo.HeaderOrigin)
	}
}

// codecAuthenticated is the codec routes' authentication: the embedded UI's origin
// without a key (wop dev only), every other caller with a key holding scopes.
func (s *Server) codecAuthenticated(scopes ...string) echo.MiddlewareFunc {
	auth := s.authenticated(scopes...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		withKey := auth(next)
		return func(c echo.Context) error {
			s.allowCodecOrigin(c)
			r := c.Request()
			if s.cfg.CodecUIOrigin != "" && r.Header.Get(echo.HeaderOrigin) == s.cfg.CodecUIOrigin && r.Header.Get(echo.HeaderAuthorization) == "" {
				return next(c)
			}
			return withKey(c)
		}
	}
}

// codecPreflight answers a browser's CORS preflight of the codec routes (before
// routing: they are POST routes).
func (s *Server) codecPreflight(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodOptions || !strings.HasPrefix(r.URL.Path, codecPathPrefix) {
			return next(c)
		}
		return s.answerCodecPreflight(c)
	}
}

func (s *Server) answerCodecPreflight(c echo.Context) error {
	if s.codecOrigin(c) == "" {
		return c.NoContent(http.StatusForbidden)
	}
	s.allowCodecOrigin(c)
	h := c.Response().Header()
	h.Set(echo.HeaderAccessControlAllowMethods, http.MethodPost)
	h.Set(echo.HeaderAccessControlAllowHeaders, codecHeaders)
	h.Set(echo.HeaderAccessControlMaxAge, "600")
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) handleCodecEncode(c echo.Context) error { return s.codec(c, true) }
func (s *Server) handleCodecDecode(c echo.Context) error { return s.codec(c, false) }

// codec encodes or decodes the payloads of the request body.
func (s *Server) codec(c echo.Context, encode bool) error {
	pc := s.cfg.PayloadCodec
	if pc == nil {
		return notFound("this host seals no payloads (WOP_PAYLOAD_KEYS_FILE is not set), so it serves no codec")
	}
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return codeErr(CodeUnsupportedMediaType, "the codec reads application/json, not %q", ct)
	}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return badRequest("read the request body: %v", err)
	}
	var in commonpb.Payloads
	if err := protojson.Unmarshal(body, &in); err != nil {
		return badRequest(`the body is not {"payloads": [...]} of Temporal payloads: %v`, err)
	}
	out := in.GetPayloads()
	if encode {
		out, err = pc.Encode(out)
	} else {
		out, err = pc.Decode(out)
	}
	if err != nil {
		return badRequest("%v", err)
	}
	data, err := protojson.Marshal(&commonpb.Payloads{Payloads: out})
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}
