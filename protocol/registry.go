package protocol

// The v2 error registry (errors.md, spec/v2/errors.json): every code a major-2 answer
// may carry, with its HTTP status. A v2 answer, and the code of a failed run or node a
// v2 reader is served, uses only these codes or a vendor code of this host's org
// (wop.<code>); V2Code says which v2 code each of this host's codes is served as. The
// rows are in registry_table.go: errors.json's 101 and the ten more of the newer
// generated table (spec/v2/error-codes.md), checked against both files by
// TestTablesMatchTheSpec.

var registry = func() map[string]int {
	m := make(map[string]int, len(registryRows))
	for _, r := range registryRows {
		m[r.code] = r.status
	}
	return m
}()

type registryRow struct {
	code   string
	status int
}

// RegisteredStatus is the HTTP status the registry gives code; ok is false for a code it
// does not carry.
func RegisteredStatus(code string) (status int, ok bool) {
	status, ok = registry[code]
	return status, ok
}

// RegisteredCodes is the number of codes in the registry.
func RegisteredCodes() int { return len(registry) }

// v2Codes maps this host's codes that the registry does not carry, or that v2 spells
// otherwise, to the code a major-2 answer carries (docs/DECISIONS.md, "Errors per
// major"). Codes neither here nor registered are served as wop.<code>.
var v2Codes = map[string]string{
	CodeKeyExpired:           CodeUnauthenticated,
	CodeKeyRevoked:           "credential_revoked", // identity.md §2.2: the api-key lane
	CodeSubscriptionNotFound: CodeNotFound,
	CodeMethodNotAllowed:     CodeNotFound, // v2 has no 405: an unserved method is an unserved operation
	CodeUnavailable:          CodeRunnerUnavailable,
	CodeRequestTimeout:       CodeRunnerUnavailable,
	CodeInterruptTimeout:     CodeRunTimeout,
	// RFC 0213 §C, one code per state: a resolve of an interrupt whose run was
	// cancelled or has ended is interrupt_already_resolved on every resolve surface.
	CodeInterruptCancelled: CodeInterruptResolved,
	// A conversation message refused while a tool call waits for its approval: the run
	// is in a state that does not take it.
	CodeApprovalPending: CodeRunStateConflict,
}

// V2Code is the code a major-2 answer (an error envelope, a failed run's or node's
// error) carries for this host's code: the registered code itself, the registered code
// v2Codes names, or the vendor code wop.<code>. A vendor code of another org, and
// anything that is not a code, is served as internal_error.
func V2Code(code string) string {
	if c, ok := v2Codes[code]; ok {
		return c
	}
	if _, ok := registry[code]; ok {
		return code
	}
	if i := indexByte(code, '.'); i >= 0 {
		if code[:i] == Org && snakeCode(code[i+1:]) {
			return code
		}
		return CodeInternal
	}
	if snakeCode(code) {
		return Org + "." + code
	}
	return CodeInternal
}

// IsVendorCode reports whether code is a vendor code of this host's org.
func IsVendorCode(code string) bool {
	i := indexByte(code, '.')
	return i > 0 && code[:i] == Org && snakeCode(code[i+1:])
}

// snakeCode reports whether s matches ^[a-z][a-z0-9_]*$ (the code part of the
// registry's vendor pattern, and the shape of this host's codes).
func snakeCode(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
