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
// each with its status, and no other; and, for each, the code and status a major-2
// answer carries (v2Error), "same" where they do not change.
func TestErrorCodesDoc(t *testing.T) {
	raw, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\| (same|`([a-z_.]+)` ([0-9]{3})) \\| (.+) \\|$").FindAllStringSubmatch(string(raw), -1)
	type doc struct {
		status   int
		v2       string
		v2Status int
	}
	documented := map[string]doc{}
	for _, r := range rows {
		_, dup := documented[r[1]]
		assert.False(t, dup, "%s is documented twice", r[1])
		d := doc{v2: r[1]}
		d.status, _ = strconv.Atoi(r[2])
		d.v2Status = d.status
		if r[3] != "same" {
			d.v2 = r[4]
			d.v2Status, _ = strconv.Atoi(r[5])
		}
		documented[r[1]] = d
		assert.NotEmpty(t, r[6], "%s has a meaning", r[1])
	}
	for code, status := range statusOf {
		got, ok := documented[code]
		if assert.True(t, ok, "docs/api.md does not document the code %s (%d)", code, status) {
			assert.Equal(t, status, got.status, "the status of %s", code)
			v2 := v2Error(&Error{Status: status, Code: code})
			assert.Equal(t, v2.Code, got.v2, "the code of %s at major 2", code)
			assert.Equal(t, v2.Status, got.v2Status, "the status of %s at major 2", code)
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
		{"past that wait, a resolve Temporal has not accepted yet waits for it, then answers 503", d(DefaultAcceptWait), "`api.GuardConfig`"},
		{"a resolve's update call goes on after its answer, for the poll that follows", d(updateCallBudget), ""},
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
