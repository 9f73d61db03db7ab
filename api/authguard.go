package api

// Guards around authentication: failed authentication and the signed-token routes are
// rate-limited per client address, and every 401 names the Bearer scheme.

import (
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// wwwAuthenticate is the challenge every 401 carries (RFC 6750).
const wwwAuthenticate = `Bearer realm="openwop"`

// unauthenticated is a 401 unauthenticated error.
func unauthenticated(format string, args ...any) *Error {
	return codeErr(CodeUnauthenticated, format, args...)
}

// clientAddr is the address a request came from: the connection's peer. Forwarding
// headers (X-Forwarded-For, X-Real-IP) are not read, since any client can set them; an
// API behind a proxy sees the proxy's address and relies on the proxy's own limits.
func clientAddr(c echo.Context) string {
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		return c.Request().RemoteAddr
	}
	return host
}

// peek reports whether id's bucket holds a token, without taking one, or how long
// until it does.
func (rl *rateLimiter) peek(id string) (bool, time.Duration) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b, ok := rl.buckets[id]
	if !ok {
		return true, 0
	}
	tokens := math.Min(rl.burst, b.tokens+rl.now().Sub(b.last).Seconds()*rl.rate)
	if tokens >= 1 {
		return true, 0
	}
	return false, time.Duration((1 - tokens) / rl.rate * float64(time.Second))
}

// rateLimited is the 429 of a per-client limit.
func rateLimited(wait time.Duration, what string) *Error {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	e := codeErr(CodeRateLimited, "too many %s from this client; retry after %d s", what, secs).
		with("retryAfterMs", wait.Milliseconds()).with("scope", "route")
	e.Header = http.Header{"Retry-After": []string{strconv.Itoa(secs)}}
	return e
}

// authenticated wraps requireAuth: a client whose failed authentications have emptied
// its bucket gets 429 before its key is looked at, and each 401 drains the bucket.
func (s *Server) authenticated(scopes ...string) echo.MiddlewareFunc {
	inner := s.requireAuth(scopes...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := inner(next)
		return func(c echo.Context) error {
			addr := clientAddr(c)
			if ok, wait := s.authFails.peek(addr); !ok {
				return rateLimited(wait, "failed authentications")
			}
			err := h(c)
			var ae *Error
			if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized && principalOf(c) == nil {
				s.authFails.allow(addr)
			}
			return err
		}
	}
}

// limitTokenRoute limits the signed-token routes per client address.
func (s *Server) limitTokenRoute(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if ok, wait := s.tokenRoutes.allow(clientAddr(c)); !ok {
			return rateLimited(wait, "interrupt token requests")
		}
		return next(c)
	}
}
