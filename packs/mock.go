package packs

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// MockScript is a scripted model conversation for one pack (file <pack>.mock.yaml beside the
// pack). Rounds is a list of steps played in order, one per model round: a step is a round
// (text and tool calls, with optional expectations) or a branch point (OneOf) whose first
// matching alternative plays its own rounds. Next and Play walk the script; see docs/packs.md.
//
// A round whose expectations do not hold is off script. A strict script (Strict, or a
// strict mock provider) fails such a round; otherwise the mock answers Default (or a note
// of what the script expected) and the script stays where it is, waiting for the message
// it expects. Past the last step the mock answers Default, or fails if FailWhenExhausted.
type MockScript struct {
	Default           string      `json:"default,omitempty"`
	FailWhenExhausted bool        `json:"fail_when_exhausted,omitempty"`
	Strict            bool        `json:"strict,omitempty"`
	Rounds            []MockRound `json:"rounds,omitempty"`
	// ToolResults maps a tool name to the JSON value every call of that tool returns when
	// the mock also stands in for the tool executor.
	ToolResults map[string]json.RawMessage `json:"tool_results,omitempty"`

	file      string
	resultPos map[string][2]int
}

// MockRound is one step of a script: a scripted model round, or, when OneOf is set, a
// branch point that holds alternatives instead of an answer.
type MockRound struct {
	// ExpectState, when set, is the workflow state the round must run in.
	ExpectState string `json:"expect_state,omitempty"`
	// ExpectUser, when set, lists text of which the latest user message must contain one
	// (a case-insensitive substring match).
	ExpectUser []string `json:"expect_user,omitempty"`
	// ExpectToolResult, when set, is a substring the latest tool result of the transcript
	// must contain: a check that a real tool's answer reached the model.
	ExpectToolResult string         `json:"expect_tool_result,omitempty"`
	Text             string         `json:"text,omitempty"`
	ToolCalls        []MockToolCall `json:"tool_calls,omitempty"`
	// Error, when set, makes this round fail permanently with this message (to test
	// provider failures).
	Error string `json:"error,omitempty"`
	// OneOf makes the step a branch point: the first alternative whose expectations hold
	// (and whose first step matches) is played.
	OneOf []MockBranch `json:"one_of,omitempty"`

	line, col int
}

// MockBranch is one alternative of a branch point.
type MockBranch struct {
	ExpectState string   `json:"expect_state,omitempty"`
	ExpectUser  []string `json:"expect_user,omitempty"`
	// Stay returns the script to the branch point once the alternative's rounds are
	// played (a detour); otherwise the script goes on after the branch point.
	Stay   bool        `json:"stay,omitempty"`
	Rounds []MockRound `json:"rounds"`

	line, col int
}

