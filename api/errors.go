package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"

	"github.com/wop-dev/wop/protocol"
)

// OpenWOP error codes this host answers with, under the names the API uses (package
// protocol spells them; statusOf maps them to HTTP).
const (
	CodeValidation            = protocol.CodeValidation
	CodeUnauthenticated       = protocol.CodeUnauthenticated
	CodeKeyRevoked            = protocol.CodeKeyRevoked
	CodeKeyExpired            = protocol.CodeKeyExpired
	CodeForbidden             = protocol.CodeForbidden
	CodeNotFound              = protocol.CodeNotFound
	CodeInterruptNotFound     = protocol.CodeInterruptNotFound
	CodeIdempotencyMismatch   = protocol.CodeIdempotencyMismatch
	CodeInterruptResolved     = protocol.CodeInterruptResolved
	CodeInterruptExpired      = protocol.CodeInterruptExpired
	CodeInterruptCancelled    = protocol.CodeInterruptCancelled
	CodeUnsupportedStreamMode = protocol.CodeUnsupportedStreamMode
	CodeRateLimited           = protocol.CodeRateLimited
	CodePayloadTooLarge       = protocol.CodePayloadTooLarge
	CodeUnsupportedMediaType  = protocol.CodeUnsupportedMediaType
	CodeMethodNotAllowed      = protocol.CodeMethodNotAllowed
	CodeInternal              = protocol.CodeInternal
	CodeUnavailable           = protocol.CodeUnavailable
	CodeRunTimeout            = protocol.CodeRunTimeout
)

// Error is an API error rendered as the closed OpenWOP error envelope
// {error, message, details?}. Cause is logged, never sent.
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
	Header  http.Header
	Cause   error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// codeErr is the API error of an OpenWOP code, answered with the status statusOf gives
// it (500 for a code the table does not know).
func codeErr(code, format string, args ...any) *Error {
	code = lostToCancel(code)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	return apiErr(status, code, format, args...)
}

// lostToCancel is the code a refused resolve is answered with: one that finds its run
// cancelled lost to the cancel, answered 409 interrupt_already_resolved at both majors
// (RFC 0213 §C: one code per state; the message says the run was cancelled). The run
// and the workers still name the state interrupt_cancelled.
func lostToCancel(code string) string {
	if code == CodeInterruptCancelled {
		return CodeInterruptResolved
	}
	return code
}

// apiErr is an API error with a status of its own: the answers the specification gives
// another status than the code's (422 for a well-formed value that does not fit, a
// status Echo chose), and refusals (refusalStatus).
func apiErr(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) with(k string, v any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[k] = v
	return e
}

func badRequest(format string, args ...any) *Error {
	return codeErr(CodeValidation, format, args...)
}

func notFound(format string, args ...any) *Error {
	return codeErr(CodeNotFound, format, args...)
}

