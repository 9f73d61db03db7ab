package packs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Skills (RFC 0008): knowledge a model loads on demand. The pack's skills are its
// inline skills and the skills its path sources hold: every SKILL.md under the path
// (AgentSkills.io's format: YAML front matter with name and description, then the
// instructions), read by LoadFile relative to the pack file. The loaded skills travel
// with the pack (LoadedSkills, part of its hash), so a run never reads files.
//
// In a state, the skills on offer are all of them, none (skills: none), or those under
// the state's skills path. The model sees their names and descriptions in the
// skill__activate tool and activates one to read its instructions (the tool's result);
// a source with preload: true puts its skills' instructions in the system prompt of
// every state that offers them.

// SkillActivateToolName is the implicit tool that loads a skill's instructions.
const SkillActivateToolName = "skill__activate"

// SkillsNone is a state's skills value that offers no skill.
const SkillsNone = "none"

// skillFile is the file that defines a skill in a skill's folder.
const skillFile = "SKILL.md"

// Skill is one loaded skill.
type Skill struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	Instructions string `json:"instructions"`
	// Dir is the skill's folder relative to the pack file's folder, slash-separated
	// ("skills/billing/refunds"); empty for an inline skill.
	Dir     string `json:"dir,omitempty"`
	Preload bool   `json:"preload,omitempty"`
}

// skillSource is one entry of the pack's skills, decoded.
type skillSource struct {
	Path    string
	Preload bool
	Inline  *Skill
}

func (p *Pack) skillSources() []skillSource {
	var raw []json.RawMessage
	if len(p.Skills) == 0 || json.Unmarshal(p.Skills, &raw) != nil {
		return nil
	}
	var out []skillSource
	for _, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			out = append(out, skillSource{Path: s})
			continue
		}
		var o struct {
			Path         string `json:"path"`
			Preload      bool   `json:"preload"`
			Name         string `json:"name"`
			Description  string `json:"description"`
			Instructions string `json:"instructions"`
		}
		if json.Unmarshal(r, &o) != nil {
			continue
		}
		if o.Path != "" {
			out = append(out, skillSource{Path: o.Path, Preload: o.Preload})
		} else {
			out = append(out, skillSource{Inline: &Skill{Name: o.Name, Description: o.Description, Instructions: o.Instructions}})
		}
	}
	return out
}

// hasSkillPaths reports whether a skills entry names a path.
func (p *Pack) hasSkillPaths() bool {
	return slices.ContainsFunc(p.skillSources(), func(s skillSource) bool { return s.Inline == nil })
}

// checkSkills checks the skills block and the states' skills values: inline names are
// unique; a state's value is none or a path within one of the pack's sources.
func (c *checker) checkSkills() {
	srcs := c.p.skillSources()
	seen := map[string]int{}
	var paths []string
	for i, src := range srcs {
		if src.Inline == nil {
			paths = append(paths, cleanSkillPath(src.Path))
			continue
		}
		if j, dup := seen[src.Inline.Name]; dup {
			c.errorAt(toks("skills", strconv.Itoa(i), "name"), "skill %q is declared twice (first at skills[%d])", src.Inline.Name, j)
		}
		seen[src.Inline.Name] = i
	}
	if c.p.Workflow == nil {
		return
	}
	for _, sn := range c.p.Workflow.StateNames() {
		st := c.p.Workflow.States[sn]
		var v string
		if len(st.Skills) == 0 || json.Unmarshal(st.Skills, &v) != nil || v == SkillsNone {
			continue
		}
		under := cleanSkillPath(v)
		if !slices.ContainsFunc(paths, func(p string) bool {
			return p == under || strings.HasPrefix(under, p+"/") || strings.HasPrefix(p, under+"/")
		}) {
			c.errorAt(toks("workflow", "states", sn, "skills"), "skills %q is neither %q nor within a path of the pack's skills (%s)", v, SkillsNone, strings.Join(quoteEach(paths), ", "))
		}
	}
}

// cleanSkillPath is a skill path relative to the pack's folder, slash-separated and
// clean ("./skills/billing" → "skills/billing").
func cleanSkillPath(p string) string { return path.Clean(filepath.ToSlash(p)) }

