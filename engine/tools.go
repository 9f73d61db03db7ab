package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
)

// policy is a prompt's tool_policy with the schema defaults applied.
type policy struct {
	MaxRounds           int
	MaxToolCallsPerTurn int
	Blocked             map[string]bool
}

func policyOf(p *packs.Prompt) policy {
	pol := policy{MaxRounds: DefaultMaxRounds, MaxToolCallsPerTurn: DefaultMaxToolCallsPerTurn, Blocked: map[string]bool{}}
	if tp := p.ToolPolicy; tp != nil {
		if tp.MaxRounds > 0 {
			pol.MaxRounds = tp.MaxRounds
		}
		if tp.MaxToolCallsPerTurn > 0 {
			pol.MaxToolCallsPerTurn = tp.MaxToolCallsPerTurn
		}
		for _, b := range tp.Blocklist {
			pol.Blocked[b] = true
		}
	}
	return pol
}

// transitionOffered reports whether workflow__transition is offered in s (§8.6).
func transitionOffered(s *packs.State) bool { return s.OffersTransition() }

// artifactNames is every artifact name any state declares, deduplicated and sorted.
func artifactNames(p *packs.Pack) []string { return p.ArtifactNames() }

type stringProp struct {
	Type        string   `json:"type"`
	Enum        []string `json:"enum,omitempty"`
	Description string   `json:"description"`
}

type transitionSchema struct {
	Type       string `json:"type"`
	Properties struct {
		Event   stringProp `json:"event"`
		Context stringProp `json:"context"`
	} `json:"properties"`
	Required []string `json:"required"`
}

type artifactSchema struct {
	Type       string `json:"type"`
	Properties struct {
		Name  stringProp `json:"name"`
		Value stringProp `json:"value"`
	} `json:"properties"`
	Required []string `json:"required"`
}

// transitionSpec is the workflow__transition tool for a state's sorted events, with the
// input schema of promptpack-workflow.md §8.6.
func transitionSpec(events []string) convo.ToolSpec {
	var sc transitionSchema
	sc.Type = "object"
	sc.Properties.Event = stringProp{Type: "string", Enum: events, Description: "The workflow event to trigger."}
	sc.Properties.Context = stringProp{Type: "string", Description: "Summary of relevant context to carry forward."}
	sc.Required = []string{"event", "context"}
	raw, _ := json.Marshal(sc) // plain strings: cannot fail
	return convo.ToolSpec{
		Name: ToolTransition,
		Description: "Transition the workflow to a new state by triggering one of the current state's events. " +
			"Use it for escalation, resolution or any other state change; pass a summary of what the next state needs to know as context.",
		Parameters: raw,
	}
}

// artifactSpec is the workflow__set_artifact tool (§8.7).
func artifactSpec(names []string) convo.ToolSpec {
	var sc artifactSchema
	sc.Type = "object"
	sc.Properties.Name = stringProp{Type: "string", Enum: names, Description: "The artifact to set."}
	sc.Properties.Value = stringProp{Type: "string", Description: "The value to store; it replaces the artifact's value or is appended to it, as the artifact's mode says."}
	sc.Required = []string{"name", "value"}
	raw, _ := json.Marshal(sc)
	return convo.ToolSpec{
		Name:        ToolSetArtifact,
		Description: "Store a value in a workflow artifact. Later states read it as {{artifacts.<name>}}; the final values are the workflow's output.",
		Parameters:  raw,
	}
}

