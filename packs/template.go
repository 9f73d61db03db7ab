package packs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RuntimeVars are the values the workflow runtime injects into every render.
type RuntimeVars struct {
	// WorkflowContext is the hand-over text of the current state ({{workflow_context}}).
	WorkflowContext string
	// Artifacts are the current artifact values ({{artifacts.<name>}}).
	Artifacts map[string]string
}

// Reserved template namespaces.
const (
	varWorkflowContext = "workflow_context"
	nsArtifacts        = "artifacts"
	nsFragments        = "fragments"
)

// maxFragmentDepth bounds fragment expansion (fragments may contain placeholders, including
// other fragments); deeper nesting is reported as a cycle.
const maxFragmentDepth = 10

// placeholderRe finds {{ ... }} placeholders; surrounding spaces inside the braces are allowed.
var placeholderRe = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// exprRe is the grammar of a variable reference: name, .field and [index] segments.
var exprRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[[0-9]+\])*$`)

var segRe = regexp.MustCompile(`\.([A-Za-z_][A-Za-z0-9_-]*)|\[([0-9]+)\]`)

// ref is a parsed placeholder expression such as customer.addresses[0].city.
type ref struct {
	raw  string
	root string
	segs []seg
}

type seg struct {
	key   string
	index int
	isIdx bool
}

// parseRef parses a placeholder body; ok is false when it is not a variable reference
// (e.g. "#if x", which this template engine leaves untouched).
func parseRef(expr string) (ref, bool) {
	if !exprRe.MatchString(expr) {
		return ref{}, false
	}
	r := ref{raw: expr}
	i := strings.IndexAny(expr, ".[")
	if i < 0 {
		r.root = expr
		return r, true
	}
	r.root = expr[:i]
	for _, m := range segRe.FindAllStringSubmatch(expr[i:], -1) {
		if m[1] != "" {
			r.segs = append(r.segs, seg{key: m[1]})
		} else {
			n, err := strconv.Atoi(m[2])
			if err != nil {
				return ref{}, false
			}
			r.segs = append(r.segs, seg{index: n, isIdx: true})
		}
	}
	return r, true
}

// Render renders the system template of the prompt promptKey. Placeholders resolve as:
// {{workflow_context}} and {{artifacts.x}} from rt (unset: ""); {{fragments.x}} to the
// fragment's text, itself rendered (nesting is bounded); anything else to a run variable,
// with dot paths and [i] indexes into object and array values. Values are inserted verbatim
// and never re-rendered. Objects and arrays render as compact JSON with sorted keys.
// A declared variable without a value takes its default; an optional one without a
// default renders as "", and a required one is an error. Placeholders that are not
// variable references (such as "{{#if x}}") are left as written.
func Render(p *Pack, promptKey string, vars map[string]any, rt RuntimeVars) (string, error) {
	r, err := newRenderer(p, promptKey, vars, rt)
	if err != nil {
		return "", err
	}
	return r.expand(p.Prompts[promptKey].SystemTemplate, 0)
}

// ModelOverride is one entry of a prompt's model_overrides: for that model, a full
// system template that replaces the base, or a prefix and suffix around it, and
// parameters merged over the prompt's.
type ModelOverride struct {
	SystemTemplate string      `json:"system_template,omitempty"`
	Prefix         string      `json:"system_template_prefix,omitempty"`
	Suffix         string      `json:"system_template_suffix,omitempty"`
	Parameters     *Parameters `json:"parameters,omitempty"`
}

// Overrides decodes the prompt's model_overrides (model name → override); nil when it
// has none.
func (pr *Prompt) Overrides() (map[string]ModelOverride, error) {
	if len(pr.ModelOverrides) == 0 {
		return nil, nil
	}
	var m map[string]ModelOverride
	if err := json.Unmarshal(pr.ModelOverrides, &m); err != nil {
		return nil, fmt.Errorf("model_overrides of prompt %q: %w", pr.ID, err)
	}
	return m, nil
}

// RenderOverrides returns the prompt's model_overrides with their templates rendered
// with the same variables as Render; nil when the prompt has none.
func RenderOverrides(p *Pack, promptKey string, vars map[string]any, rt RuntimeVars) (map[string]ModelOverride, error) {
	if p != nil && p.Prompts[promptKey] != nil && len(p.Prompts[promptKey].ModelOverrides) == 0 {
		return nil, nil // most prompts: no renderer to build
	}
	r, err := newRenderer(p, promptKey, vars, rt)
	if err != nil {
		return nil, err
	}
	ovs, err := p.Prompts[promptKey].Overrides()
	if err != nil || len(ovs) == 0 {
		return nil, err
	}
	out := make(map[string]ModelOverride, len(ovs))
	for _, model := range slices.Sorted(maps.Keys(ovs)) { // the first error is always the same
		ov := ovs[model]
		var ro ModelOverride
		for _, f := range []struct {
			dst  *string
			tmpl string
		}{{&ro.SystemTemplate, ov.SystemTemplate}, {&ro.Prefix, ov.Prefix}, {&ro.Suffix, ov.Suffix}} {
			if *f.dst, err = r.expand(f.tmpl, 0); err != nil {
				return nil, fmt.Errorf("model_overrides[%q]: %w", model, err)
			}
		}
		ro.Parameters = ov.Parameters
		out[model] = ro
	}
	return out, nil
}

func newRenderer(p *Pack, promptKey string, vars map[string]any, rt RuntimeVars) (*renderer, error) {
	if p == nil {
		return nil, errors.New("render: nil pack")
	}
	pr := p.Prompts[promptKey]
	if pr == nil {
		return nil, fmt.Errorf("render: pack %q has no prompt %q", p.ID, promptKey)
	}
	r := &renderer{pack: p, prompt: promptKey, vars: map[string]any{}, rt: rt, declared: map[string]Variable{}}
	for k, v := range vars {
		r.vars[k] = v
	}
	for _, v := range pr.Variables {
		r.declared[v.Name] = v
		if val, ok := r.vars[v.Name]; ok && val != nil {
			continue
		}
		if len(v.Default) > 0 {
			d, err := decodeJSONValue(v.Default)
			if err != nil {
				return nil, fmt.Errorf("render prompt %q: default of variable %q: %w", promptKey, v.Name, err)
			}
			r.vars[v.Name] = d
		}
	}
	return r, nil
}

type renderer struct {
	pack     *Pack
	prompt   string
	vars     map[string]any
	declared map[string]Variable
	rt       RuntimeVars
}

func (r *renderer) expand(tmpl string, depth int) (string, error) {
	var b strings.Builder
	last := 0
	for _, loc := range placeholderRe.FindAllStringSubmatchIndex(tmpl, -1) {
		b.WriteString(tmpl[last:loc[0]])
		last = loc[1]
		expr := tmpl[loc[2]:loc[3]]
		rf, ok := parseRef(expr)
		if !ok {
			b.WriteString(tmpl[loc[0]:loc[1]])
			continue
		}
		s, err := r.resolve(rf, depth)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	b.WriteString(tmpl[last:])
	return b.String(), nil
}

func (r *renderer) resolve(rf ref, depth int) (string, error) {
	switch rf.root {
	case varWorkflowContext:
		if len(rf.segs) == 0 {
			return r.rt.WorkflowContext, nil
		}
	case nsFragments:
		if len(rf.segs) == 1 && !rf.segs[0].isIdx {
			frag, ok := r.pack.Fragments[rf.segs[0].key]
			if !ok {
				return "", nil
			}
			if depth >= maxFragmentDepth {
				return "", fmt.Errorf("render prompt %q: fragments nest more than %d levels deep at {{%s}}; do they include each other?", r.prompt, maxFragmentDepth, rf.raw)
			}
			return r.expand(frag, depth+1)
		}
	case nsArtifacts:
		if len(rf.segs) >= 1 && !rf.segs[0].isIdx {
			val, ok := r.rt.Artifacts[rf.segs[0].key]
			if !ok {
				return "", nil
			}
			if len(rf.segs) == 1 {
				return val, nil
			}
			// A path into an artifact works when the artifact holds JSON.
			v, err := decodeJSONValue([]byte(val))
			if err != nil {
				return "", nil
			}
			return renderValue(walk(v, rf.segs[1:]))
		}
	}
	val, ok := r.vars[rf.root]
	if !ok || val == nil {
		if d, declared := r.declared[rf.root]; declared && d.Required {
			return "", fmt.Errorf("render prompt %q: required variable %q has no value", r.prompt, rf.root)
		}
		return "", nil
	}
	if len(rf.segs) == 0 {
		return renderValue(val)
	}
	nv, err := normalizeValue(val)
	if err != nil {
		return "", fmt.Errorf("render prompt %q: variable %q: %w", r.prompt, rf.root, err)
	}
	return renderValue(walk(nv, rf.segs))
}

// walk follows field and index segments into a JSON-shaped value; a missing step yields nil.
func walk(v any, segs []seg) any {
	for _, s := range segs {
		switch x := v.(type) {
		case map[string]any:
			if s.isIdx {
				return nil
			}
			v = x[s.key]
		case []any:
			if !s.isIdx || s.index >= len(x) {
				return nil
			}
			v = x[s.index]
		default:
			return nil
		}
	}
	return v
}

// renderValue turns a value into template text: strings verbatim, numbers and booleans in
// JSON form, null as "", objects and arrays as compact JSON.
func renderValue(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return formatFloat(x), nil
	case float32:
		return formatFloat(float64(x)), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), nil
	}
	return compactJSON(v)
}

func compactJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("render value as JSON: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// normalizeValue converts any Go value to the JSON-shaped form (maps, slices, json.Number).
func normalizeValue(v any) (any, error) {
	switch v.(type) {
	case nil, string, bool, json.Number, float64:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value is not JSON-encodable: %w", err)
	}
	return decodeJSONValue(b)
}

func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// VariableError lists every problem with a run's variables, one line each, sorted.
type VariableError struct {
	Problems []string
	// Missing names the required variables without a value, sorted.
	Missing []string
}

// Error joins every problem into one message.
func (e *VariableError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid run variables: " + e.Problems[0]
	}
	return fmt.Sprintf("invalid run variables (%d problems): %s", len(e.Problems), strings.Join(e.Problems, "; "))
}

// variableRules is the validation block of a variable declaration.
type variableRules struct {
	Pattern   *string  `json:"pattern"`
	MinLength *int     `json:"min_length"`
	MaxLength *int     `json:"max_length"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	Enum      []any    `json:"enum"`
}

