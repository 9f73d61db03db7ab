package protocol

import "encoding/json"

// MustJSON encodes a payload the host builds from JSON-safe types. A failure is a
// programming error, so it becomes a JSON object naming it ({"marshalError": …})
// rather than a panic inside workflow code. A json.RawMessage is taken as it is (null
// when empty). The run core and the pack agent encode every payload of their events
// through it, so the same value always records the same bytes.
func MustJSON(v any) json.RawMessage {
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

// OrJSON is raw, or def when raw is empty or null.
func OrJSON(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(def)
	}
	return raw
}
