package packagent

import "encoding/json"

// mustJSON marshals v as the run core's does: the values passed are built by this
// package from JSON-safe types, so a failure is a programming error and is turned into
// a JSON string that names it rather than a panic inside workflow code. The payloads
// it builds are recorded in run events, so they encode as the run core's would.
func mustJSON(v any) json.RawMessage {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return json.RawMessage("null")
		}
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"marshalError": err.Error()})
	}
	return b
}

// orJSON is raw, or def when raw is empty or null.
func orJSON(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(def)
	}
	return raw
}

// truncateText cuts s to at most n bytes on a rune boundary, ending in "…" when it
// cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
