package mapkeys

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestSorted(t *testing.T) {
	if got := Sorted(map[string]int{"b": 1, "c": 2, "a": 3}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Sorted = %v, want [a b c]", got)
	}
	b, _ := json.Marshal(Sorted(map[string]bool(nil)))
	if string(b) != "[]" {
		t.Errorf("no keys encode as %s, want []", b)
	}
}
