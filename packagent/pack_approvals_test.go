package packagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// payPackYAML is the pay desk of the run's approval tests (workflows/approvals_tool_test.go):
// it acts with approval, and its pay tool is external, its lookup a read.
const payPackYAML = `id: pay
name: Pay Desk
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
metadata:
  governance: { autonomy_level: acts_with_approval }
tools:
  lookup:
    name: lookup
    description: Look up an invoice.
    parameters: { type: object, properties: { invoice: { type: string } }, required: [invoice] }
    action_scope: { effect: read }
  pay:
    name: pay
    description: Pay an invoice.
    parameters:
      type: object
      properties:
        invoice: { type: string }
        amount: { type: string, pattern: "^[0-9]+\\.[0-9]{2}$" }
      required: [invoice, amount]
      additionalProperties: false
    action_scope: { effect: external, reversibility: irreversible }
prompts:
  desk:
    id: desk
    name: Desk
    version: 1.0.0
    system_template: Pay invoices.
    tools: [lookup, pay]
workflow:
  version: 2
  entry: desk
  states:
    desk: { prompt_task: desk, on_event: { Done: done } }
    done: { prompt_task: desk, terminal: true }
`

// TestToolApprovalPolicy: the binding decides first, then the autonomy level with the
// tool's effect.
func TestToolApprovalPolicy(t *testing.T) {
	p, diags, err := packs.Parse("pay.yaml", []byte(payPackYAML))
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
