package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
)

// Error types of the retryable failures of HTTP and MCP bindings. Temporal retries them
// as the call's RetryPolicy allows; after the last attempt the model gets an error
// result with the failure's message.
const (
	ErrTypeToolUnavailable = "ToolUnavailable" // 5xx, 408, no answer, connection failed
	ErrTypeToolRateLimited = "ToolRateLimited" // 429
)

// Headers an HTTP binding sends with every call besides its own.
const (
	HeaderIdempotencyKey = "Idempotency-Key"  // the same for every attempt of one call
	HeaderRunID          = "Wop-Run-Id"       // the run (Temporal workflow id)
	HeaderCallID         = "Wop-Tool-Call-Id" // the model's id of the call
	HeaderTool           = "Wop-Tool"         // the tool name
	HeaderPackID         = "Wop-Pack-Id"      // the pack the run executes
	HeaderAttempt        = "Wop-Attempt"      // 1 for the first attempt
)

// callHTTP POSTs the call's arguments to the binding's URL. A 2xx answer is the result
// (its JSON body; text becomes a JSON string; an empty body null); 429, 408 and 5xx
// answers, timeouts and connection failures are retryable errors (Retry-After is
// honoured); every other status is an error result the model reads, with the status
// and the body.
func (s *Set) callHTTP(ctx context.Context, b *HTTPBinding, in convo.ToolCallInput) (*convo.ToolCallResult, error) {
	args := in.Args
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	cctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, b.URL, bytes.NewReader(args))
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("build the request to %s: %v", b.URL, err), ErrTypeToolUnavailable, nil)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "wop-tools")
	req.Header.Set(HeaderIdempotencyKey, in.IdempotencyKey)
	req.Header.Set(HeaderRunID, in.RunID)
	req.Header.Set(HeaderCallID, in.CallID)
	req.Header.Set(HeaderTool, in.Tool)
	req.Header.Set(HeaderPackID, in.PackID)
	attempt := int32(1)
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	req.Header.Set(HeaderAttempt, strconv.Itoa(int(attempt)))
	for k, v := range b.Headers {
		req.Header.Set(k, v.Value())
	}

	resp, err := s.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the activity was cancelled or timed out
		}
		// A request that never left (no connection) was not applied; one that was sent
		// and got no answer may have been.
		errType := activities.ErrTypeOutcomeUnknown
		if notSent(err) {
			errType = ErrTypeToolUnavailable
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, temporal.NewApplicationError(fmt.Sprintf("POST %s: no answer within %s", b.URL, b.Timeout), errType)
		}
		return nil, temporal.NewApplicationError(fmt.Sprintf("POST %s failed: %s", b.URL, s.redact(rootCause(err).Error())), errType)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, temporal.NewApplicationError(fmt.Sprintf("POST %s: reading the answer failed: %s", b.URL, s.redact(err.Error())), activities.ErrTypeOutcomeUnknown)
	}
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if len(body) > MaxResultBytes {
			return errorResult(map[string]any{"error": fmt.Sprintf("the result of %s is larger than %d KiB, more than a tool result may hold; ask for less", in.Tool, MaxResultBytes>>10)}), nil
		}
		return &convo.ToolCallResult{Content: resultJSON(s.redact(string(body)))}, nil
	case code == http.StatusTooManyRequests:
		return nil, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("POST %s answered %s%s", b.URL, status, s.snippet(body)),
			ErrTypeToolRateLimited, temporal.ApplicationErrorOptions{NextRetryDelay: activities.RetryAfter(resp.Header)})
	case code == http.StatusRequestTimeout || code >= 500:
		return nil, temporal.NewApplicationErrorWithOptions(fmt.Sprintf("POST %s answered %s%s", b.URL, status, s.snippet(body)),
			ErrTypeToolUnavailable, temporal.ApplicationErrorOptions{NextRetryDelay: activities.RetryAfter(resp.Header)})
	case code >= 300 && code < 400:
		return errorResult(map[string]any{"error": fmt.Sprintf("POST %s answered %s; tool bindings do not follow redirects", b.URL, status), "status": code}), nil
	default:
		out := map[string]any{"error": fmt.Sprintf("POST %s answered %s", b.URL, status), "status": code}
		if len(body) > 0 {
			out["body"] = json.RawMessage(resultJSON(activities.Truncate(s.redact(string(body)), 4096)))
		}
		return errorResult(out), nil
	}
}

// snippet is ": <the start of the body>", redacted, for error messages.
func (s *Set) snippet(body []byte) string {
	t := strings.TrimSpace(string(body))
	if t == "" {
		return ""
	}
	return ": " + activities.Truncate(s.redact(t), 500)
}

// resultJSON returns text as JSON: itself when it is JSON, null when empty, else a JSON
// string.
func resultJSON(text string) json.RawMessage {
	t := strings.TrimSpace(text)
	if t == "" {
		return json.RawMessage(`null`)
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(text)
	return b
}

// errorResult is an IsError result with v as content.
func errorResult(v any) *convo.ToolCallResult {
	b, _ := json.Marshal(v)
	return &convo.ToolCallResult{Content: b, IsError: true}
}

// notSent reports whether a failed request never reached the target: the connection
// could not be made (refused, unreachable, DNS, a dial timeout).
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// rootCause drops the wrappers (url.Error) that repeat the method and URL.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
