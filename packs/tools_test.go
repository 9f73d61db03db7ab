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

// TestMockToolResultAlternativesBranch: alternatives told apart by the tool result
// their first round expects are branches, not a catch-all hiding the ones after it,
// and the first whose tool result matches is played.
func TestMockToolResultAlternativesBranch(t *testing.T) {
	src := `rounds:
  - one_of:
      - rounds:
          - expect_tool_result: '"status":"rejected"'
            text: not paid
      - rounds:
          - expect_tool_result: '"error"'
            text: failed
      - text: paid
`
	m, diags, err := ParseMock("x.mock.yaml", []byte(src))
	if err != nil || len(diags) != 0 {
		t.Fatalf("ParseMock: %v %v", err, diags)
	}
	for result, want := range map[string]string{
		`{"error":"issue_refund was not run","status":"rejected"}`: "not paid",
		`{"error":"tool issue_refund failed: HTTP 500"}`:           "failed",
		`{"status":"issued"}`: "paid",
	} {
		ans := m.Play([]MockSeen{{State: "refunded", ToolResult: result, HasToolResult: true}})
		if ans.Round == nil || ans.Round.Text != want {
			t.Errorf("tool result %s: answered %+v, want %q", result, ans, want)
		}
	}
	one := &MockRound{ExpectState: "refunded", ExpectToolResult: "shipped"}
	if got := describeStep(one); got != `a round in state "refunded" after a tool result containing "shipped"` {
		t.Errorf("describeStep = %q", got)
	}
}
