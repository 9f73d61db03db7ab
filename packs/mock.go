package packs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MockScript is a scripted model conversation for one pack (file <pack>.mock.yaml beside the
// pack). A run consumes Rounds strictly in order, one entry per model round, from the first
// entry; when they run out the mock answers Default, or fails if FailWhenExhausted is set.
type MockScript struct {
	Default           string      `json:"default,omitempty"`
	FailWhenExhausted bool        `json:"fail_when_exhausted,omitempty"`
	Rounds            []MockRound `json:"rounds,omitempty"`
	// ToolResults maps a tool name to the JSON value every call of that tool returns when
	// the mock also stands in for the tool executor.
	ToolResults map[string]json.RawMessage `json:"tool_results,omitempty"`

	file      string
	resultPos map[string][2]int
}

// MockRound is one scripted model round.
type MockRound struct {
	// ExpectState, when set, is the workflow state the round must run in; a mismatch fails
	// the round with a clear error, so the script doubles as an acceptance test.
	ExpectState string `json:"expect_state,omitempty"`
	// ExpectUser, when set, is a substring the latest user message must contain.
	ExpectUser string `json:"expect_user,omitempty"`
	// ExpectToolResult, when set, is a substring the latest tool result of the transcript
	// must contain: a check that a real tool's answer reached the model.
	ExpectToolResult string         `json:"expect_tool_result,omitempty"`
	Text             string         `json:"text,omitempty"`
	ToolCalls        []MockToolCall `json:"tool_calls,omitempty"`
	// Error, when set, makes this round fail permanently with this message (to test
	// provider failures).
	Error string `json:"error,omitempty"`

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
	if !d.object(top, "", "default", "fail_when_exhausted", "rounds", "tool_results") {
		return m
	}
	m.Default = d.str(top.get("default"), "default")
	if n := top.get("fail_when_exhausted"); n != nil {
		if n.kind != kindBool {
			d.add(SeverityError, n.line, n.col, "fail_when_exhausted", "must be true or false (got %s)", describeValue(n))
		}
		m.FailWhenExhausted = n.b
	}
	if n := top.get("rounds"); n != nil {
		if n.kind != kindArray {
			d.add(SeverityError, n.line, n.col, "rounds", "must be a list of rounds (got %s)", describeValue(n))
		} else {
			for i, rn := range n.items {
				m.Rounds = append(m.Rounds, d.round(rn, fmt.Sprintf("rounds[%d]", i)))
			}
		}
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

func (d *mockDecoder) round(n *node, path string) MockRound {
	r := MockRound{line: n.line, col: n.col}
	if !d.object(n, path, "expect_state", "expect_user", "expect_tool_result", "text", "tool_calls", "error") {
		return r
	}
	r.ExpectState = d.str(n.get("expect_state"), path+".expect_state")
	r.ExpectUser = d.str(n.get("expect_user"), path+".expect_user")
	r.ExpectToolResult = d.str(n.get("expect_tool_result"), path+".expect_tool_result")
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
	return r
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
// unknown tools are warnings.
func CheckMock(p *Pack, m *MockScript) Diagnostics {
	if p == nil || m == nil {
		return nil
	}
	var diags Diagnostics
	add := func(sev string, line, col int, path, format string, args ...any) {
		diags = append(diags, Diagnostic{File: m.file, Line: line, Col: col, Severity: sev, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	hasArtifacts := len(p.ArtifactNames()) > 0
	warnedNoResult := map[string]bool{}
	for i, r := range m.Rounds {
		path := fmt.Sprintf("rounds[%d]", i)
		var st *State
		if r.ExpectState != "" {
			if p.Workflow == nil {
				add(SeverityError, r.line, r.col, path+".expect_state", "expects state %q, but pack %q has no workflow", r.ExpectState, p.ID)
			} else if st = p.Workflow.States[r.ExpectState]; st == nil {
				msg := fmt.Sprintf("expects state %q, which pack %q does not have", r.ExpectState, p.ID)
				if s := suggest(r.ExpectState, p.Workflow.StateNames()); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				add(SeverityError, r.line, r.col, path+".expect_state", "%s", msg)
			}
		}
		for j, tc := range r.ToolCalls {
			cpath := fmt.Sprintf("%s.tool_calls[%d]", path, j)
			switch tc.Name {
			case TransitionToolName:
				if p.Workflow == nil {
					add(SeverityError, tc.line, tc.col, cpath, "calls %s, but pack %q has no workflow", tc.Name, p.ID)
					continue
				}
				var args struct {
					Event string `json:"event"`
				}
				_ = json.Unmarshal(tc.Args, &args)
				if st != nil {
					if !st.OffersTransition() {
						add(SeverityWarning, tc.line, tc.col, cpath, "state %q does not offer %s (it is terminal or external); the call will get an error result", r.ExpectState, tc.Name)
					} else if _, ok := st.OnEvent[args.Event]; !ok {
						add(SeverityWarning, tc.line, tc.col, cpath, "event %q is not an event of state %q (events: %s); the call will get an error result", args.Event, r.ExpectState, strings.Join(st.Events(), ", "))
					}
				}
			case SetArtifactToolName:
				if !hasArtifacts {
					add(SeverityError, tc.line, tc.col, cpath, "calls %s, but no state of pack %q declares artifacts", tc.Name, p.ID)
				}
			default:
				if _, ok := p.Tools[tc.Name]; !ok {
					msg := fmt.Sprintf("calls tool %q, which pack %q does not declare", tc.Name, p.ID)
					if s := suggest(tc.Name, append(p.ToolNames(), TransitionToolName, SetArtifactToolName)); s != "" {
						msg += fmt.Sprintf(" (did you mean %q?)", s)
					}
					add(SeverityError, tc.line, tc.col, cpath+".name", "%s", msg)
					continue
				}
				if _, ok := m.ToolResults[tc.Name]; !ok && !warnedNoResult[tc.Name] {
					warnedNoResult[tc.Name] = true
					add(SeverityWarning, tc.line, tc.col, cpath, "tool_results has no entry for %q, so a mock tool executor has no result to return", tc.Name)
				}
				if st != nil && st.PromptTask != "" {
					offered := false
					for _, t := range p.PromptTools(st.PromptTask) {
						if t.Name == tc.Name {
							offered = true
						}
					}
					if !offered {
						add(SeverityWarning, tc.line, tc.col, cpath, "state %q (prompt %q) does not offer tool %q; the call will get an error result", r.ExpectState, st.PromptTask, tc.Name)
					}
				}
			}
		}
	}
	for _, name := range sortedKeys(m.ToolResults) {
		if _, ok := p.Tools[name]; !ok {
			pos := m.resultPos[name]
			add(SeverityWarning, pos[0], pos[1], join("tool_results", name), "result for tool %q, which pack %q does not declare", name, p.ID)
		}
	}
	diags.Sort()
	return diags
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
