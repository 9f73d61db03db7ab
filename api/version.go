package api

// Two protocol majors, one host (versioning.md §1). Major 1 lives under /v1/ as it
// always has; major 2 is the unversioned path space. Every protocol request is served
// under one major, chosen here before any handler runs, and every protocol response —
// errors, 304s and event streams included — carries OpenWOP-Version naming it:
//
//	path          OpenWOP-Version        served under
//	/v1/...       absent, 1 or 1.x        major 1
//	/v1/...       anything else           400 protocol_version_mismatch
//	unversioned   2 or 2.x                major 2
//	unversioned   1 or 1.x                major 1 (the same handlers, v1 shapes)
//	unversioned   any other value         406 protocol_version_unsupported
//	unversioned   absent                  major 2, except /.well-known/openwop: the
//	                                      preferredVersion's major (1 while v1 is served)
//
// Handlers are shared: each reads the major (majorOf) where the two differ, and the
// error handler renders each major's codes (errors.go). The approvals inbox, /healthz,
// /metrics and /codec are not protocol routes: no header, no negotiation.

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
)

const majorKey = "wop.major"

// DiscoveryPath is the discovery resource, one resource for both majors.
const DiscoveryPath = "/.well-known/openwop"

// majorOf is the major the request is served under; major 1 where nothing negotiated
// (the non-protocol routes, unit tests that call a handler directly).
func majorOf(c echo.Context) int {
	if m, ok := c.Get(majorKey).(int); ok {
		return m
	}
	return protocol.Major1
}

// isV2 reports whether the request is served under major 2.
func isV2(c echo.Context) bool { return majorOf(c) == protocol.Major2 }

// isV1Path reports whether p is in the /v1/ path space.
func isV1Path(p string) bool { return p == "/v1" || strings.HasPrefix(p, "/v1/") }

// isProtocolPath reports whether p is answered by the protocol: everything but the
// host's own pages and probes. An unknown unversioned path is a protocol path too (it
// is answered 404 under major 2).
func isProtocolPath(p string) bool {
	switch {
	case p == "/healthz", p == "/metrics", p == "/inbox", strings.HasPrefix(p, "/inbox/"), strings.HasPrefix(p, codecPathPrefix):
		return false
	}
	return true
}

// negotiate picks the request's major, sets OpenWOP-Version on the response, and
// answers the version table's refusals.
func (s *Server) negotiate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		path := c.Request().URL.Path
		if !isProtocolPath(path) {
			return next(c)
		}
		asked := c.Request().Header.Get(protocol.HeaderVersion)
		h := c.Response().Header()
		if isV1Path(path) {
			c.Set(majorKey, protocol.Major1)
			h.Set(protocol.HeaderVersion, protocol.Version1)
			if asked != "" {
				if m, ok := protocol.ParseVersionHeader(asked); !ok || m != protocol.Major1 {
					return codeErr(protocol.CodeProtocolVersionMismatch,
						"OpenWOP-Version %q names another major than the /v1/ path space; send 1 (or no header) on /v1/ paths, or use the unversioned paths for major 2", asked).
						with("protocolVersions", protocol.ProtocolVersions)
				}
			}
			return next(c)
		}
		// The representation of every unversioned path depends on the header.
		h.Add(echo.HeaderVary, "Accept, "+protocol.HeaderVersion)
		m := protocol.Major2
		if path == DiscoveryPath {
			m, _ = protocol.ParseVersionHeader(protocol.PreferredVersion)
		}
		if asked != "" {
			am, ok := protocol.ParseVersionHeader(asked)
			if !ok || !protocol.Served(am) {
				c.Set(majorKey, protocol.Major2)
				h.Set(protocol.HeaderVersion, protocol.Version2)
				return codeErr(protocol.CodeProtocolVersionUnsupported,
					"OpenWOP-Version %q names no major this host serves; it serves %s", asked, strings.Join(protocol.ProtocolVersions, ", ")).
					with("protocolVersions", protocol.ProtocolVersions)
			}
			m = am
		}
		c.Set(majorKey, m)
		h.Set(protocol.HeaderVersion, protocol.VersionOf(m))
		return next(c)
	}
}
