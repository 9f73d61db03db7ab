package convo

import (
	"slices"
	"strings"
	"testing"
)

func TestPieces(t *testing.T) {
	for text, want := range map[string][]string{
		"":                  nil,
		"one":               {"one"},
		"two words":         {"two", " words"},
		"  lead and  gaps ": {"  lead", " and", "  gaps", " "},
	} {
		got := Pieces(text)
		if !slices.Equal(got, want) {
			t.Errorf("Pieces(%q) = %q, want %q", text, got, want)
		}
		if strings.Join(got, "") != text {
			t.Errorf("the pieces of %q do not concatenate to it: %q", text, got)
		}
	}
}
