package engine

import (
	"encoding/json"
	"strings"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

// Skills (RFC 0008, packs/skills.go): a state that offers skills offers skill__activate,
// whose description lists them (name: description) and whose result is the activated
// skill's instructions; the skills of a preload source are in the state's system prompt
// from the start. Which skills a state offers is the pack's (packs.Pack.StateSkills).

// SkillsRuntime is a Runtime that says whether a run offers its pack's skills. A Runtime
// without the method does; the run workflow answers with its gate, asked at the first
// round in a state that has skills, so runs recorded before kept running without them.
type SkillsRuntime interface {
	SkillsOffered() bool
}

// offeredSkills returns the skills state s offers in this run.
func (m *Machine) offeredSkills(t *turn, s *packs.State) []packs.Skill {
	skills := m.cfg.Pack.StateSkills(s)
	if len(skills) == 0 {
		return nil
	}
	if r, ok := t.rt.(SkillsRuntime); ok && !r.SkillsOffered() {
		return nil
	}
	return skills
}

// skillSpec is the skill__activate tool for the skills on offer.
func skillSpec(skills []packs.Skill) convo.ToolSpec {
	names := make([]string, len(skills))
	for i, s := range skills {
		names[i] = s.Name
	}
	return convo.ToolSpec{Name: ToolSkillActivate, Description: packs.SkillIndex(skills),
		Parameters: oneStringSchema("name", stringProp{Type: "string", Enum: names, Description: "Name of the skill to activate."})}
}

// preloadedSkills is the text the preloaded skills among skills add to a system prompt.
func preloadedSkills(skills []packs.Skill) string {
	var b strings.Builder
	for _, s := range skills {
		if s.Preload {
			b.WriteString("\n\n# Skill: " + s.Name + "\n\n" + s.Instructions)
		}
	}
	return b.String()
}

// activateSkill answers a skill__activate call with the skill's instructions.
func (m *Machine) activateSkill(t *turn, s *packs.State, c convo.ToolCall) *convo.ToolCallResult {
	var args struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(c.Args, &args)
	var names []string
	for _, sk := range m.offeredSkills(t, s) {
		if sk.Name == args.Name {
			return jsonResult(map[string]string{"skill": sk.Name, "instructions": sk.Instructions})
		}
		names = append(names, sk.Name)
	}
	return errorResult("unknown skill %q; skills available in state %q: %s", args.Name, m.st.CurrentState, joinEvents(names))
}
