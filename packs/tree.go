package packs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// node is a JSON-shaped document tree that remembers where each value (and each object
// key) came from. YAML and JSON files both parse into it, so the rest of the loader treats
// them the same way.
type node struct {
	kind      nodeKind
	line, col int
	str       string // string value, or canonical number literal
	b         bool
	fields    []field // objects, in source order
	items     []*node // arrays

	// How a string was written, so positions inside it can be computed (see offsetPos):
	// verbatim strings appear in the source exactly as their value, shifted by quoteCols;
	// literal block scalars (|) have their content from line+1 on, indented by blockIndent.
	verbatim    bool
	quoteCols   int
	blockIndent int
}

type field struct {
	key       string
	line, col int // position of the key
	val       *node
}

type nodeKind int

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

func (k nodeKind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindObject:
		return "object"
	case kindArray:
		return "array"
	}
	return "unknown"
}

// get returns the value of an object's key, or nil.
func (n *node) get(key string) *node {
	if f := n.getField(key); f != nil {
		return f.val
	}
	return nil
}

func (n *node) getField(key string) *field {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i := range n.fields {
		if n.fields[i].key == key {
			return &n.fields[i]
		}
	}
	return nil
}

// toAny converts the tree to the values encoding/json produces with UseNumber:
// map[string]any, []any, string, json.Number, bool and nil.
func (n *node) toAny() any {
	switch n.kind {
	case kindBool:
		return n.b
	case kindNumber:
		return json.Number(n.str)
	case kindString:
		return n.str
	case kindObject:
		m := make(map[string]any, len(n.fields))
		for _, f := range n.fields {
			m[f.key] = f.val.toAny()
		}
		return m
	case kindArray:
		a := make([]any, len(n.items))
		for i, it := range n.items {
			a[i] = it.toAny()
		}
		return a
	}
	return nil
}

// canonicalJSON encodes the tree as compact JSON with object keys sorted.
func (n *node) canonicalJSON() ([]byte, error) {
	return json.Marshal(n.toAny())
}

// pos is a source position with the document path that leads to it.
type pos struct {
	line, col int
	path      string
}

// locate walks a JSON-pointer-like token list and returns the position of the deepest node
// it can reach. When key is true and the last token names an object key, the position of
// the key is returned instead of its value (used for "unknown field" errors).
func (n *node) locate(tokens []string, key bool) pos {
	cur := n
	p := pos{line: n.line, col: n.col}
	var path strings.Builder
	for i, tok := range tokens {
		switch cur.kind {
		case kindObject:
			f := cur.getField(tok)
			appendKey(&path, tok)
			if f == nil {
				p.path = path.String()
				return p
			}
			if key && i == len(tokens)-1 {
				p.line, p.col = f.line, f.col
			} else {
				p.line, p.col = f.val.line, f.val.col
			}
			cur = f.val
		case kindArray:
			idx, err := strconv.Atoi(tok)
			fmt.Fprintf(&path, "[%s]", tok)
			if err != nil || idx < 0 || idx >= len(cur.items) {
				p.path = path.String()
				return p
			}
			cur = cur.items[idx]
			p.line, p.col = cur.line, cur.col
		default:
			p.path = path.String()
			return p
		}
	}
	p.path = path.String()
	return p
}

var plainKey = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// appendKey adds an object key to a dotted path, quoting keys that are not plain names.
func appendKey(b *strings.Builder, key string) {
	if plainKey.MatchString(key) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(key)
		return
	}
	fmt.Fprintf(b, "[%s]", strconv.Quote(key))
}

// dotPath renders a list of keys as a dotted path (keys only, no array indexes).
func dotPath(keys ...string) string {
	var b strings.Builder
	for _, k := range keys {
		appendKey(&b, k)
	}
	return b.String()
}

// Limits that keep hostile input (alias bombs, deep nesting) from exhausting memory or stack.
const (
	maxTreeNodes = 1 << 20
	maxTreeDepth = 512
)

// parseError is a syntax error with a position.
type parseError struct {
	line, col int
	msg       string
}

func (e *parseError) Error() string { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }

