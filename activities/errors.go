package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
)

// maxRetryAfter caps a provider's Retry-After so that one odd header cannot park a
// round for hours; the activity's RetryPolicy still bounds the attempts.
const maxRetryAfter = 10 * time.Minute

// httpFailure is what a provider reported for a failed HTTP call, reduced to the parts
// that are safe to show: never the request, its headers or the key.
type httpFailure struct {
	provider string      // canonical provider id, for the message
	status   int         // HTTP status code
	header   http.Header // response headers (Retry-After)
	message  string      // the provider's error message, if any
}

// classifyHTTP turns a provider's HTTP error into a Temporal application error whose
// type tells the workflow (and the RetryPolicy) whether to retry:
//
//	400, 404, 422 and other 4xx  → ErrTypeBadRequest, non-retryable
//	401, 403                     → ErrTypeAuth, non-retryable; the provider's message is dropped
//	429                          → ErrTypeRateLimited, retryable after Retry-After
//	408, 409, 5xx                → ErrTypeUnavailable, retryable after Retry-After
//
// redact is applied to the provider's message (a provider may echo part of the key).
func classifyHTTP(f httpFailure, redact func(string) string) error {
	msg := strings.TrimSpace(redact(f.message))
	detail := ""
	if msg != "" {
		detail = ": " + truncate(msg, 500)
	}
	switch {
	case f.status == http.StatusUnauthorized || f.status == http.StatusForbidden:
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("%s rejected the API key (HTTP %d): the key is invalid, expired or lacks access to the model; "+
				"check the key in the worker's environment", f.provider, f.status),
			ErrTypeAuth, temporal.ApplicationErrorOptions{NonRetryable: true})
	case f.status == http.StatusTooManyRequests:
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("%s rate limit reached (HTTP 429)%s", f.provider, detail),
			ErrTypeRateLimited, temporal.ApplicationErrorOptions{NextRetryDelay: retryAfter(f.header, time.Now())})
	case f.status == http.StatusRequestTimeout || f.status == http.StatusConflict || f.status >= 500:
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("%s is unavailable (HTTP %d)%s", f.provider, f.status, detail),
			ErrTypeUnavailable, temporal.ApplicationErrorOptions{NextRetryDelay: retryAfter(f.header, time.Now())})
	default:
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("%s rejected the request (HTTP %d)%s", f.provider, f.status, detail),
			ErrTypeBadRequest, temporal.ApplicationErrorOptions{NonRetryable: true})
	}
}

// retryAfter reads Retry-After-Ms, then Retry-After (seconds or an HTTP date), and
// returns 0 when neither is usable, which lets the RetryPolicy's backoff decide.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			d = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); d == 0 && v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 {
				d = time.Duration(s * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// classifyTransport maps an error that carries no HTTP status: a cancelled or timed
// out activity context is returned as is, a response the SDK could not decode is a
// non-retryable ErrTypeBadResponse, anything else (connection refused, reset, DNS) is
// a retryable ErrTypeUnavailable.
func classifyTransport(ctx context.Context, provider string, err error, redact func(string) string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := redact(err.Error())
	if isDecodeError(err) {
		return badResponse(provider, "could not decode the response: "+truncate(msg, 300))
	}
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("calling %s failed: %s", provider, truncate(msg, 300)),
		ErrTypeUnavailable, temporal.ApplicationErrorOptions{})
}

// isDecodeError reports whether err comes from decoding a response body rather than
// from the network: encoding/json's error types, or an SDK error whose text says so.
func isDecodeError(err error) bool {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return true
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) {
		return false
	}
	s := strings.ToLower(err.Error())
	for _, marker := range []string{"invalid character", "unexpected end of json", "cannot unmarshal", "json"} {
		if strings.Contains(s, marker) {
			return true
		}
	}
	return false
}

// badResponse is a non-retryable ErrTypeBadResponse: the provider answered 2xx with
// something that is not a usable completion.
func badResponse(provider, what string) error {
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("%s returned a malformed response: %s", provider, what),
		ErrTypeBadResponse, temporal.ApplicationErrorOptions{NonRetryable: true})
}

// nonRetryable builds a non-retryable application error of the given type.
func nonRetryable(errType, format string, args ...any) error {
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf(format, args...), errType,
		temporal.ApplicationErrorOptions{NonRetryable: true})
}

// redactor returns a function that replaces every occurrence of the given secrets
// (and of their longer prefixes and suffixes, which providers echo as "sk-ab…wxyz")
// with "[REDACTED]".
func redactor(secrets ...string) func(string) string {
	var keep []string
	for _, s := range secrets {
		if len(s) >= 4 {
			keep = append(keep, s)
		}
	}
	return func(in string) string {
		for _, s := range keep {
			in = strings.ReplaceAll(in, s, "[REDACTED]")
			// Masked echoes such as "sk-abc***wxyz": drop 8+ character fragments too.
			if len(s) >= 16 {
				for _, frag := range []string{s[:8], s[len(s)-8:]} {
					in = strings.ReplaceAll(in, frag, "[REDACTED]")
				}
			}
		}
		return in
	}
}

// truncate shortens s to at most n bytes (on a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
