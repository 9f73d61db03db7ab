package engine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// snapshot is what the fake runtime saw of the machine when a round started.
type snapshot struct {
	In          convo.ModelRoundInput
	Visits      map[string]int
	TotalVisits int
	ToolCalls   int
	Messages    []convo.Message // the transcript the round's reference points at
}

// fakeRuntime scripts model rounds and tool results and records what it receives.
type fakeRuntime struct {
	t  *testing.T
	m  *Machine
	mu []*convo.ModelRoundResult // scripted rounds, consumed by ModelRoundInput.Round
	// next, when set, answers rounds the list does not cover.
	next      func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error)
	toolFn    func(in convo.ToolCallInput) *convo.ToolCallResult
	toolErr   error
	now       time.Time
	tick      time.Duration // added to now after every model round
	rounds    []snapshot
	toolCalls [][]convo.ToolCallInput
	events    []Event
	// stop, when set, answers Stopped.
	stop func() bool
}

func newFake(t *testing.T, rounds ...*convo.ModelRoundResult) *fakeRuntime {
	return &fakeRuntime{t: t, mu: rounds, now: t0}
}

func (f *fakeRuntime) Model(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
	snap := snapshot{In: in}
	if f.m != nil {
		st := f.m.State()
		snap.Visits, snap.TotalVisits, snap.ToolCalls = st.VisitCounts, st.TotalVisits, st.TotalToolCalls
		snap.Messages = f.m.Transcript(in.Transcript.From, in.Transcript.To)
	}
	f.rounds = append(f.rounds, snap)
	defer func() { f.now = f.now.Add(f.tick) }()
	if in.Round < len(f.mu) {
		r := *f.mu[in.Round]
		if r.Model == "" {
			r.Provider, r.Model = "mock", "scripted-mock"
		}
		return &r, nil
	}
	if f.next != nil {
		return f.next(in)
	}
	f.t.Fatalf("unexpected model round %d in state %q", in.Round, in.State)
	return nil, nil
}

func (f *fakeRuntime) Tools(calls []convo.ToolCallInput) ([]*convo.ToolCallResult, error) {
	f.toolCalls = append(f.toolCalls, calls)
	if f.toolErr != nil {
		return nil, f.toolErr
	}
	out := make([]*convo.ToolCallResult, len(calls))
	for i, c := range calls {
		if f.toolFn != nil {
			out[i] = f.toolFn(c)
			continue
		}
		out[i] = &convo.ToolCallResult{Content: json.RawMessage(fmt.Sprintf(`{"tool":%q,"ok":true}`, c.Tool))}
	}
	return out, nil
}

func (f *fakeRuntime) Now() time.Time { return f.now }

func (f *fakeRuntime) Emit(ev Event) { f.events = append(f.events, ev) }

func (f *fakeRuntime) Stopped() bool { return f.stop != nil && f.stop() }

func (f *fakeRuntime) kinds() []string {
	var out []string
	for _, e := range f.events {
		out = append(out, e.Kind)
	}
	return out
}

func (f *fakeRuntime) eventsOf(kind string) []Event {
	var out []Event
	for _, e := range f.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// text is a model round that only answers text.
func text(s string) *convo.ModelRoundResult {
	return &convo.ModelRoundResult{Text: s, Usage: convo.Usage{InputTokens: 10, OutputTokens: 5}}
}

// call is one tool call with JSON args.
func call(name, args string) convo.ToolCall {
	return convo.ToolCall{Name: name, Args: json.RawMessage(args)}
}

// calls is a model round with optional text and tool calls.
func calls(txt string, cs ...convo.ToolCall) *convo.ModelRoundResult {
	return &convo.ModelRoundResult{Text: txt, ToolCalls: cs, Usage: convo.Usage{InputTokens: 10, OutputTokens: 5}}
}

func transition(event, context string) convo.ToolCall {
	return call(ToolTransition, fmt.Sprintf(`{"event":%q,"context":%q}`, event, context))
}

// mustPack decodes a pack from JSON.
func mustPack(t *testing.T, src string) *packs.Pack {
	t.Helper()
	var p packs.Pack
	if err := json.Unmarshal([]byte(src), &p); err != nil {
		t.Fatalf("decode test pack: %v", err)
	}
	return &p
}

// start starts a machine and wires the fake to it.
func start(t *testing.T, p *packs.Pack, f *fakeRuntime) *Machine {
	t.Helper()
	m, err := Start(Config{RunID: "run-1", NodeID: "chat", Pack: p, Vars: map[string]any{"customer": "Ada"}}, t0)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	f.m = m
	return m
}

func mustTurn(t *testing.T, m *Machine, f Runtime, msg string) *TurnResult {
	t.Helper()
	res, err := m.Turn(f, msg)
	if err != nil {
		t.Fatalf("Turn(%q): %v", msg, err)
	}
	return res
}

// prompt builds the JSON of a prompt with a system template and optional extras.
func prompt(key, system, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`%q:{"id":%q,"name":%q,"version":"1.0.0","system_template":%q%s}`, key, key, key, system, extra)
}

// simplePack is a pack whose prompts are named after its states; states is the JSON
// of workflow.states, prompts the extra prompt JSON entries.
func simplePack(t *testing.T, entry, states, budget string, prompts ...string) *packs.Pack {
	t.Helper()
	ps := ""
	for i, p := range prompts {
		if i > 0 {
			ps += ","
		}
		ps += p
	}
	eng := ""
	if budget != "" {
		eng = fmt.Sprintf(`,"engine":{"budget":%s}`, budget)
	}
	return mustPack(t, fmt.Sprintf(`{"id":"test","name":"Test","version":"1.0.0",
		"template_engine":{"version":"v1","syntax":"{{variable}}"},
		"prompts":{%s},
		"tools":{
			"lookup":{"name":"lookup","description":"Look something up","parameters":{"type":"object","properties":{"q":{"type":"string"}}}},
			"danger":{"name":"danger","description":"Dangerous","parameters":{"type":"object","properties":{}}}
		},
		"workflow":{"version":2,"entry":%q,"states":%s%s}}`, ps, entry, states, eng))
}
