package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// A run's summary says what the run is in the Temporal UI's list: its definition, packs,
// tenant, and what it was started with, cut short.
func TestRunSummarySaysWhatTheRunWasStartedWith(t *testing.T) {
	in := &RunInput{Definition: &Definition{ID: "refund"}, Owner: Owner{Tenant: "acme"},
		Inputs: json.RawMessage(`{"message":"Hi,   I'd like a refund,\nmy jacket arrived torn."}`)}
	if got, want := RunSummary(in), `OpenWOP run of refund · tenant acme · "Hi, I'd like a refund, my jacket arrived torn."`; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	in.Inputs = json.RawMessage(`{ "a": 1, "b": "` + strings.Repeat("x", 100) + `" }`)
	got := RunSummary(in)
	if !strings.Contains(got, ` · inputs {"a":1,"b":"xxx`) || !strings.HasSuffix(got, "…") || utf8.RuneCountInString(got[strings.Index(got, "inputs ")+len("inputs "):]) != summaryInputRunes {
		t.Errorf("summary of long inputs %q", got)
	}
	in.Inputs = json.RawMessage(`{}`)
	if got := RunSummary(in); got != "OpenWOP run of refund · tenant acme" {
		t.Errorf("summary without inputs %q", got)
	}
}

// However many packs and whatever the inputs' script, the summary stays within what
// Temporal accepts, cut on a rune boundary.
func TestRunSummaryStaysWithinTemporalsLimit(t *testing.T) {
	in := &RunInput{Definition: &Definition{ID: "many"}, Packs: map[string]json.RawMessage{},
		Inputs: json.RawMessage(`{"message":"` + strings.Repeat("日本語", 40) + `"}`)}
	for i := range 20 {
		in.Packs[fmt.Sprintf("pack-%02d", i)] = json.RawMessage(`{"version":"1.0.0"}`)
	}
	got := RunSummary(in)
	if len(got) > summaryMaxBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("summary of %d bytes (valid UTF-8 %v): %q", len(got), utf8.ValidString(got), got)
	}
}
