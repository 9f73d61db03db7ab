package packs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runValidate(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := ValidateCommand(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateCommandExamplesClean(t *testing.T) {
	// As a user would run it: `wop pack validate packs/*.yaml` passes mock scripts too.
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("glob: %v %v", files, err)
	}
	code, out, stderr := runValidate(files...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if out != "4 packs checked: 0 errors, 0 warnings\n" {
		t.Errorf("output = %q", out)
	}
	code, out, _ = runValidate(".")
	if code != 0 || out != "4 packs checked: 0 errors, 0 warnings\n" {
		t.Errorf("folder: exit %d, output %q", code, out)
	}
}

// brokenSupportCopy writes support.yaml with triage's control set to "banana" into a temp
// folder (with its mock script) and returns the path and the 1-based line of the change.
func brokenSupportCopy(t *testing.T) (string, int) {
	t.Helper()
	data, err := os.ReadFile("support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	line := 0
	for i, l := range lines {
		if l == "      control: agent" {
			lines[i] = "      control: banana"
			line = i + 1
		}
	}
	if line == 0 {
		t.Fatal("support.yaml has no triage control line")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "support.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	mock, err := os.ReadFile("support.mock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "support.mock.yaml"), mock, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, line
}

func TestValidateCommandBrokenCopy(t *testing.T) {
	path, line := brokenSupportCopy(t)
	code, out, _ := runValidate(path)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := fmt.Sprintf("%s:%d:16: error: workflow.states.triage.control: must be one of \"user\", \"agent\" (got \"banana\")\n1 pack checked: 1 error, 0 warnings\n", path, line)
	if out != want {
		t.Errorf("output\n got %q\nwant %q", out, want)
	}

	// --json prints only the array, with the same position.
	code, out, _ = runValidate(path, "--json")
	if code != 1 {
		t.Errorf("--json exit %d, want 1", code)
	}
	var diags []Diagnostic
	if err := json.Unmarshal([]byte(out), &diags); err != nil {
		t.Fatalf("--json output is not a JSON array: %v\n%s", err, out)
	}
	if len(diags) != 1 || diags[0].File != path || diags[0].Line != line || diags[0].Col != 16 ||
		diags[0].Severity != "error" || diags[0].Path != "workflow.states.triage.control" {
		t.Errorf("--json diagnostics = %+v", diags)
	}
}

func TestValidateCommandMockAndWarnings(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"p.yaml":      minimalPack("p") + "workflow:\n  version: 1\n  entry: s\n  states:\n    s: { prompt_task: p, control: agent, on_event: { next: s, Done: e } }\n    e: { prompt_task: p, terminal: true }\n",
		"p.mock.yaml": "rounds:\n  - expect_state: t\n    text: hi\n",
	})
	// Naming only the mock script validates its pack too.
	code, out, _ := runValidate(filepath.Join(dir, "p.mock.yaml"))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{
		filepath.Join(dir, "p.mock.yaml") + `:2:5: error: rounds[0].expect_state: expects state "t", which pack "p" does not have`,
		filepath.Join(dir, "p.yaml") + `:11:54: warning: workflow.states.s.on_event.next: event name "next" is not PascalCase`,
		filepath.Join(dir, "p.yaml") + `:11:5: warning: workflow.states.s: state "s" can hand over to itself within one turn`,
		"1 pack checked: 1 error, 2 warnings\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Warnings alone exit 0.
	writeFiles(t, dir, map[string]string{"p.mock.yaml": "rounds:\n  - expect_state: s\n    text: hi\n"})
	if code, out, _ := runValidate(filepath.Join(dir, "p.yaml"), filepath.Join(dir, "p.mock.yaml")); code != 0 || !strings.HasSuffix(out, "1 pack checked: 0 errors, 2 warnings\n") {
		t.Errorf("warnings only: exit %d\n%s", code, out)
	}
}

func TestValidateCommandUsage(t *testing.T) {
	if code, _, stderr := runValidate(); code != 2 || !strings.Contains(stderr, "usage: wop pack validate") {
		t.Errorf("no args: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runValidate("x.yaml", "--bogus"); code != 2 || !strings.Contains(stderr, "unknown flag --bogus") {
		t.Errorf("unknown flag: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runValidate("-h"); code != 0 || !strings.Contains(stderr, "--json") {
		t.Errorf("-h: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runValidate(filepath.Join(t.TempDir(), "missing.yaml")); code != 2 || !strings.Contains(stderr, "no such file or folder") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": minimalPack("same"), "b.yaml": minimalPack("same")})
	code, out, _ := runValidate(filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), dir)
	if code != 1 || !strings.Contains(out, `error: id: duplicate pack id "same"`) || !strings.HasSuffix(out, "2 packs checked: 1 error, 0 warnings\n") {
		t.Errorf("duplicates: exit %d\n%s", code, out)
	}
}
