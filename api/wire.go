package api

// The one seam where the host's ids meet a major (identity.md §5). Temporal ids never
// change: a run is the workflow "r_…", a webhook "wh_…". Under major 2 an id leaving the
// host is bound to its tenant ("acme/r_…", raw in bodies) and projected in paths and
// links ("acme~2Fr_…"); an id arriving in a major-2 path is decoded (projected or
// percent-encoded), its tenant segment checked against the caller's before anything is
// looked up (403 id_tenant_mismatch), and a bare v1 id is read in the caller's tenant
// (the overlap rule). Every response that names an id or a link goes through a wire:
// bodies, links, list pages, event envelopes and payloads, snapshots.

import (
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/wop-dev/wop/protocol"
)

// wire is how one response speaks of ids and links.
type wire struct {
	major  int
	tenant string // the tenant major-2 ids are bound to
	base   string // the base of absolute links ("": relative links)
}

// wireOf is the wire of a response to c about resources of tenant (the caller's, or a
// token's run's).
func (s *Server) wireOf(c echo.Context, tenant string) wire {
	return wire{major: majorOf(c), tenant: tenant, base: s.baseURL(c)}
}

// v2 reports whether the response is a major-2 one.
func (w wire) v2() bool { return w.major == protocol.Major2 }

// id is a tenant-bound kind of id (run, interrupt, webhook) as a body carries it.
func (w wire) id(id string) string {
	if !w.v2() || id == "" {
		return id
	}
	return protocol.BindID(w.tenant, id)
}

// prefix is the path space of the response's major.
func (w wire) prefix() string {
	if w.v2() {
		return ""
	}
	return "/v1"
}

// segment is a tenant-bound id as one path segment.
func (w wire) segment(id string) string {
	if !w.v2() {
		return id
	}
	return protocol.ProjectID(w.id(id))
}

// runPath is the path of run id, with suffix ("/events", "") after it.
func (w wire) runPath(id, suffix string) string {
	return w.prefix() + "/runs/" + w.segment(id) + suffix
}

// runLink is runPath as a link (absolute when the host knows its base URL).
func (w wire) runLink(id, suffix string) string { return w.base + w.runPath(id, suffix) }

// tokenPath is the path that resolves an interrupt by token.
func (w wire) tokenPath(tok string) string { return w.prefix() + "/interrupts/" + tok }

// boundParam reads a tenant-bound path parameter (runId, webhookId) under the request's
// major and returns the host's id. Under major 1 it is the id as it is. Under major 2
// it is decoded (percent-encoding, then the ~HH projection), its tenant segment must be
// the caller's (403 id_tenant_mismatch, before any lookup), and a bare id is taken in
// the caller's tenant.
func (s *Server) boundParam(c echo.Context, kind string) (string, error) {
	raw := c.Param(kind)
	if !isV2(c) {
		if err := validateID(kind, raw); err != nil {
			return "", err
		}
		return raw, nil
	}
	seg, err := url.PathUnescape(raw)
	if err != nil {
		return "", badRequest("%s %q is not a valid path segment", kind, raw).with("field", kind)
	}
	id, err := protocol.UnprojectID(seg)
	if err != nil {
		return "", badRequest("%s %q: %v", kind, raw, err).with("field", kind)
	}
	tenant, opaque, bound := protocol.SplitBoundID(id)
	if bound {
		if !protocol.ValidTenantID(tenant) {
			return "", badRequest("%s %q has no valid tenant segment (<tenantId>/<id>)", kind, id).with("field", kind)
		}
		if p := principalOf(c); p != nil && tenant != p.Tenant {
			return "", codeErr(protocol.CodeIDTenantMismatch, "the tenant segment of %s %q is not the caller's tenant", kind, id).with("field", kind)
		}
	}
	if err := validateID(kind, opaque); err != nil {
		return "", err
	}
	return opaque, nil
}

// pathIDForLog is the host's id in the request's path parameter kind, for log lines and
// span attributes: the opaque id of a v2 tenant-bound id, the id itself at v1; "" for
// a parameter that is absent or not a valid id. It checks no tenant (boundParam does,
// for the handler).
func pathIDForLog(c echo.Context, kind string) string {
	raw := c.Param(kind)
	if raw == "" {
		return ""
	}
	if isV2(c) {
		seg, err := url.PathUnescape(raw)
		if err != nil {
			return ""
		}
		id, err := protocol.UnprojectID(seg)
		if err != nil {
			return ""
		}
		_, raw, _ = protocol.SplitBoundID(id)
	}
	if validateID(kind, raw) != nil {
		return ""
	}
	return raw
}