// inlineSkills loads the pack's inline skills (Parse; path sources need LoadFile).
func (p *Pack) inlineSkills() {
	for _, src := range p.skillSources() {
		if src.Inline != nil {
			p.LoadedSkills = append(p.LoadedSkills, *src.Inline)
		}
	}
}

// loadSkillPaths reads the skills of the pack's path sources, relative to dir (the pack
// file's folder), after its inline ones; a source that cannot be read is an error
// diagnostic at its entry. A later skill of the same name replaces an earlier one (RFC
// 0008: the last declared wins).
func (c *checker) loadSkillPaths(dir string) {
	var loaded []Skill
	for i, src := range c.p.skillSources() {
		at := toks("skills", strconv.Itoa(i))
		if src.Inline != nil {
			loaded = append(loaded, *src.Inline)
			continue
		}
		if strings.HasPrefix(src.Path, "@") {
			c.errorAt(at, "skill package %q cannot be resolved: this host reads skills from folders beside the pack only", src.Path)
			continue
		}
		skills, err := readSkills(dir, cleanSkillPath(src.Path))
		if err != nil {
			c.errorAt(at, "skills %q: %v", src.Path, err)
			continue
		}
		for _, s := range skills {
			s.Preload = src.Preload
			loaded = append(loaded, s)
		}
	}
	var out []Skill
	for i, s := range loaded {
		if !slices.ContainsFunc(loaded[i+1:], func(o Skill) bool { return o.Name == s.Name }) {
			out = append(out, s)
		}
	}
	c.p.LoadedSkills = out
}

// readSkills reads every SKILL.md under rel (a folder, or a SKILL.md file) in dir, in
// path order.
func readSkills(dir, rel string) ([]Skill, error) {
	root := filepath.Join(dir, filepath.FromSlash(rel))
	info, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no such file or folder beside the pack")
		}
		return nil, err
	}
	var files []string
	if !info.IsDir() {
		files = []string{root}
	} else if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == skillFile {
			files = append(files, p)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("holds no %s", skillFile)
	}
	var out []Skill
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := parseSkill(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		relDir, err := filepath.Rel(dir, filepath.Dir(f))
		if err != nil {
			return nil, err
		}
		s.Dir = filepath.ToSlash(relDir)
		out = append(out, s)
	}
	return out, nil
}

// parseSkill reads a SKILL.md: front matter between "---" lines with name and
// description, then the instructions.
func parseSkill(data []byte) (Skill, error) {
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return Skill{}, errors.New("no front matter (a SKILL.md starts with ---, name and description)")
	}
	front, body, ok := strings.Cut(text[4:], "\n---")
	if !ok {
		return Skill{}, errors.New("front matter is not closed with ---")
	}
	var meta struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	}
	if err := yaml.NewDecoder(bytes.NewReader([]byte(front))).Decode(&meta); err != nil {
		return Skill{}, fmt.Errorf("front matter: %w", err)
	}
	if meta.Name == "" || meta.Description == "" {
		return Skill{}, errors.New("front matter needs name and description")
	}
	body = strings.TrimPrefix(body, "\n")
	if i := strings.IndexByte(body, '\n'); i >= 0 && strings.TrimSpace(body[:i]) == "" {
		body = body[i+1:]
	}
	return Skill{Name: meta.Name, Description: meta.Description, Instructions: strings.TrimSpace(body)}, nil
}

// StateSkills returns the skills on offer in a state: none for skills: none, those under
// the state's skills path, else all of the pack's.
func (p *Pack) StateSkills(st *State) []Skill {
	filter := ""
	if st != nil && len(st.Skills) > 0 {
		_ = json.Unmarshal(st.Skills, &filter)
	}
	switch filter {
	case "":
		return p.LoadedSkills
	case SkillsNone:
		return nil
	}
	under := cleanSkillPath(filter)
	var out []Skill
	for _, s := range p.LoadedSkills {
		if s.Dir == under || strings.HasPrefix(s.Dir, under+"/") {
			out = append(out, s)
		}
	}
	return out
}

// SkillIndex is the skill__activate tool's description for the skills on offer.
func SkillIndex(skills []Skill) string {
	var b strings.Builder
	b.WriteString("Activate a skill to load its instructions. Available skills:")
	for _, s := range skills {
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, s.Description)
	}
	return b.String()
}
