package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// nodeError is a node failure with its OpenWOP error.
type nodeError struct{ protocol.RunError }

func (e *nodeError) Error() string { return e.Code + ": " + e.Message }

func failNode(code, format string, args ...any) error {
	return &nodeError{protocol.RunError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// nodeExecutor runs one built-in node type and returns its outputs (port → value).
type nodeExecutor func(r *runner, n *Node, inputs map[string]json.RawMessage) (map[string]json.RawMessage, error)

// builtinNodes maps the built-in node types to their executors. Agent node types are
// looked up among the registered agents (RegisterAgent, conversation_agent.go) instead.
var builtinNodes map[string]nodeExecutor

func init() {
	builtinNodes = map[string]nodeExecutor{
		"core.noop":              execNoop,
		"core.identity":          execIdentity,
		"core.delay":             execDelay,
		"core.fail":              execFail,
		"core.approvalGate":      execApprovalGate,
		"core.clarificationGate": execClarificationGate,
		"core.interrupt":         execInterrupt,
		"core.subWorkflow":       execSubWorkflow,
		"core.conversationGate":  execConversationNode,
		// The conformance fixture conformance-replay-side-effect (effectnode.go).
		"core.conformance.hold":        execDelay,
		"core.conformance.side-effect": execSideEffect,
	}
}

// providedCapabilities are the capabilities a node may declare in config.requires.
var providedCapabilities = map[string]bool{"conversationPrimitive": true}

// nodeRecord is the execution record of one node.
type nodeRecord struct {
	NodeID  string                     `json:"nodeId"`
	State   string                     `json:"state"` // running | completed | failed | skipped | cancelled
	Outputs map[string]json.RawMessage `json:"outputs,omitempty"`
}

// execNode runs one node with its node.started / node.completed events.
func (r *runner) execNode(n *Node) (map[string]json.RawMessage, error) {
	resumed := r.record(n.ID) != nil // continued as new inside this node
	if !resumed {
		r.nodes = append(r.nodes, nodeRecord{NodeID: n.ID, State: "running"})
		r.currentNode = n.ID
		r.emit(protocol.EvNodeStarted, n.ID, protocol.NodeStarted{NodeID: n.ID, TypeID: n.TypeID, Attempt: 0}, "")
		if r.in.Seam != "" && len(r.nodes) == 1 {
			if err := r.stageSeam(n); err != nil { // the run's first node (seam.go)
				return nil, err
			}
		}
	}
	r.currentNode = n.ID
	started := workflow.Now(r.ctx)
	if err := r.checkRequires(n); err != nil {
		return nil, err
	}
	exec, ok := builtinNodes[n.TypeID]
	if !ok {
		if _, isAgent := agentFactoryOf(n.TypeID); isAgent {
			exec = execConversationNode
		} else {
			return nil, failNode(protocol.CodeCapabilityNotProvided, "node %q has type %q, which this host does not provide", n.ID, n.TypeID)
		}
	}
	inputs, err := r.nodeInputs(n)
	if err != nil {
		return nil, failNode(protocol.CodeValidation, "%v", err)
	}
	outs, err := exec(r, n, inputs)
	for errors.Is(err, errCut) {
		// An immediate pause cut the attempt: no node event for it; the next attempt
		// opens once the run resumes (pause.go).
		if err = r.reopenCut(n); err == nil {
			outs, err = exec(r, n, inputs)
		}
	}
	if err != nil {
		return nil, err
	}
	if outs == nil {
		outs = map[string]json.RawMessage{}
	}
	r.outputs[n.ID] = outs
	r.setRecord(n.ID, "completed", outs)
	dur := workflow.Now(r.ctx).Sub(started).Milliseconds()
	if dur < 0 {
		dur = 0
	}
	r.emit(protocol.EvNodeCompleted, n.ID, protocol.NodeCompleted{NodeID: n.ID, Outputs: outs, DurationMs: dur}, r.lastNodeEvent(n.ID))
	r.currentNode = ""
	r.refreshStatus()
	return outs, nil
}

// checkRequires fails a node whose config declares capabilities the host lacks.
func (r *runner) checkRequires(n *Node) error {
	var cfg struct {
		Requires []string `json:"requires"`
	}
	if len(n.Config) > 0 {
		// Lenient, as it always was: a config that does not decode requires nothing
		// here (the nodes that read it report it).
		_ = json.Unmarshal(n.Config, &cfg)
	}
	for _, c := range cfg.Requires {
		if !providedCapabilities[c] {
			return failNode(protocol.CodeCapabilityNotProvided, "node %q requires capability %q, which this host does not provide", n.ID, c)
		}
	}
	return nil
}

// lastNodeEvent is the newest event of the node (the causation of its completion).
func (r *runner) lastNodeEvent(nodeID string) string { return r.nodeLast[nodeID] }

func (r *runner) record(nodeID string) *nodeRecord {
	for i := range r.nodes {
		if r.nodes[i].NodeID == nodeID {
			return &r.nodes[i]
		}
	}
	return nil
}

func (r *runner) setRecord(nodeID, state string, outs map[string]json.RawMessage) {
	if rec := r.record(nodeID); rec != nil {
		rec.State = state
		rec.Outputs = outs
		return
	}
	r.nodes = append(r.nodes, nodeRecord{NodeID: nodeID, State: state, Outputs: outs})
}

// variables = the run's inputs (with declared defaults) overlaid by the outputs of the
// completed nodes, in execution order.
func (r *runner) variables() map[string]json.RawMessage {
	vars := map[string]json.RawMessage{}
	if r.in.Definition != nil {
		for _, v := range r.in.Definition.Variables {
			if len(v.DefaultValue) > 0 {
				vars[v.Name] = v.DefaultValue
			}
		}
	}
	if len(r.in.Inputs) > 0 {
		var in map[string]json.RawMessage
		if json.Unmarshal(r.in.Inputs, &in) == nil {
			for _, k := range slices.Sorted(maps.Keys(in)) {
				vars[k] = in[k]
			}
		}
	}
	for _, rec := range r.nodes {
		if rec.State != "completed" {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(rec.Outputs)) {
			vars[k] = rec.Outputs[k]
		}
	}
	return vars
}
