package packagent

// What a pack asks of the durable approval of its tool calls, whose interrupt is the
// run's (workflows/approvals_tool.go): which calls of a batch need a person's decision
// (the binding's approval setting, or the agent's autonomy_level), and what the approval shows of each: the tool, its
// arguments, its action_scope, why it needs approval, and the agent's state and text
// of that round.

import (
	"fmt"
	"strings"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// approvalNeeded decides whether a call waits for a person, and says why
// (activities.ApprovalNeeded with the recorded route's mode and the autonomy level of
// the agent that runs the call's state).
func approvalNeeded(p *packs.Pack, state string, call convo.ToolCallInput, route activities.ToolRoute) (bool, string) {
	mode := ""
	if route.Approval != nil {
		mode = route.Approval.Mode
	}
	prompt := ""
	if p.Workflow != nil && p.Workflow.States[state] != nil {
		prompt = p.Workflow.States[state].PromptTask
	}
	return activities.ApprovalNeeded(mode, p.AutonomyLevel(prompt), call.Tool, p.Tools[call.Tool].Effect())
}

// approveCalls waits, one call at a time, for the decision on every live call of the
// batch that needs approval. It returns, per live call, the result that replaces it
// (rejected or expired), or nil when it runs; an edit-accept has replaced the call's
// arguments in calls. A nil slice means every call runs as routed.
func (rt *packRuntime) approveCalls(calls []convo.ToolCallInput, live []int, routes []activities.ToolRoute) ([]*convo.ToolCallResult, error) {
	var need []int
	why := map[int]string{}
	for j, i := range live {
		if ok, reason := approvalNeeded(rt.a.pack, calls[i].State, calls[i], routes[j]); ok {
			need = append(need, j)
			why[j] = reason
		}
	}
	if len(need) == 0 || !rt.c.Changed(workflows.GateToolApprovals) {
		return nil, nil
	}
	out := make([]*convo.ToolCallResult, len(live))
	for _, j := range need {
		res, err := rt.awaitToolDecision(&calls[live[j]], routes[j], why[j])
		if err != nil {
			return nil, err
		}
		out[j] = res
	}
	return out, nil
}

// awaitToolDecision asks the run to raise the approval interrupt of one call and
// waits for its decision (runner.awaitToolDecision): nil when the call runs (with
// edited arguments after edit-accept), else the tool result the model reads instead.
func (rt *packRuntime) awaitToolDecision(call *convo.ToolCallInput, route activities.ToolRoute, reason string) (*convo.ToolCallResult, error) {
	tool := rt.a.pack.Tools[call.Tool]
	art := workflows.ToolCallArtifact{
		Tool: call.Tool, CallID: call.CallID, Arguments: protocol.OrJSON(call.Args, "{}"), ActionScope: tool.ActionScopeOf(),
		Reason: reason,
		Agent:  workflows.ToolCallAgent{PackID: rt.a.pack.ID, AgentID: rt.a.agentID(call.State), State: call.State, Round: call.Round, Text: rt.a.roundText()},
	}
	if tool != nil {
		art.Parameters = tool.Parameters
	}
	p := rt.a.pack
	res, err := rt.c.AwaitToolDecision(rt.ctx, workflows.ToolDecisionRequest{Call: call, Route: route, Artifact: art,
		Describe: func(call *convo.ToolCallInput) string { return toolCallDescription(p, call, tool, reason) }})
	if err != nil && rt.Stopped() {
		// The run is being cancelled: the turn stops (pack_cancel.go), and the run's
		// cancel voids the interrupt.
		return nil, fmt.Errorf("%w: the run was cancelled while %s waited for approval", engine.ErrStopped, call.Tool)
	}
	return res, err
}

// roundText is the agent's text of the round whose tool calls are being run: the
// newest assistant message of the transcript.
func (a *packAgent) roundText() string {
	n := a.m.TranscriptLen()
	for i := n - 1; i >= 0 && i >= n-64; i-- {
		if m := a.m.Transcript(i, i+1); len(m) == 1 && m[0].Role == convo.RoleAssistant {
			return m[0].Text
		}
	}
	return ""
}

// toolCallDescription is the ApprovalData description of a call, in words.
func toolCallDescription(p *packs.Pack, call *convo.ToolCallInput, tool *packs.Tool, reason string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (pack %s, state %s) wants to call %s with %s.", p.Name, p.ID, call.State, call.Tool, activities.Truncate(string(protocol.OrJSON(call.Args, "{}")), 400))
	if tool != nil {
		if tool.Description != "" {
			fmt.Fprintf(&b, " The tool: %s", strings.TrimSpace(tool.Description))
			if !strings.HasSuffix(b.String(), ".") {
				b.WriteString(".")
			}
		}
		if e := tool.Effect(); e != "" {
			fmt.Fprintf(&b, " Effect: %s", e)
			if rv := tool.Reversibility(); rv != "" {
				fmt.Fprintf(&b, ", %s", rv)
			}
			b.WriteString(".")
		}
	}
	fmt.Fprintf(&b, " It needs approval because %s.", reason)
	return b.String()
}
