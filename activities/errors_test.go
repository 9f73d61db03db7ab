package activities

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	assert.Equal(t, time.Duration(0), retryAfter(nil, now))
	assert.Equal(t, time.Duration(0), retryAfter(h(), now))
	assert.Equal(t, 3*time.Second, retryAfter(h("Retry-After", "3"), now))
	assert.Equal(t, 1500*time.Millisecond, retryAfter(h("Retry-After", "1.5"), now))
	assert.Equal(t, 250*time.Millisecond, retryAfter(h("Retry-After-Ms", "250", "Retry-After", "3"), now))
	assert.Equal(t, 90*time.Second, retryAfter(h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), now))
	assert.Equal(t, time.Duration(0), retryAfter(h("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), now))
	assert.Equal(t, time.Duration(0), retryAfter(h("Retry-After", "soon"), now))
	assert.Equal(t, maxRetryAfter, retryAfter(h("Retry-After", "86400"), now), "capped")
}

func TestRedactor(t *testing.T) {
	r := redactor("sk-abcdefgh12345678ijklmnop", "")
	assert.Equal(t, "key [REDACTED] bad", r("key sk-abcdefgh12345678ijklmnop bad"))
	assert.Equal(t, "masked [REDACTED]****[REDACTED]", r("masked sk-abcde****ijklmnop"))
	assert.Equal(t, "nothing here", r("nothing here"), "an empty secret redacts nothing")
}

func TestTruncate(t *testing.T) {
	assert.Equal(t, "short", truncate("short", 10))
	assert.Equal(t, "ab…", truncate("abcdef", 2))
	assert.Equal(t, "é…", truncate("ééé", 3), "never cuts inside a rune")
}

// TestErrorCodes: every error type an activity raises has a snake_case OpenWOP code.
func TestErrorCodes(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	types := []string{ErrTypeBadRequest, ErrTypeAuth, ErrTypeMockMismatch, ErrTypeMockExhausted, ErrTypeMockFailure,
		ErrTypeUnknownProvider, ErrTypeUnknownTool, ErrTypeBadResponse, ErrTypeRateLimited, ErrTypeUnavailable}
	seen := map[string]bool{}
	for _, typ := range types {
		code := ErrorCode(typ)
		assert.Regexp(t, snake, code, "code of %s", typ)
		assert.False(t, seen[code], "code %s is used twice", code)
		seen[code] = true
	}
	assert.Equal(t, "model_authentication", ErrorCode(ErrTypeAuth))
	assert.Equal(t, "mock_script_mismatch", ErrorCode(ErrTypeMockMismatch))
	assert.Empty(t, ErrorCode("SomethingElse"))
}
