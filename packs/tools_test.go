package packs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestToolEffect(t *testing.T) {
	cases := map[string]string{
		`{"effect":"read","reversibility":"reversible"}`: EffectRead,
		`{"effect":"external"}`:                          EffectExternal,
		`{"reversibility":"irreversible"}`:               "",
		``:                                               "",
	}
	for scope, want := range cases {
		if got := (&Tool{ActionScope: json.RawMessage(scope)}).Effect(); got != want {
			t.Errorf("Effect of action_scope %s = %q, want %q", scope, got, want)
		}
	}
	var none *Tool
	if none.Effect() != "" {
		t.Error("a tool the pack does not declare has no effect")
	}
}

func TestMockExpectToolResultParses(t *testing.T) {
	m, diags, err := ParseMock("x.mock.yaml", []byte("rounds:\n  - expect_tool_result: shipped\n    text: ok\n"))
	if err != nil {
		t.Fatalf("%v\n%s", err, diags)
	}
	if got := m.Rounds[0].ExpectToolResult; got != "shipped" {
		t.Errorf("ExpectToolResult = %q", got)
	}
	_, diags, err = ParseMock("x.mock.yaml", []byte("rounds:\n  - expect_tool_result: [a]\n    text: ok\n"))
	if err == nil || diags.String() != "x.mock.yaml:2:25: error: rounds[0].expect_tool_result: must be a string (got a list); quote it" {
		t.Errorf("a list is refused with its position, got %v\n%s", err, diags)
	}
}

func TestLoadDirSkipsTheBindingsFile(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"support.yaml", "support.mock.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte("tools:\n  get_balance:\n    http: { url: http://x/ }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, diags, err := LoadDir(dir)
	if err != nil || len(loaded) != 1 || len(diags) != 0 {
		t.Errorf("LoadDir = %d packs, %v\n%s", len(loaded), err, diags)
	}
	code, out, _ := runValidate(filepath.Join(dir, "support.yaml"), filepath.Join(dir, "tools.yaml"))
	if code != 0 || out != "1 pack checked: 0 errors, 0 warnings\n" {
		t.Errorf("validate with tools.yaml among the paths: exit %d, %q", code, out)
	}
}
