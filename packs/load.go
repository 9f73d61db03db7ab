package packs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Loaded is one pack file loaded from disk, with the mock script found beside it.
type Loaded struct {
	Pack *Pack
	// Mock is the scripted conversation from <pack>.mock.yaml, or nil when there is none.
	Mock *MockScript
	// Path is the pack file's path as it was found.
	Path string
}

// Parse parses, schema-validates and semantically validates one pack document. The format
// follows the file name: a name ending in ".json" is read as JSON, anything else as YAML
// (both produce the same tree). filename is used in diagnostics only.
//
// Warnings never stop a pack from loading. When any diagnostic is an error, Parse returns a
// nil pack, all diagnostics and a non-nil error summarising them.
func Parse(filename string, data []byte) (*Pack, Diagnostics, error) {
	p, _, diags, err := parse(filename, data)
	return p, diags, err
}

// parse is Parse that also returns the source tree, for later cross-checks that need positions.
func parse(filename string, data []byte) (*Pack, *node, Diagnostics, error) {
	root, err := parseTree(filename, data)
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			diags := Diagnostics{{File: filename, Line: pe.line, Col: pe.col, Severity: SeverityError, Message: pe.msg}}
			return nil, nil, diags, &DiagnosticsError{File: filename, Diags: diags}
		}
		return nil, nil, nil, fmt.Errorf("%s: %w", filename, err)
	}
	diags, err := schemaDiagnostics(filename, root)
	if err != nil {
		return nil, nil, nil, err
	}
	if diags.HasErrors() {
		return nil, root, diags, &DiagnosticsError{File: filename, Diags: diags}
	}
	pack, derr := decodePack(root)
	if derr == nil {
		pack.promptOrder = promptKeysInOrder(root)
	}
	if derr != nil {
		diags = append(diags, Diagnostic{File: filename, Line: root.line, Col: root.col, Severity: SeverityError,
			Message: fmt.Sprintf("cannot decode pack: %v", derr)})
		return nil, root, diags, &DiagnosticsError{File: filename, Diags: diags}
	}
	diags = append(diags, semanticDiagnostics(filename, root, pack)...)
	diags.Sort()
	diags = diags.dedupe()
	if diags.HasErrors() {
		return nil, root, diags, &DiagnosticsError{File: filename, Diags: diags}
	}
	pack.inlineSkills()
	h, err := pack.ComputeHash()
	if err != nil {
		return nil, root, diags, fmt.Errorf("%s: %w", filename, err)
	}
	pack.Hash = h
	return pack, root, diags, nil
}

// decodePack decodes a schema-valid tree into the typed Pack.
func decodePack(root *node) (*Pack, error) {
	raw, err := root.canonicalJSON()
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var p Pack
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	for _, t := range p.Tools {
		if t != nil && len(t.Parameters) == 0 {
			// A tool without parameters takes none; providers need an object schema.
			t.Parameters = json.RawMessage(`{"properties":{},"type":"object"}`)
		}
	}
	return &p, nil
}

// ComputeHash returns "sha256:<hex>" over the pack's canonical JSON encoding (struct fields
// in declaration order, map keys sorted, numbers normalised). The same pack written in YAML
// and in JSON hashes alike. The Hash field itself is not part of the input.
func (p *Pack) ComputeHash() (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode pack %q for hashing: %w", p.ID, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Load reads and parses one pack file (see Parse). It does not read the mock script; use
// LoadFile for that.
func Load(path string) (*Pack, Diagnostics, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read pack: %w", err)
	}
	return Parse(path, data)
}

// MockPathFor returns the mock script paths that may sit beside a pack file, in the order
// they are looked for: <pack>.mock.yaml, then <pack>.mock.yml.
func MockPathFor(packPath string) []string {
	base := strings.TrimSuffix(packPath, filepath.Ext(packPath))
	return []string{base + ".mock.yaml", base + ".mock.yml"}
}

// isMockFile reports whether a file name is a mock script rather than a pack.
func isMockFile(name string) bool {
	l := strings.ToLower(name)
	return strings.HasSuffix(l, ".mock.yaml") || strings.HasSuffix(l, ".mock.yml")
}

// BindingsFileNames are the file names of a packs folder that hold the deployment's tool
// bindings (package tools), not a pack; the loader skips them.
var BindingsFileNames = []string{"tools.yaml", "tools.yml"}

// isBindingsFile reports whether a file name is a tool bindings file.
func isBindingsFile(name string) bool {
	for _, b := range BindingsFileNames {
		if strings.EqualFold(name, b) {
			return true
		}
	}
	return false
}

