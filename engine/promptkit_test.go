package engine

import (
	"encoding/json"
	"fmt"
	"github.com/wop-dev/wop/convo"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wop-dev/wop/packs"
)

// TestEveryPromptKitExamplePackRuns: every example pack PromptKit ships
// (testdata/promptkit, NOTICE.md) loads and answers two messages: packs without a
// workflow as a conversation with each of their prompts, the one with a workflow from
// its entry. Required variables get their example, else a value named after them.
func TestEveryPromptKitExamplePackRuns(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "promptkit", "*.pack.json"))
	if err != nil || len(files) != 39 {
		t.Fatalf("PromptKit example packs: %d (%v), want 39", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, diags, err := packs.Load(f)
			if err != nil {
				t.Fatalf("load: %v\n%s", err, diags)
			}
			prompts := []string{""}
			if p.Conversational() {
				prompts = p.PromptKeys()
			}
			for _, key := range prompts {
				run := p
				if key != "" {
					run = p.AsConversation(key)
				}
				vars := map[string]any{}
				for _, k := range run.UsedPromptKeys() {
					for _, v := range run.Prompts[k].Variables {
						if v.Required && len(v.Default) == 0 {
							vars[v.Name] = exampleValue(v)
						}
					}
				}
				f := newFake(t, text("first answer"), text("second answer"))
				m, err := Start(Config{RunID: "run-1", NodeID: "agent", Pack: run, Vars: vars}, t0)
				if err != nil {
					t.Fatalf("prompt %q: start: %v", key, err)
				}
				f.m = m
				for i, want := range []string{"first answer", "second answer"} {
					res := mustTurn(t, m, f, fmt.Sprint("message ", i))
					if res.Reply != want || res.Done() {
						t.Fatalf("prompt %q, turn %d = %+v", key, i, res)
					}
				}
				if sys := f.rounds[0].In.System; strings.Contains(sys, "{{") && !strings.Contains(run.Prompts[f.rounds[0].In.Prompt].SystemTemplate, "{{#") {
					t.Errorf("prompt %q: system prompt left a placeholder: %q", key, sys)
				}
			}
		})
	}
}

// exampleValue is a value for a required variable: its example, else its name.
func exampleValue(v packs.Variable) any {
	if len(v.Example) > 0 {
		var x any
		if err := json.Unmarshal(v.Example, &x); err == nil {
			return x
		}
	}
	switch v.Type {
	case "number", "integer":
		return 1
	case "boolean":
		return true
	}
	return "example " + v.Name
}

// TestPromptKitInputGuardrail: PromptKit's hooks example declares a regex validator with
// direction input and expect_match false: a user message that matches is answered with
// the validator's message (params.message) and never reaches the model, whose later
// rounds read a note instead; other messages pass, and the model's replies are not
// checked against it.
func TestPromptKitInputGuardrail(t *testing.T) {
	p, diags, err := packs.Load(filepath.Join("testdata", "promptkit", "sdk__examples__hooks__hooks.pack.json"))
	if err != nil {
		t.Fatalf("load: %v\n%s", err, diags)
	}
	f := newFake(t, text("Your routing number? I can't say."), text("hello"))
	m, err := Start(Config{RunID: "run-1", NodeID: "agent", Pack: p.AsConversation("chat")}, t0)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	res := mustTurn(t, m, f, "What is my Routing Number?")
	if res.Reply != "I can't help with bank routing numbers." || len(f.rounds) != 0 {
		t.Fatalf("blocked turn = %+v after %d rounds", res, len(f.rounds))
	}
	if ev := f.eventsOf(EventValidator); len(ev) != 1 || ev[0].Validator.Action != "blocked" {
		t.Errorf("validator events = %+v", ev)
	}
	res = mustTurn(t, m, f, "Hi there")
	if res.Reply != "Your routing number? I can't say." || len(f.rounds) != 1 {
		t.Fatalf("second turn = %+v", res)
	}
	var users []string
	for _, msg := range f.rounds[0].Messages {
		if msg.Role == convo.RoleUser {
			users = append(users, msg.Text)
		}
	}
	if len(users) != 2 || users[0] != BlockedInputText || users[1] != "Hi there" {
		t.Errorf("the model read %q", users)
	}
}

// oldValidators is a Runtime of a run recorded before validators' direction and
// expect_match were read.
type oldValidators struct{ *fakeRuntime }

func (oldValidators) ValidatorParamsRead() bool { return false }

func TestPromptKitGuardrailRecordedBefore(t *testing.T) {
	p, _, err := packs.Load(filepath.Join("testdata", "promptkit", "sdk__examples__hooks__hooks.pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, text("hello"))
	m, err := Start(Config{RunID: "run-1", NodeID: "agent", Pack: p.AsConversation("chat")}, t0)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	// The earlier reading: the pattern must match the model's text, which it does not.
	res, err := m.Turn(oldValidators{f}, "What is my routing number?")
	if err != nil || res.Reply != DefaultBlockedText || len(f.rounds) != 1 {
		t.Fatalf("turn = %+v, %v after %d rounds", res, err, len(f.rounds))
	}
}
