package packs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// SchemaJSON is the official PromptPack JSON Schema (v1.9.0, MIT, see schema/LICENSE) that
// every pack is validated against before the semantic checks run.
//
//go:embed schema/promptpack.schema.json
var SchemaJSON []byte

// schemaURL is the $id of the embedded schema.
const schemaURL = "https://promptpack.org/schema/latest/promptpack.schema.json"

var (
	schemaOnce     sync.Once
	compiledSchema *jsonschema.Schema
	schemaDoc      map[string]any
	schemaErr      error
)

// packSchema compiles the embedded schema once.
func packSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
		if err != nil {
			schemaErr = fmt.Errorf("parse embedded PromptPack schema: %w", err)
			return
		}
		schemaDoc, _ = doc.(map[string]any)
		c := jsonschema.NewCompiler()
		if err := c.AddResource(schemaURL, doc); err != nil {
			schemaErr = fmt.Errorf("add embedded PromptPack schema: %w", err)
			return
		}
		compiledSchema, schemaErr = c.Compile(schemaURL)
		if schemaErr != nil {
			schemaErr = fmt.Errorf("compile embedded PromptPack schema: %w", schemaErr)
		}
	})
	return compiledSchema, schemaErr
}

// schemaDiagnostics validates the tree against the PromptPack schema and turns each
// violation into a positioned, author-oriented diagnostic.
func schemaDiagnostics(file string, root *node) (Diagnostics, error) {
	sch, err := packSchema()
	if err != nil {
		return nil, err
	}
	err = sch.Validate(root.toAny())
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, fmt.Errorf("validate against the PromptPack schema: %w", err)
	}
	var out Diagnostics
	for _, leaf := range leafErrors(ve) {
		out = append(out, schemaErrorDiags(file, root, leaf)...)
	}
	out.Sort()
	return out.dedupe(), nil
}

// leafErrors flattens a validation error tree to the errors an author can act on. For
// oneOf/anyOf it keeps only the alternative that got furthest into the value, since
// listing why every alternative failed is noise.
func leafErrors(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		switch e.ErrorKind.(type) {
		case *kind.Group, *kind.Schema, *kind.Reference, *kind.AllOf:
			return nil
		}
		return []*jsonschema.ValidationError{e}
	}
	switch e.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
		// Rank the alternatives: fewest value mismatches (const, enum, pattern, type; these
		// mark the wrong alternative, e.g. a different step kind), then deepest errors
		// (the alternative that got furthest into the value), then fewest errors.
		var best []*jsonschema.ValidationError
		bestMis, bestDepth := -1, -1
		for _, c := range e.Causes {
			leaves := leafErrors(c)
			d, mis := 0, 0
			for _, l := range leaves {
				if len(l.InstanceLocation) > d {
					d = len(l.InstanceLocation)
				}
				switch l.ErrorKind.(type) {
				case *kind.Const, *kind.Enum, *kind.Pattern, *kind.Type:
					mis++
				}
			}
			better := bestMis < 0 || mis < bestMis ||
				(mis == bestMis && (d > bestDepth || (d == bestDepth && len(leaves) < len(best))))
			if better {
				best, bestMis, bestDepth = leaves, mis, d
			}
		}
		// If every alternative failed on the value itself, report the oneOf as a whole.
		if bestDepth <= len(e.InstanceLocation) && bestMis > 0 {
			return []*jsonschema.ValidationError{{
				SchemaURL:        e.SchemaURL,
				InstanceLocation: e.InstanceLocation,
				ErrorKind:        &kind.OneOf{},
			}}
		}
		return best
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leafErrors(c)...)
	}
	return out
}