// MockToolCall is one scripted tool call. Args is a JSON object ({} when absent).
type MockToolCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`

	line, col int
}

// Line returns the 1-based source line of the round in its mock file (0 if unknown).
func (r MockRound) Line() int { return r.line }

// Line returns the 1-based source line of the alternative in its mock file (0 if unknown).
func (b MockBranch) Line() int { return b.line }

// File returns the path the script was loaded from ("" when built in code).
func (m *MockScript) File() string { return m.file }

// LoadMock reads and parses a mock script file.
func LoadMock(path string) (*MockScript, Diagnostics, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read mock script: %w", err)
	}
	return ParseMock(path, data)
}

// ParseMock parses a mock script strictly: unknown keys, wrong types and empty rounds are
// errors with file:line:col. The top level may be wrapped in a "mock:" key.
func ParseMock(filename string, data []byte) (*MockScript, Diagnostics, error) {
	root, err := parseTree(filename, data)
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			diags := Diagnostics{{File: filename, Line: pe.line, Col: pe.col, Severity: SeverityError, Message: pe.msg}}
			return nil, diags, &DiagnosticsError{File: filename, Diags: diags}
		}
		return nil, nil, fmt.Errorf("%s: %w", filename, err)
	}
	d := &mockDecoder{file: filename}
	m := d.script(root)
	d.diags.Sort()
	if d.diags.HasErrors() {
		return nil, d.diags, &DiagnosticsError{File: filename, Diags: d.diags}
	}
	m.file = filename
	return m, d.diags, nil
}

type mockDecoder struct {
	file  string
	diags Diagnostics
}

func (d *mockDecoder) add(sev string, line, col int, path, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: line, Col: col, Severity: sev, Path: path, Message: fmt.Sprintf(format, args...)})
}

// object checks that n is an object whose keys are all allowed, reporting the others.
func (d *mockDecoder) object(n *node, path string, allowed ...string) bool {
	if n.kind != kindObject {
		d.add(SeverityError, n.line, n.col, path, "must be a mapping (got %s)", describeValue(n))
		return false
	}
	for _, f := range n.fields {
		if !containsString(allowed, f.key) {
			msg := fmt.Sprintf("unknown field %q", f.key)
			if s := suggest(f.key, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += "; allowed fields: " + strings.Join(allowed, ", ")
			}
			d.add(SeverityError, f.line, f.col, path, "%s", msg)
		}
	}
	return true
}

func (d *mockDecoder) str(n *node, path string) string {
	if n == nil {
		return ""
	}
	if n.kind != kindString {
		d.add(SeverityError, n.line, n.col, path, "must be a string (got %s); quote it", describeValue(n))
		return ""
	}
	return n.str
}

func join(path, key string) string {
	var b strings.Builder
	b.WriteString(path)
	appendKey(&b, key)
	return b.String()
}

func (d *mockDecoder) script(root *node) *MockScript {
	m := &MockScript{}
	top := root
	if root.kind == kindObject && len(root.fields) >= 1 && root.get("mock") != nil {
		if !d.object(root, "", "mock") {
			return m
		}
		top = root.get("mock")
	}
	if !d.object(top, "", "default", "fail_when_exhausted", "rounds", "strict", "tool_results") {
		return m
	}
	m.Default = d.str(top.get("default"), "default")
	m.FailWhenExhausted = d.boolean(top.get("fail_when_exhausted"), "fail_when_exhausted")
	m.Strict = d.boolean(top.get("strict"), "strict")
	if n := top.get("rounds"); n != nil {
		m.Rounds = d.steps(n, "rounds")
	}
	if n := top.get("tool_results"); n != nil {
		if n.kind != kindObject {
			d.add(SeverityError, n.line, n.col, "tool_results", "must be a mapping of tool name to result (got %s)", describeValue(n))
		} else {
			m.ToolResults = map[string]json.RawMessage{}
			for _, f := range n.fields {
				raw, err := f.val.canonicalJSON()
				if err != nil {
					d.add(SeverityError, f.val.line, f.val.col, join("tool_results", f.key), "cannot encode result: %v", err)
					continue
				}
				m.ToolResults[f.key] = raw
				if m.resultPos == nil {
					m.resultPos = map[string][2]int{}
				}
				m.resultPos[f.key] = [2]int{f.line, f.col}
			}
		}
	}
	if len(m.Rounds) == 0 && m.Default == "" && !m.FailWhenExhausted {
		d.add(SeverityWarning, top.line, top.col, "", "the script has no rounds and no default; every model round will answer with an empty reply")
	}
	return m
}

func (d *mockDecoder) boolean(n *node, path string) bool {
	if n == nil {
		return false
	}
	if n.kind != kindBool {
		d.add(SeverityError, n.line, n.col, path, "must be true or false (got %s)", describeValue(n))
	}
	return n.b
}

// steps decodes a list of steps (rounds or branch points).
func (d *mockDecoder) steps(n *node, path string) []MockRound {
	if n.kind != kindArray {
		d.add(SeverityError, n.line, n.col, path, "must be a list of rounds (got %s)", describeValue(n))
		return nil
	}
	var out []MockRound
	for i, rn := range n.items {
		out = append(out, d.round(rn, fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

// expectUser decodes expect_user: a string, or a list of strings of which one must match.
func (d *mockDecoder) expectUser(n *node, path string) []string {
	if n == nil {
		return nil
	}
	var items []*node
	switch n.kind {
	case kindString:
		items = []*node{n}
	case kindArray:
		if len(n.items) == 0 {
			d.add(SeverityError, n.line, n.col, path, "must name at least one text")
		}
		items = n.items
	default:
		d.add(SeverityError, n.line, n.col, path, "must be a string or a list of strings (got %s); quote it", describeValue(n))
		return nil
	}
	var out []string
	for _, it := range items {
		if it.kind != kindString {
			d.add(SeverityError, it.line, it.col, path, "must be a string (got %s); quote it", describeValue(it))
			continue
		}
		if strings.TrimSpace(it.str) == "" {
			d.add(SeverityError, it.line, it.col, path, "must not be empty (it would match every message)")
			continue
		}
		out = append(out, it.str)
	}
	return out
}

// answer decodes the text, tool_calls and error fields shared by rounds and one-round
// alternatives.
func (d *mockDecoder) answer(n *node, path string, r *MockRound) {
	r.Text = d.str(n.get("text"), path+".text")
	r.Error = d.str(n.get("error"), path+".error")
	if tc := n.get("tool_calls"); tc != nil {
		if tc.kind != kindArray {
			d.add(SeverityError, tc.line, tc.col, path+".tool_calls", "must be a list of {name, args} (got %s)", describeValue(tc))
		} else {
			for i, cn := range tc.items {
				r.ToolCalls = append(r.ToolCalls, d.toolCall(cn, fmt.Sprintf("%s.tool_calls[%d]", path, i)))
			}
		}
	}
	switch {
	case r.Error != "" && (r.Text != "" || len(r.ToolCalls) > 0):
		d.add(SeverityError, n.line, n.col, path, "a round with error fails before answering; remove text and tool_calls or the error")
	case r.Error == "" && r.Text == "" && len(r.ToolCalls) == 0:
		d.add(SeverityError, n.line, n.col, path, "round has no text, tool_calls or error")
	}
}

func (d *mockDecoder) round(n *node, path string) MockRound {
	r := MockRound{line: n.line, col: n.col}
	if !d.object(n, path, "expect_state", "expect_user", "expect_tool_result", "text", "tool_calls", "error", "one_of") {
		return r
	}
	if alts := n.get("one_of"); alts != nil {
		for _, f := range n.fields {
			if f.key != "one_of" {
				d.add(SeverityError, f.line, f.col, path, "a one_of step holds only alternatives; move %q into them", f.key)
			}
		}
		p := path + ".one_of"
		if alts.kind != kindArray || len(alts.items) == 0 {
			d.add(SeverityError, alts.line, alts.col, p, "must be a non-empty list of alternatives (got %s)", describeValue(alts))
			return r
		}
		catchAll := false
		for i, an := range alts.items {
			b := d.branch(an, fmt.Sprintf("%s[%d]", p, i))
			if catchAll {
				d.add(SeverityWarning, an.line, an.col, fmt.Sprintf("%s[%d]", p, i),
					"unreachable: an earlier alternative without expect_state or expect_user takes every round")
			}
			if b.ExpectState == "" && len(b.ExpectUser) == 0 && len(b.Rounds) > 0 && b.Rounds[0].ExpectState == "" &&
				len(b.Rounds[0].ExpectUser) == 0 && b.Rounds[0].ExpectToolResult == "" && len(b.Rounds[0].OneOf) == 0 {
				catchAll = true
			}
			r.OneOf = append(r.OneOf, b)
		}
		return r
	}
	r.ExpectState = d.str(n.get("expect_state"), path+".expect_state")
	r.ExpectUser = d.expectUser(n.get("expect_user"), path+".expect_user")
	r.ExpectToolResult = d.str(n.get("expect_tool_result"), path+".expect_tool_result")
	d.answer(n, path, &r)
	return r
}

// branch decodes one alternative of a one_of: expectations, stay, and either rounds or
// the text, tool_calls or error of a single round.
func (d *mockDecoder) branch(n *node, path string) MockBranch {
	b := MockBranch{line: n.line, col: n.col}
	if !d.object(n, path, "expect_state", "expect_user", "stay", "rounds", "text", "tool_calls", "error") {
		return b
	}
	b.ExpectState = d.str(n.get("expect_state"), path+".expect_state")
	b.ExpectUser = d.expectUser(n.get("expect_user"), path+".expect_user")
	b.Stay = d.boolean(n.get("stay"), path+".stay")
	inline := n.get("text") != nil || n.get("tool_calls") != nil || n.get("error") != nil
	if rn := n.get("rounds"); rn != nil {
		if inline {
			d.add(SeverityError, n.line, n.col, path, "an alternative has either rounds or the text, tool_calls or error of one round, not both")
		}
		b.Rounds = d.steps(rn, path+".rounds")
		if rn.kind == kindArray && len(rn.items) == 0 {
			d.add(SeverityError, rn.line, rn.col, path+".rounds", "must hold at least one round")
		}
		return b
	}
	if !inline {
		d.add(SeverityError, n.line, n.col, path, "alternative has no rounds, text, tool_calls or error")
		return b
	}
	r := MockRound{line: n.line, col: n.col}
	d.answer(n, path, &r)
	b.Rounds = []MockRound{r}
	return b
}

func (d *mockDecoder) toolCall(n *node, path string) MockToolCall {
	c := MockToolCall{line: n.line, col: n.col, Args: json.RawMessage("{}")}
	if !d.object(n, path, "name", "args") {
		return c
	}
	c.Name = d.str(n.get("name"), path+".name")
	if c.Name == "" && n.get("name") == nil {
		d.add(SeverityError, n.line, n.col, path, "missing required field \"name\"")
	}
	if a := n.get("args"); a != nil {
		if a.kind != kindObject {
			d.add(SeverityError, a.line, a.col, path+".args", "must be a mapping of argument name to value (got %s)", describeValue(a))
		} else if raw, err := a.canonicalJSON(); err != nil {
			d.add(SeverityError, a.line, a.col, path+".args", "cannot encode arguments: %v", err)
		} else {
			c.Args = raw
		}
	}
	return c
}

// CheckMock cross-checks a mock script against its pack: every scripted tool call must name
// a tool of the pack or a workflow system tool (errors), every expect_state must name a
// state (errors); a call the expected state's prompt does not offer, a transition event the
// expected state does not have, a called tool without tool_results, and tool_results for
// unknown tools are warnings. Alternatives of a one_of are checked like rounds; the first
// round of an alternative runs in the alternative's expect_state unless it names its own.
func CheckMock(p *Pack, m *MockScript) Diagnostics {
	if p == nil || m == nil {
		return nil
	}
	c := &mockChecker{p: p, m: m, hasArtifacts: len(p.ArtifactNames()) > 0, warnedNoResult: map[string]bool{}}
	c.steps(m.Rounds, "rounds", "")
	for _, name := range slices.Sorted(maps.Keys(m.ToolResults)) {
		if _, ok := p.Tools[name]; !ok {
			pos := m.resultPos[name]
			c.add(SeverityWarning, pos[0], pos[1], join("tool_results", name), "result for tool %q, which pack %q does not declare", name, p.ID)
		}
	}
	c.diags.Sort()
	return c.diags
}

type mockChecker struct {
	p              *Pack
	m              *MockScript
	hasArtifacts   bool
	warnedNoResult map[string]bool
	diags          Diagnostics
}

func (c *mockChecker) add(sev string, line, col int, path, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{File: c.m.file, Line: line, Col: col, Severity: sev, Path: path, Message: fmt.Sprintf(format, args...)})
}

// state checks an expect_state and returns the state it names (nil when unknown).
func (c *mockChecker) state(name string, line, col int, path string) *State {
	p := c.p
	if name == "" {
		return nil
	}
	if p.Workflow == nil {
		if p.Prompts[name] != nil { // a conversation's one state is named after its prompt
			return p.AsConversation(name).Workflow.States[name]
		}
		c.add(SeverityError, line, col, path, "expects state %q, but pack %q has no workflow and no prompt %q (a pack without a workflow runs in a state named after its prompt: %s)",
			name, p.ID, name, strings.Join(quoteEach(p.PromptKeys()), ", "))
		return nil
	}
	st := p.Workflow.States[name]
	if st == nil {
		msg := fmt.Sprintf("expects state %q, which pack %q does not have", name, p.ID)
		if s := suggest(name, p.Workflow.StateNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		c.add(SeverityError, line, col, path, "%s", msg)
	}
	return st
}

// steps checks a list of steps; inherit is the state the first one runs in when it names
// none (an alternative's expect_state).
func (c *mockChecker) steps(steps []MockRound, path, inherit string) {
	for i, r := range steps {
		rpath := fmt.Sprintf("%s[%d]", path, i)
		if len(r.OneOf) > 0 {
			for j, b := range r.OneOf {
				bpath := fmt.Sprintf("%s.one_of[%d]", rpath, j)
				c.state(b.ExpectState, b.line, b.col, bpath+".expect_state")
				in := b.ExpectState
				if in == "" && i == 0 {
					in = inherit
				}
				c.steps(b.Rounds, bpath+".rounds", in)
			}
			continue
		}
		st := c.state(r.ExpectState, r.line, r.col, rpath+".expect_state")
		stateName := r.ExpectState
		if stateName == "" && i == 0 && inherit != "" {
			stateName, st = inherit, nil
			if c.p.Workflow != nil {
				st = c.p.Workflow.States[inherit]
			} else if c.p.Prompts[inherit] != nil {
				st = c.p.AsConversation(inherit).Workflow.States[inherit]
			}
		}
		c.calls(r, rpath, stateName, st)
	}
}

// calls checks the tool calls of one round that runs in state st (nil when unknown).
func (c *mockChecker) calls(r MockRound, path, stateName string, st *State) {
	p := c.p
	for j, tc := range r.ToolCalls {
		cpath := fmt.Sprintf("%s.tool_calls[%d]", path, j)
		switch tc.Name {
		case TransitionToolName:
			if p.Workflow == nil {
				c.add(SeverityError, tc.line, tc.col, cpath, "calls %s, but pack %q has no workflow", tc.Name, p.ID)
				continue
			}
			var args struct {
				Event string `json:"event"`
			}
			_ = json.Unmarshal(tc.Args, &args)
			if st != nil {
				if !st.OffersTransition() {
					c.add(SeverityWarning, tc.line, tc.col, cpath, "state %q does not offer %s (it is terminal or external); the call will get an error result", stateName, tc.Name)
				} else if _, ok := st.OnEvent[args.Event]; !ok {
					c.add(SeverityWarning, tc.line, tc.col, cpath, "event %q is not an event of state %q (events: %s); the call will get an error result", args.Event, stateName, strings.Join(st.Events(), ", "))
				}
			}
		case SkillActivateToolName:
			if st != nil && len(p.StateSkills(st)) == 0 {
				c.add(SeverityWarning, tc.line, tc.col, cpath, "state %q offers no skills, so %s gets an error result", stateName, tc.Name)
			} else if len(p.LoadedSkills) == 0 && !p.hasSkillPaths() {
				c.add(SeverityError, tc.line, tc.col, cpath, "calls %s, but pack %q declares no skills", tc.Name, p.ID)
			}
		case SetArtifactToolName:
			if !c.hasArtifacts {
				c.add(SeverityError, tc.line, tc.col, cpath, "calls %s, but no state of pack %q declares artifacts", tc.Name, p.ID)
			}
		default:
			if _, ok := p.Tools[tc.Name]; !ok && p.AgentMembers()[tc.Name] {
				if st != nil && !p.IsAgentTool(st.PromptTask, tc.Name) {
					c.add(SeverityWarning, tc.line, tc.col, cpath, "state %q (prompt %q) does not call agent %q; the call will get an error result", stateName, st.PromptTask, tc.Name)
				}
				continue
			}
			if _, ok := p.Tools[tc.Name]; !ok {
				msg := fmt.Sprintf("calls tool %q, which pack %q does not declare", tc.Name, p.ID)
				if s := suggest(tc.Name, append(p.ToolNames(), TransitionToolName, SetArtifactToolName)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				c.add(SeverityError, tc.line, tc.col, cpath+".name", "%s", msg)
				continue
			}
			if _, ok := c.m.ToolResults[tc.Name]; !ok && !c.warnedNoResult[tc.Name] {
				c.warnedNoResult[tc.Name] = true
				c.add(SeverityWarning, tc.line, tc.col, cpath, "tool_results has no entry for %q, so a mock tool executor has no result to return", tc.Name)
			}
			if st != nil && st.PromptTask != "" {
				offered := false
				for _, t := range p.PromptTools(st.PromptTask) {
					if t.Name == tc.Name {
						offered = true
					}
				}
				if !offered {
					c.add(SeverityWarning, tc.line, tc.col, cpath, "state %q (prompt %q) does not offer tool %q; the call will get an error result", stateName, st.PromptTask, tc.Name)
				}
			}
		}
	}
}

// String summarises a round for error messages, e.g. `round 3 (state "triage")`.
func (r MockRound) String() string {
	s := "round"
	if r.line > 0 {
		s += " at line " + strconv.Itoa(r.line)
	}
	if r.ExpectState != "" {
		s += fmt.Sprintf(" (state %q)", r.ExpectState)
	}
	return s
}