// parseTree parses YAML or JSON (chosen by the file extension; anything not ending in .json is
// read as YAML) into a node tree.
func parseTree(filename string, data []byte) (*node, error) {
	if strings.HasSuffix(strings.ToLower(filename), ".json") {
		return parseJSONTree(data)
	}
	return parseYAMLTree(data)
}

// ---- YAML ----

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parseYAMLTree(data []byte) (*node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &parseError{line: 1, col: 1, msg: "the file is empty"}
		}
		return nil, yamlSyntaxError(data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &parseError{line: extra.Line, col: extra.Column, msg: "a pack file holds one YAML document; remove the second document (---)"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlSyntaxError(data, err)
	}
	c := &yamlConv{active: map[*yaml.Node]bool{}, lines: strings.Split(string(data), "\n")}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, &parseError{line: 1, col: 1, msg: "the file is empty"}
		}
		root = root.Content[0]
	}
	return c.conv(root, 0)
}

// yamlSyntaxError turns a yaml.v3 syntax error into a positioned parseError. yaml.v3 names
// the line where the enclosing block starts (often far above the mistake) and no column,
// so the line is found again: the first prefix of whole lines, from that line on, that
// fails with the same problem ends at the offending line. The column is where the
// problem starts on it (a tab, a second ": ", or the first non-blank character).
func yamlSyntaxError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := strings.SplitAfter(string(data), "\n")
	// The search re-parses growing prefixes; a budget of bytes parsed bounds it on
	// large files (it then keeps yaml.v3's line).
	budget := 16 << 20
	start, end := max(line, 1), 0 // end: the length of lines[:n]
	for i := 0; i < start-1 && i < len(lines); i++ {
		end += len(lines[i])
	}
	for n := start; n <= len(lines) && budget > 0; n++ {
		end += len(lines[n-1])
		budget -= end
		if yamlProblem(string(data[:end])) == msg {
			line = n
			break
		}
	}
	col := 1
	if line >= 1 && line <= len(lines) {
		col = problemColumn(strings.TrimRight(lines[line-1], "\r\n"), msg)
	}
	hint := ""
	if strings.Contains(msg, "did not find expected key") || strings.Contains(msg, "did not find expected '-' indicator") {
		hint = " (check the indentation of this line)"
	}
	return &parseError{line: line, col: col, msg: "YAML syntax error: " + msg + hint}
}

// yamlProblem returns the problem yaml.v3 reports for src ("" when it parses).
func yamlProblem(src string) string {
	dec := yaml.NewDecoder(strings.NewReader(src))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return ""
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
			msg = m[2]
		}
		return msg
	}
}

// problemColumn guesses the 1-based column where problem starts on line.
func problemColumn(line, problem string) int {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	switch {
	case strings.Contains(problem, "cannot start any token") || strings.Contains(problem, "tab"):
		if i := strings.IndexByte(line, '\t'); i >= 0 {
			return utf8.RuneCountInString(line[:i]) + 1
		}
	case strings.Contains(problem, "did not find expected ',' or"):
		// An unclosed flow collection: point at its opening bracket.
		var open []int
	scan:
		for i := 0; i < len(line); i++ {
			switch c := line[i]; c {
			case '[', '{':
				open = append(open, i)
			case ']', '}':
				if len(open) == 0 {
					break scan
				}
				if top := line[open[len(open)-1]]; (c == ']') != (top == '[') {
					break scan // closed by the wrong bracket: the opener on top is unclosed
				}
				open = open[:len(open)-1]
			}
		}
		if len(open) > 0 {
			return utf8.RuneCountInString(line[:open[len(open)-1]]) + 1
		}
	case strings.Contains(problem, "mapping values are not allowed"):
		if first := strings.Index(line, ": "); first >= 0 {
			if second := strings.Index(line[first+2:], ":"); second >= 0 {
				return utf8.RuneCountInString(line[:first+2+second]) + 1
			}
		}
	}
	if indent == len(line) {
		return 1
	}
	return indent + 1
}

type yamlConv struct {
	lines  []string // source lines, to measure the indentation of block scalars
	count  int
	active map[*yaml.Node]bool // alias targets being expanded (cycle guard)
}

