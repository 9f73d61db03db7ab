package api

// Guards around authentication: failed authentication is rate-limited per failing
// client, the signed-token routes per client address, and every 401 names the Bearer
// scheme.

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// wwwAuthenticate is the challenge every 401 carries (RFC 6750).
const wwwAuthenticate = `Bearer realm="openwop"`

// unauthenticated is a 401 unauthenticated error.
func unauthenticated(format string, args ...any) *Error {
	return codeErr(CodeUnauthenticated, format, args...)
}

// clientAddr is the address a request came from: the connection's peer, or, when the
// peer is one of Guards.TrustedProxies, the address those proxies forwarded in
// X-Forwarded-For: read from the right, the first address that is not a trusted proxy
// (the left-most when every one is). Without trusted proxies forwarding headers are not
// read, since any client can set them.
func (s *Server) clientAddr(c echo.Context) string {
	r := c.Request()
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	trusted := s.cfg.Guards.TrustedProxies
	if len(trusted) == 0 {
		return host
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !trustedProxy(trusted, addr) {
		return host
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := forwardedAddr(hops[i])
		if !ok {
			break // not an address: nothing left of it is trusted
		}
		addr = hop
		if !trustedProxy(trusted, addr) {
			break
		}
	}
	return addr.String()
}

// forwardedAddr reads one X-Forwarded-For entry: an address, optionally with a port
// (IPv6 in brackets).
func forwardedAddr(v string) (netip.Addr, bool) {
	v = strings.TrimSpace(v)
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.Trim(v, "[]"))
	return a.Unmap(), err == nil
}

func trustedProxy(trusted []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR prefixes
// (WOP_TRUSTED_PROXIES), e.g. "10.0.0.0/8, 127.0.0.1".
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix such as 10.0.0.0/8", v)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
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

// failedKeyKey names, on a request whose key was refused though it is known (revoked
// or expired), that key's id: its failures count against the key, not the address.
const failedKeyKey = "wop.failedKey"

// authenticated wraps requireAuth with the limit of failed authentications. A failure
// (a 401 before any key authenticated) is counted against what identifies the failing
// client: the key it presented when that is a known key that no longer authenticates,
// else its address (clientAddr, behind trusted proxies the client's own). Once that
// bucket is empty its failures are answered 429 instead of 401. The key is looked up
// first, so a request whose key authenticates is never refused for failures, its
// client's or anyone's: a flood of wrong keys through one proxy or one published
// Docker port locks out no valid key.
func (s *Server) authenticated(scopes ...string) echo.MiddlewareFunc {
	inner := s.requireAuth(scopes...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := inner(next)
		return func(c echo.Context) error {
			err := h(c)
			var ae *Error
			if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || principalOf(c) != nil {
				return err
			}
			id := "addr:" + s.clientAddr(c)
			if key, _ := c.Get(failedKeyKey).(string); key != "" {
				id = "key:" + key
			}
			if ok, wait := s.authFails.allow(id); !ok {
				return rateLimited(wait, "failed authentications")
			}
			return err
		}
	}
}

// limitTokenRoute limits the signed-token routes per client address.
func (s *Server) limitTokenRoute(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if ok, wait := s.tokenRoutes.allow(s.clientAddr(c)); !ok {
			return rateLimited(wait, "interrupt token requests")
		}
		return next(c)
	}
}
