package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
)

// recordedCall is what the test server saw of one request.
type recordedCall struct {
	Method, Path, ContentType, Key, RunID, CallID, Tool, Auth string
	Body                                                      string
}

// toolServer answers each request with the next scripted response and records it.
type toolServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls []recordedCall
	next  func(n int, r *http.Request, w http.ResponseWriter)
}

func newToolServer(t *testing.T, next func(n int, r *http.Request, w http.ResponseWriter)) *toolServer {
	ts := &toolServer{next: next}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts.mu.Lock()
		ts.calls = append(ts.calls, recordedCall{Method: r.Method, Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"),
			Key: r.Header.Get(HeaderIdempotencyKey), RunID: r.Header.Get(HeaderRunID), CallID: r.Header.Get(HeaderCallID),
			Tool: r.Header.Get(HeaderTool), Auth: r.Header.Get("Authorization"), Body: string(body)})
		n := len(ts.calls)
		ts.mu.Unlock()
		ts.next(n, r, w)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) recorded() []recordedCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]recordedCall(nil), ts.calls...)
}

func httpSet(t *testing.T, url, timeout string) *Set {
	t.Helper()
	s := NewSet()
	src := "tools:\n  lookup_order:\n    http:\n      url: " + url + "\n      headers: { Authorization: \"Bearer ${ORDERS_TOKEN}\" }\n"
	if timeout != "" {
		src += "      timeout: " + timeout + "\n"
	}
	_, err := s.Parse("tools.yaml", []byte(src), LoadOptions{Getenv: envOf(map[string]string{"ORDERS_TOKEN": "tok-0123456789abcdef"})})
	require.NoError(t, err)
	return s
}

func lookupCall() convo.ToolCallInput {
	in := convo.ToolCallInput{RunID: "r_1", PackID: "orders", NodeID: "agent", State: "desk", Round: 1, CallID: "call_1_0_lookup_order",
		Tool: "lookup_order", Args: json.RawMessage(`{"order_id":"ORD-1042"}`)}
	in.IdempotencyKey = activities.ToolIdempotencyKey("t1", in)
	return in
}

func TestHTTPBindingPostsArgumentsAndReturnsTheJSONBody(t *testing.T) {
	ts := newToolServer(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"order_id":"ORD-1042","status":"shipped"}`)
	})
	s := httpSet(t, ts.URL+"/lookup", "")
	in := lookupCall()
	res, ok, err := s.Execute(context.Background(), in)
	require.True(t, ok)
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.JSONEq(t, `{"order_id":"ORD-1042","status":"shipped"}`, string(res.Content))

	calls := ts.recorded()
	require.Len(t, calls, 1)
	c := calls[0]
	require.Equal(t, recordedCall{Method: http.MethodPost, Path: "/lookup", ContentType: "application/json", Key: in.IdempotencyKey,
		RunID: "r_1", CallID: "call_1_0_lookup_order", Tool: "lookup_order", Auth: "Bearer tok-0123456789abcdef", Body: `{"order_id":"ORD-1042"}`}, c)
	require.Len(t, in.IdempotencyKey, 43, "base64url of a SHA-256")
	other := in
	other.CallID = "call_1_1_lookup_order"
	require.NotEqual(t, in.IdempotencyKey, activities.ToolIdempotencyKey("t1", other), "each call has its own key")
}

func TestHTTPBindingFailuresTheModelReads(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"not found", 404, `{"message":"no order ORD-1042"}`, `{"body":{"message":"no order ORD-1042"},"error":"POST URL answered HTTP 404 Not Found","status":404}`},
		{"unprocessable text", 422, `order_id is malformed`, `{"body":"order_id is malformed","error":"POST URL answered HTTP 422 Unprocessable Entity","status":422}`},
		{"redirect", 302, ``, `{"error":"POST URL answered HTTP 302 Found; tool bindings do not follow redirects","status":302}`},
		{"echoed secret", 401, `bad token Bearer tok-0123456789abcdef`, `{"body":"bad token Bearer [REDACTED]","error":"POST URL answered HTTP 401 Unauthorized","status":401}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := newToolServer(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
				if c.status == 302 {
					w.Header().Set("Location", "http://elsewhere.example/")
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			})
			url := ts.URL + "/lookup"
			res, _, err := httpSet(t, url, "").Execute(context.Background(), lookupCall())
			require.NoError(t, err, "the model reads a %d; the call is not retried", c.status)
			require.True(t, res.IsError)
			var want, got any
			require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(c.want, "URL", url)), &want))
			require.NoError(t, json.Unmarshal(res.Content, &got))
			require.Equal(t, want, got)
			require.Len(t, ts.recorded(), 1)
		})
	}
}

