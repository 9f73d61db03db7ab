package packs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, name, src string) *Pack {
	t.Helper()
	p, diags, err := Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("Parse(%s): %v\n%s", name, err, diags)
	}
	return p
}

func TestYAMLAndJSONHashAlike(t *testing.T) {
	y, _, err := Load("testdata/packs/valid_minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := Load("testdata/packs/valid_minimal.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(y.Hash, "sha256:") || len(y.Hash) != len("sha256:")+64 {
		t.Fatalf("hash %q is not sha256:<hex>", y.Hash)
	}
	if y.Hash != j.Hash {
		t.Errorf("YAML hash %s != JSON hash %s", y.Hash, j.Hash)
	}
	// Any change of content changes the hash.
	data, _ := os.ReadFile("testdata/packs/valid_minimal.yaml")
	changed := mustParse(t, "x.yaml", strings.Replace(string(data), "helpful assistant", "helpful assistant!", 1))
	if changed.Hash == y.Hash {
		t.Error("hash did not change when the system template changed")
	}
}

func TestExamplePackJSONEquivalent(t *testing.T) {
	// The support pack re-encoded as JSON (from the typed value) loads to the same hash.
	p, _, err := Load("support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	q := mustParse(t, "support.json", string(raw))
	if p.Hash != q.Hash {
		t.Errorf("hash of JSON re-encoding %s != %s", q.Hash, p.Hash)
	}
	p.promptOrder, q.promptOrder = nil, nil // the source's order of prompts, not part of the value
	if !reflect.DeepEqual(p, q) {
		t.Error("JSON re-encoding of the support pack decodes to a different value")
	}
}

func TestEngineExtraRoundTrip(t *testing.T) {
	p, _, err := Load("testdata/packs/valid_open_objects.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := p.Workflow.Engine
	if e.Budget == nil || e.Budget.MaxToolCalls != 5 {
		t.Fatalf("budget = %+v, want max_tool_calls 5", e.Budget)
	}
	if got := string(e.Extra["timeout_ms"]); got != "30000" {
		t.Errorf("Extra[timeout_ms] = %q", got)
	}
	if got := string(e.Extra["acme.example/queue"]); got != `{"name":"priority","weight":2}` {
		t.Errorf("Extra[acme.example/queue] = %q", got)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"acme.example/queue":{"name":"priority","weight":2},"budget":{"max_tool_calls":5},"timeout_ms":30000}`; string(b) != want {
		t.Errorf("engine JSON = %s\nwant %s", b, want)
	}
	var back Engine
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, e) {
		t.Errorf("engine round trip: got %+v, want %+v", back, *e)
	}
	// The whole pack survives a JSON round trip (as it does through workflow input).
	raw, _ := json.Marshal(p)
	var q Pack
	if err := json.Unmarshal(raw, &q); err != nil {
		t.Fatal(err)
	}
	if h, _ := q.ComputeHash(); h != p.Hash {
		t.Errorf("hash after JSON round trip %s != %s", h, p.Hash)
	}
	// Open objects are kept, not dropped; merge keys apply.
	if !strings.Contains(string(p.Metadata), `"acme.example/owner":"platform-team"`) {
		t.Errorf("metadata lost an extension key: %s", p.Metadata)
	}
	if got := p.Prompts["chat"].Version; got != "1.0.0" {
		t.Errorf("merged prompt version = %q, want 1.0.0", got)
	}
	if got := string(p.Prompts["chat"].Validators[0].Params); got != `{"acme.example/strict":true,"words":["foo"]}` {
		t.Errorf("validator params = %s", got)
	}
	// A tool declared without parameters takes none.
	if got := string(p.Tools["ping"].Parameters); got != `{"properties":{},"type":"object"}` {
		t.Errorf("default tool parameters = %s", got)
	}
}

func TestParseJSONDiagnostics(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // full rendered first diagnostic
	}{
		{"duplicate key", "{\n  \"id\": \"a\",\n  \"id\": \"b\"\n}", `x.json:3:3: error: duplicate key "id" (first defined on line 2)`},
		{"syntax", "{\n  \"id\": \"a\",\n}", `x.json:3:1: error: JSON syntax error: expected a string object key`},
		{"trailing text", "{} {}", `x.json:1:4: error: JSON syntax error: unexpected text after the end of the JSON document`},
		{"empty", "  \n", `x.json:2:1: error: JSON syntax error: the file is empty`},
		{"bad escape", `{"id": "\q"}`, `x.json:1:8: error: JSON syntax error: invalid string (bad escape or control character)`},
		{"schema error positioned", "{\n\t\"id\": \"a\",\n\t\"name\": \"A\",\n\t\"version\": \"1.0.0\",\n\t\"template_engine\": {\"version\": \"v1\", \"syntax\": \"{{variable}}\"},\n\t\"prompts\": {\"p\": {\"id\": \"p\", \"name\": \"P\", \"version\": \"1.0.0\", \"system_template\": \"x\", \"temprature\": 1}}\n}",
			`x.json:6:88: error: prompts.p: unknown field "temprature"; allowed fields: description, evals, extensions, id, media, model_overrides, name, parameters, pipeline, provider, system_template, tested_models, tool_policy, tools, validators, variables, version`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags, err := Parse("x.json", []byte(tt.src))
			if err == nil || p != nil || len(diags) == 0 {
				t.Fatalf("Parse succeeded or gave no diagnostics: %v %v", err, diags)
			}
			if got := diags[0].String(); got != tt.want {
				t.Errorf("diagnostic\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseYAMLEdgeCases(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"two documents", "id: a\n---\nid: b\n", "x.yaml:2:1: error: a pack file holds one YAML document"},
		{"recursive alias", "a: &x [*x]\n", "x.yaml:1:8: error: alias *x refers to itself"},
		{"custom tag", "id: !secret abc\n", "x.yaml:1:5: error: unsupported YAML tag !secret"},
		{"empty", "# nothing\n", "x.yaml:1:1: error: the file is empty"},
		{"complex key", "? [a]\n: b\n", "x.yaml:1:3: error: a mapping key must be a plain string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, err := Parse("x.yaml", []byte(tt.src))
			if err == nil || len(diags) == 0 {
				t.Fatalf("Parse succeeded: %v", diags)
			}
			if got := diags[0].String(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("diagnostic\n got %s\nwant prefix %s", got, tt.want)
			}
		})
	}
}

func TestYAMLEventNamesStayStrings(t *testing.T) {
	// YAML 1.1 decoders turn On/Off/Yes/No into booleans; yaml.v3 keeps them, as the
	// on_event map needs.
	p := mustParse(t, "x.yaml", `id: a
name: A
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  p: { id: p, name: P, version: 1.0.0, system_template: x }
workflow:
  version: 1
  entry: s
  states:
    s: { prompt_task: p, on_event: { "On": t, "Off": t } }
    t: { prompt_task: p, terminal: true }
`)
	if got := p.Workflow.States["s"].Events(); !reflect.DeepEqual(got, []string{"Off", "On"}) {
		t.Errorf("events = %v", got)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func minimalPack(id string) string {
	return `id: ` + id + `
name: X
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  p: { id: p, name: P, version: 1.0.0, system_template: x }
`
}

func TestLoadDir(t *testing.T) {
	t.Run("missing folder", func(t *testing.T) {
		got, diags, err := LoadDir(filepath.Join(t.TempDir(), "nope"))
		if err != nil || got != nil || diags != nil {
			t.Errorf("LoadDir(missing) = %v, %v, %v; want nothing", got, diags, err)
		}
	})
	t.Run("empty folder", func(t *testing.T) {
		got, _, err := LoadDir(t.TempDir())
		if err != nil || len(got) != 0 {
			t.Errorf("LoadDir(empty) = %v, %v", got, err)
		}
	})
	t.Run("packs and mocks", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{
			"a.yaml":      minimalPack("a"),
			"a.mock.yaml": "rounds:\n  - text: hi\n",
			"b.json":      `{"id":"b","name":"B","version":"1.0.0","template_engine":{"version":"v1","syntax":"{{variable}}"},"prompts":{"p":{"id":"p","name":"P","version":"1.0.0","system_template":"x"}}}`,
			"notes.txt":   "not a pack",
			".hidden.yml": "garbage: [",
		})
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, filepath.Join(dir, "sub"), map[string]string{"c.yaml": "broken: ["})
		got, diags, err := LoadDir(dir)
		if err != nil {
			t.Fatalf("LoadDir: %v\n%s", err, diags)
		}
		if len(got) != 2 || got[0].Pack.ID != "a" || got[1].Pack.ID != "b" {
			t.Fatalf("loaded %d packs, want a and b", len(got))
		}
		if got[0].Mock == nil || got[0].Mock.Rounds[0].Text != "hi" {
			t.Errorf("mock of a not loaded: %+v", got[0].Mock)
		}
		if got[1].Mock != nil {
			t.Errorf("b has no mock, got %+v", got[1].Mock)
		}
		if got[0].Path != filepath.Join(dir, "a.yaml") {
			t.Errorf("path = %s", got[0].Path)
		}
	})
	t.Run("a broken pack is left out, the others load", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{
			"a.yaml": minimalPack("a"),
			"b.yaml": strings.Replace(minimalPack("b"), "version: 1.0.0\ntemplate", "version: 1.0.0\nflavour: x\ntemplate", 1),
			"c.yaml": minimalPack("c"),
		})
		got, diags, err := LoadDir(dir)
		var de *DirError
		if !errors.As(err, &de) || len(got) != 2 || got[0].Pack.ID != "a" || got[1].Pack.ID != "c" {
			t.Fatalf("LoadDir = %d packs, err %v; want a and c and a DirError", len(got), err)
		}
		want := filepath.Join(dir, "b.yaml") + `:4:1: error: unknown field "flavour"`
		if len(diags) != 1 || !strings.HasPrefix(diags[0].String(), want) {
			t.Errorf("diagnostics = %s\nwant %s...", diags, want)
		}
		if de.Error() != "1 of 3 pack files in "+dir+" have errors and are not served: "+filepath.Join(dir, "b.yaml") {
			t.Errorf("error = %q", de.Error())
		}
		if got := de.FileDiagnostics(filepath.Join(dir, "b.yaml")); len(got) != 1 {
			t.Errorf("FileDiagnostics = %s", got)
		}
	})
	t.Run("a broken mock leaves its pack out, naming the mock file", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{
			"a.yaml":      minimalPack("a"),
			"a.mock.yaml": "rounds:\n  - txt: hi\n",
			"b.yaml":      minimalPack("b"),
		})
		got, diags, err := LoadDir(dir)
		var de *DirError
		if !errors.As(err, &de) || len(got) != 1 || got[0].Pack.ID != "b" {
			t.Fatalf("LoadDir = %d packs, %v; want b only", len(got), err)
		}
		want := filepath.Join(dir, "a.mock.yaml") + `:2:5: error: rounds[0]: unknown field "txt" (did you mean "text"?)`
		if !strings.Contains(diags.String(), want) {
			t.Errorf("got %s\nwant %s", diags, want)
		}
		fd := de.FileDiagnostics(filepath.Join(dir, "a.yaml"))
		if len(fd) == 0 {
			t.Error("FileDiagnostics(a.yaml) is empty")
		}
		for _, d := range fd {
			if d.File != filepath.Join(dir, "a.mock.yaml") {
				t.Errorf("FileDiagnostics(a.yaml) = %s", fd)
			}
		}
	})
	t.Run("a YAML syntax error points at the offending line and column", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{
			"a.yaml": minimalPack("a") + "metadata:\n  extra:\n    a: 1\n   b: 2\n  c: 3\n",
			"b.yaml": minimalPack("b"),
		})
		got, diags, _ := LoadDir(dir)
		if len(got) != 1 {
			t.Fatalf("loaded %d packs", len(got))
		}
		line := strings.Count(minimalPack("a"), "\n") + 4
		want := fmt.Sprintf("%s:%d:4: error: YAML syntax error: did not find expected key", filepath.Join(dir, "a.yaml"), line)
		if len(diags) != 1 || !strings.HasPrefix(diags[0].String(), want) {
			t.Errorf("diagnostics = %s\nwant %s...", diags, want)
		}
	})
	t.Run("YAML syntax errors point at their column", func(t *testing.T) {
		for src, want := range map[string]string{
			"a: b: c\n":               "x.yaml:1:5: error: YAML syntax error: mapping values are not allowed in this context",
			"a:\n\tb: 1\n":            "x.yaml:2:1: error: YAML syntax error: found character that cannot start any token",
			"a: 1\nb: { c: [1, 2 }\n": "x.yaml:2:9: error: YAML syntax error: did not find expected ',' or ']'",
		} {
			_, diags, err := Parse("x.yaml", []byte(src))
			if err == nil || len(diags) != 1 || !strings.HasPrefix(diags[0].String(), want) {
				t.Errorf("Parse(%q) = %s\nwant %s", src, diags, want)
			}
		}
	})
	t.Run("duplicate ids: the first file serves", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"a.yaml": minimalPack("same"), "b.yaml": minimalPack("same")})
		got, diags, err := LoadDir(dir)
		if err == nil || len(got) != 1 || got[0].Path != filepath.Join(dir, "a.yaml") {
			t.Fatal("LoadDir accepted duplicate pack ids")
		}
		want := filepath.Join(dir, "b.yaml") + `:1:5: error: id: duplicate pack id "same" (also used by ` + filepath.Join(dir, "a.yaml")
		if len(diags) != 1 || !strings.HasPrefix(diags[0].String(), want) {
			t.Errorf("diagnostics = %s\nwant %s...", diags, want)
		}
	})
	t.Run("orphan mock warns", func(t *testing.T) {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"a.yaml": minimalPack("a"), "gone.mock.yaml": "rounds: []\ndefault: x\n"})
		got, diags, err := LoadDir(dir)
		if err != nil || len(got) != 1 {
			t.Fatalf("LoadDir: %v", err)
		}
		if len(diags) != 1 || diags[0].Severity != SeverityWarning || !strings.Contains(diags[0].Message, "mock script has no pack beside it") {
			t.Errorf("diagnostics = %s", diags)
		}
	})
}

func TestWarningsDoNotStopLoading(t *testing.T) {
	p, diags, err := Load("testdata/packs/warnings.yaml")
	if err != nil || p == nil {
		t.Fatalf("a pack with only warnings failed to load: %v", err)
	}
	if len(diags) == 0 || diags.HasErrors() {
		t.Fatalf("want warnings only, got %s", diags)
	}
	if p.Hash == "" {
		t.Error("pack with warnings has no hash")
	}
}

func TestDiagnosticsDeterministic(t *testing.T) {
	data, err := os.ReadFile("testdata/packs/warnings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, first, _ := Parse("w.yaml", data)
	for i := 0; i < 20; i++ {
		_, again, _ := Parse("w.yaml", data)
		if again.String() != first.String() {
			t.Fatalf("diagnostics differ between runs:\n%s\n---\n%s", first, again)
		}
	}
}

func TestTemplateWarningPositions(t *testing.T) {
	head := "id: a\nname: A\nversion: 1.0.0\ntemplate_engine: { version: v1, syntax: \"{{variable}}\" }\nprompts:\n  p:\n    id: p\n    name: P\n    version: 1.0.0\n"
	tests := []struct {
		name, file, src, want string
	}{
		{"plain", "a.yaml", head + "    system_template: Hi {{nme}}\n", "a.yaml:10:25: warning: prompts.p.system_template: {{nme}} names no declared variable"},
		{"double quoted", "a.yaml", head + "    system_template: \"Hi {{nme}}\"\n", "a.yaml:10:26: warning"},
		{"escaped: start of the value", "a.yaml", head + "    system_template: \"Hi\\t{{nme}}\"\n", "a.yaml:10:22: warning"},
		{"literal block, second line", "a.yaml", head + "    system_template: |\n      Hi.\n        Then {{nme}}\n", "a.yaml:12:14: warning"},
		{"folded: start of the value", "a.yaml", head + "    system_template: >\n      Hi.\n      Then {{nme}}\n", "a.yaml:10:22: warning"},
		{"json", "a.json", `{"id":"a","name":"A","version":"1.0.0","template_engine":{"version":"v1","syntax":"{{variable}}"},` + "\n" +
			`"prompts":{"p":{"id":"p","name":"P","version":"1.0.0","system_template":"Hi {{nme}}"}}}`, "a.json:2:77: warning"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, err := Parse(tt.file, []byte(tt.src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(diags) != 1 || !strings.HasPrefix(diags[0].String(), tt.want) {
				t.Errorf("diagnostics = %s\nwant prefix %s", diags, tt.want)
			}
		})
	}
}

func TestParseConcurrently(t *testing.T) {
	data, err := os.ReadFile("code-fix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := Parse("code-fix.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			p, _, err := Parse("code-fix.yaml", data)
			if err == nil && p.Hash != want.Hash {
				err = fmt.Errorf("hash %s != %s", p.Hash, want.Hash)
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
