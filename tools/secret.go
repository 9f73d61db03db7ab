package tools

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// Secret is a header or environment value of a binding. It may hold a secret taken from
// the worker's environment (${VAR}), so it prints, logs and encodes as "[REDACTED]";
// only the executors read its value.
type Secret string

// String implements fmt.Stringer.
func (Secret) String() string { return "[REDACTED]" }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return `"[REDACTED]"` }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }

// MarshalJSON encodes the secret as "[REDACTED]".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"[REDACTED]"`), nil }

// Value returns the secret's value. Never log it or put it into a result.
func (s Secret) Value() string { return string(s) }

// varRef matches ${NAME}: an environment variable reference.
var varRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// validVarName is the shape of an environment variable name.
var validVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces every ${NAME} in s with the worker's environment variable NAME. It
// reports the names it read (their values are secrets) and an error for a malformed
// reference or a variable that is not set.
func expand(s string, getenv func(string) string) (string, []string, error) {
	if strings.Count(s, "${") != len(varRef.FindAllStringIndex(s, -1)) {
		return s, nil, fmt.Errorf("unterminated ${ in the value; write ${NAME}")
	}
	var (
		used []string
		err  error
	)
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if err != nil {
			return m
		}
		if !validVarName.MatchString(name) {
			err = fmt.Errorf("%q is not a valid environment variable reference; write ${NAME} with letters, digits and underscores", m)
			return m
		}
		v := getenv(name)
		if v == "" {
			err = &unsetError{name: name}
			return m
		}
		used = append(used, v)
		return v
	})
	return out, used, err
}

// unsetError is a ${VAR} whose variable is not set.
type unsetError struct{ name string }

func (e *unsetError) Error() string {
	return fmt.Sprintf("${%s} is not set in the worker's environment", e.name)
}
