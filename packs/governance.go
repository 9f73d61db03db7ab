package packs

import "encoding/json"

// Autonomy levels of PromptPack governance (RFC 0013, autonomy_level).
const (
	AutonomySuggests          = "suggests"
	AutonomyActsWithApproval  = "acts_with_approval"
	AutonomyActsWithOversight = "acts_with_oversight"
	AutonomyActsAutonomously  = "acts_autonomously"
)

// AutonomyLevel is the declared autonomy_level of the agent that runs prompt promptKey:
// the governance of its agents.members entry when that declares one (RFC 0013: an
// agent's governance replaces the pack's field by field), else the pack's
// metadata.governance; "" when neither declares it. Nothing is inferred.
func (p *Pack) AutonomyLevel(promptKey string) string {
	if p == nil {
		return ""
	}
	var agents struct {
		Members map[string]struct {
			Governance *struct {
				AutonomyLevel string `json:"autonomy_level"`
			} `json:"governance"`
		} `json:"members"`
	}
	if len(p.Agents) > 0 && json.Unmarshal(p.Agents, &agents) == nil {
		if m, ok := agents.Members[promptKey]; ok && m.Governance != nil && m.Governance.AutonomyLevel != "" {
			return m.Governance.AutonomyLevel
		}
	}
	var meta struct {
		Governance *struct {
			AutonomyLevel string `json:"autonomy_level"`
		} `json:"governance"`
	}
	if len(p.Metadata) > 0 && json.Unmarshal(p.Metadata, &meta) == nil && meta.Governance != nil {
		return meta.Governance.AutonomyLevel
	}
	return ""
}

// ActionScopeOf returns the tool's action_scope as declared (nil when absent).
func (t *Tool) ActionScopeOf() json.RawMessage {
	if t == nil || len(t.ActionScope) == 0 {
		return nil
	}
	return t.ActionScope
}

// Reversibility returns the tool's action_scope.reversibility, or "" when undeclared.
func (t *Tool) Reversibility() string {
	if t == nil || len(t.ActionScope) == 0 {
		return ""
	}
	var scope struct {
		Reversibility string `json:"reversibility"`
	}
	if json.Unmarshal(t.ActionScope, &scope) != nil {
		return ""
	}
	return scope.Reversibility
}
