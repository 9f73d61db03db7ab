package packagent

// Agents (RFC 0007): the entry agent of a pack converses; a call of another member,
// which the engine offers as a tool (packs.Pack.AgentTools), runs as a child run of
// the pack whose node holds that member's prompt for one message (packs.Pack.AsAgentCall:
// one terminal state), started with the call's message and the run's other inputs. The
// child's reply is the call's result; a child that fails gives the model an error
// result. A called agent calls no further agents. Cancelling the run cancels the child.

import (
	"encoding/json"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/engine"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// agentCallTools runs a batch whose calls include agent calls: the others through run,
// then each agent call in order as a child run.
func (rt *packRuntime) agentCallTools(calls []convo.ToolCallInput, run func([]convo.ToolCallInput) ([]*convo.ToolCallResult, error)) ([]*convo.ToolCallResult, error) {
	out := make([]*convo.ToolCallResult, len(calls))
	var others []convo.ToolCallInput
	var at []int
	for i, c := range calls {
		if !rt.isAgentCall(c) {
			others, at = append(others, c), append(at, i)
		}
	}
	if len(others) > 0 {
		res, err := run(others)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			out[i] = res[j]
		}
	}
	for i, c := range calls {
		if out[i] != nil || !rt.isAgentCall(c) {
			continue
		}
		r, err := rt.agentCall(c)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// isAgentCall reports whether a call is a call of a member agent.
func (rt *packRuntime) isAgentCall(c convo.ToolCallInput) bool {
	st := rt.a.pack.Workflow.States[c.State]
	return st != nil && rt.a.pack.IsAgentTool(st.PromptTask, c.Tool)
}

// agentCall runs one agent call as a child run and returns its reply.
func (rt *packRuntime) agentCall(call convo.ToolCallInput) (*convo.ToolCallResult, error) {
	var args struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(call.Args, &args) != nil || strings.TrimSpace(args.Message) == "" {
		return agentError("call agent %s with {\"message\": \"…\"}: what to ask it", call.Tool), nil
	}
	parent := rt.c.Input()
	vars := runVars(parent.Inputs)
	delete(vars, packs.PromptInput)
	vars["message"] = args.Message
	childID := workflows.ChildRunID(parent.RunID, rt.a.nodeID+"."+call.CallID, 0)
	childIn := workflows.RunInput{
		RunID: childID, Definition: agentCallDefinition(rt.a.pack, call.Tool), Packs: parent.Packs, PackHashes: parent.PackHashes,
		Inputs: protocol.MustJSON(vars), Owner: parent.Owner, Tags: parent.Tags, ParentRunID: parent.RunID, Limits: parent.Limits, Era: parent.Era, Notices: parent.Notices, Attributes: parent.Attributes,
	}
	cctx, cancel := workflow.WithCancel(rt.ctx)
	cctx = workflow.WithChildOptions(cctx, workflow.ChildWorkflowOptions{
		WorkflowID:        childID,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		StaticSummary:     fmt.Sprintf("Agent %s of pack %s, called by run %s", call.Tool, rt.a.pack.ID, parent.RunID),
	})
	fut := workflow.ExecuteChildWorkflow(cctx, workflows.RunWorkflowName, childIn)
	rt.c.AddChild(workflows.ChildRun{RunID: childID, NodeID: rt.a.nodeID, Status: protocol.StatusRunning})
	rt.beforeBlock()
	rt.await(fut, cancel)
	var snap workflows.Snapshot
	err := fut.Get(rt.ctx, &snap)
	if s, ok := workflows.SnapshotFromError(err); ok {
		snap, err = *s, nil
	}
	cancel()
	if err != nil {
		rt.c.AddChild(workflows.ChildRun{RunID: childID, Status: protocol.StatusCancelled})
		if rt.Stopped() {
			return nil, fmt.Errorf("%w: agent %s: %v", engine.ErrStopped, call.Tool, err)
		}
		return agentError("agent %s failed: %v", call.Tool, err), nil
	}
	rt.c.AddChild(workflows.ChildRun{RunID: childID, Status: snap.Status})
	if snap.Status != protocol.StatusCompleted {
		why := snap.Status
		if snap.Error != nil {
			why = snap.Error.Code + ": " + snap.Error.Message
		}
		return agentError("agent %s did not answer (%s)", call.Tool, why), nil
	}
	return &convo.ToolCallResult{Content: protocol.MustJSON(map[string]string{"agent": call.Tool, "runId": childID, "reply": lastAgentText(snap)})}, nil
}

func agentError(format string, args ...any) *convo.ToolCallResult {
	return &convo.ToolCallResult{Content: protocol.MustJSON(map[string]string{"error": fmt.Sprintf(format, args...)}), IsError: true}
}

// lastAgentText is the text of the last agent turn of a run's conversation.
func lastAgentText(s workflows.Snapshot) string {
	var turns []protocol.Turn
	_ = json.Unmarshal(s.Channels["conversation"], &turns)
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == protocol.RoleAgent {
			return turnText(turns[i].Content)
		}
	}
	return ""
}

// agentCallDefinition is the definition of a child run that calls member of pack p:
// the pack's served definition whose node holds member's prompt for one message.
func agentCallDefinition(p *packs.Pack, member string) *workflows.Definition {
	d := servedPackDefinition(p)
	d.Nodes[0].Config = protocol.MustJSON(NodeConfig{Pack: p.ID, Prompt: member, AgentCall: true})
	return d
}
