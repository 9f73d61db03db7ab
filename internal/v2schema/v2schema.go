// Package v2schema validates documents against the vendored OpenWOP v2 JSON schemas
// (protocol/spec/v2/schemas) for the tests of the API and the end-to-end tests. The
// schemas use a negative lookahead (^(?!openwop\.)…, the vendor patterns), which Go's
// regexp lacks, so a pattern that starts with one is compiled as a prefix refusal and
// the rest. Documents the folder does not carry are served as {}.
package v2schema

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Base is the $id prefix of the v2 schemas.
const Base = "https://openwop.dev/spec/v2/"

// Set compiles and caches schemas of one folder.
type Set struct {
	dir  string
	once sync.Once
	mu   sync.Mutex
	c    *jsonschema.Compiler
	m    map[string]*jsonschema.Schema
}

// New is the set of the schemas in dir.
func New(dir string) *Set { return &Set{dir: dir} }

type loader struct{ dir string }

func (l loader) Load(url string) (any, error) {
	name := strings.TrimPrefix(url, Base)
	if !strings.Contains(name, "/") {
		if b, err := os.ReadFile(filepath.Join(l.dir, name)); err == nil {
			return jsonschema.UnmarshalJSON(bytes.NewReader(b))
		}
	}
	return map[string]any{}, nil
}

// Validate validates the JSON document doc against the schema at loc (a file name of
// the folder, with an optional #fragment).
func (s *Set) Validate(loc string, doc []byte) error {
	s.once.Do(func() {
		s.c = jsonschema.NewCompiler()
		s.c.UseLoader(loader{dir: s.dir})
		s.c.UseRegexpEngine(compile)
		s.m = map[string]*jsonschema.Schema{}
	})
	s.mu.Lock()
	sch, ok := s.m[loc]
	if !ok {
		var err error
		if sch, err = s.c.Compile(Base + loc); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("compile %s: %w", loc, err)
		}
		s.m[loc] = sch
	}
	s.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(v)
}

// CompileSchema compiles an inline schema (a document of its own) against the same
// folder, for checks a vendored file does not cover.
func (s *Set) CompileSchema(id string, schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(loader{dir: s.dir})
	c.UseRegexpEngine(compile)
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	return c.Compile(id)
}

// lookahead is a pattern ^(?!not)rest: it matches what rest matches unless not matches
// at the start.
type lookahead struct {
	src     string
	not, re *regexp.Regexp
}

func (r lookahead) String() string { return r.src }

func (r lookahead) MatchString(s string) bool {
	return (r.not == nil || !r.not.MatchString(s)) && r.re.MatchString(s)
}

func compile(s string) (jsonschema.Regexp, error) {
	if strings.HasPrefix(s, "^(?!") {
		end := strings.IndexByte(s, ')')
		if end < 0 {
			return nil, fmt.Errorf("unclosed lookahead in %q", s)
		}
		not, err := regexp.Compile("^" + s[len("^(?!"):end])
		if err != nil {
			return nil, err
		}
		re, err := regexp.Compile("^" + s[end+1:])
		if err != nil {
			return nil, err
		}
		return lookahead{src: s, not: not, re: re}, nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	return lookahead{src: s, re: re}, nil
}
