package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxJSONDepth is how deeply a request body may nest arrays and objects.
const MaxJSONDepth = 64

// checkJSONShape refuses a body that every JSON reader would not read the same way:
// bytes that are not UTF-8 (or \u escapes of unpaired surrogates), an object with the
// same key twice (readers disagree on which wins), nesting deeper than MaxJSONDepth, or
// a number out of range (checkJSONNumber).
// Each refusal is a 400 naming the field (a path such as resumeValue.turn.messageId or
// tags[2]) and the offset. Syntax errors are left to the decoder, which reports them.
func checkJSONShape(body []byte) error {
	checkStrings := !utf8.Valid(body) || bytes.Contains(body, []byte(`\u`)) || bytes.Contains(body, []byte(`\U`))
	type frame struct {
		object    bool
		path      string
		keys      map[string]bool
		key       string // the current key (objects)
		expectKey bool
		index     int // the current index (arrays)
	}
	var stack []*frame
	child := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.object {
			return joinPath(f.path, f.key)
		}
		return f.path + "[" + strconv.Itoa(f.index) + "]"
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.object {
			f.expectKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		end := dec.InputOffset()
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				path := child()
				if len(stack) >= MaxJSONDepth {
					return badRequest("%s nests arrays and objects deeper than %d levels (offset %d)", fieldName(path), MaxJSONDepth, end).
						with("field", fieldName(path)).with("offset", end)
				}
				stack = append(stack, &frame{object: d == '{', path: path, keys: map[string]bool{}, expectKey: d == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		}
		if s, ok := tok.(string); ok && checkStrings {
			path := child()
			if top != nil && top.object && top.expectKey {
				path = joinPath(top.path, s)
			}
			if err := checkJSONString(body[start:end], path, start); err != nil {
				return err
			}
		}
		if n, ok := tok.(json.Number); ok {
			if err := checkJSONNumber(string(n), child(), start); err != nil {
				return err
			}
		}
		if top != nil && top.object && top.expectKey {
			key := tok.(string)
			if top.keys[key] {
				path := joinPath(top.path, key)
				return badRequest("duplicate key %q in %s (offset %d): each key may appear once", key, fieldName(top.path), end).
					with("field", path).with("offset", end)
			}
			top.keys[key] = true
			top.key, top.expectKey = key, false
			continue
		}
		valueDone()
	}
}

// MaxJSONInteger is the largest integer magnitude a request body may write as an
// integer: 2^53-1, the largest every JSON reader holds exactly (RFC 7493 §2.2; readers
// that decode numbers as IEEE 754 doubles round larger ones).
const MaxJSONInteger = 1<<53 - 1

// checkJSONNumber refuses a number literal that readers would not read as written: one
// beyond the range of an IEEE 754 double (1e400: Go's decoder fails on it, others read
// infinity), and an integer literal beyond ±MaxJSONInteger (a 40-digit id). Such a
// value is accepted as a string.
func checkJSONNumber(lit, path string, offset int64) error {
	shown := lit
	if len(shown) > 32 {
		shown = shown[:24] + "…(" + strconv.Itoa(len(lit)) + " characters)"
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil // not a number literal: the decoder reports it
	}
	if math.IsInf(f, 0) {
		return badRequest("%s is the number %s, outside the range of a JSON number (a double, at most about 1.8e308 in magnitude); send it as a string (offset %d)", fieldName(path), shown, offset).
			with("field", fieldName(path)).with("offset", offset)
	}
	if !strings.ContainsAny(lit, ".eE") && math.Abs(f) > MaxJSONInteger {
		return badRequest("%s is the integer %s, beyond ±%d (2^53-1), the largest integer every JSON reader holds exactly; send it as a string (offset %d)", fieldName(path), shown, int64(MaxJSONInteger), offset).
			with("field", fieldName(path)).with("offset", offset)
	}
	return nil
}

// checkJSONString checks one string token as it appears in the body (raw, with any
// separator before it): valid UTF-8, and \u escapes of surrogates only in pairs.
func checkJSONString(raw []byte, path string, offset int64) error {
	if !utf8.Valid(raw) {
		return badRequest("%s holds bytes that are not valid UTF-8 (near offset %d)", fieldName(path), offset).
			with("field", fieldName(path)).with("offset", offset)
	}
	s := string(raw)
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			continue
		}
		if s[i+1] != 'u' {
			i++ // an escaped character, e.g. \\ or \"
			continue
		}
		r, ok := hex4(s, i+2)
		if !ok {
			continue // malformed: the decoder reports it
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			low, ok := rune(0), false
			if i+11 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				low, ok = hex4(s, i+8)
			}
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return unpaired(path, offset)
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return unpaired(path, offset)
		default:
			i += 5
		}
	}
	return nil
}

func unpaired(path string, offset int64) error {
	return badRequest("%s holds a \\u escape of an unpaired UTF-16 surrogate, which is not a character (near offset %d)", fieldName(path), offset).
		with("field", fieldName(path)).with("offset", offset)
}

func hex4(s string, at int) (rune, bool) {
	if at+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s[at:at+4], 16, 32)
	return rune(n), err == nil
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// fieldName names a path for messages: the body itself when empty.
func fieldName(path string) string {
	if strings.TrimSpace(path) == "" {
		return "(body)"
	}
	return path
}
