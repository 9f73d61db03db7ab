package packs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Tool policy defaults from the PromptPack schema (PromptKit uses 50 rounds; the spec says 5).
const (
	DefaultMaxRounds           = 5
	DefaultMaxToolCallsPerTurn = 10
	DefaultToolChoice          = "auto"
)

// System tool names the workflow runtime offers besides the pack's own tools.
const (
	TransitionToolName  = "workflow__transition"
	SetArtifactToolName = "workflow__set_artifact"
)

// MarshalJSON writes the budget and every extra engine key as one object, keys sorted.
func (e Engine) MarshalJSON() ([]byte, error) {
	m := make(map[string]json.RawMessage, len(e.Extra)+1)
	for k, v := range e.Extra {
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		m[k] = v
	}
	if e.Budget != nil {
		b, err := json.Marshal(e.Budget)
		if err != nil {
			return nil, fmt.Errorf("encode engine budget: %w", err)
		}
		m["budget"] = b
	} else {
		delete(m, "budget")
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads "budget" into Budget and keeps every other key verbatim in Extra.
func (e *Engine) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("workflow.engine must be an object: %w", err)
	}
	*e = Engine{}
	for k, v := range m {
		if k == "budget" {
			if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			var b Budget
			if err := dec.Decode(&b); err != nil {
				return fmt.Errorf("workflow.engine.budget: %w", err)
			}
			e.Budget = &b
			continue
		}
		if e.Extra == nil {
			e.Extra = map[string]json.RawMessage{}
		}
		e.Extra[k] = append(json.RawMessage(nil), v...)
	}
	return nil
}

// IsTerminal reports whether the state ends the workflow: terminal: true, or no on_event
// (except the conversation state of a pack without a workflow, which never ends it).
func (s *State) IsTerminal() bool {
	return s.Terminal || (len(s.OnEvent) == 0 && !s.conversation)
}

// ControlOrDefault returns the state's control, "user" when absent (RFC 0014).
func (s *State) ControlOrDefault() string {
	if s.Control == "" {
		return ControlUser
	}
	return s.Control
}

// OrchestrationOrDefault returns the state's orchestration, "internal" when absent.
func (s *State) OrchestrationOrDefault() string {
	if s.Orchestration == "" {
		return OrchestrationInternal
	}
	return s.Orchestration
}

// Events returns the state's on_event names, sorted.
// It is never nil, so a state without events encodes them as [] in JSON.
func (s *State) Events() []string {
	if events := slices.Sorted(maps.Keys(s.OnEvent)); events != nil {
		return events
	}
	return []string{}
}

// OffersTransition reports whether the model is offered workflow__transition in this state:
// the state is not terminal and its orchestration is internal or hybrid.
func (s *State) OffersTransition() bool {
	if s.IsTerminal() || len(s.OnEvent) == 0 {
		return false
	}
	switch s.OrchestrationOrDefault() {
	case OrchestrationInternal, OrchestrationHybrid:
		return true
	}
	return false
}

// StateNames returns the workflow's state names, sorted.
func (w *Workflow) StateNames() []string {
	return slices.Sorted(maps.Keys(w.States))
}

// PromptKeys returns the pack's prompt keys, sorted.
func (p *Pack) PromptKeys() []string {
	return slices.Sorted(maps.Keys(p.Prompts))
}

// ToolNames returns the pack's tool keys, sorted.
func (p *Pack) ToolNames() []string {
	return slices.Sorted(maps.Keys(p.Tools))
}

// Action scope effects (RFC 0013, Tool.action_scope.effect).
const (
	EffectRead     = "read"
	EffectWrite    = "write"
	EffectExternal = "external"
)

// Effect returns the tool's action_scope.effect ("read", "write" or "external"), or ""
// when the tool declares none. An undeclared effect means unknown, not safe.
func (t *Tool) Effect() string {
	if t == nil || len(t.ActionScope) == 0 {
		return ""
	}
	var scope struct {
		Effect string `json:"effect"`
	}
	if json.Unmarshal(t.ActionScope, &scope) != nil {
		return ""
	}
	return scope.Effect
}

// PromptTools returns the tools the prompt may call: its tools[] minus its tool_policy
// blocklist, resolved to the pack's declarations and sorted by name. Names that are not
// declared are skipped (validation reports them). It does not apply tool_choice: "none";
// callers decide whether to offer tools at all.
func (p *Pack) PromptTools(promptKey string) []*Tool {
	pr := p.Prompts[promptKey]
	if pr == nil {
		return nil
	}
	blocked := map[string]bool{}
	if pr.ToolPolicy != nil {
		for _, b := range pr.ToolPolicy.Blocklist {
			blocked[b] = true
		}
	}
	seen := map[string]bool{}
	var out []*Tool
	for _, name := range pr.Tools {
		if blocked[name] || seen[name] {
			continue
		}
		seen[name] = true
		if t := p.Tools[name]; t != nil {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// EffectiveToolPolicy returns the prompt's tool policy with the schema defaults filled in:
// tool_choice "auto", max_rounds 5, max_tool_calls_per_turn 10.
func (pr *Prompt) EffectiveToolPolicy() ToolPolicy {
	tp := ToolPolicy{}
	if pr.ToolPolicy != nil {
		tp = *pr.ToolPolicy
		tp.Blocklist = append([]string(nil), pr.ToolPolicy.Blocklist...)
	}
	if tp.ToolChoice == "" {
		tp.ToolChoice = DefaultToolChoice
	}
	if tp.MaxRounds <= 0 {
		tp.MaxRounds = DefaultMaxRounds
	}
	if tp.MaxToolCallsPerTurn <= 0 {
		tp.MaxToolCallsPerTurn = DefaultMaxToolCallsPerTurn
	}
	return tp
}

// ArtifactNames returns every artifact name declared by any state, deduplicated and sorted
// (the enum of workflow__set_artifact's name argument). It is empty when the pack has no
// workflow or no artifacts.
func (p *Pack) ArtifactNames() []string {
	if p.Workflow == nil {
		return nil
	}
	set := map[string]bool{}
	for _, st := range p.Workflow.States {
		if st == nil {
			continue
		}
		for name := range st.Artifacts {
			set[name] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// ArtifactDecl returns the declaration of an artifact as seen from a state: the state's own
// declaration first, else that of the first state (in name order) declaring it; nil if none.
func (w *Workflow) ArtifactDecl(state, name string) *Artifact {
	if st := w.States[state]; st != nil && st.Artifacts[name] != nil {
		return st.Artifacts[name]
	}
	for _, sn := range w.StateNames() {
		if a := w.States[sn].Artifacts[name]; a != nil {
			return a
		}
	}
	return nil
}

// ArtifactMode returns the artifact's mode, "replace" when absent.
func (a *Artifact) ArtifactMode() string {
	if a == nil || a.Mode == "" {
		return "replace"
	}
	return a.Mode
}

// Suggest returns the candidate closest to s by edit distance, for "did you mean"
// hints, or "" when none is close.
func Suggest(s string, candidates []string) string { return suggest(s, candidates) }
