package packs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ValidateCommand is the body of `wop pack validate [--json] PATH...`. Each PATH is a pack
// file, a mock script (validated together with the pack beside it) or a folder (every pack
// in it, as LoadDir reads them). It prints every diagnostic as
// "file:line:col: severity: message" and a summary line, or with --json a JSON array of
// diagnostics only. The exit code is 0 when there are no errors, 1 when there are, and 2 for
// a usage problem.
func ValidateCommand(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "usage: wop pack validate [--json] PATH...")
		fmt.Fprintln(stderr, "Checks PromptPack files (schema, references, RFC 0014 rules) and the mock scripts beside them.")
		fmt.Fprintln(stderr, "PATH is a pack file (.yaml, .yml, .json), a mock script (<pack>.mock.yaml) or a folder.")
		fmt.Fprintln(stderr, "  --json   print the diagnostics as a JSON array instead of text")
	}
	// Flags may come before or after the paths (`wop pack validate packs/*.yaml --json`);
	// "--" ends them.
	var (
		asJSON bool
		paths  []string
	)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			paths = append(paths, args[i+1:]...)
			i = len(args)
		case a == "--json" || a == "-json":
			asJSON = true
		case a == "-h" || a == "--help" || a == "-help":
			usage()
			return 0
		case strings.HasPrefix(a, "-") && a != "-":
			fmt.Fprintf(stderr, "wop pack validate: unknown flag %s\n", a)
			usage()
			return 2
		default:
			paths = append(paths, a)
		}
	}
	if len(paths) == 0 {
		usage()
		return 2
	}

	files, diags, err := collectPackFiles(paths)
	if err != nil {
		fmt.Fprintf(stderr, "wop pack validate: %v\n", err)
		return 2
	}
	ids := map[string]string{} // pack id -> first file, to report duplicates across all inputs
	for _, f := range files {
		l, root, d, err := loadFile(f)
		diags = append(diags, d...)
		if err != nil {
			var de *DiagnosticsError
			if !errors.As(err, &de) {
				diags = append(diags, Diagnostic{File: f, Severity: SeverityError, Message: err.Error()})
			}
			continue
		}
		if prev, dup := ids[l.Pack.ID]; dup {
			p := root.locate([]string{"id"}, false)
			diags = append(diags, Diagnostic{File: f, Line: p.line, Col: p.col, Severity: SeverityError, Path: "id",
				Message: fmt.Sprintf("duplicate pack id %q (also used by %s); a host loads pack ids from one folder and they must be unique", l.Pack.ID, prev)})
			continue
		}
		ids[l.Pack.ID] = f
	}
	diags.Sort()
	diags = diags.dedupe()
	errs, warns := len(diags.Errors()), len(diags.Warnings())

	if asJSON {
		if diags == nil {
			diags = Diagnostics{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(diags); err != nil {
			fmt.Fprintf(stderr, "wop pack validate: %v\n", err)
			return 2
		}
	} else {
		for _, d := range diags {
			fmt.Fprintln(stdout, d.String())
		}
		fmt.Fprintf(stdout, "%d %s checked: %d %s, %d %s\n",
			len(files), plural(len(files), "pack", "packs"), errs, plural(errs, "error", "errors"), warns, plural(warns, "warning", "warnings"))
	}
	if errs > 0 {
		return 1
	}
	return 0
}

// collectPackFiles expands the command's paths to pack files, in argument order without
// duplicates. A mock script stands for the pack beside it.
func collectPackFiles(paths []string) ([]string, Diagnostics, error) {
	var (
		out   []string
		diags Diagnostics
		seen  = map[string]bool{}
	)
	add := func(p string) {
		key := filepath.Clean(p)
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("%s: no such file or folder", p)
			}
			return nil, nil, err
		}
		if info.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, nil, fmt.Errorf("read folder %s: %w", p, err)
			}
			for _, e := range entries {
				if !e.IsDir() && isPackFile(e.Name()) {
					add(filepath.Join(p, e.Name()))
				}
			}
			continue
		}
		if isBindingsFile(filepath.Base(p)) {
			continue // the tool bindings file is not a pack (wop pack validate --tools checks it)
		}
		if isMockFile(filepath.Base(p)) {
			pack, ok := packForMock(p)
			if !ok {
				diags = append(diags, Diagnostic{File: p, Line: 1, Col: 1, Severity: SeverityError,
					Message: "mock script has no pack beside it; name it <pack>.mock.yaml next to <pack>.yaml or <pack>.json"})
				continue
			}
			add(pack)
			continue
		}
		add(p)
	}
	return out, diags, nil
}

// packForMock finds the pack file a mock script belongs to.
func packForMock(mockPath string) (string, bool) {
	base := mockPath
	for _, suf := range []string{".mock.yaml", ".mock.yml"} {
		if strings.HasSuffix(strings.ToLower(base), suf) {
			base = base[:len(base)-len(suf)]
			break
		}
	}
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if info, err := os.Stat(base + ext); err == nil && !info.IsDir() {
			return base + ext, true
		}
	}
	return "", false
}
