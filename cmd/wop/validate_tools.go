package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/tools"
)

// runPackValidate is `wop pack validate [--json] [--tools FILE] PATH...`: the packs'
// checks (packs.ValidateCommand), then, when a bindings file is given (--tools, or a
// PATH named tools.yaml) or a folder PATH holds tools.yaml, the bindings' checks against
// those packs: the file's own
// diagnostics, which pack tools are bound to what, which are unbound (a warning), and
// whether the parameters of MCP-bound tools match their servers (which it connects to).
func runPackValidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			code := packs.ValidateCommand([]string{a}, stdout, stderr)
			fmt.Fprintln(stderr, "  --tools FILE   also check a tool bindings file against the packs (default: tools.yaml of a folder PATH)")
			return code
		}
	}
	var rest, paths []string
	toolsFile, asJSON := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--tools" || a == "-tools":
			if i+1 >= len(args) {
				fmt.Fprintln(stderr, "wop pack validate: --tools needs a FILE")
				return 2
			}
			toolsFile = args[i+1]
			i++
			continue
		case strings.HasPrefix(a, "--tools=") || strings.HasPrefix(a, "-tools="):
			toolsFile = a[strings.Index(a, "=")+1:]
			continue
		case a == "--json" || a == "-json":
			asJSON = true
		case a == "--":
			paths = append(paths, args[i+1:]...)
		case !strings.HasPrefix(a, "-"):
			paths = append(paths, a)
		}
		rest = append(rest, a)
	}
	for _, p := range paths {
		if toolsFile == "" && isBindingsName(strings.ToLower(filepath.Base(p))) {
			toolsFile = p // `wop pack validate packs/*.yaml` names it
		}
	}
	if toolsFile == "" {
		toolsFile = defaultToolsFile(paths)
	}
	if toolsFile == "" {
		return packs.ValidateCommand(rest, stdout, stderr)
	}

	var packOut bytes.Buffer
	code := packs.ValidateCommand(rest, &packOut, stderr)
	if code == 2 {
		_, _ = stdout.Write(packOut.Bytes())
		return code
	}
	set := tools.NewSet()
	defer func() { _ = set.Close() }()
	diags, err := set.LoadFile(toolsFile, tools.LoadOptions{UnsetIsWarning: true})
	var report *tools.Report
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		report = set.Check(cctx, loadForTools(paths))
		cancel()
		diags = append(diags, report.Diags...)
	} else if len(diags) == 0 {
		diags = packs.Diagnostics{{File: toolsFile, Severity: packs.SeverityError, Message: err.Error()}}
	}
	diags.Sort()
	if diags.HasErrors() {
		code = 1
	}

	if asJSON {
		var all packs.Diagnostics
		if err := json.Unmarshal(packOut.Bytes(), &all); err != nil {
			fmt.Fprintf(stderr, "wop pack validate: %v\n", err)
			return 2
		}
		all = append(all, diags...)
		if all == nil {
			all = packs.Diagnostics{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(all); err != nil {
			fmt.Fprintf(stderr, "wop pack validate: %v\n", err)
			return 2
		}
		return code
	}
	_, _ = stdout.Write(packOut.Bytes())
	fmt.Fprintf(stdout, "Tool bindings %s:\n", toolsFile)
	if report != nil {
		report.Diags = diags
		report.Print(stdout, "  ")
		fmt.Fprintf(stdout, "  %d bound, %d unbound: %d errors, %d warnings\n", len(report.Bound), len(report.Unbound), len(diags.Errors()), len(diags.Warnings()))
	} else {
		for _, d := range diags {
			fmt.Fprintf(stdout, "  %s\n", d)
		}
	}
	return code
}

// defaultToolsFile is the tools.yaml of the first folder among paths, or "".
func defaultToolsFile(paths []string) string {
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			continue
		}
		for _, name := range packs.BindingsFileNames {
			f := filepath.Join(p, name)
			if st, err := os.Stat(f); err == nil && !st.IsDir() {
				return f
			}
		}
	}
	return ""
}

// loadForTools loads the packs of the paths that load without errors (the pack checks
// report the others), for the bindings' check.
func loadForTools(paths []string) []*packs.Loaded {
	var out []*packs.Loaded
	seen := map[string]bool{}
	add := func(l *packs.Loaded) {
		if l != nil && !seen[l.Pack.ID] {
			seen[l.Pack.ID] = true
			out = append(out, l)
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		if st.IsDir() {
			if loaded, _, err := packs.LoadDir(p); err == nil {
				for _, l := range loaded {
					add(l)
				}
				continue
			}
			entries, _ := os.ReadDir(p)
			for _, e := range entries {
				name := strings.ToLower(e.Name())
				if e.IsDir() || strings.HasPrefix(name, ".") || strings.Contains(name, ".mock.") || isBindingsName(name) {
					continue
				}
				if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" || ext == ".json" {
					l, _, _ := packs.LoadFile(filepath.Join(p, e.Name()))
					add(l)
				}
			}
			continue
		}
		if strings.Contains(strings.ToLower(filepath.Base(p)), ".mock.") || isBindingsName(strings.ToLower(filepath.Base(p))) {
			continue
		}
		l, _, _ := packs.LoadFile(p)
		add(l)
	}
	return out
}

func isBindingsName(name string) bool {
	for _, b := range packs.BindingsFileNames {
		if name == b {
			return true
		}
	}
	return false
}
