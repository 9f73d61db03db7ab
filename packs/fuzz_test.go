package packs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary bytes to the pack and mock parsers, as YAML and as JSON. They
// must never panic, must report errors as diagnostics, and a pack that loads must hash
// deterministically and render every prompt without panicking.
//
// Run it with -fuzzminimizetime 1s (see the README): the seeds are whole packs, and
// minimizing each new interesting input of several kilobytes for the default 60 s leaves
// no time for fuzzing.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("*.yaml")
	more, _ := filepath.Glob("testdata/packs/*")
	for _, s := range append(seeds, more...) {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data, s[len(s)-5:] == ".json")
		}
	}
	f.Add([]byte("a: &x [*x, *x]\nb: *x\n"), false)
	f.Add([]byte(`{"id":"a","b":[1,2,{"c":null}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		// A hang is a failure too: crash with the input after a generous limit.
		tm := time.AfterFunc(20*time.Second, func() { panic(fmt.Sprintf("input took over 20s: %q", data)) })
		defer tm.Stop()
		name := "f.yaml"
		if asJSON {
			name = "f.json"
		}
		p, diags, err := Parse(name, data)
		if err == nil && diags.HasErrors() {
			t.Fatalf("no error but error diagnostics: %s", diags)
		}
		if err != nil && p != nil {
			t.Fatal("error together with a pack")
		}
		if p != nil {
			h, herr := p.ComputeHash()
			if herr != nil || h != p.Hash {
				t.Fatalf("hash %s / %v, loader said %s", h, herr, p.Hash)
			}
			for _, k := range p.PromptKeys() {
				_, _ = Render(p, k, nil, RuntimeVars{WorkflowContext: "x"})
				_ = p.PromptTools(k)
			}
			_ = CheckVariables(p, map[string]any{"x": 1})
		}
		m, mdiags, merr := ParseMock("f.mock.yaml", data)
		if merr == nil && mdiags.HasErrors() {
			t.Fatalf("mock: no error but error diagnostics: %s", mdiags)
		}
		if m != nil && p != nil {
			_ = CheckMock(p, m)
		}
		if m != nil {
			// Playing any script over any rounds answers without panicking, and Play
			// agrees with Next round by round.
			var rounds []MockSeen
			for i := 0; i < 6 && i < len(data); i++ {
				rounds = append(rounds, MockSeen{State: string(data[i : i+1]), User: string(data[i:]), HasUser: data[i]%2 == 0})
			}
			var c MockCursor
			for i := range rounds {
				var a MockAnswer
				a, c = m.Next(c, rounds[i])
				if b := m.Play(rounds[:i+1]); b.Round != a.Round || b.Exhausted != a.Exhausted {
					t.Fatalf("Play and Next disagree at round %d", i)
				}
			}
		}
	})
}
