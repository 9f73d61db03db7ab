package tools

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/internal/docblock"
)

// TestBindingsReferenceDoc: docs/tools.md has a row for every field the bindings file
// accepts, in the section of its mapping, and no row for a field it refuses. The fields
// are the ones the parser names when it refuses an unknown one.
func TestBindingsReferenceDoc(t *testing.T) {
	raw, err := os.ReadFile("../docs/tools.md")
	require.NoError(t, err)
	doc := string(raw)
	sections := map[string]string{ // section heading → a file with an unknown field there
		"### `tools.<name>`":       "tools:\n  t:\n    zzzz: 1\n",
		"### `http`":               "tools:\n  t:\n    http: { url: http://x, zzzz: 1 }\n",
		"### `activity`":           "tools:\n  t:\n    activity: { type: A, task_queue: q, zzzz: 1 }\n",
		"### `mcp`":                "tools:\n  t:\n    mcp: { server: s, zzzz: 1 }\nmcp_servers:\n  s: { url: http://x }\n",
		"### `mcp_servers.<name>`": "mcp_servers:\n  s: { url: http://x, zzzz: 1 }\n",
	}
	allowed := regexp.MustCompile(`unknown field "zzzz"; allowed fields: (.+)$`)
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	for heading, file := range sections {
		diags, _ := NewSet().Parse("t.yaml", []byte(file), LoadOptions{Getenv: func(string) string { return "" }})
		var fields []string
		for _, d := range diags {
			if m := allowed.FindStringSubmatch(d.Message); m != nil {
				fields = strings.Split(m[1], ", ")
			}
		}
		require.NotEmpty(t, fields, "%s: the parser names its fields: %v", heading, diags)
		i := strings.Index(doc, heading+"\n")
		require.GreaterOrEqual(t, i, 0, "docs/tools.md has the section %s", heading)
		section := doc[i+len(heading):]
		if j := strings.Index(section, "\n#"); j >= 0 {
			section = section[:j]
		}
		var documented []string
		for _, m := range row.FindAllStringSubmatch(section, -1) {
			documented = append(documented, m[1])
		}
		assert.ElementsMatch(t, fields, documented, "the fields of %s", heading)
	}
}

// TestBindingDefaultsDoc keeps the bindings' default timeouts in docs/timeouts.md equal
// to the code's. WOP_UPDATE_DOCS=1 rewrites them.
func TestBindingDefaultsDoc(t *testing.T) {
	d := docblock.Duration
	table := docblock.Table([]string{"binding", "one attempt", "set with"}, [][]string{
		{"`http`", d(DefaultHTTPTimeout), "`http.timeout`"},
		{"`activity`", d(DefaultActivityTimeout), "`activity.start_to_close_timeout` (and `schedule_to_close_timeout`, `heartbeat_timeout`)"},
		{"`mcp`", d(DefaultMCPTimeout), "`mcp.timeout`"},
		{"an MCP server's connection at start", d(mcpConnectTimeout), ""},
	})
	table += "\nA call that may be retried gets `max_attempts`, default " + strconv.Itoa(activities.DefaultToolAttempts) + ".\n"
	docblock.Check(t, "../docs/timeouts.md", "binding-timeouts", table)
}
