package api

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/internal/docblock"
)

// TestErrorCodesDoc: docs/api.md's table of error codes lists every code of statusOf,
// each with its status, and no other.
func TestErrorCodesDoc(t *testing.T) {
	raw, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\| (.+) \\|$").FindAllStringSubmatch(string(raw), -1)
	documented := map[string]int{}
	for _, r := range rows {
		_, dup := documented[r[1]]
		assert.False(t, dup, "%s is documented twice", r[1])
		documented[r[1]], _ = strconv.Atoi(r[2])
		assert.NotEmpty(t, r[3], "%s has a meaning", r[1])
	}
	for code, status := range statusOf {
		got, ok := documented[code]
		if assert.True(t, ok, "docs/api.md does not document the code %s (%d)", code, status) {
			assert.Equal(t, status, got, "the status of %s", code)
		}
	}
	for code := range documented {
		_, ok := statusOf[code]
		assert.True(t, ok, "docs/api.md documents %s, which the API does not answer with", code)
	}
}

// TestAPITimeoutsDoc keeps the API's timeouts in docs/timeouts.md equal to its
// defaults. WOP_UPDATE_DOCS=1 rewrites them.
func TestAPITimeoutsDoc(t *testing.T) {
	d := docblock.Duration
	table := docblock.Table([]string{"what", "default", "set with"}, [][]string{
		{"a resolve waits for the run's outcome, then answers `202 queued`", d(DefaultResolveWait), "`WOP_RESOLVE_WAIT`"},
		{"a request's headers arrive", d(DefaultReadHeaderTimeout), "`api.GuardConfig`"},
		{"a request's body arrives (else 408 `request_timeout`)", d(DefaultBodyReadTimeout), "`api.GuardConfig`"},
		{"a response is written (not a stream)", d(DefaultWriteTimeout), "`api.GuardConfig`"},
		{"one frame of an event stream is written", d(DefaultStreamWriteTimeout), "`api.GuardConfig`"},
		{"an idle keep-alive connection stays open", d(DefaultIdleTimeout), "`api.GuardConfig`"},
		{"a signed interrupt token lives, from the read that served it", d(DefaultTokenTTL), "`WOP_TOKEN_TTL`"},
		{"an event stream's keepalive comment, while nothing happens", d(DefaultKeepAlive), ""},
	})
	docblock.Check(t, "../docs/timeouts.md", "api-timeouts", table)
}
