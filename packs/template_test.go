package packs

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const templatePack = `id: tmpl
name: Templates
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
fragments:
  sign: "-- {{company}} team"
  outer: "[{{fragments.inner}}]"
  inner: "inner for {{ name }}"
prompts:
  main:
    id: main
    name: Main
    version: 1.0.0
    system_template: "Hi {{name}}"
    variables:
      - { name: name, type: string, required: true }
      - { name: company, type: string, required: false, default: Acme }
      - { name: tier, type: string, required: false }
      - { name: limit, type: integer, required: false, default: 3 }
      - { name: customer, type: object, required: false }
      - name: code
        type: string
        required: false
        validation: { pattern: "^[A-Z]{3}$", min_length: 3, max_length: 3 }
      - name: score
        type: number
        required: false
        validation: { minimum: 0, maximum: 10 }
      - name: level
        type: string
        required: false
        validation: { enum: [low, high] }
  other:
    id: other
    name: Other
    version: 1.0.0
    system_template: "{{topic}}"
    variables:
      - { name: topic, type: string, required: true }
      - { name: name, type: string, required: true }
  unused:
    id: unused
    name: Unused
    version: 1.0.0
    system_template: "{{secret}}"
    variables:
      - { name: secret, type: string, required: true }
workflow:
  version: 1
  entry: a
  states:
    a: { prompt_task: main, on_event: { Next: b } }
    b: { prompt_task: other, terminal: true, artifacts: { report: { type: application/json } } }
`

// renderWith renders prompt main with a replaced template.
func renderWith(t *testing.T, tmpl string, vars map[string]any, rt RuntimeVars) (string, error) {
	t.Helper()
	p, _, err := Parse("t.yaml", []byte(templatePack))
	if err != nil {
		t.Fatal(err)
	}
	p.Prompts["main"].SystemTemplate = tmpl
	return Render(p, "main", vars, rt)
}