func schemaErrorDiags(file string, root *node, e *jsonschema.ValidationError) Diagnostics {
	mk := func(tokens []string, key bool, msg string) Diagnostic {
		p := root.locate(tokens, key)
		return Diagnostic{File: file, Line: p.line, Col: p.col, Severity: SeverityError, Path: p.path, Message: msg}
	}
	loc := e.InstanceLocation
	here := root.lookupTokens(loc)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		var out Diagnostics
		allowed := allowedProperties(e.SchemaURL)
		props := append([]string(nil), k.Properties...)
		sort.Strings(props)
		for _, prop := range props {
			msg := fmt.Sprintf("unknown field %q", prop)
			if s := suggest(prop, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else if len(allowed) > 0 {
				msg += "; allowed fields: " + strings.Join(allowed, ", ")
			}
			d := mk(append(append([]string(nil), loc...), prop), true, msg)
			d.Path = root.locate(loc, false).path
			out = append(out, d)
		}
		return out
	case *kind.Required:
		missing := quoteAll(k.Missing)
		msg := "missing required field " + missing
		if len(k.Missing) > 1 {
			msg = "missing required fields " + missing
		}
		// Point at the key that holds the incomplete object (e.g. "workflow:").
		return Diagnostics{mk(loc, len(loc) > 0, msg)}
	case *kind.Enum:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be one of %s (got %s)", jsonList(k.Want), describeValue(here)))}
	case *kind.Const:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be %s (got %s)", jsonText(k.Want), describeValue(here)))}
	case *kind.Type:
		msg := fmt.Sprintf("must be %s (got %s)", typeList(k.Want), describeValue(here))
		if here != nil && here.kind != kindString && len(k.Want) == 1 && k.Want[0] == "string" {
			msg += "; quote the value if you mean it as text"
		}
		return Diagnostics{mk(loc, false, msg)}
	case *kind.Pattern:
		msg := fmt.Sprintf("%q does not match the pattern %s", k.Got, k.Want)
		if h, ok := patternHints[k.Want]; ok {
			msg = fmt.Sprintf("%q is invalid: %s", k.Got, h)
		}
		return Diagnostics{mk(loc, false, msg)}
	case *kind.MinLength:
		if k.Want == 1 {
			return Diagnostics{mk(loc, false, "must not be empty")}
		}
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be at least %d characters long (got %d)", k.Want, k.Got))}
	case *kind.MaxLength:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be at most %d characters long (got %d)", k.Want, k.Got))}
	case *kind.Minimum:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be at least %s (got %s)", ratText(k.Want), ratText(k.Got)))}
	case *kind.Maximum:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be at most %s (got %s)", ratText(k.Want), ratText(k.Got)))}
	case *kind.ExclusiveMinimum:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be greater than %s (got %s)", ratText(k.Want), ratText(k.Got)))}
	case *kind.ExclusiveMaximum:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must be less than %s (got %s)", ratText(k.Want), ratText(k.Got)))}
	case *kind.MinProperties:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must have at least %d %s", k.Want, plural(k.Want, "entry", "entries")))}
	case *kind.MaxProperties:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must have at most %d %s", k.Want, plural(k.Want, "entry", "entries")))}
	case *kind.MinItems:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must have at least %d %s", k.Want, plural(k.Want, "item", "items")))}
	case *kind.MaxItems:
		return Diagnostics{mk(loc, false, fmt.Sprintf("must have at most %d %s", k.Want, plural(k.Want, "item", "items")))}
	case *kind.UniqueItems:
		return Diagnostics{mk(loc, false, fmt.Sprintf("items must be unique (items %d and %d are equal)", k.Duplicates[0], k.Duplicates[1]))}
	case *kind.OneOf, *kind.AnyOf:
		return Diagnostics{mk(loc, false, "does not match any of the forms the schema allows here")}
	case *kind.FalseSchema:
		return Diagnostics{mk(loc, true, "is not allowed here")}
	}
	// Fall back to the library's wording, without its "at '<pointer>': " prefix.
	msg := e.Error()
	if _, rest, ok := strings.Cut(msg, "': "); ok && strings.HasPrefix(msg, "at '") {
		msg = rest
	}
	return Diagnostics{mk(loc, false, msg)}
}

// lookupTokens returns the node at a JSON-pointer token path, or nil.
func (n *node) lookupTokens(tokens []string) *node {
	cur := n
	for _, tok := range tokens {
		switch {
		case cur == nil:
			return nil
		case cur.kind == kindObject:
			cur = cur.get(tok)
		case cur.kind == kindArray:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur.items) {
				return nil
			}
			cur = cur.items[i]
		default:
			return nil
		}
	}
	return cur
}

// patternHints explains the schema's regular expressions in words.
var patternHints = map[string]string{
	`^[a-z][a-z0-9-]*$`:          "must start with a lowercase letter and hold only lowercase letters, digits and hyphens",
	`^[a-z][a-z0-9_-]*$`:         "must start with a lowercase letter and hold only lowercase letters, digits, '_' and '-'",
	`^[a-zA-Z_][a-zA-Z0-9_]*$`:   "must start with a letter or '_' and hold only letters, digits and '_' (no spaces or hyphens)",
	`^[a-z]{2}$`:                 "must be a two-letter lowercase language code such as \"en\"",
	`^[a-z0-9_]+$`:               "must hold only lowercase letters, digits and '_'",
	semverPattern:                "must be a semantic version such as \"1.0.0\" (quote it in YAML: version: \"1.0.0\")",
	`^[a-zA-Z0-9_-]+$`:           "must hold only letters, digits, '_' and '-'",
	`^[a-zA-Z_:][a-zA-Z0-9_:]*$`: "must start with a letter, '_' or ':' and hold only letters, digits, '_' and ':'",
}

const semverPattern = `^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`

// allowedProperties lists the property names the schema object at schemaURL (an absolute
// keyword location such as ".../promptpack.schema.json#/$defs/WorkflowState") declares.
func allowedProperties(url string) []string {
	if _, err := packSchema(); err != nil || schemaDoc == nil {
		return nil
	}
	_, frag, _ := strings.Cut(url, "#")
	var cur any = schemaDoc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// suggest returns the candidate closest to s when it is a plausible typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD || (d == bestD && best != "" && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > len(s)/2 {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, ", ")
}

func typeList(ts []string) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		switch t {
		case "object", "array", "integer":
			parts[i] = "an " + t
		case "null":
			parts[i] = "null"
		default:
			parts[i] = "a " + t
		}
	}
	return strings.Join(parts, " or ")
}

// describeValue renders a value for "(got ...)" parts of messages.
func describeValue(n *node) string {
	if n == nil {
		return "nothing"
	}
	switch n.kind {
	case kindString:
		s := n.str
		if r := []rune(s); len(r) > 60 {
			s = string(r[:57]) + "..."
		}
		return strconv.Quote(s)
	case kindNumber:
		return "number " + n.str
	case kindBool:
		return "boolean " + strconv.FormatBool(n.b)
	case kindNull:
		return "null"
	case kindObject:
		return "an object"
	case kindArray:
		return "a list"
	}
	return "?"
}

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