func TestHTTPBindingRetryableFailures(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		header  map[string]string
		errType string
		delay   time.Duration
	}{
		{"rate limited", 429, map[string]string{"Retry-After": "7"}, ErrTypeToolRateLimited, 7 * time.Second},
		{"unavailable", 503, map[string]string{"Retry-After": "2"}, ErrTypeToolUnavailable, 2 * time.Second},
		{"server error", 500, nil, ErrTypeToolUnavailable, 0},
		{"request timeout", 408, nil, ErrTypeToolUnavailable, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := newToolServer(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, "busy; token tok-0123456789abcdef")
			})
			_, ok, err := httpSet(t, ts.URL, "").Execute(context.Background(), lookupCall())
			require.True(t, ok)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, c.errType, appErr.Type())
			require.False(t, appErr.NonRetryable())
			require.Equal(t, c.delay, appErr.NextRetryDelay())
			require.NotContains(t, appErr.Error(), "tok-0123456789abcdef")
			require.Contains(t, appErr.Error(), "[REDACTED]")
		})
	}

	t.Run("no answer", func(t *testing.T) {
		release := make(chan struct{})
		ts := newToolServer(t, func(_ int, r *http.Request, w http.ResponseWriter) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		_, _, err := httpSet(t, ts.URL, "50ms").Execute(context.Background(), lookupCall())
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, activities.ErrTypeOutcomeUnknown, appErr.Type(), "the request was sent: it may have been applied")
		require.False(t, appErr.NonRetryable())
		require.Contains(t, appErr.Error(), "no answer within 50ms")
	})

	t.Run("connection refused", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		url := ts.URL
		ts.Close()
		_, _, err := httpSet(t, url, "").Execute(context.Background(), lookupCall())
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr)
		require.Equal(t, ErrTypeToolUnavailable, appErr.Type(), "nothing was sent: the call was not applied")
	})

	t.Run("cancelled", func(t *testing.T) {
		ts := newToolServer(t, func(_ int, r *http.Request, _ http.ResponseWriter) { <-r.Context().Done() })
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		_, _, err := httpSet(t, ts.URL, "").Execute(ctx, lookupCall())
		require.True(t, errors.Is(err, context.DeadlineExceeded), "the activity's own deadline is returned as is: %v", err)
	})
}

func TestHTTPBindingResultShapes(t *testing.T) {
	cases := []struct{ body, want string }{
		{"", `null`},
		{"shipped yesterday", `"shipped yesterday"`},
		{`[1,2]`, `[1,2]`},
	}
	for _, c := range cases {
		ts := newToolServer(t, func(_ int, _ *http.Request, w http.ResponseWriter) { _, _ = io.WriteString(w, c.body) })
		res, _, err := httpSet(t, ts.URL, "").Execute(context.Background(), lookupCall())
		require.NoError(t, err)
		require.Equal(t, c.want, string(res.Content))
	}
	big := newToolServer(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		_, _ = w.Write(make([]byte, MaxResultBytes+10))
	})
	res, _, err := httpSet(t, big.URL, "").Execute(context.Background(), lookupCall())
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, string(res.Content), "larger than 256 KiB")
}