func (c *yamlConv) conv(y *yaml.Node, depth int) (*node, error) {
	c.count++
	if c.count > maxTreeNodes {
		return nil, &parseError{line: y.Line, col: y.Column, msg: "document too large (too many values after expanding aliases)"}
	}
	if depth > maxTreeDepth {
		return nil, &parseError{line: y.Line, col: y.Column, msg: "document nested too deeply"}
	}
	switch y.Kind {
	case yaml.AliasNode:
		if y.Alias == nil {
			return nil, &parseError{line: y.Line, col: y.Column, msg: "unknown alias"}
		}
		if c.active[y.Alias] {
			return nil, &parseError{line: y.Line, col: y.Column, msg: fmt.Sprintf("alias *%s refers to itself", y.Value)}
		}
		c.active[y.Alias] = true
		n, err := c.conv(y.Alias, depth+1)
		delete(c.active, y.Alias)
		return n, err
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			return &node{kind: kindNull, line: y.Line, col: y.Column}, nil
		}
		return c.conv(y.Content[0], depth+1)
	case yaml.MappingNode:
		return c.mapping(y, depth)
	case yaml.SequenceNode:
		n := &node{kind: kindArray, line: y.Line, col: y.Column}
		for _, it := range y.Content {
			v, err := c.conv(it, depth+1)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, v)
		}
		return n, nil
	case yaml.ScalarNode:
		n, err := yamlScalar(y)
		if err == nil && n.kind == kindString {
			c.markStringStyle(y, n)
		}
		return n, err
	}
	return nil, &parseError{line: y.Line, col: y.Column, msg: "unsupported YAML node"}
}

func (c *yamlConv) mapping(y *yaml.Node, depth int) (*node, error) {
	n := &node{kind: kindObject, line: y.Line, col: y.Column}
	seen := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(y.Content); i += 2 {
		k, v := y.Content[i], y.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind == yaml.AliasNode && k.Alias != nil && k.Alias.Kind == yaml.ScalarNode {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return nil, &parseError{line: k.Line, col: k.Column, msg: "a mapping key must be a plain string"}
		}
		key := k.Value
		if first, dup := seen[key]; dup {
			return nil, &parseError{line: k.Line, col: k.Column, msg: fmt.Sprintf("duplicate key %q (first defined on line %d)", key, first)}
		}
		seen[key] = k.Line
		val, err := c.conv(v, depth+1)
		if err != nil {
			return nil, err
		}
		n.fields = append(n.fields, field{key: key, line: k.Line, col: k.Column, val: val})
	}
	// YAML merge keys (<<: *base): merged keys never override explicit ones; earlier
	// sources win over later ones.
	for _, m := range merges {
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = m.Content
		}
		for _, s := range srcs {
			sn, err := c.conv(s, depth+1)
			if err != nil {
				return nil, err
			}
			if sn.kind != kindObject {
				return nil, &parseError{line: s.Line, col: s.Column, msg: "a merge key (<<) must refer to a mapping"}
			}
			for _, f := range sn.fields {
				if _, ok := seen[f.key]; ok {
					continue
				}
				seen[f.key] = f.line
				n.fields = append(n.fields, f)
			}
		}
	}
	return n, nil
}

// markStringStyle records how a YAML string was written, for positions inside it.
func (c *yamlConv) markStringStyle(y *yaml.Node, n *node) {
	switch {
	case y.Style&yaml.LiteralStyle != 0:
		for i := y.Line; i < len(c.lines); i++ { // lines[y.Line] is the line after the header
			if l := c.lines[i]; strings.TrimSpace(l) != "" {
				n.blockIndent = len(l) - len(strings.TrimLeft(l, " "))
				break
			}
		}
	case y.Style&yaml.FoldedStyle != 0 || strings.Contains(y.Value, "\n"):
	default:
		// A one-line string is verbatim when the source shows exactly its value (no
		// escapes), possibly inside quotes.
		quote := ""
		switch {
		case y.Style&yaml.DoubleQuotedStyle != 0:
			quote = `"`
		case y.Style&yaml.SingleQuotedStyle != 0:
			quote = "'"
		}
		if y.Line < 1 || y.Line > len(c.lines) {
			return
		}
		src := []rune(c.lines[y.Line-1])
		if y.Column < 1 || y.Column > len(src) {
			return
		}
		if strings.HasPrefix(string(src[y.Column-1:]), quote+y.Value+quote) {
			n.verbatim, n.quoteCols = true, len(quote)
		}
	}
}