func TestRender(t *testing.T) {
	base := map[string]any{"name": "Ada"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{"name": "Ada"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	customer := map[string]any{
		"contact": map[string]any{"email": "ada@example.com"},
		"items":   []any{map[string]any{"title": "Lamp", "qty": 2}, "second"},
		"tags":    []string{"vip", "<new>"},
	}
	tests := []struct {
		name string
		tmpl string
		vars map[string]any
		rt   RuntimeVars
		want string
	}{
		{"variable", "Hi {{name}}!", base, RuntimeVars{}, "Hi Ada!"},
		{"spaces inside braces", "Hi {{ name }}!", base, RuntimeVars{}, "Hi Ada!"},
		{"default applies", "{{company}}", base, RuntimeVars{}, "Acme"},
		{"supplied beats default", "{{company}}", with("company", "Globex"), RuntimeVars{}, "Globex"},
		{"optional without default is empty", "[{{tier}}]", base, RuntimeVars{}, "[]"},
		{"numeric default", "{{limit}}", base, RuntimeVars{}, "3"},
		{"dot path", "{{customer.contact.email}}", with("customer", customer), RuntimeVars{}, "ada@example.com"},
		{"index then field", "{{customer.items[0].title}} x{{customer.items[0].qty}}", with("customer", customer), RuntimeVars{}, "Lamp x2"},
		{"index into a Go slice", "{{customer.tags[1]}}", with("customer", customer), RuntimeVars{}, "<new>"},
		{"missing path is empty", "[{{customer.nope.deeper}}][{{customer.items[9]}}][{{name.x}}]", with("customer", customer), RuntimeVars{}, "[][][]"},
		{"object renders as compact sorted JSON", "{{customer.items[0]}}", with("customer", customer), RuntimeVars{}, `{"qty":2,"title":"Lamp"}`},
		{"array renders as JSON without HTML escaping", "{{customer.tags}}", with("customer", customer), RuntimeVars{}, `["vip","<new>"]`},
		{"numbers and booleans", "{{a}} {{b}} {{c}} {{d}}", with("a", 1.5, "b", 7, "c", true, "d", json.Number("2e3")), RuntimeVars{}, "1.5 7 true 2e3"},
		{"undeclared supplied variable", "{{extra}}", with("extra", "x"), RuntimeVars{}, "x"},
		{"unknown name is empty", "[{{ghost}}]", base, RuntimeVars{}, "[]"},
		{"values are not re-rendered", "{{tier}}", with("tier", "{{name}}"), RuntimeVars{}, "{{name}}"},
		{"fragment with placeholder", "{{fragments.sign}}", base, RuntimeVars{}, "-- Acme team"},
		{"nested fragments", "{{fragments.outer}}", base, RuntimeVars{}, "[inner for Ada]"},
		{"unknown fragment is empty", "[{{fragments.nope}}]", base, RuntimeVars{}, "[]"},
		{"workflow context", "ctx={{workflow_context}}", base, RuntimeVars{WorkflowContext: "wants balance"}, "ctx=wants balance"},
		{"unset runtime namespaces are empty", "[{{workflow_context}}][{{artifacts.report}}]", base, RuntimeVars{}, "[][]"},
		{"artifact", "{{artifacts.sha}}", base, RuntimeVars{Artifacts: map[string]string{"sha": "abc123"}}, "abc123"},
		{"path into a JSON artifact", "{{artifacts.report.failed[0]}}", base, RuntimeVars{Artifacts: map[string]string{"report": `{"failed":["TestX"]}`}}, "TestX"},
		{"non-references are left as written", "{{#if vip}}x{{/if}} {{ a b }}", base, RuntimeVars{}, "{{#if vip}}x{{/if}} {{ a b }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renderWith(t, tt.tmpl, tt.vars, tt.rt)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tt.want {
				t.Errorf("Render = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	p, _, err := Parse("t.yaml", []byte(templatePack))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(p, "main", nil, RuntimeVars{}); err == nil || !strings.Contains(err.Error(), `required variable "name" has no value`) {
		t.Errorf("missing required variable: err = %v", err)
	}
	if _, err := Render(p, "nope", nil, RuntimeVars{}); err == nil || !strings.Contains(err.Error(), `has no prompt "nope"`) {
		t.Errorf("unknown prompt: err = %v", err)
	}
	// Fragments that include each other are stopped (the loader rejects such packs; Render
	// must not loop on a hand-built one).
	p.Fragments["loop"] = "x{{fragments.loop}}"
	p.Prompts["main"].SystemTemplate = "{{fragments.loop}}"
	if _, err := Render(p, "main", map[string]any{"name": "A"}, RuntimeVars{}); err == nil || !strings.Contains(err.Error(), "fragments nest more than 10 levels") {
		t.Errorf("fragment cycle: err = %v", err)
	}
}

func TestRenderDeterministic(t *testing.T) {
	vars := map[string]any{"name": "A", "customer": map[string]any{"z": 1, "a": 2, "m": map[string]any{"y": 1, "b": 2}}}
	first, err := renderWith(t, "{{customer}}", vars, RuntimeVars{})
	if err != nil {
		t.Fatal(err)
	}
	if first != `{"a":2,"m":{"b":2,"y":1},"z":1}` {
		t.Fatalf("got %s", first)
	}
	for i := 0; i < 50; i++ {
		if again, _ := renderWith(t, "{{customer}}", vars, RuntimeVars{}); again != first {
			t.Fatalf("render differs: %s vs %s", again, first)
		}
	}
}

func TestCheckVariables(t *testing.T) {
	p, _, err := Parse("t.yaml", []byte(templatePack))
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]any{"name": "Ada", "topic": "billing"}
	if err := CheckVariables(p, ok); err != nil {
		t.Errorf("valid variables rejected: %v", err)
	}
	tests := []struct {
		name string
		vars map[string]any
		want []string
	}{
		{"all missing, listed once per variable, unused prompt ignored", nil, []string{
			`required variable "name" is missing (needed by prompt "main", "other")`,
			`required variable "topic" is missing (needed by prompt "other")`,
		}},
		{"nil counts as missing", map[string]any{"name": nil, "topic": "t"}, []string{
			`required variable "name" is missing (needed by prompt "main", "other")`,
		}},
		{"type mismatch", map[string]any{"name": 42, "topic": "t"}, []string{
			`variable "name" (prompt "main"): must be a string (got a number)`,
			`variable "name" (prompt "other"): must be a string (got a number)`,
		}},
		{"integer", map[string]any{"name": "A", "topic": "t", "limit": 2.5}, []string{
			`variable "limit" (prompt "main"): must be an integer (got 2.5)`,
		}},
		{"pattern and length", map[string]any{"name": "A", "topic": "t", "code": "ab"}, []string{
			`variable "code" (prompt "main"): must be at least 3 characters long (got 2)`,
			`variable "code" (prompt "main"): value "ab" does not match the pattern ^[A-Z]{3}$`,
		}},
		{"max length", map[string]any{"name": "A", "topic": "t", "code": "ABCD"}, []string{
			`variable "code" (prompt "main"): must be at most 3 characters long (got 4)`,
			`variable "code" (prompt "main"): value "ABCD" does not match the pattern ^[A-Z]{3}$`,
		}},
		{"minimum", map[string]any{"name": "A", "topic": "t", "score": -1}, []string{
			`variable "score" (prompt "main"): must be at least 0 (got -1)`,
		}},
		{"maximum", map[string]any{"name": "A", "topic": "t", "score": json.Number("10.5")}, []string{
			`variable "score" (prompt "main"): must be at most 10 (got 10.5)`,
		}},
		{"enum", map[string]any{"name": "A", "topic": "t", "level": "mid"}, []string{
			`variable "level" (prompt "main"): must be one of "low", "high" (got "mid")`,
		}},
		{"object type", map[string]any{"name": "A", "topic": "t", "customer": []string{"x"}}, []string{
			`variable "customer" (prompt "main"): must be an object (got an array)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckVariables(p, tt.vars)
			var ve *VariableError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want *VariableError", err)
			}
			if !reflect.DeepEqual(ve.Problems, tt.want) {
				t.Errorf("problems\n got %q\nwant %q", ve.Problems, tt.want)
			}
		})
	}
	// Supplied values that pass every rule.
	good := map[string]any{"name": "A", "topic": "t", "code": "ABC", "score": 10, "level": "high", "limit": json.Number("4"), "customer": map[string]any{}}
	if err := CheckVariables(p, good); err != nil {
		t.Errorf("valid values rejected: %v", err)
	}
	// Without a workflow every prompt counts.
	p.Workflow = nil
	err = CheckVariables(p, ok)
	if err == nil || !strings.Contains(err.Error(), `required variable "secret" is missing (needed by prompt "unused")`) {
		t.Errorf("no workflow: err = %v", err)
	}
}

func TestPromptToolsAndPolicy(t *testing.T) {
	p := mustParse(t, "x.yaml", `id: tools
name: Tools
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
tools:
  zeta: { name: zeta, description: Z., parameters: { type: object, properties: {} } }
  alpha: { name: alpha, description: A., parameters: { type: object, properties: {} } }
  danger: { name: danger, description: D., parameters: { type: object, properties: {} } }
prompts:
  p:
    id: p
    name: P
    version: 1.0.0
    system_template: x
    tools: [zeta, danger, alpha, zeta]
    tool_policy: { blocklist: [danger], max_rounds: 2 }
  q: { id: q, name: Q, version: 1.0.0, system_template: x }
`)
	var names []string
	for _, tool := range p.PromptTools("p") {
		names = append(names, tool.Name)
	}
	if !reflect.DeepEqual(names, []string{"alpha", "zeta"}) {
		t.Errorf("PromptTools = %v, want [alpha zeta]", names)
	}
	if got := p.PromptTools("q"); len(got) != 0 {
		t.Errorf("prompt without tools offers %d", len(got))
	}
	if got := p.PromptTools("missing"); got != nil {
		t.Errorf("unknown prompt offers tools")
	}
	tp := p.Prompts["p"].EffectiveToolPolicy()
	if tp.MaxRounds != 2 || tp.MaxToolCallsPerTurn != 10 || tp.ToolChoice != "auto" || !reflect.DeepEqual(tp.Blocklist, []string{"danger"}) {
		t.Errorf("EffectiveToolPolicy(p) = %+v", tp)
	}
	tq := p.Prompts["q"].EffectiveToolPolicy()
	if tq.MaxRounds != DefaultMaxRounds || tq.MaxToolCallsPerTurn != DefaultMaxToolCallsPerTurn || tq.ToolChoice != DefaultToolChoice {
		t.Errorf("EffectiveToolPolicy(q) = %+v", tq)
	}
}

func TestStateHelpers(t *testing.T) {
	p, _, err := Load("support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	w := p.Workflow
	tests := []struct {
		state         string
		terminal      bool
		control       string
		orchestration string
		events        []string
		transition    bool
	}{
		{"verifying", false, ControlUser, OrchestrationInternal, []string{"AccountVerified"}, true},
		{"triage", false, ControlAgent, OrchestrationInternal, []string{"EscalateToAgent", "ServeBalance"}, true},
		{"resolution", true, ControlUser, OrchestrationInternal, []string{}, false},
	}
	for _, tt := range tests {
		s := w.States[tt.state]
		if s.IsTerminal() != tt.terminal || s.ControlOrDefault() != tt.control || s.OrchestrationOrDefault() != tt.orchestration ||
			!reflect.DeepEqual(s.Events(), tt.events) || s.OffersTransition() != tt.transition {
			t.Errorf("%s: terminal=%v control=%s orchestration=%s events=%v transition=%v", tt.state,
				s.IsTerminal(), s.ControlOrDefault(), s.OrchestrationOrDefault(), s.Events(), s.OffersTransition())
		}
	}
	// No on_event means terminal even without terminal: true; external states never offer
	// the transition tool.
	if !(&State{}).IsTerminal() {
		t.Error("a state without on_event is not terminal")
	}
	ext := &State{Orchestration: OrchestrationExternal, OnEvent: map[string]string{"Approved": "x"}}
	if ext.IsTerminal() || ext.OffersTransition() {
		t.Error("external state: want non-terminal, no transition tool")
	}
	r, _, err := Load("refund.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r.Workflow.States["awaiting_approval"].OffersTransition() {
		t.Error("refund awaiting_approval offers workflow__transition")
	}

	c, _, err := Load("code-fix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ArtifactNames(); !reflect.DeepEqual(got, []string{"build_log", "changes", "test_report"}) {
		t.Errorf("ArtifactNames = %v", got)
	}
	if got := c.Workflow.ArtifactDecl("compile", "changes").ArtifactMode(); got != "append" {
		t.Errorf("changes seen from compile: mode %q, want append (from the declaring state)", got)
	}
	if got := c.Workflow.ArtifactDecl("compile", "build_log").ArtifactMode(); got != "replace" {
		t.Errorf("build_log mode %q, want replace", got)
	}
	if c.Workflow.ArtifactDecl("compile", "nope") != nil {
		t.Error("undeclared artifact has a declaration")
	}
	if got := c.UsedPromptKeys(); !reflect.DeepEqual(got, []string{"compile", "fix", "report_failure", "report_success", "test"}) {
		t.Errorf("UsedPromptKeys = %v", got)
	}
}

func TestRenderOverrides(t *testing.T) {
	src := strings.Replace(templatePack, `    system_template: "Hi {{name}}"`, `    system_template: "Hi {{name}}"
    model_overrides:
      gpt-4o:
        system_template_prefix: "[{{company}}] "
        system_template_suffix: " {{fragments.sign}}"
        parameters: { temperature: 0.1 }
      claude-x:
        system_template: "Hello {{name}}, from {{workflow_context}}"`, 1)
	p, diags, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("%v\n%s", err, diags)
	}
	got, err := RenderOverrides(p, "main", map[string]any{"name": "Ada"}, RuntimeVars{WorkflowContext: "triage"})
	if err != nil {
		t.Fatal(err)
	}
	if o := got["gpt-4o"]; o.Prefix != "[Acme] " || o.Suffix != " -- Acme team" || o.SystemTemplate != "" || o.Parameters == nil || *o.Parameters.Temperature != 0.1 {
		t.Errorf("gpt-4o: %+v", o)
	}
	if o := got["claude-x"]; o.SystemTemplate != "Hello Ada, from triage" || o.Prefix != "" {
		t.Errorf("claude-x: %+v", o)
	}
	if _, err := RenderOverrides(p, "main", nil, RuntimeVars{}); err == nil || !strings.Contains(err.Error(), `required variable "name"`) {
		t.Errorf("a missing variable fails the overrides too: %v", err)
	}
	plain, _, err := Parse("t.yaml", []byte(templatePack))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := RenderOverrides(plain, "main", map[string]any{"name": "Ada"}, RuntimeVars{}); err != nil || got != nil {
		t.Errorf("a prompt without model_overrides: %v, %v", got, err)
	}
}