// UsedPromptKeys returns the prompts a run of the pack may render, sorted: the prompt_task
// of every workflow state, or every prompt when the pack has no workflow.
func (p *Pack) UsedPromptKeys() []string {
	if p.Workflow == nil {
		return p.PromptKeys()
	}
	set := map[string]bool{}
	for _, st := range p.Workflow.States {
		if st != nil && st.PromptTask != "" && p.Prompts[st.PromptTask] != nil {
			set[st.PromptTask] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// CheckVariables checks a run's variables before the run starts: every required variable of
// every prompt the workflow uses must have a value, and every supplied value must match its
// declaration's type and validation rules (pattern, min_length, max_length, minimum,
// maximum, enum). It reports all problems at once as a *VariableError.
func CheckVariables(p *Pack, vars map[string]any) error {
	if p == nil {
		return errors.New("check variables: nil pack")
	}
	missing := map[string][]string{} // variable -> prompts that require it
	problems := map[string]bool{}
	for _, key := range p.UsedPromptKeys() {
		for _, v := range p.Prompts[key].Variables {
			val, ok := vars[v.Name]
			if !ok || val == nil {
				if v.Required && len(v.Default) == 0 {
					missing[v.Name] = append(missing[v.Name], key)
				}
				continue
			}
			nv, err := normalizeValue(val)
			if err != nil {
				problems[fmt.Sprintf("variable %q: %v", v.Name, err)] = true
				continue
			}
			for _, msg := range checkValue(v, nv) {
				problems[fmt.Sprintf("variable %q (prompt %q): %s", v.Name, key, msg)] = true
			}
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(missing)) {
		out = append(out, fmt.Sprintf("required variable %q is missing (needed by prompt %s)", name, strings.Join(quoteEach(missing[name]), ", ")))
	}
	out = append(out, slices.Sorted(maps.Keys(problems))...)
	if len(out) == 0 {
		return nil
	}
	return &VariableError{Problems: out, Missing: slices.Sorted(maps.Keys(missing))}
}

func quoteEach(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// checkValue validates one JSON-shaped value against a variable's type and rules.
func checkValue(v Variable, val any) []string {
	var out []string
	switch v.Type {
	case "string":
		if _, ok := val.(string); !ok {
			out = append(out, fmt.Sprintf("must be a string (got %s)", jsonKind(val)))
		}
	case "number", "integer":
		f, ok := numberOf(val)
		if !ok {
			out = append(out, fmt.Sprintf("must be a %s (got %s)", v.Type, jsonKind(val)))
		} else if v.Type == "integer" && f != math.Trunc(f) {
			out = append(out, fmt.Sprintf("must be an integer (got %s)", formatFloat(f)))
		}
	case "boolean":
		if _, ok := val.(bool); !ok {
			out = append(out, fmt.Sprintf("must be a boolean (got %s)", jsonKind(val)))
		}
	case "object":
		if _, ok := val.(map[string]any); !ok {
			out = append(out, fmt.Sprintf("must be an object (got %s)", jsonKind(val)))
		}
	case "array":
		if _, ok := val.([]any); !ok {
			out = append(out, fmt.Sprintf("must be an array (got %s)", jsonKind(val)))
		}
	}
	if len(v.Validation) == 0 {
		return out
	}
	var rules variableRules
	if err := json.Unmarshal(v.Validation, &rules); err != nil {
		return append(out, fmt.Sprintf("its validation rules cannot be read: %v", err))
	}
	if s, ok := val.(string); ok {
		n := utf8.RuneCountInString(s)
		if rules.Pattern != nil {
			re, err := regexp.Compile(*rules.Pattern)
			if err != nil {
				out = append(out, fmt.Sprintf("its pattern %q does not compile: %v", *rules.Pattern, err))
			} else if !re.MatchString(s) {
				out = append(out, fmt.Sprintf("value %q does not match the pattern %s", s, *rules.Pattern))
			}
		}
		if rules.MinLength != nil && n < *rules.MinLength {
			out = append(out, fmt.Sprintf("must be at least %d characters long (got %d)", *rules.MinLength, n))
		}
		if rules.MaxLength != nil && n > *rules.MaxLength {
			out = append(out, fmt.Sprintf("must be at most %d characters long (got %d)", *rules.MaxLength, n))
		}
	}
	if f, ok := numberOf(val); ok {
		if rules.Minimum != nil && f < *rules.Minimum {
			out = append(out, fmt.Sprintf("must be at least %s (got %s)", formatFloat(*rules.Minimum), formatFloat(f)))
		}
		if rules.Maximum != nil && f > *rules.Maximum {
			out = append(out, fmt.Sprintf("must be at most %s (got %s)", formatFloat(*rules.Maximum), formatFloat(f)))
		}
	}
	if rules.Enum != nil {
		got, _ := compactJSON(canonicalValue(val))
		allowed := make([]string, len(rules.Enum))
		match := false
		for i, e := range rules.Enum {
			allowed[i], _ = compactJSON(canonicalValue(e))
			if allowed[i] == got {
				match = true
			}
		}
		if !match {
			out = append(out, fmt.Sprintf("must be one of %s (got %s)", strings.Join(allowed, ", "), got))
		}
	}
	return out
}

// canonicalValue rewrites numbers so that 1, 1.0 and json.Number("1") compare equal.
func canonicalValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = canonicalValue(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = canonicalValue(e)
		}
		return a
	}
	if f, ok := numberOf(v); ok {
		return json.Number(formatFloat(f))
	}
	return v
}

func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	if _, ok := numberOf(v); ok {
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// placeholderAt is a placeholder found in a prompt's template, directly or inside a
// fragment it includes. off is the byte offset, in the prompt's own template, of the
// placeholder itself or of the fragment include that brought it in.
type placeholderAt struct {
	body  string
	rf    ref
	isRef bool
	off   int
}

// templateRefs lists the placeholders of a prompt's template after expanding the fragments
// it includes, for load-time checks. A fragment cycle is described in cyc.
func templateRefs(p *Pack, tmpl string) (out []placeholderAt, cyc string) {
	var visit func(s string, depth int, chain []string, site int)
	visit = func(s string, depth int, chain []string, site int) {
		for _, loc := range placeholderRe.FindAllStringSubmatchIndex(s, -1) {
			body := s[loc[2]:loc[3]]
			off := site
			if site < 0 {
				off = loc[0]
			}
			rf, ok := parseRef(body)
			out = append(out, placeholderAt{body: body, rf: rf, isRef: ok, off: off})
			if !ok || rf.root != nsFragments || len(rf.segs) != 1 || rf.segs[0].isIdx {
				continue
			}
			name := rf.segs[0].key
			frag, ok := p.Fragments[name]
			if !ok {
				continue
			}
			if depth >= maxFragmentDepth || containsString(chain, name) {
				if cyc == "" {
					cyc = strings.Join(append(append([]string(nil), chain...), name), " -> ")
				}
				continue
			}
			visit(frag, depth+1, append(chain, name), off)
		}
	}
	visit(tmpl, 0, nil, -1)
	return out, cyc
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
