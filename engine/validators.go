package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/wop-dev/wop/packs"
)

// DefaultBlockedText replaces a round's text that a validator blocked, when the
// validator declares no message.
const DefaultBlockedText = "I'm sorry, I can't provide that response."

// validate enforces the prompt's validators on one round's text (RFC 0015: a
// triggered validator rewrites or blocks; fail_on_violation is ignored; enabled: false
// turns it off). Supported types:
//
//   - banned_words (params.words): any word, matched whole and case-insensitively,
//     blocks the text.
//   - max_length (params.max_characters, or params.max_length): longer text is
//     truncated to that many characters.
//   - regex_match / regex (params.pattern): text the pattern does not match is blocked.
//
// A blocked text is replaced by the validator's message (or DefaultBlockedText) and
// the remaining validators are skipped. Unknown types, and validators whose params are
// missing or invalid, pass the text unchanged.
func (m *Machine) validate(t *turn, prompt *packs.Prompt, text string) string {
	if text == "" {
		return text
	}
	for _, v := range prompt.Validators {
		if v.Enabled != nil && !*v.Enabled {
			continue
		}
		var params map[string]any
		if len(v.Params) > 0 {
			_ = json.Unmarshal(v.Params, &params) // invalid params: the validator has no effect
		}
		action, reason := "", ""
		switch v.Type {
		case "banned_words":
			for _, w := range stringList(params["words"]) {
				if w == "" {
					continue
				}
				re, err := regexp.Compile(`(?i)(^|\W)` + regexp.QuoteMeta(w) + `($|\W)`)
				if err == nil && re.MatchString(text) {
					action, reason = "blocked", fmt.Sprintf("the text contains the banned word %q", w)
					break
				}
			}
		case "max_length":
			n := intParam(params, "max_characters")
			if n <= 0 {
				n = intParam(params, "max_length")
			}
			if n > 0 && utf8.RuneCountInString(text) > n {
				runes := []rune(text)
				text = string(runes[:n])
				m.emitValidator(t, v, "truncated", fmt.Sprintf("the text was longer than %d characters", n))
			}
		case "regex_match", "regex":
			pat, _ := params["pattern"].(string)
			if pat == "" {
				continue
			}
			re, err := regexp.Compile(pat)
			if err == nil && !re.MatchString(text) {
				action, reason = "blocked", fmt.Sprintf("the text does not match the pattern %q", pat)
			}
		}
		if action == "blocked" {
			m.emitValidator(t, v, action, reason)
			if v.Message != "" {
				return v.Message
			}
			return DefaultBlockedText
		}
	}
	return text
}

func (m *Machine) emitValidator(t *turn, v packs.Validator, action, reason string) {
	t.rt.Emit(Event{Kind: EventValidator, State: m.st.CurrentState, Validator: &ValidatorEvent{
		ID: v.ID, Type: v.Type, Action: action, Reason: reason,
	}})
}

func stringList(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

func intParam(params map[string]any, key string) int {
	f, _ := params[key].(float64)
	return int(f)
}
