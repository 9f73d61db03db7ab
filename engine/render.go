package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wop-dev/wop/packs"
)

// renderPrompt renders the system template of a prompt (promptpack-workflow.md §4, REC):
// {{name}} placeholders with dot paths and [i] indexes into the run's variables,
// {{fragments.<name>}}, {{workflow_context}} and {{artifacts.<name>}}. Values that are
// not strings render as compact JSON; anything unresolved renders as "". Fragments and
// values may contain placeholders themselves (up to 10 passes).
func renderPrompt(p *packs.Pack, promptKey string, vars map[string]any, workflowContext string, artifacts map[string]string) (string, error) {
	prompt := p.Prompts[promptKey]
	if prompt == nil {
		return "", fmt.Errorf("render: pack %q has no prompt %q", p.ID, promptKey)
	}
	flat := map[string]string{"workflow_context": workflowContext}
	for _, v := range prompt.Variables {
		if len(v.Default) > 0 {
			flat[v.Name] = valueString(rawValue(v.Default))
		}
	}
	for _, name := range sortedKeys(p.Fragments) {
		flat["fragments."+name] = p.Fragments[name]
	}
	for _, name := range sortedKeys(artifacts) {
		flat["artifacts."+name] = artifacts[name]
	}
	out := prompt.SystemTemplate
	for pass := 0; pass < 10 && strings.Contains(out, "{{"); pass++ {
		next := replacePlaceholders(out, func(name string) string {
			if v, ok := lookupPath(vars, name); ok {
				return valueString(v)
			}
			return flat[name]
		})
		if next == out {
			break
		}
		out = next
	}
	return out, nil
}

// replacePlaceholders replaces every {{ name }} in s with resolve(name).
func replacePlaceholders(s string, resolve func(string) string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.Index(s[i+2:], "}}")
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(resolve(strings.TrimSpace(s[i+2 : i+2+j])))
		s = s[i+2+j+2:]
	}
}

// lookupPath resolves a dot/index path such as customer.contact.email or items[0].title
// in vars.
func lookupPath(vars map[string]any, path string) (any, bool) {
	if v, ok := vars[path]; ok {
		return v, true
	}
	var cur any = vars
	for _, part := range strings.Split(path, ".") {
		name, idx := part, []int(nil)
		if k := strings.IndexByte(part, '['); k >= 0 {
			name = part[:k]
			for _, seg := range strings.Split(part[k+1:], "[") {
				n, err := strconv.Atoi(strings.TrimSuffix(seg, "]"))
				if err != nil {
					return nil, false
				}
				idx = append(idx, n)
			}
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[name]; !ok {
			return nil, false
		}
		for _, n := range idx {
			arr, ok := cur.([]any)
			if !ok || n < 0 || n >= len(arr) {
				return nil, false
			}
			cur = arr[n]
		}
	}
	return cur, true
}

// valueString renders a variable value: strings verbatim, nil as "", everything else
// as compact JSON.
func valueString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func rawValue(raw json.RawMessage) any {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

// checkVariables reports the required variables, over the prompts the workflow's
// states run, that have neither a value in vars nor a default.
func checkVariables(p *packs.Pack, vars map[string]any) error {
	var missing []string
	seen := map[string]bool{}
	used := statePrompts(p)
	for _, key := range sortedKeys(p.Prompts) {
		if !used[key] {
			continue
		}
		for _, v := range p.Prompts[key].Variables {
			if !v.Required || len(v.Default) > 0 || seen[v.Name] {
				continue
			}
			if val, ok := vars[v.Name]; ok && val != nil {
				continue
			}
			seen[v.Name] = true
			missing = append(missing, fmt.Sprintf("%s (prompt %s)", v.Name, key))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("pack %q: missing required variables: %s; pass them in the run's inputs", p.ID, strings.Join(missing, ", "))
	}
	return nil
}

// statePrompts is the set of prompt keys some workflow state runs.
func statePrompts(p *packs.Pack) map[string]bool {
	out := map[string]bool{}
	if p.Workflow == nil {
		return out
	}
	for _, name := range sortedKeys(p.Workflow.States) {
		if st := p.Workflow.States[name]; st != nil && st.PromptTask != "" {
			out[st.PromptTask] = true
		}
	}
	return out
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