// toolSpecs is the tool set of a round in state s: the prompt's tools minus the
// blocklist (the agents members among them as agent calls), plus workflow__transition (when offered), workflow__set_artifact (when
// some state declares artifacts) and skill__activate (when the state offers skills),
// sorted by name.
func (m *Machine) toolSpecs(t *turn, s *packs.State) []convo.ToolSpec {
	var specs []convo.ToolSpec
	if skills := m.offeredSkills(t, s); len(skills) > 0 {
		specs = append(specs, skillSpec(skills))
	}
	for _, tool := range m.cfg.Pack.PromptTools(s.PromptTask) {
		specs = append(specs, convo.ToolSpec{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters})
	}
	for _, member := range m.cfg.Pack.AgentTools(s.PromptTask) {
		specs = append(specs, agentSpec(member, m.cfg.Pack.AgentDescription(member)))
	}
	if transitionOffered(s) {
		specs = append(specs, transitionSpec(s.Events()))
	}
	if names := artifactNames(m.cfg.Pack); len(names) > 0 {
		specs = append(specs, artifactSpec(names))
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}

// agentSpec is the tool that calls member agent name (RFC 0007): one message in, the
// agent's reply out. The Runtime runs the call (packs.Pack.IsAgentTool tells it apart).
func agentSpec(name, description string) convo.ToolSpec {
	return convo.ToolSpec{Name: name, Description: "Ask the agent " + name + ": " + description, Parameters: oneStringSchema("message",
		stringProp{Type: "string", Description: "What to ask the agent, with everything it needs to know: it sees this message only."})}
}

// oneStringSchema is the parameters of a tool that takes one required string.
func oneStringSchema(name string, prop stringProp) json.RawMessage {
	raw, _ := json.Marshal(struct {
		Type       string                `json:"type"`
		Properties map[string]stringProp `json:"properties"`
		Required   []string              `json:"required"`
	}{"object", map[string]stringProp{name: prop}, []string{name}})
	return raw
}

// errorResult is the content of an error tool result.
func errorResult(format string, args ...any) *convo.ToolCallResult {
	raw, _ := json.Marshal(map[string]string{"error": fmt.Sprintf(format, args...)})
	return &convo.ToolCallResult{Content: raw, IsError: true}
}

func jsonResult(v any) *convo.ToolCallResult {
	raw, _ := json.Marshal(v)
	return &convo.ToolCallResult{Content: raw}
}

// runTools answers one round's tool calls in call order: system tools in the engine,
// pack tools through Runtime.Tools in one batch. It reports false when the run ended.
func (m *Machine) runTools(t *turn, round int, s *packs.State, prompt *packs.Prompt, pol policy, calls []convo.ToolCall) bool {
	offered := map[string]bool{}
	var names []string
	for _, sp := range m.toolSpecs(t, s) {
		offered[sp.Name] = true
		names = append(names, sp.Name)
	}
	sname := m.st.CurrentState
	results := make([]*convo.ToolCallResult, len(calls))
	var batch []convo.ToolCallInput
	var batchIdx []int
	for i, c := range calls {
		t.rt.Emit(Event{Kind: EventToolCall, State: sname, ToolCall: &ToolCallEvent{
			Round: round, CallID: c.ID, Tool: c.Name, Args: c.Args, System: strings.HasPrefix(c.Name, "workflow__"),
		}})
		m.st.TotalToolCalls++
		t.segCalls++
		t.calls++
		if m.inLoop() {
			t.loopCalls++
		}
		switch {
		case t.segCalls > pol.MaxToolCallsPerTurn:
			results[i] = errorResult("tool call limit reached: prompt %q allows %d tool calls per turn; answer with what you have", s.PromptTask, pol.MaxToolCallsPerTurn)
		case pol.Blocked[c.Name]:
			results[i] = errorResult("Tool %s is blocked by policy", c.Name)
		case !offered[c.Name]:
			results[i] = errorResult("tool %q is not available in state %q; available tools: %s", c.Name, sname, joinEvents(names))
		case c.Name == ToolTransition:
			results[i] = m.transitionCall(t, s, c)
		case c.Name == ToolSetArtifact:
			results[i] = m.setArtifact(c)
		case c.Name == ToolSkillActivate:
			results[i] = m.activateSkill(t, s, c)
		default:
			batch = append(batch, convo.ToolCallInput{
				RunID: m.cfg.RunID, PackID: m.cfg.Pack.ID, PackHash: m.cfg.Pack.Hash, NodeID: m.cfg.NodeID,
				State: sname, Round: round, CallID: c.ID, Tool: c.Name, Args: c.Args,
			})
			batchIdx = append(batchIdx, i)
		}
	}
	if len(batch) > 0 {
		if m.stopped(t, nil) {
			return false
		}
		out, err := t.rt.Tools(batch)
		if m.stopped(t, err) {
			return false
		}
		if err != nil {
			m.fail(errorCode(err, protocol.CodeToolError), fmt.Sprintf("tool calls of round %d in state %q failed: %v", round, sname, err))
			return false
		}
		if len(out) != len(batch) {
			m.fail(protocol.CodeToolError, fmt.Sprintf("tool calls of round %d in state %q: %d calls returned %d results", round, sname, len(batch), len(out)))
			return false
		}
		for j, r := range out {
			if r == nil {
				r = errorResult("tool %q returned no result", batch[j].Tool)
			}
			results[batchIdx[j]] = r
		}
	}
	for i, c := range calls {
		r := results[i]
		content := r.Content
		if len(content) == 0 {
			content = json.RawMessage(`null`)
		}
		m.appendMessage(convo.Message{
			Role: convo.RoleTool, Text: string(content), ToolCallID: c.ID, Name: c.Name, IsError: r.IsError, State: sname,
		})
		t.rt.Emit(Event{Kind: EventToolResult, State: sname, ToolResult: &ToolResultEvent{
			Round: round, CallID: c.ID, Tool: c.Name, Content: content, IsError: r.IsError,
		}})
	}
	return true
}

// transitionCall validates a workflow__transition call and schedules the transition;
// it is committed after the round's tool results (§8.6, REC).
func (m *Machine) transitionCall(t *turn, s *packs.State, c convo.ToolCall) *convo.ToolCallResult {
	var args map[string]any
	if err := json.Unmarshal(c.Args, &args); err != nil || args == nil {
		return errorResult("workflow__transition arguments must be a JSON object with event and context: %v", err)
	}
	event, _ := args["event"].(string)
	context, _ := args["context"].(string)
	events := s.Events()
	if t.transition != nil {
		return errorResult("one transition per round: event %s is already scheduled; this call was ignored", t.transition.event)
	}
	target, ok := s.OnEvent[event]
	if !ok {
		return errorResult("unknown event %q in state %q; valid events: %s", event, m.st.CurrentState, joinEvents(events))
	}
	var extras map[string]any
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if k != "event" && k != "context" {
			if extras == nil {
				extras = map[string]any{}
			}
			extras[k] = args[k]
		}
	}
	t.transition = &pendingTransition{event: event, context: context, extras: extras}
	if ts := m.cfg.Pack.Workflow.States[target]; ts.MaxVisits > 0 && m.st.VisitCounts[target] >= ts.MaxVisits && ts.OnMaxVisits != "" {
		target = ts.OnMaxVisits
	}
	return jsonResult(map[string]string{"status": "transition_scheduled", "event": event, "target_state": target})
}

