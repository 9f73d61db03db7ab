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
			if r.ExpectState != "verifying" || !reflect.DeepEqual(r.ExpectUser, []string{"ACC-1"}) || r.Text != "Checking." || r.Line() != 5-boolToInt(name == "bare") {
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
	again, err := json.Marshal(&back)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(raw) || len(back.Rounds[1].OneOf) == 0 || back.Default != m.Default {
		t.Errorf("round trip lost data:\n%s\n%s", raw, again)
	}
}

func TestParseMockErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"unknown top-level key", "rounds: []\nrepeat: true\n", []string{`m.yaml:2:1: error: unknown field "repeat"; allowed fields: default, fail_when_exhausted, rounds, strict, tool_results`}},
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

// play answers rounds one after another, as the mock provider does for a run.
func play(m *MockScript, rounds ...MockSeen) []MockAnswer {
	var c MockCursor
	out := make([]MockAnswer, len(rounds))
	for i, r := range rounds {
		out[i], c = m.Next(c, r)
	}
	return out
}

func seen(state, user string) MockSeen { return MockSeen{State: state, User: user, HasUser: true} }

// answered renders each answer as "text" / tool names / "off script" / "exhausted".
func answered(ans []MockAnswer) []string {
	var out []string
	for _, a := range ans {
		switch {
		case a.Exhausted:
			out = append(out, "exhausted")
		case a.Round == nil:
			out = append(out, "off script")
		case len(a.Round.ToolCalls) > 0:
			var names []string
			for _, c := range a.Round.ToolCalls {
				names = append(names, c.Name)
			}
			out = append(out, strings.Join(names, "+"))
		default:
			out = append(out, "text")
		}
	}
	return out
}

func TestMockPlay(t *testing.T) {
	src := `rounds:
  - expect_state: a
    text: hello
  - one_of:
      - expect_user: [Yes, sure]
        rounds:
          - text: going
          - expect_state: b
            tool_calls: [{ name: t1 }]
      - expect_user: help
        stay: true
        text: helping
  - expect_state: c
    text: done
`
	m, diags, err := ParseMock("m.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseMock: %v\n%s", err, diags)
	}
	tests := []struct {
		name   string
		rounds []MockSeen
		want   []string
	}{
		{"straight", []MockSeen{seen("a", "hi"), seen("a", "yes please"), seen("b", "yes please"), seen("c", "x"), seen("c", "x")},
			[]string{"text", "text", "t1", "text", "exhausted"}},
		{"case-insensitive, any of", []MockSeen{seen("a", "hi"), seen("a", "SURE")}, []string{"text", "text"}},
		{"detour stays at the branch point", []MockSeen{seen("a", "hi"), seen("a", "help!"), seen("a", "help again"), seen("a", "yes"), seen("b", "yes")},
			[]string{"text", "text", "text", "text", "t1"}},
		{"off script waits", []MockSeen{seen("x", "hi"), seen("a", "hi"), seen("a", "what?"), seen("a", "yes")},
			[]string{"off script", "text", "off script", "text"}},
		{"wrong state inside an alternative", []MockSeen{seen("a", "hi"), seen("a", "yes"), seen("z", "yes"), seen("b", "yes")},
			[]string{"text", "text", "off script", "t1"}},
		{"no user message", []MockSeen{seen("a", ""), {State: "a"}}, []string{"text", "off script"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := answered(play(m, tt.rounds...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("answers = %v, want %v", got, tt.want)
			}
			// Play of the same rounds answers the last one alike (the provider's path).
			if last := answered([]MockAnswer{m.Play(tt.rounds)}); last[0] != tt.want[len(tt.want)-1] {
				t.Errorf("Play = %v, want %v", last, tt.want[len(tt.want)-1])
			}
		})
	}

	ans := play(m, seen("a", "hi"), seen("a", "what?"))[1]
	if ans.Line != 4 || !strings.Contains(ans.OffScript, `none of the 2 alternatives matches state "a" and the latest user message "what?"`) ||
		ans.Expected != `one of: a message containing "Yes" or "sure"; a message containing "help"` {
		t.Errorf("off-script answer = %+v", ans)
	}
	ans = play(m, seen("x", "hi"))[0]
	if ans.OffScript != `expected state "a" but the round runs in state "x"` || ans.Expected != `a round in state "a"` || ans.Line != 2 {
		t.Errorf("off-script answer = %+v", ans)
	}
}

func TestParseMockBranchErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"one_of with text", "rounds:\n  - one_of: [{ text: a }]\n    text: b\n", []string{`m.yaml:3:5: error: rounds[0]: a one_of step holds only alternatives; move "text" into them`}},
		{"empty one_of", "rounds:\n  - one_of: []\n", []string{`m.yaml:2:13: error: rounds[0].one_of: must be a non-empty list of alternatives`}},
		{"rounds and text", "rounds:\n  - one_of:\n      - { text: a, rounds: [{ text: b }] }\n", []string{`m.yaml:3:9: error: rounds[0].one_of[0]: an alternative has either rounds or the text`}},
		{"empty alternative", "rounds:\n  - one_of:\n      - { expect_user: a }\n", []string{`m.yaml:3:9: error: rounds[0].one_of[0]: alternative has no rounds, text, tool_calls or error`}},
		{"bad expect_user", "rounds:\n  - { expect_user: [a, 3, \"\"], text: x }\n", []string{
			`m.yaml:2:24: error: rounds[0].expect_user: must be a string (got number 3); quote it`,
			`m.yaml:2:27: error: rounds[0].expect_user: must not be empty`,
		}},
		{"bad stay", "rounds:\n  - one_of:\n      - { stay: 1, text: a }\n", []string{`m.yaml:3:17: error: rounds[0].one_of[0].stay: must be true or false`}},
		{"bad strict", "strict: yes please\n", []string{`m.yaml:1:9: error: strict: must be true or false`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, diags, err := ParseMock("m.yaml", []byte(tt.src))
			if err == nil || m != nil {
				t.Fatalf("ParseMock accepted the script: %+v", m)
			}
			if errs := diags.Errors(); len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(tt.want), diags)
			}
			for _, w := range tt.want {
				if !strings.Contains(diags.String(), w) {
					t.Errorf("missing %q in\n%s", w, diags)
				}
			}
		})
	}

	// An alternative after a catch-all can never be played.
	_, diags, err := ParseMock("m.yaml", []byte("rounds:\n  - one_of:\n      - { text: a }\n      - { expect_user: b, text: c }\n"))
	if err != nil || !strings.Contains(diags.String(), "m.yaml:4:9: warning: rounds[0].one_of[1]: unreachable") {
		t.Errorf("diagnostics = %s (%v)", diags, err)
	}
}

func TestExampleMocksFollowTheirWorkflows(t *testing.T) {
	load := func(name string) *MockScript {
		t.Helper()
		m, diags, err := LoadMock(name)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, diags)
		}
		return m
	}
	// The worked example of promptpack-workflow.md §14 is rounds 2-6 of the support
	// script's straight path; the branches make a five-turn conversation.
	support := load("support.mock.yaml")
	balance := "It's ACC-12345. What's my balance?"
	got := answered(play(support, seen("verifying", "Hi"), seen("verifying", balance), seen("verifying", balance),
		seen("triage", balance), seen("resolution", balance), seen("resolution", balance)))
	want := []string{"text", "verify_account", "workflow__transition", "workflow__transition", "get_balance", "text"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("support straight path = %v, want %v", got, want)
	}
	fraud := "I see a card payment I don't recognise."
	got = answered(play(support, seen("verifying", "Hi, I have a question about my account."),
		seen("verifying", "I don't remember my account number, can you look me up by name?"),
		seen("verifying", "Found it: ACC-12345."), seen("verifying", "Found it: ACC-12345."),
		seen("verifying", "What can you do?"),
		seen("verifying", fraud), seen("triage", fraud), seen("handoff", fraud), seen("handoff", fraud)))
	want = []string{"text", "text", "verify_account", "text", "text", "workflow__transition", "workflow__transition", "create_handoff_ticket", "text"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("support five turns = %v, want %v", got, want)
	}

	// refund: filed, asked about while it waits, then approved.
	refund := load("refund.mock.yaml")
	approved := "[Event Approved from outside the conversation] Approved 89.90 USD, ref APR-7731"
	ans := play(refund, seen("intake", "Hi, I'd like a refund, my jacket arrived torn."),
		seen("intake", "I don't have the order number with me."),
		seen("intake", "Found it: ORD-1042."), seen("intake", "Found it: ORD-1042."),
		seen("awaiting_approval", "Any news on my refund?"),
		seen("awaiting_approval", "How long does the review take?"),
		seen("refunded", approved), seen("refunded", approved), seen("refunded", "thanks"))
	got = answered(ans)
	want = []string{"text", "text", "lookup_order", "workflow__transition", "text", "text", "issue_refund", "text", "exhausted"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("refund path = %v, want %v", got, want)
	}
	if !strings.Contains(ans[4].Round.Text, "no decision yet") || !strings.HasPrefix(ans[7].Round.Text, "Good news") {
		t.Errorf("refund answers: %q / %q", ans[4].Round.Text, ans[7].Round.Text)
	}

	// code-fix: nothing happens before the go-ahead.
	cf := load("code-fix.mock.yaml")
	got = answered(play(cf, seen("compile", "The build is red"), seen("compile", "What will you do?"), seen("compile", "Yes, go ahead.")))
	if want := []string{"text", "text", "run_build"}; !reflect.DeepEqual(got, want) {
		t.Errorf("code-fix go-ahead = %v, want %v", got, want)
	}
}

// TestCheckMockBranches: alternatives are checked like rounds; an alternative's
// expect_state is the state of its first round.
func TestCheckMockBranches(t *testing.T) {
	p, _, err := Load("support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := `rounds:
  - one_of:
      - expect_state: triage
        tool_calls: [{ name: get_balance, args: {} }]
      - expect_state: resolutoin
        text: hi
      - rounds:
          - expect_state: verifying
            tool_calls: [{ name: verify_acount, args: {} }]
tool_results:
  get_balance: {}
`
	m, diags, err := ParseMock("s.mock.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseMock: %v\n%s", err, diags)
	}
	want := []string{
		`s.mock.yaml:4:22: warning: rounds[0].one_of[0].rounds[0].tool_calls[0]: state "triage" (prompt "triage") does not offer tool "get_balance"; the call will get an error result`,
		`s.mock.yaml:5:9: error: rounds[0].one_of[1].expect_state: expects state "resolutoin", which pack "support" does not have (did you mean "resolution"?)`,
		`s.mock.yaml:9:26: error: rounds[0].one_of[2].rounds[0].tool_calls[0].name: calls tool "verify_acount", which pack "support" does not declare (did you mean "verify_account"?)`,
	}
	if got := CheckMock(p, m); got.String() != strings.Join(want, "\n") {
		t.Errorf("CheckMock\n got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}
