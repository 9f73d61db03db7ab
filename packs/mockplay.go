package packs

import (
	"fmt"
	"slices"
	"strings"
)

// MockSeen is what a mock script sees of one model round: the workflow state the round
// runs in, and the latest user message and tool result of the transcript.
type MockSeen struct {
	State   string
	User    string
	HasUser bool // false when the transcript has no user message yet
	// ToolResult is the content of the latest tool result (HasToolResult false when the
	// transcript has none).
	ToolResult    string
	HasToolResult bool
}

// MockCursor is a position in a mock script. The zero value is the start; Next returns
// the cursor of the following round. A cursor is a value: Next never changes the one it
// is given.
type MockCursor struct {
	// path indexes into the nested steps: [step] at the top level, then [alternative,
	// step] for each alternative entered.
	path []int
}

// MockAnswer is a script's answer to one round.
type MockAnswer struct {
	// Round is the scripted round that answers, nil when the round is off script or the
	// script is exhausted.
	Round *MockRound
	// Exhausted: the script has no step left.
	Exhausted bool
	// OffScript says why the expected step does not match ("" when it matches), and
	// Expected what it expects, e.g. `a message containing "ACC-12345"`. Line is the
	// step's source line (0 when unknown).
	OffScript string
	Expected  string
	Line      int
}

// Play answers the last of rounds, the model rounds of one run in order, after playing
// the earlier ones: the answer of a round depends only on the rounds before it, so the
// same transcript always gets the same answer.
func (m *MockScript) Play(rounds []MockSeen) MockAnswer {
	var c MockCursor
	var ans MockAnswer
	for _, r := range rounds {
		ans, c = m.Next(c, r)
	}
	return ans
}

// Next answers one round at cursor c and returns the cursor of the next round. A round
// that matches moves the cursor past it; a round off script, and a round past the end,
// leave the cursor where it is, so the script waits for the message it expects.
func (m *MockScript) Next(c MockCursor, seen MockSeen) (MockAnswer, MockCursor) {
	path := slices.Clone(c.path)
	if len(path) == 0 {
		path = []int{0}
	}
	steps := m.stepsAt(path)
	i := path[len(path)-1]
	if i >= len(steps) {
		return MockAnswer{Exhausted: true}, c
	}
	r, sub, miss := enterStep(&steps[i], seen)
	if r == nil {
		return MockAnswer{OffScript: miss, Expected: describeStep(&steps[i]), Line: steps[i].line}, c
	}
	path = append(path, sub...)
	path[len(path)-1]++
	return MockAnswer{Round: r, Line: r.line}, MockCursor{path: m.normalize(path)}
}

// stepsAt returns the list of steps the last index of path points into.
func (m *MockScript) stepsAt(path []int) []MockRound {
	steps := m.Rounds
	for d := 0; d+2 < len(path); d += 2 {
		steps = steps[path[d]].OneOf[path[d+1]].Rounds
	}
	return steps
}

// normalize leaves the alternatives whose rounds are all played: back to the branch
// point when the alternative stays, else to the step after it.
func (m *MockScript) normalize(path []int) []int {
	for len(path) > 1 && path[len(path)-1] >= len(m.stepsAt(path)) {
		parent := path[:len(path)-2]
		b := m.stepsAt(parent)[parent[len(parent)-1]].OneOf[path[len(path)-2]]
		path = parent
		if !b.Stay {
			path[len(path)-1]++
		}
	}
	return path
}

// enterStep matches a step against a round. It returns the round that answers and the
// path of alternatives entered to reach it ([alternative, 0] per level), or nil and why
// the step does not match.
func enterStep(s *MockRound, seen MockSeen) (*MockRound, []int, string) {
	if len(s.OneOf) == 0 {
		if why := unmet(s.ExpectState, s.ExpectUser, seen); why != "" {
			return nil, nil, why
		}
		if why := unmetToolResult(s.ExpectToolResult, seen); why != "" {
			return nil, nil, why
		}
		return s, nil, ""
	}
	for ai := range s.OneOf {
		b := &s.OneOf[ai]
		if unmet(b.ExpectState, b.ExpectUser, seen) != "" || len(b.Rounds) == 0 {
			continue
		}
		if r, sub, _ := enterStep(&b.Rounds[0], seen); r != nil {
			return r, append([]int{ai, 0}, sub...), ""
		}
	}
	return nil, nil, fmt.Sprintf("none of the %d alternatives matches state %q and %s", len(s.OneOf), seen.State, describeUser(seen))
}

// unmet says why a round does not meet expectations, or "" when it does.
func unmet(state string, user []string, seen MockSeen) string {
	if state != "" && state != seen.State {
		return fmt.Sprintf("expected state %q but the round runs in state %q", state, seen.State)
	}
	if len(user) == 0 {
		return ""
	}
	if !seen.HasUser {
		return fmt.Sprintf("expected a user message containing %s but the transcript has no user message", quoteAny(user))
	}
	lower := strings.ToLower(seen.User)
	for _, u := range user {
		if strings.Contains(lower, strings.ToLower(u)) {
			return ""
		}
	}
	return fmt.Sprintf("expected the latest user message to contain %s but it is %q", quoteAny(user), truncateText(seen.User, 200))
}

// unmetToolResult says why the latest tool result does not contain want, or "" when it
// does (or nothing is expected).
func unmetToolResult(want string, seen MockSeen) string {
	switch {
	case want == "":
		return ""
	case !seen.HasToolResult:
		return fmt.Sprintf("expected a tool result containing %q but the transcript has no tool result", want)
	case !strings.Contains(seen.ToolResult, want):
		return fmt.Sprintf("expected the latest tool result to contain %q but it is %q", want, truncateText(seen.ToolResult, 300))
	}
	return ""
}

// describeStep says what a step expects, for off-script notes and errors.
func describeStep(s *MockRound) string {
	if len(s.OneOf) == 0 {
		d := describeExpect(s.ExpectState, s.ExpectUser)
		if s.ExpectToolResult != "" {
			d += fmt.Sprintf(" after a tool result containing %q", s.ExpectToolResult)
		}
		return d
	}
	var parts []string
	for _, b := range s.OneOf {
		d := describeExpect(b.ExpectState, b.ExpectUser)
		if len(b.Rounds) > 0 && b.ExpectState == "" && len(b.ExpectUser) == 0 {
			d = describeStep(&b.Rounds[0])
		}
		if !slices.Contains(parts, d) {
			parts = append(parts, d)
		}
	}
	return "one of: " + strings.Join(parts, "; ")
}

func describeExpect(state string, user []string) string {
	switch {
	case state != "" && len(user) > 0:
		return fmt.Sprintf("a message containing %s in state %q", quoteAny(user), state)
	case state != "":
		return fmt.Sprintf("a round in state %q", state)
	case len(user) > 0:
		return "a message containing " + quoteAny(user)
	}
	return "any message"
}

func describeUser(seen MockSeen) string {
	if !seen.HasUser {
		return "no user message"
	}
	return fmt.Sprintf("the latest user message %q", truncateText(seen.User, 200))
}

// quoteAny renders `"a"`, or `"a" or "b"`, or `one of "a", "b", "c"`.
func quoteAny(texts []string) string {
	q := make([]string, len(texts))
	for i, t := range texts {
		q[i] = fmt.Sprintf("%q", t)
	}
	switch len(q) {
	case 1:
		return q[0]
	case 2:
		return q[0] + " or " + q[1]
	}
	return "one of " + strings.Join(q, ", ")
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