// setArtifact applies a workflow__set_artifact call immediately (§8.7).
func (m *Machine) setArtifact(c convo.ToolCall) *convo.ToolCallResult {
	var args struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return errorResult("workflow__set_artifact arguments must be a JSON object with string name and value: %v", err)
	}
	names := artifactNames(m.cfg.Pack)
	decl := m.cfg.Pack.Workflow.ArtifactDecl(m.st.CurrentState, args.Name)
	if args.Name == "" || decl == nil {
		return errorResult("unknown artifact %q; declared artifacts: %s", args.Name, joinEvents(names))
	}
	value := args.Value
	if decl.ArtifactMode() == "append" {
		value = m.st.Artifacts[args.Name] + args.Value
	}
	if total := artifactBytes(m.st.Artifacts) - len(m.st.Artifacts[args.Name]) + len(value); total > MaxArtifactBytes {
		return errorResult("artifact %q was not set: the artifacts would hold %d bytes, and a run's artifacts hold at most %d bytes in all", args.Name, total, MaxArtifactBytes)
	}
	m.st.Artifacts[args.Name] = value
	return jsonResult(map[string]string{"status": "artifact_set", "artifact": args.Name})
}

// artifactBytes is the size of the artifacts' values together.
func artifactBytes(arts map[string]string) int {
	n := 0
	for _, v := range arts {
		n += len(v)
	}
	return n
}

// joinEvents lists names for an error message.
func joinEvents(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}