// offsetPos returns the source position of byte offset k of a string value, or the
// value's own position when it cannot be known (folded or escaped strings).
func (n *node) offsetPos(k int) (line, col int) {
	if n == nil || n.kind != kindString || k < 0 || k > len(n.str) {
		if n == nil {
			return 0, 0
		}
		return n.line, n.col
	}
	before := n.str[:k]
	switch {
	case n.blockIndent > 0:
		nl := strings.LastIndexByte(before, '\n')
		return n.line + 1 + strings.Count(before, "\n"), n.blockIndent + 1 + utf8.RuneCountInString(before[nl+1:])
	case n.verbatim:
		return n.line, n.col + n.quoteCols + utf8.RuneCountInString(before)
	}
	return n.line, n.col
}

func yamlScalar(y *yaml.Node) (*node, error) {
	n := &node{line: y.Line, col: y.Column}
	switch y.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		n.kind, n.str = kindString, y.Value
	case "!!null":
		n.kind = kindNull
	case "!!bool":
		var b bool
		if err := y.Decode(&b); err != nil {
			return nil, &parseError{line: y.Line, col: y.Column, msg: fmt.Sprintf("invalid boolean %q", y.Value)}
		}
		n.kind, n.b = kindBool, b
	case "!!int", "!!float":
		var v any
		if err := y.Decode(&v); err != nil {
			return nil, &parseError{line: y.Line, col: y.Column, msg: fmt.Sprintf("invalid number %q", y.Value)}
		}
		var lit string
		switch x := v.(type) {
		case int:
			lit = strconv.FormatInt(int64(x), 10)
		case int64:
			lit = strconv.FormatInt(x, 10)
		case uint64:
			lit = strconv.FormatUint(x, 10)
		case float64:
			if math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, &parseError{line: y.Line, col: y.Column, msg: fmt.Sprintf("%s is not a JSON number; quote it if you mean a string", y.Value)}
			}
			lit = formatFloat(x)
		default:
			return nil, &parseError{line: y.Line, col: y.Column, msg: fmt.Sprintf("invalid number %q", y.Value)}
		}
		n.kind, n.str = kindNumber, lit
	default:
		return nil, &parseError{line: y.Line, col: y.Column, msg: fmt.Sprintf("unsupported YAML tag %s; packs hold plain JSON-compatible values", y.Tag)}
	}
	return n, nil
}

// canonicalNumber normalises a JSON number literal so that 1, 1.0 and 1e0 encode alike.
func canonicalNumber(lit string) (string, error) {
	if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return strconv.FormatInt(i, 10), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("number %s is out of range", lit)
	}
	return formatFloat(f), nil
}

func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// ---- JSON ----

// jsonParser is a small recursive-descent JSON parser that records positions and rejects
// duplicate keys (encoding/json silently keeps the last one).
type jsonParser struct {
	data  []byte
	off   int
	count int
}

func parseJSONTree(data []byte) (*node, error) {
	p := &jsonParser{data: data}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		p.off = 3
	}
	p.skipWS()
	if p.off >= len(p.data) {
		return nil, p.errAt(p.off, "the file is empty")
	}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.off < len(p.data) {
		return nil, p.errAt(p.off, "unexpected text after the end of the JSON document")
	}
	return n, nil
}

func (p *jsonParser) position(off int) (int, int) {
	if off > len(p.data) {
		off = len(p.data)
	}
	line := 1 + bytes.Count(p.data[:off], []byte{'\n'})
	start := bytes.LastIndexByte(p.data[:off], '\n') + 1
	return line, 1 + utf8.RuneCount(p.data[start:off])
}

func (p *jsonParser) errAt(off int, msg string) error {
	l, c := p.position(off)
	return &parseError{line: l, col: c, msg: "JSON syntax error: " + msg}
}

