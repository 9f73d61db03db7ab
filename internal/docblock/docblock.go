// Package docblock keeps generated blocks of the project's Markdown documents equal to
// what the code says. A block sits between two comments,
//
//	<!-- generated: NAME (the test that checks it) -->
//	...
//	<!-- end: NAME -->
//
// and a test renders it from the code and calls Check, which fails when the document
// differs. With WOP_UPDATE_DOCS=1 Check writes the rendered block into the document
// instead, so a change of the code's defaults or tables is one command away from its
// documentation:
//
//	WOP_UPDATE_DOCS=1 go test ./activities ./tools ./api -run Doc
package docblock

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// UpdateEnv names the variable that makes Check write instead of compare.
const UpdateEnv = "WOP_UPDATE_DOCS"

// Check requires the block name of the Markdown file path to hold content (its lines
// between the two comments, without them).
func Check(t testing.TB, path, name, content string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	doc := string(raw)
	startTag, endTag := "<!-- generated: "+name+" ", "<!-- end: "+name+" -->"
	i := strings.Index(doc, startTag)
	if i < 0 {
		t.Fatalf("%s has no block %q: add the line %q and the line %q around it", path, name, startTag+"(...) -->", endTag)
	}
	bodyStart := i + strings.Index(doc[i:], "\n") + 1
	j := strings.Index(doc[bodyStart:], endTag)
	if j < 0 {
		t.Fatalf("%s: block %q has no end line %q", path, name, endTag)
	}
	bodyEnd := bodyStart + j
	content = strings.TrimRight(content, "\n") + "\n"
	if doc[bodyStart:bodyEnd] == content {
		return
	}
	if os.Getenv(UpdateEnv) == "1" {
		doc = doc[:bodyStart] + content + doc[bodyEnd:]
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
		t.Logf("%s: block %q updated", path, name)
		return
	}
	t.Errorf("%s: block %q differs from the code; run the test with %s=1 to rewrite it.\nwant:\n%s\ngot:\n%s",
		path, name, UpdateEnv, content, doc[bodyStart:bodyEnd])
}

// Table renders a Markdown table.
func Table(header []string, rows [][]string) string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			fmt.Fprintf(&b, " %s |", c)
		}
		b.WriteString("\n")
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	b.WriteString("|" + strings.Join(sep, "|") + "|\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// Duration renders a duration as a person writes it: 30s, 5m, 100ms, 1m30s, 24h.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
