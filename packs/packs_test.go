package packs

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// want is one expected diagnostic, declared in a testdata file by a trailing comment
// "# want: <severity>@<col> <message fragment>" on the line the diagnostic must point at,
// or "# want: <severity>@<line>:<col> ..." where that line cannot hold a comment (inside a
// block scalar).
type want struct {
	line, col int
	severity  string
	fragment  string
}

var wantRe = regexp.MustCompile(`# want: (error|warning)@(?:(\d+):)?(\d+) (.*?)\s*$`)

// readWants extracts the expectations of a testdata file. Several may share a line,
// separated by " # want: ".
func readWants(t *testing.T, path string) []want {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []want
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		i := strings.Index(text, "# want: ")
		if i < 0 {
			continue
		}
		for _, part := range strings.Split(text[i:], " # want: ") {
			if !strings.HasPrefix(part, "# want: ") {
				part = "# want: " + part
			}
			m := wantRe.FindStringSubmatch(part)
			if m == nil {
				t.Fatalf("%s:%d: malformed want marker %q", path, line, part)
			}
			at := line
			if m[2] != "" {
				at, _ = strconv.Atoi(m[2])
			}
			col, _ := strconv.Atoi(m[3])
			out = append(out, want{line: at, col: col, severity: m[1], fragment: m[4]})
		}
	}
	return out
}

// matchDiagnostics requires a one-to-one match between diagnostics and expectations: same
// line, column and severity, and the rendered diagnostic contains the fragment.
func matchDiagnostics(t *testing.T, diags Diagnostics, wants []want) {
	t.Helper()
	used := make([]bool, len(wants))
	for _, d := range diags {
		found := false
		for i, w := range wants {
			if used[i] || w.line != d.Line || w.col != d.Col || w.severity != d.Severity || !strings.Contains(d.String(), w.fragment) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			t.Errorf("unexpected diagnostic: %s", d)
		}
	}
	for i, w := range wants {
		if !used[i] {
			t.Errorf("missing diagnostic at %d:%d (%s): %q", w.line, w.col, w.severity, w.fragment)
		}
	}
}

// TestPackTestdata parses every pack in testdata/packs and checks its diagnostics against
// the "# want:" markers in the file. Files without markers must load with no diagnostics.
func TestPackTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/packs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata packs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			wants := readWants(t, f)
			p, diags, err := Parse(f, data)
			matchDiagnostics(t, diags, wants)
			for _, d := range diags {
				if d.File != f {
					t.Errorf("diagnostic names file %q, want %q", d.File, f)
				}
			}
			wantErr := false
			for _, w := range wants {
				wantErr = wantErr || w.severity == SeverityError
			}
			if wantErr {
				if err == nil || p != nil {
					t.Errorf("Parse returned pack=%v err=%v, want no pack and an error", p != nil, err)
				}
			} else if err != nil || p == nil {
				t.Errorf("Parse failed: %v", err)
			}
		})
	}
}