// isPackFile reports whether a file name looks like a pack file (YAML or JSON, not a mock,
// not the tool bindings file).
func isPackFile(name string) bool {
	if strings.HasPrefix(name, ".") || isMockFile(name) || isBindingsFile(name) {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// LoadFile loads one pack file and, when present, the mock script beside it, and
// cross-checks the script against the pack. It fails (with diagnostics) when either has errors.
func LoadFile(path string) (*Loaded, Diagnostics, error) {
	l, _, diags, err := loadFile(path)
	return l, diags, err
}

func loadFile(path string) (*Loaded, *node, Diagnostics, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read pack: %w", err)
	}
	pack, root, diags, perr := parse(path, data)
	if perr != nil {
		return nil, root, diags, perr
	}
	if pack.hasSkillPaths() {
		c := &checker{file: path, root: root, p: pack}
		c.loadSkillPaths(filepath.Dir(path))
		diags = append(diags, c.diags...)
		if pack.Hash, err = pack.ComputeHash(); err != nil {
			return nil, root, diags, fmt.Errorf("%s: %w", path, err)
		}
	}
	l := &Loaded{Pack: pack, Path: path}
	for _, mp := range MockPathFor(path) {
		mdata, err := os.ReadFile(mp)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, root, diags, fmt.Errorf("read mock script: %w", err)
		}
		m, mdiags, merr := ParseMock(mp, mdata)
		diags = append(diags, mdiags...)
		if merr == nil {
			diags = append(diags, CheckMock(pack, m)...)
		}
		l.Mock = m
		break
	}
	diags.Sort()
	diags = diags.dedupe()
	if diags.HasErrors() {
		return nil, root, diags, &DiagnosticsError{File: path, Diags: diags}
	}
	return l, root, diags, nil
}

// LoadDir loads every pack in dir: files ending in .yaml, .yml or .json, except mock scripts
// (*.mock.yaml, *.mock.yml), the tool bindings file (tools.yaml) and hidden files;
// sub-folders are not read. Each pack's mock
// script is loaded and cross-checked. A missing or empty folder yields no packs and no error.
//
// Packs load one by one: a pack file with errors, or whose mock script has errors, or whose
// id an earlier file (in name order) already uses, is left out; the others load. The
// diagnostics cover every file, and the error, a *DirError, names the files left out. Only
// a folder that cannot be read fails without packs.
func LoadDir(dir string) ([]*Loaded, Diagnostics, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read packs folder %s: %w", dir, err)
	}
	var (
		out      []*Loaded
		roots    = map[string]*node{}
		diags    Diagnostics
		failed   []string
		packDirs = map[string]bool{}
	)
	for _, e := range entries {
		if e.IsDir() || !isPackFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		packDirs[strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))] = true
		l, root, d, err := loadFile(path)
		diags = append(diags, d...)
		if err != nil {
			var de *DiagnosticsError
			if !errors.As(err, &de) {
				diags = append(diags, Diagnostic{File: path, Severity: SeverityError, Message: err.Error()})
			}
			failed = append(failed, path)
			continue
		}
		roots[path] = root
		out = append(out, l)
	}
	// A mock script whose pack does not exist is most likely a rename left behind.
	for _, e := range entries {
		if e.IsDir() || !isMockFile(e.Name()) {
			continue
		}
		base := e.Name()[:len(e.Name())-len(filepath.Ext(e.Name()))]
		base = strings.TrimSuffix(base, filepath.Ext(base)) // strip ".mock"
		if !packDirs[base] {
			diags = append(diags, Diagnostic{File: filepath.Join(dir, e.Name()), Line: 1, Col: 1, Severity: SeverityWarning,
				Message: fmt.Sprintf("mock script has no pack beside it (expected %s.yaml or %s.json)", base, base)})
		}
	}
	byID := map[string]*Loaded{}
	kept := out[:0]
	for _, l := range out {
		if prev, dup := byID[l.Pack.ID]; dup {
			p := roots[l.Path].locate([]string{"id"}, false)
			diags = append(diags, Diagnostic{File: l.Path, Line: p.line, Col: p.col, Severity: SeverityError, Path: "id",
				Message: fmt.Sprintf("duplicate pack id %q (also used by %s); pack ids must be unique in a folder", l.Pack.ID, prev.Path)})
			failed = append(failed, l.Path)
			continue
		}
		byID[l.Pack.ID] = l
		kept = append(kept, l)
	}
	diags.Sort()
	diags = diags.dedupe()
	if len(failed) > 0 {
		sort.Strings(failed)
		return kept, diags, &DirError{Dir: dir, Failed: failed, Loaded: len(kept), Diags: diags}
	}
	return kept, diags, nil
}

// DirError says which pack files of a folder LoadDir left out.
type DirError struct {
	Dir    string
	Failed []string // pack file paths, sorted
	Loaded int      // how many packs loaded
	Diags  Diagnostics
}

// Error names the files left out.
func (e *DirError) Error() string {
	return fmt.Sprintf("%d of %d pack files in %s have errors and are not served: %s",
		len(e.Failed), len(e.Failed)+e.Loaded, e.Dir, strings.Join(e.Failed, ", "))
}

// FileDiagnostics returns the error diagnostics that keep pack file path out: those of
// the pack file itself and of its mock script.
func (e *DirError) FileDiagnostics(path string) Diagnostics {
	var out Diagnostics
	mocks := MockPathFor(path)
	for _, d := range e.Diags.Errors() {
		if d.File == path || slices.Contains(mocks, d.File) {
			out = append(out, d)
		}
	}
	return out
}

// Report renders the files left out with their errors, one block per file:
//
//	packs/refund.yaml is not served:
//	  packs/refund.mock.yaml:12:7: error: rounds[2]: unknown field "txt" (did you mean "text"?)
func (e *DirError) Report() string {
	var b strings.Builder
	for _, f := range e.Failed {
		fmt.Fprintf(&b, "%s is not served:\n", f)
		for _, d := range e.FileDiagnostics(f) {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	return b.String()
}
