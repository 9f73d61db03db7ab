package packs

import (
	"os"
	"testing"
)

func TestAnsweredByFollowsStateThenPack(t *testing.T) {
	data, err := os.ReadFile("testdata/packs/valid_answered_by.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := Parse("valid_answered_by.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for state, want := range map[string]string{"chat": AnsweredByUser, "human": AnsweredByOperator, "done": AnsweredByUser, "nowhere": AnsweredByUser} {
		if got := p.AnsweredBy(state); got != want {
			t.Errorf("AnsweredBy(%q) = %q, want %q", state, got, want)
		}
	}
	if !p.OperatorAnswered() {
		t.Error("OperatorAnswered is false for a pack with an operator state")
	}

	// The pack's metadata answers for the states that say nothing.
	p.Metadata = []byte(`{"wop": {"answered_by": "operator"}}`)
	for state, want := range map[string]string{"chat": AnsweredByOperator, "human": AnsweredByOperator, "done": AnsweredByUser} {
		if got := p.AnsweredBy(state); got != want {
			t.Errorf("with the pack's operator default, AnsweredBy(%q) = %q, want %q", state, got, want)
		}
	}
	var none *Pack
	if none.AnsweredBy("x") != AnsweredByUser || none.OperatorAnswered() {
		t.Error("a nil pack is answered by its user")
	}
}

func TestShippedPacksAreAnsweredByTheirUsers(t *testing.T) {
	for _, name := range []string{"support", "refund", "code-fix", "orders"} {
		p, _, err := Load(name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if p.OperatorAnswered() {
			t.Errorf("%s: the shipped packs talk to their end users; the inbox holds only their approvals and decisions", name)
		}
	}
}