func (p *jsonParser) skipWS() {
	for p.off < len(p.data) {
		switch p.data[p.off] {
		case ' ', '\t', '\n', '\r':
			p.off++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (*node, error) {
	p.count++
	if p.count > maxTreeNodes {
		return nil, p.errAt(p.off, "document too large")
	}
	if depth > maxTreeDepth {
		return nil, p.errAt(p.off, "document nested too deeply")
	}
	p.skipWS()
	if p.off >= len(p.data) {
		return nil, p.errAt(p.off, "unexpected end of input")
	}
	start := p.off
	line, col := p.position(start)
	n := &node{line: line, col: col}
	switch c := p.data[p.off]; {
	case c == '{':
		n.kind = kindObject
		p.off++
		p.skipWS()
		if p.off < len(p.data) && p.data[p.off] == '}' {
			p.off++
			return n, nil
		}
		seen := map[string]int{}
		for {
			p.skipWS()
			if p.off >= len(p.data) || p.data[p.off] != '"' {
				return nil, p.errAt(p.off, "expected a string object key")
			}
			kl, kc := p.position(p.off)
			key, err := p.str()
			if err != nil {
				return nil, err
			}
			if first, dup := seen[key]; dup {
				return nil, &parseError{line: kl, col: kc, msg: fmt.Sprintf("duplicate key %q (first defined on line %d)", key, first)}
			}
			seen[key] = kl
			p.skipWS()
			if p.off >= len(p.data) || p.data[p.off] != ':' {
				return nil, p.errAt(p.off, "expected ':' after an object key")
			}
			p.off++
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, field{key: key, line: kl, col: kc, val: v})
			p.skipWS()
			if p.off >= len(p.data) {
				return nil, p.errAt(p.off, "unexpected end of input in an object")
			}
			if p.data[p.off] == ',' {
				p.off++
				continue
			}
			if p.data[p.off] == '}' {
				p.off++
				return n, nil
			}
			return nil, p.errAt(p.off, "expected ',' or '}' in an object")
		}
	case c == '[':
		n.kind = kindArray
		p.off++
		p.skipWS()
		if p.off < len(p.data) && p.data[p.off] == ']' {
			p.off++
			return n, nil
		}
		for {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, v)
			p.skipWS()
			if p.off >= len(p.data) {
				return nil, p.errAt(p.off, "unexpected end of input in an array")
			}
			if p.data[p.off] == ',' {
				p.off++
				continue
			}
			if p.data[p.off] == ']' {
				p.off++
				return n, nil
			}
			return nil, p.errAt(p.off, "expected ',' or ']' in an array")
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		n.kind, n.str = kindString, s
		n.verbatim = !bytes.ContainsRune(p.data[start:p.off], '\\')
		n.quoteCols = 1
		return n, nil
	case c == '-' || (c >= '0' && c <= '9'):
		for p.off < len(p.data) && strings.IndexByte("+-0123456789.eE", p.data[p.off]) >= 0 {
			p.off++
		}
		lit := string(p.data[start:p.off])
		var num json.Number
		if err := json.Unmarshal([]byte(lit), &num); err != nil {
			return nil, p.errAt(start, fmt.Sprintf("invalid number %q", lit))
		}
		canon, err := canonicalNumber(lit)
		if err != nil {
			return nil, p.errAt(start, err.Error())
		}
		n.kind, n.str = kindNumber, canon
		return n, nil
	default:
		for _, lit := range []struct {
			word string
			kind nodeKind
			b    bool
		}{{"true", kindBool, true}, {"false", kindBool, false}, {"null", kindNull, false}} {
			if bytes.HasPrefix(p.data[p.off:], []byte(lit.word)) {
				p.off += len(lit.word)
				n.kind, n.b = lit.kind, lit.b
				return n, nil
			}
		}
		return nil, p.errAt(start, fmt.Sprintf("unexpected character %q", rune(c)))
	}
}

// str reads a JSON string starting at the opening quote.
func (p *jsonParser) str() (string, error) {
	start := p.off
	p.off++
	for p.off < len(p.data) {
		switch p.data[p.off] {
		case '\\':
			p.off += 2
			continue
		case '"':
			p.off++
			var s string
			if err := json.Unmarshal(p.data[start:p.off], &s); err != nil {
				return "", p.errAt(start, "invalid string (bad escape or control character)")
			}
			return s, nil
		}
		p.off++
	}
	return "", p.errAt(start, "unterminated string")
}
