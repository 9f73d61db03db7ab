package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
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
//   - regex_match / regex (params.pattern): text the pattern does not match is blocked;
//     with params.expect_match false, text it matches is.
//
// params.direction (PromptKit's guardrail parameter) says what a validator checks:
// output (the default: the round's text), input (the user's message, validateInput) or
// both. A blocked text is replaced by the validator's message (its message, else
// params.message, else DefaultBlockedText) and the remaining validators are skipped.
// Unknown types, and validators whose params are missing or invalid, pass the text
// unchanged. Runs recorded before expect_match, direction and params.message were read
// read none of them (ValidatorsRuntime).
func (m *Machine) validate(t *turn, prompt *packs.Prompt, text string) string {
	out, _ := m.runValidators(t, prompt, text, false)
	return out
}

// validateInput checks the user's message of a turn with the validators whose
// direction is input or both; a blocked message is not answered by the model, and the
// validator's message is the turn's reply.
func (m *Machine) validateInput(t *turn, prompt *packs.Prompt, text string) (string, bool) {
	if !slices.ContainsFunc(prompt.Validators, func(v packs.Validator) bool { return validatorParams(v).direction != directionOutput }) || !readsValidatorParams(t) {
		return "", false
	}
	return m.runValidators(t, prompt, text, true)
}

// Validator directions (params.direction).
const (
	directionOutput = "output"
	directionInput  = "input"
	directionBoth   = "both"
)

// validatorReading is what the newer reading of a validator's params adds.
type validatorReading struct {
	direction   string
	expectMatch bool
	message     string
	// newer is set when any of them differs from the earlier reading.
	newer bool
}

func validatorParams(v packs.Validator) validatorReading {
	var params map[string]any
	_ = json.Unmarshal(v.Params, &params)
	r := validatorReading{direction: directionOutput, expectMatch: true}
	if d, _ := params["direction"].(string); d == directionInput || d == directionBoth {
		r.direction, r.newer = d, true
	}
	if e, ok := params["expect_match"].(bool); ok && !e {
		r.expectMatch, r.newer = false, true
	}
	if msg, _ := params["message"].(string); msg != "" && v.Message == "" {
		r.message, r.newer = msg, true
	}
	return r
}

// readsValidatorParams reports whether the run reads direction, expect_match and
// params.message.
func readsValidatorParams(t *turn) bool {
	if r, ok := t.rt.(ValidatorsRuntime); ok {
		return r.ValidatorParamsRead()
	}
	return true
}

// ValidatorsRuntime is a Runtime that says whether its run reads a validator's
// direction, expect_match and params.message; a Runtime without the method does. The
// run workflow answers with its gate, asked at the first validator that has one.
type ValidatorsRuntime interface {
	ValidatorParamsRead() bool
}

// runValidators applies the validators of one direction (input, or output) to text and
// reports whether one blocked it.
func (m *Machine) runValidators(t *turn, prompt *packs.Prompt, text string, input bool) (string, bool) {
	if text == "" {
		return text, false
	}
	for _, v := range prompt.Validators {
		if v.Enabled != nil && !*v.Enabled {
			continue
		}
		var params map[string]any
		if len(v.Params) > 0 {
			_ = json.Unmarshal(v.Params, &params) // invalid params: the validator has no effect
		}
		read := validatorReading{direction: directionOutput, expectMatch: true}
		if r := validatorParams(v); r.newer && readsValidatorParams(t) {
			read = r
		}
		if (read.direction == directionInput) != input && read.direction != directionBoth {
			continue
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
			switch {
			case err != nil:
			case read.expectMatch && !re.MatchString(text):
				action, reason = "blocked", fmt.Sprintf("the text does not match the pattern %q", pat)
			case !read.expectMatch && re.MatchString(text):
				action, reason = "blocked", fmt.Sprintf("the text matches the pattern %q", pat)
			}
		}
		if action == "blocked" {
			m.emitValidator(t, v, action, reason)
			return cmp.Or(v.Message, read.message, DefaultBlockedText), true
		}
	}
	return text, false
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
