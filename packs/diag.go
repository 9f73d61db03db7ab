package packs

import (
	"fmt"
	"sort"
	"strings"
)

// Diagnostic severities.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Diagnostic is one problem found in a pack or mock script, located in its source file.
// Line and Col are 1-based; 0 means the position is unknown.
type Diagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Col      int    `json:"col"`
	Severity string `json:"severity"` // "error" or "warning"
	// Path is the location inside the document in dotted form,
	// e.g. "workflow.states.triage.control" or "prompts.triage.variables[0].name".
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// String renders the diagnostic as "file:line:col: severity: path: message"
// (the path part is left out when Path is empty, the position when it is unknown), the
// form editors and CI logs understand.
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Line > 0 {
		fmt.Fprintf(&b, "%s:%d:%d: %s: ", d.File, d.Line, max(d.Col, 1), d.Severity)
	} else {
		fmt.Fprintf(&b, "%s: %s: ", d.File, d.Severity)
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// IsError reports whether the diagnostic is an error (as opposed to a warning).
func (d Diagnostic) IsError() bool { return d.Severity == SeverityError }

// Diagnostics is a list of diagnostics, usually sorted by file and position.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.IsError() {
			return true
		}
	}
	return false
}

// Errors returns only the error diagnostics.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(SeverityError) }

// Warnings returns only the warning diagnostics.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(SeverityWarning) }

func (ds Diagnostics) filter(sev string) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == sev {
			out = append(out, d)
		}
	}
	return out
}

// String renders one diagnostic per line.
func (ds Diagnostics) String() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Sort orders diagnostics by file, line, column, then errors before warnings, then path and
// message, so output never depends on map iteration order.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		if a.Severity != b.Severity {
			return a.Severity == SeverityError
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Message < b.Message
	})
}

// dedupe removes exact duplicates from a sorted list.
func (ds Diagnostics) dedupe() Diagnostics {
	out := ds[:0]
	for i, d := range ds {
		if i > 0 && d == ds[i-1] {
			continue
		}
		out = append(out, d)
	}
	return out
}

// DiagnosticsError is the error returned alongside diagnostics that contain errors. It
// summarises them; the full list is in the Diagnostics value returned with it.
type DiagnosticsError struct {
	File  string
	Diags Diagnostics
}

// Error returns the first error diagnostic and how many more there are.
func (e *DiagnosticsError) Error() string {
	errs := e.Diags.Errors()
	if len(errs) == 0 {
		return fmt.Sprintf("%s: invalid", e.File)
	}
	if len(errs) == 1 {
		return errs[0].String()
	}
	return fmt.Sprintf("%s (and %d more errors)", errs[0].String(), len(errs)-1)
}
