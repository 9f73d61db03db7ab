package packagent

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// TestToolApprovalPolicy: the binding decides first, then the autonomy level with the
// tool's effect.
func TestToolApprovalPolicy(t *testing.T) {
	p, diags, err := packs.Parse("pay.yaml", readPayPack(t))
	require.NoError(t, err, "%s", diags)
	call := func(tool string) convo.ToolCallInput { return convo.ToolCallInput{Tool: tool, State: "desk"} }
	route := func(mode string) activities.ToolRoute {
		return activities.ToolRoute{Approval: &activities.ToolApproval{Mode: mode}}
	}
	for _, c := range []struct {
		tool, mode string
		want       bool
	}{
		{"pay", "", true}, {"pay", "never", false}, {"lookup", "", false}, {"lookup", "required", true}, {"undeclared", "", true},
	} {
		got, why := approvalNeeded(p, "desk", call(c.tool), route(c.mode))
		require.Equal(t, c.want, got, "%s with approval %q: %s", c.tool, c.mode, why)
	}
	// Without governance only the binding asks.
	p.Metadata = nil
	got, _ := approvalNeeded(p, "desk", call("pay"), route(""))
	require.False(t, got)
	got, _ = approvalNeeded(p, "desk", call("pay"), activities.ToolRoute{})
	require.False(t, got, "routes recorded before approvals")
	// An agent's governance replaces the pack's.
	p.Agents = json.RawMessage(`{"entry":"desk","members":{"desk":{"governance":{"autonomy_level":"acts_with_approval"}}}}`)
	got, _ = approvalNeeded(p, "desk", call("pay"), route(""))
	require.True(t, got)
}

// readPayPack is the pay desk of the run's approval tests (workflows/approvals_tool_test.go):
// it acts with approval, and its pay tool is external, its lookup a read.
func readPayPack(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("../workflows/testdata/pay.pack.yaml")
	require.NoError(t, err)
	return raw
}