// envelope is the wire form of Error.
type envelope struct {
	Error   string         `json:"error"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// errorHandler renders every error, Echo's own included, as the OpenWOP envelope.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	e := s.toAPIError(err, c)
	if isV2(c) {
		e = v2Error(e)
	}
	if e.Status >= 500 {
		corr := newCorrelationID()
		e = e.with("correlationId", corr)
		s.log.Error("Request failed", "method", c.Request().Method, "path", c.Request().URL.Path,
			"status", e.Status, "correlationId", corr, "error", err)
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			c.Response().Header().Add(k, v)
		}
	}
	if e.Status == http.StatusUnauthorized && c.Response().Header().Get("WWW-Authenticate") == "" {
		c.Response().Header().Set("WWW-Authenticate", wwwAuthenticate)
	}
	body := envelope{Error: e.Code, Message: e.Message, Details: e.Details}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(e.Status)
		return
	}
	if werr := c.JSON(e.Status, body); werr != nil {
		s.log.Warn("Writing error response failed", "error", werr)
	}
}

func (s *Server) toAPIError(err error, c echo.Context) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		path := c.Request().URL.Path
		switch he.Code {
		case http.StatusNotFound:
			return notFound("no route for %s %s", c.Request().Method, path)
		case http.StatusMethodNotAllowed:
			return codeErr(CodeMethodNotAllowed, "method %s is not allowed on %s", c.Request().Method, path)
		case http.StatusRequestEntityTooLarge:
			return apiErr(he.Code, CodePayloadTooLarge, "request body exceeds %d bytes", s.cfg.MaxRequestBodyBytes)
		case http.StatusUnsupportedMediaType:
			return apiErr(he.Code, CodeUnsupportedMediaType, "%v", he.Message)
		}
		if he.Code < 500 {
			return apiErr(he.Code, codeForStatus(he.Code), "%v", he.Message)
		}
		return &Error{Status: he.Code, Code: CodeInternal, Message: "internal error", Cause: err}
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return notFound("run not found")
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Cause: err}
}

// statusOf is the HTTP status the API answers each OpenWOP error code with: the one
// table from domain codes to HTTP. The API's own errors take it through codeErr; a
// run refuses a resolve with a code (workflows.ResolveCheck, ResolveOutcome), which
// refusalStatus answers with the status here.
var statusOf = map[string]int{
	CodeValidation:                                 http.StatusBadRequest,
	CodeUnsupportedStreamMode:                      http.StatusBadRequest,
	CodeWebhookURLRejected:                         http.StatusBadRequest,
	CodeWebhookEndpointUnverified:                  http.StatusBadRequest,
	CodeUnauthenticated:                            http.StatusUnauthorized,
	CodeKeyRevoked:                                 http.StatusUnauthorized,
	CodeKeyExpired:                                 http.StatusUnauthorized,
	CodeForbidden:                                  http.StatusForbidden,
	CodeNotFound:                                   http.StatusNotFound,
	CodeInterruptNotFound:                          http.StatusNotFound,
	CodeSubscriptionNotFound:                       http.StatusNotFound,
	CodeMethodNotAllowed:                           http.StatusMethodNotAllowed,
	CodeRequestTimeout:                             http.StatusRequestTimeout,
	CodeIdempotencyMismatch:                        http.StatusConflict,
	CodeInterruptResolved:                          http.StatusConflict,
	CodeTooManyWebhooks:                            http.StatusConflict,
	protocol.CodeApprovalPending:                   http.StatusConflict,
	protocol.CodeRunStateConflict:                  http.StatusConflict,
	protocol.CodeConversationSpeakerNotParticipant: http.StatusUnprocessableEntity,
	protocol.CodeConversationRosterExceeded:        http.StatusUnprocessableEntity,
	CodeInterruptExpired:                           http.StatusGone,
	CodePayloadTooLarge:                            http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType:                       http.StatusUnsupportedMediaType,
	CodeRateLimited:                                http.StatusTooManyRequests,
	CodeInternal:                                   http.StatusInternalServerError,
	CodeUnavailable:                                http.StatusServiceUnavailable,

	// Codes only the version table and major-2 answers use (their registered statuses).
	protocol.CodeProtocolVersionUnsupported: http.StatusNotAcceptable,
	protocol.CodeProtocolVersionMismatch:    http.StatusBadRequest,
	protocol.CodeIDTenantMismatch:           http.StatusForbidden,
	protocol.CodeIdempotencyKeyInvalid:      http.StatusBadRequest,
	protocol.CodeRunTerminal:                http.StatusConflict,
	protocol.CodeRunForbidden:               http.StatusForbidden,
	protocol.CodeRunnerUnavailable:          http.StatusServiceUnavailable,
	protocol.CodeInterruptTokenInvalid:      http.StatusUnauthorized,
	protocol.CodeEventTypeUnmapped:          http.StatusInternalServerError,
	protocol.CodePayloadUnprojectable:       http.StatusInternalServerError,
	protocol.CodeForkPointInvalid:           http.StatusUnprocessableEntity,
}

// refusalStatus is the HTTP status of a resolve the run refused. Outcomes that runs
// recorded before codes were mapped here carry the status they were answered with,
// and keep it; otherwise the code decides (statusOf), with 422 for a validation_error
// about a well-formed value that does not fit (Unprocessable), and 400 for a code the
// table does not know.
func refusalStatus(recorded int, code string, unprocessable bool) int {
	switch {
	case recorded >= 400 && recorded <= 599:
		return recorded
	case unprocessable:
		return http.StatusUnprocessableEntity
	}
	if status, ok := statusOf[code]; ok {
		return status
	}
	return http.StatusBadRequest
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeValidation
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusTooManyRequests:
		return CodeRateLimited
	}
	return CodeValidation
}

// v2Error is e as a major-2 answer (errors.md): its code the registered one V2Code
// names (or this host's vendor code wop.<code>), its status the registry's for a
// registered code, and retry timing only in Retry-After, never in details.
func v2Error(e *Error) *Error {
	out := *e
	out.Code = protocol.V2Code(e.Code)
	if status, ok := protocol.RegisteredStatus(out.Code); ok {
		out.Status = status
	}
	if e.Details != nil {
		out.Details = map[string]any{}
		for k, v := range e.Details {
			if !strings.HasPrefix(k, "retryAfter") {
				out.Details[k] = v
			}
		}
		if len(out.Details) == 0 {
			out.Details = nil
		}
	}
	return &out
}

func newCorrelationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "c_" + hex.EncodeToString(b[:])
}
