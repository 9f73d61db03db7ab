package packs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseMockForms(t *testing.T) {
	wrapped := `mock:
  default: "OK."
  fail_when_exhausted: true
  rounds:
    - expect_state: verifying
      expect_user: ACC-1
      text: "Checking."
      tool_calls: [{ name: verify_account, args: { account_id: ACC-1, opts: { deep: true } } }]
    - error: "provider unavailable"
    - tool_calls: [{ name: workflow__transition }]
  tool_results:
    verify_account: { ok: true }
    get_balance: 42
`
	bare := strings.ReplaceAll(strings.TrimPrefix(wrapped, "mock:\n"), "\n  ", "\n")
	bare = strings.TrimPrefix(bare, "  ")
	for name, src := range map[string]string{"wrapped": wrapped, "bare": bare} {
		t.Run(name, func(t *testing.T) {
			m, diags, err := ParseMock("s.mock.yaml", []byte(src))
			if err != nil {
				t.Fatalf("ParseMock: %v\n%s", err, diags)
			}
			if m.Default != "OK." || !m.FailWhenExhausted || len(m.Rounds) != 3 {
				t.Fatalf("script = %+v", m)
			}
			r := m.Rounds[0]
			if r.ExpectState != "verifying" || r.ExpectUser != "ACC-1" || r.Text != "Checking." || r.Line() != 5-boolToInt(name == "bare") {
				t.Errorf("round 0 = %+v (line %d)", r, r.Line())
			}
			if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "verify_account" ||
				string(r.ToolCalls[0].Args) != `{"account_id":"ACC-1","opts":{"deep":true}}` {
				t.Errorf("tool calls = %+v", r.ToolCalls)
			}
			if m.Rounds[1].Error != "provider unavailable" {
				t.Errorf("round 1 error = %q", m.Rounds[1].Error)
			}
			if got := string(m.Rounds[2].ToolCalls[0].Args); got != "{}" {
				t.Errorf("absent args = %s, want {}", got)
			}
			want := map[string]json.RawMessage{"verify_account": json.RawMessage(`{"ok":true}`), "get_balance": json.RawMessage(`42`)}
			if !reflect.DeepEqual(m.ToolResults, want) {
				t.Errorf("tool results = %s", m.ToolResults)
			}
			if m.File() != "s.mock.yaml" {
				t.Errorf("File() = %q", m.File())
			}
		})
	}
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestMockScriptJSONRoundTrip(t *testing.T) {
	m, _, err := LoadMock("support.mock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back MockScript
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rounds) != len(m.Rounds) || back.Rounds[1].ToolCalls[0].Name != "verify_account" ||
		string(back.ToolResults["get_balance"]) != string(m.ToolResults["get_balance"]) || back.Default != m.Default {
		t.Errorf("round trip lost data: %s", raw)
	}
}

func TestParseMockErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"unknown top-level key", "rounds: []\nrepeat: true\n", []string{`m.yaml:2:1: error: unknown field "repeat"; allowed fields: default, fail_when_exhausted, rounds, tool_results`}},
		{"unknown key in wrapper", "mock:\n  rounds: []\nextra: 1\n", []string{`m.yaml:3:1: error: unknown field "extra"; allowed fields: mock`}},
		{"misspelt round key", "rounds:\n  - expect_sate: a\n    text: x\n", []string{`m.yaml:2:5: error: rounds[0]: unknown field "expect_sate" (did you mean "expect_state"?)`}},
		{"wrong types", "default: 3\nfail_when_exhausted: \"yes\"\nrounds: {}\n", []string{
			`m.yaml:1:10: error: default: must be a string (got number 3); quote it`,
			`m.yaml:2:22: error: fail_when_exhausted: must be true or false (got "yes")`,
			`m.yaml:3:9: error: rounds: must be a list of rounds (got an object)`,
		}},
		{"empty round", "rounds:\n  - expect_state: a\n", []string{`m.yaml:2:5: error: rounds[0]: round has no text, tool_calls or error`}},
		{"error with text", "rounds:\n  - { error: boom, text: hi }\n", []string{`m.yaml:2:5: error: rounds[0]: a round with error fails before answering`}},
		{"tool call shapes", "rounds:\n  - tool_calls:\n      - { args: { a: 1 } }\n      - { name: x, args: [1] }\n      - { name: y, arguments: {} }\n", []string{
			`m.yaml:3:9: error: rounds[0].tool_calls[0]: missing required field "name"`,
			`m.yaml:4:26: error: rounds[0].tool_calls[1].args: must be a mapping of argument name to value (got a list)`,
			`m.yaml:5:20: error: rounds[0].tool_calls[2]: unknown field "arguments"; allowed fields: name, args`,
		}},
		{"tool_calls not a list", "rounds:\n  - tool_calls: { name: x }\n", []string{
			`m.yaml:2:17: error: rounds[0].tool_calls: must be a list of {name, args} (got an object)`,
			`m.yaml:2:5: error: rounds[0]: round has no text, tool_calls or error`,
		}},
		{"syntax", "rounds: [\n", []string{`m.yaml:1:1: error: YAML syntax error: did not find expected node content`}},
		{"duplicate key", "default: a\ndefault: b\n", []string{`m.yaml:2:1: error: duplicate key "default" (first defined on line 1)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, diags, err := ParseMock("m.yaml", []byte(tt.src))
			if err == nil || m != nil {
				t.Fatalf("ParseMock accepted the script: %+v", m)
			}
			errs := diags.Errors()
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(tt.want), diags)
			}
			for _, w := range tt.want {
				if !strings.Contains(diags.String(), w) {
					t.Errorf("missing %q in\n%s", w, diags)
				}
			}
		})
	}
}

func TestParseMockWarnsOnEmptyScript(t *testing.T) {
	m, diags, err := ParseMock("m.yaml", []byte("rounds: []\n"))
	if err != nil || m == nil {
		t.Fatalf("ParseMock: %v", err)
	}
	if len(diags) != 1 || diags[0].Severity != SeverityWarning || !strings.Contains(diags[0].Message, "no rounds and no default") {
		t.Errorf("diagnostics = %s", diags)
	}
}

func TestCheckMock(t *testing.T) {
	p, _, err := Load("support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := `rounds:
  - expect_state: verifyng
    text: hi
  - expect_state: verifying
    tool_calls:
      - { name: verify_acount, args: {} }
      - { name: get_balance, args: {} }
      - { name: workflow__transition, args: { event: Escalate } }
  - expect_state: resolution
    tool_calls:
      - { name: workflow__transition, args: { event: Done } }
      - { name: workflow__set_artifact, args: { name: x, value: y } }
  - tool_calls: [{ name: create_handoff_ticket, args: {} }]
tool_results:
  verify_account: {}
  teleport: {}
`
	m, diags, err := ParseMock("s.mock.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseMock: %v\n%s", err, diags)
	}
	got := CheckMock(p, m)
	want := []string{
		`s.mock.yaml:2:5: error: rounds[0].expect_state: expects state "verifyng", which pack "support" does not have (did you mean "verifying"?)`,
		`s.mock.yaml:6:9: error: rounds[1].tool_calls[0].name: calls tool "verify_acount", which pack "support" does not declare (did you mean "verify_account"?)`,
		`s.mock.yaml:7:9: warning: rounds[1].tool_calls[1]: state "verifying" (prompt "verifying") does not offer tool "get_balance"; the call will get an error result`,
		`s.mock.yaml:7:9: warning: rounds[1].tool_calls[1]: tool_results has no entry for "get_balance", so a mock tool executor has no result to return`,
		`s.mock.yaml:8:9: warning: rounds[1].tool_calls[2]: event "Escalate" is not an event of state "verifying" (events: AccountVerified); the call will get an error result`,
		`s.mock.yaml:11:9: warning: rounds[2].tool_calls[0]: state "resolution" does not offer workflow__transition (it is terminal or external); the call will get an error result`,
		`s.mock.yaml:12:9: error: rounds[2].tool_calls[1]: calls workflow__set_artifact, but no state of pack "support" declares artifacts`,
		`s.mock.yaml:13:18: warning: rounds[3].tool_calls[0]: tool_results has no entry for "create_handoff_ticket", so a mock tool executor has no result to return`,
		`s.mock.yaml:16:3: warning: tool_results.teleport: result for tool "teleport", which pack "support" does not declare`,
	}
	if got.String() != strings.Join(want, "\n") {
		t.Errorf("CheckMock\n got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func TestExampleMocksFollowTheirWorkflows(t *testing.T) {
	// The worked example of promptpack-workflow.md §14 is rounds 2-6 of the support script.
	m, _, err := LoadMock("support.mock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, r := range m.Rounds {
		states = append(states, r.ExpectState)
	}
	if want := []string{"verifying", "verifying", "verifying", "triage", "resolution", "resolution"}; !reflect.DeepEqual(states, want) {
		t.Errorf("support script states = %v, want %v", states, want)
	}
	if m.Rounds[0].Text == "" || len(m.Rounds[0].ToolCalls) != 0 {
		t.Error("support script must open with a plain text round")
	}
	if m.Rounds[4].ToolCalls[0].Name != "get_balance" || m.Rounds[5].Text != "Your balance is $42.00." {
		t.Error("support script no longer ends with the worked example's get_balance and reply")
	}

	// code-fix: fix runs twice, the tests then pass, and the run ends in done.
	cf, _, err := LoadMock("code-fix.mock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	visits := map[string]int{}
	prev := ""
	var events []string
	for _, r := range cf.Rounds {
		if r.ExpectState != prev {
			visits[r.ExpectState]++
			prev = r.ExpectState
		}
		for _, tc := range r.ToolCalls {
			if tc.Name == TransitionToolName {
				var a struct{ Event string }
				_ = json.Unmarshal(tc.Args, &a)
				events = append(events, a.Event)
			}
		}
	}
	if visits["fix"] != 2 || visits["done"] != 1 || visits["give_up"] != 0 {
		t.Errorf("code-fix visits = %v, want fix 2, done 1", visits)
	}
	if events[len(events)-1] != "TestsPassed" {
		t.Errorf("code-fix last event = %s, want TestsPassed", events[len(events)-1])
	}

	// refund: the last intake round transitions into the external state; the approved
	// refund then runs one issue_refund round and one text round.
	rf, _, err := LoadMock("refund.mock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := len(rf.Rounds)
	if rf.Rounds[n-3].ToolCalls[0].Name != TransitionToolName || rf.Rounds[n-2].ToolCalls[0].Name != "issue_refund" ||
		rf.Rounds[n-2].ExpectState != "refunded" || rf.Rounds[n-1].Text == "" || len(rf.Rounds[n-1].ToolCalls) != 0 {
		t.Errorf("refund script does not end with transition, issue_refund, text")
	}
}
