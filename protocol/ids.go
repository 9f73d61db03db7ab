package protocol

// Tenant-bound identifiers (identity.md §5, RFC 0184). At major 2 a run, interrupt,
// subscription (webhook), delivery or effect id is "<tenantId>/<opaque>": raw in JSON
// bodies, projected into one path segment in paths and links. The host's own ids (the
// Temporal workflow id of a run, a webhook id) are the opaque part; they never change,
// and BindID is applied where an id leaves the host, once.

// BindID is the tenant-bound form of the host's id opaque in tenant: "<tenant>/<opaque>".
// An id that is bound already (or empty) is returned as it is, so binding is idempotent.
func BindID(tenant, opaque string) string {
	if opaque == "" || indexByte(opaque, '/') >= 0 {
		return opaque
	}
	return tenant + "/" + opaque
}

const upperHex = "0123456789ABCDEF"

// ProjectID encodes an id into exactly one path segment: every byte outside
// [A-Za-z0-9._-] becomes '~' and two uppercase hex digits ("acme/r_1" -> "acme~2Fr_1").
func ProjectID(id string) string {
	out := make([]byte, 0, len(id)+6)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			out = append(out, c)
			continue
		}
		out = append(out, '~', upperHex[c>>4], upperHex[c&15])
	}
	return string(out)
}

// projectionError is a '~' in a path segment that two hex digits do not follow.
type projectionError struct{}

func (projectionError) Error() string {
	return "a '~' in the id is not followed by two hex digits"
}

// ErrBadProjection is the error of UnprojectID for a malformed '~' escape.
var ErrBadProjection error = projectionError{}

// UnprojectID decodes one projected path segment ("acme~2Fr_1" -> "acme/r_1"). A '~'
// without two hex digits after it is ErrBadProjection.
func UnprojectID(seg string) (string, error) {
	if indexByte(seg, '~') < 0 {
		return seg, nil
	}
	out := make([]byte, 0, len(seg))
	for i := 0; i < len(seg); i++ {
		if seg[i] != '~' {
			out = append(out, seg[i])
			continue
		}
		if i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]) {
			return "", ErrBadProjection
		}
		out = append(out, unhex(seg[i+1])<<4|unhex(seg[i+2]))
		i += 2
	}
	return string(out), nil
}

// SplitBoundID splits a bound id into its tenant segment and opaque part; bound is
// false for an id without a tenant segment (a bare v1 id).
func SplitBoundID(id string) (tenant, opaque string, bound bool) {
	i := indexByte(id, '/')
	if i < 0 {
		return "", id, false
	}
	return id[:i], id[i+1:], true
}

// ValidTenantID reports whether t matches the tenantId grammar
// ^(anon:)?[A-Za-z0-9._~-]{1,128}$.
func ValidTenantID(t string) bool {
	if len(t) >= 5 && t[:5] == "anon:" {
		t = t[5:]
	}
	if t == "" || len(t) > 128 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-') {
			return false
		}
	}
	return true
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
