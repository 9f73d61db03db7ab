package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
)

// readBody reads the request body under the configured limit and checks its media type.
// An empty body is returned as nil (callers decide whether that is allowed).
func (s *Server) readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > s.cfg.MaxRequestBodyBytes {
		return nil, codeErr(CodePayloadTooLarge,
			"request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, s.cfg.MaxRequestBodyBytes).
			with("limit", s.cfg.MaxRequestBodyBytes)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxRequestBodyBytes+1))
	if err != nil {
		return nil, bodyReadError(err)
	}
	s.bodyRead(c)
	if int64(len(body)) > s.cfg.MaxRequestBodyBytes {
		return nil, codeErr(CodePayloadTooLarge,
			"request body exceeds the limit of %d bytes", s.cfg.MaxRequestBodyBytes).with("limit", s.cfg.MaxRequestBodyBytes)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	if err := checkJSONContentType(r.Header.Get(echo.HeaderContentType)); err != nil {
		return nil, err
	}
	return body, nil
}

func checkJSONContentType(ct string) error {
	if ct == "" {
		return codeErr(CodeUnsupportedMediaType, "missing Content-Type; send Content-Type: application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return codeErr(CodeUnsupportedMediaType, "malformed Content-Type %q; send application/json", ct)
	}
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return codeErr(CodeUnsupportedMediaType, "unsupported Content-Type %q; send application/json", mt)
	}
	return nil
}

// decodeStrict decodes a closed JSON object into v: unknown fields, trailing data, type
// mismatches and syntax errors become 400 validation_error naming the field and offset,
// as do invalid UTF-8, duplicate keys and nesting deeper than MaxJSONDepth anywhere in
// the body (checkJSONShape). It is the one decoder of request bodies.
func decodeStrict(body []byte, v any) error {
	if err := checkJSONShape(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, dec.InputOffset())
	}
	if tok, err := dec.Token(); err != io.EOF {
		_ = tok
		return badRequest("unexpected data after the JSON object at offset %d", dec.InputOffset()).with("offset", dec.InputOffset())
	}
	return nil
}

func jsonError(err error, offset int64) *Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return badRequest("malformed JSON at offset %d: %s", se.Offset, se.Error()).with("offset", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("malformed JSON: the body ends early at offset %d", offset).with("offset", offset)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(body)"
		}
		return badRequest("field %q must be %s, got JSON %s (offset %d)", field, jsonKind(te.Type.Kind().String()), te.Value, te.Offset).
			with("field", field).with("offset", te.Offset)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return badRequest("unknown field %q at offset %d: the body is a closed object", f, offset).with("field", f).with("offset", offset)
	}
	return badRequest("invalid JSON body at offset %d: %s", offset, strings.TrimPrefix(msg, "json: ")).with("offset", offset)
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "float64", "uint", "uint64":
		return "a number"
	}
	return "of type " + k
}

// isJSONObject reports whether raw is a JSON object (after whitespace).
func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// Identifier rules. Run, node and workflow ids are restricted to a safe charset so that
// nothing resembling a path or a control sequence reaches Temporal or a log line.
var (
	safeIDRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:~-]*$`)
	maxIDLength = 256
)

func validateID(kind, id string) error {
	if id == "" {
		return badRequest("%s is empty", kind).with("field", kind)
	}
	if len(id) > maxIDLength {
		return badRequest("%s is longer than %d characters", kind, maxIDLength).with("field", kind)
	}
	if !safeIDRe.MatchString(id) || strings.Contains(id, "..") {
		return badRequest("%s %q contains characters outside [A-Za-z0-9._:~-] or a '..' sequence", kind, id).with("field", kind)
	}
	return nil
}

// newRunID is protocol.NewRunID: "r_" + 26 Crockford base32 characters that sort by
// creation time.
func newRunID(now time.Time) string { return protocol.NewRunID(now) }

// derivedRunID maps a digest to a run id of the same shape as newRunID.
func derivedRunID(digest [32]byte) string { return protocol.DerivedRunID(digest) }
