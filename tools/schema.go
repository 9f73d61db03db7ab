package tools

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// objectSchema is the part of a JSON Schema object that the parameter check reads.
type objectSchema struct {
	Type                 json.RawMessage            `json:"type"`
	Properties           map[string]json.RawMessage `json:"properties"`
	Required             []string                   `json:"required"`
	AdditionalProperties json.RawMessage            `json:"additionalProperties"`
}

// schemaMismatches compares a pack tool's parameters (what the model is told it may
// send) with the input schema of the MCP tool that serves it (what the server accepts)
// and lists every way a call the model builds from the first would be refused by the
// second: a property the server requires that the pack does not require, a property the
// pack offers that the server does not accept (additionalProperties: false), and a
// property whose types differ (an integer is a number). Descriptions, formats and
// nested schemas are not compared.
func schemaMismatches(pack json.RawMessage, server any) []string {
	var p, s objectSchema
	if err := json.Unmarshal(pack, &p); err != nil {
		return []string{fmt.Sprintf("the pack's parameters are not a JSON Schema object: %v", err)}
	}
	raw, err := json.Marshal(server)
	if err != nil {
		return []string{fmt.Sprintf("the server's input schema cannot be read: %v", err)}
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return []string{fmt.Sprintf("the server's input schema is not a JSON Schema object: %v", err)}
	}
	if t := types(s.Type); len(t) > 0 && !slices.Contains(t, "object") {
		return []string{fmt.Sprintf("the server's input schema has type %s, not object", strings.Join(t, "|"))}
	}
	var out []string
	for _, name := range sortedUnique(s.Required) {
		switch {
		case p.Properties[name] == nil:
			out = append(out, fmt.Sprintf("the server requires %q, which the pack's parameters do not declare", name))
		case !slices.Contains(p.Required, name):
			out = append(out, fmt.Sprintf("the server requires %q, which the pack's parameters declare but do not require", name))
		}
	}
	closed := strings.TrimSpace(string(s.AdditionalProperties)) == "false"
	for _, name := range slices.Sorted(maps.Keys(p.Properties)) {
		sp, ok := s.Properties[name]
		if !ok {
			if closed {
				out = append(out, fmt.Sprintf("the pack's parameters declare %q, which the server does not accept (its input schema sets additionalProperties: false)", name))
			}
			continue
		}
		pt, st := propTypes(p.Properties[name]), propTypes(sp)
		if len(pt) == 0 || len(st) == 0 {
			continue
		}
		for _, t := range pt {
			if !slices.Contains(st, t) && !(t == "integer" && slices.Contains(st, "number")) {
				out = append(out, fmt.Sprintf("%q is %s in the pack's parameters but %s on the server", name, strings.Join(pt, "|"), strings.Join(st, "|")))
				break
			}
		}
	}
	return out
}

// propTypes reads the "type" of a property schema.
func propTypes(raw json.RawMessage) []string {
	var v struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return types(v.Type)
}

// types reads a JSON Schema "type": a string or a list of strings.
func types(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		sort.Strings(many)
		return many
	}
	return nil
}

func sortedUnique(list []string) []string {
	out := slices.Clone(list)
	sort.Strings(out)
	return slices.Compact(out)
}
