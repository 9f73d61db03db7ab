package engine

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/protocol"
)

// examplePack is the derived RFC 0014 pack of promptpack-workflow.md §7.2. triageControl
// is the control of the triage state.
func examplePack(t *testing.T, triageControl string) string {
	ctl := ""
	if triageControl != "" {
		ctl = `"control":"` + triageControl + `",`
	}
	return `{"id":"balance","name":"Balance","version":"1.0.0",
	"template_engine":{"version":"v1","syntax":"{{variable}}"},
	"prompts":{
		"verifying":{"id":"verifying","name":"Verify","version":"1.0.0","system_template":"Verify {{customer}}.","tools":["verify_account"],
			"variables":[{"name":"customer","required":true}]},
		"triage":{"id":"triage","name":"Triage","version":"1.0.0","system_template":"Route. Hand-over: {{workflow_context}}"},
		"resolution":{"id":"resolution","name":"Resolve","version":"1.0.0","system_template":"Resolve: {{workflow_context}}","tools":["get_balance"]},
		"handoff":{"id":"handoff","name":"Handoff","version":"1.0.0","system_template":"Hand off."}
	},
	"tools":{
		"verify_account":{"name":"verify_account","description":"Verify an account","parameters":{"type":"object","properties":{"account_id":{"type":"string"}}}},
		"get_balance":{"name":"get_balance","description":"Get the balance","parameters":{"type":"object","properties":{"account_id":{"type":"string"}}}}
	},
	"workflow":{"version":2,"entry":"verifying",
		"engine":{"budget":{"max_total_visits":20,"max_tool_calls":30,"max_wall_time_sec":300}},
		"states":{
			"verifying":{"prompt_task":"verifying","on_event":{"AccountVerified":"triage"}},
			"triage":{"prompt_task":"triage",` + ctl + `"max_visits":3,"on_event":{"ServeBalance":"resolution","EscalateToAgent":"handoff"}},
			"resolution":{"prompt_task":"resolution","terminal":true},
			"handoff":{"prompt_task":"handoff","terminal":true}
		}}}`
}

// exampleScript is the mock script of promptpack-workflow.md §12.
func exampleScript() []*convo.ModelRoundResult {
	return []*convo.ModelRoundResult{
		calls("Let me check that account.", call("verify_account", `{"account_id":"ACC-12345"}`)),
		calls("", transition("AccountVerified", "wants balance")),
		calls("", transition("ServeBalance", "balance request")),
		calls("", call("get_balance", `{"account_id":"ACC-12345"}`)),
		text("Your balance is $42.00."),
	}
}

func toolNames(specs []convo.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// TestWorkedExample replays promptpack-workflow.md §14 round by round.
func TestWorkedExample(t *testing.T) {
	f := newFake(t, exampleScript()...)
	m := start(t, mustPack(t, examplePack(t, "agent")), f)
	if st := m.State(); st.CurrentState != "verifying" || st.VisitCounts["verifying"] != 1 || st.TotalVisits != 1 || st.Status != StatusAwaitingUser {
		t.Fatalf("after start: %+v", st)
	}
	res := mustTurn(t, m, f, "What's my balance? ACC-12345")

	type row struct {
		state       string
		visits      map[string]int
		total       int
		toolCalls   int
		tools       []string
		systemMatch string
	}
	want := []row{
		{"verifying", map[string]int{"verifying": 1}, 1, 0, []string{"verify_account", ToolTransition}, "Verify Ada."},
		{"verifying", map[string]int{"verifying": 1}, 1, 1, []string{"verify_account", ToolTransition}, "Verify Ada."},
		{"triage", map[string]int{"verifying": 1, "triage": 1}, 2, 2, []string{ToolTransition}, "Hand-over: wants balance"},
		{"resolution", map[string]int{"verifying": 1, "triage": 1, "resolution": 1}, 3, 3, []string{"get_balance"}, "Resolve: balance request"},
		{"resolution", map[string]int{"verifying": 1, "triage": 1, "resolution": 1}, 3, 4, []string{"get_balance"}, "Resolve: balance request"},
	}
	if len(f.rounds) != len(want) {
		t.Fatalf("model rounds = %d, want %d", len(f.rounds), len(want))
	}
	for i, w := range want {
		got := f.rounds[i]
		if got.In.Round != i || got.In.State != w.state || got.In.Prompt != w.state {
			t.Errorf("round %d: round/state/prompt = %d/%q/%q, want %d/%q", i, got.In.Round, got.In.State, got.In.Prompt, i, w.state)
		}
		if !reflect.DeepEqual(got.Visits, w.visits) || got.TotalVisits != w.total || got.ToolCalls != w.toolCalls {
			t.Errorf("round %d: visits %v total %d tool calls %d, want %v %d %d", i, got.Visits, got.TotalVisits, got.ToolCalls, w.visits, w.total, w.toolCalls)
		}
		if names := toolNames(got.In.Tools); !reflect.DeepEqual(names, w.tools) {
			t.Errorf("round %d: tools %v, want %v", i, names, w.tools)
		}
		if !strings.Contains(got.In.System, w.systemMatch) {
			t.Errorf("round %d: system %q does not contain %q", i, got.In.System, w.systemMatch)
		}
		if got.In.RunID != "run-1" || got.In.NodeID != "chat" || got.In.PackID != "balance" || got.In.Provider != "default" {
			t.Errorf("round %d: ids %+v", i, got.In)
		}
		if got.In.Transcript.Key != "chat" || got.In.Transcript.From != 0 || len(got.Messages) != got.In.Transcript.To {
			t.Errorf("round %d: transcript ref %+v with %d messages", i, got.In.Transcript, len(got.Messages))
		}
	}
	// Round 2 (triage, control agent) sees the whole turn so far: user, assistant+call,
	// tool result, assistant+transition, transition result.
	if n := len(f.rounds[2].Messages); n != 5 {
		t.Errorf("triage round sees %d messages, want 5", n)
	}
	if res.Reply != "Let me check that account.\n\nYour balance is $42.00." {
		t.Errorf("reply = %q", res.Reply)
	}
	wantSegs := []Segment{{"verifying", "Let me check that account."}, {"resolution", "Your balance is $42.00."}}
	if !reflect.DeepEqual(res.Segments, wantSegs) {
		t.Errorf("segments = %+v", res.Segments)
	}
	if res.Status != StatusCompleted || res.State != "resolution" || !res.Done() || res.ErrorCode != "" {
		t.Errorf("result = %+v", res)
	}
	st := m.State()
	if st.TotalToolCalls != 4 || st.ModelRounds != 5 || st.Transitions != 2 || st.Usage.InputTokens != 50 || st.Usage.OutputTokens != 25 {
		t.Errorf("state totals: %+v", st)
	}
	trs := f.eventsOf(EventTransition)
	if len(trs) != 2 || len(f.eventsOf(EventCompleted)) != 1 {
		t.Fatalf("events = %v", f.kinds())
	}
	if tr := trs[0].Transition; tr.From != "verifying" || tr.To != "triage" || tr.Event != "AccountVerified" || tr.Context != "wants balance" ||
		tr.Visits != 1 || tr.TotalVisits != 2 || tr.ToolCalls != 2 || tr.Origin != OriginAgent {
		t.Errorf("first transition = %+v", tr)
	}
	if tr := trs[1].Transition; tr.From != "triage" || tr.To != "resolution" || tr.TotalVisits != 3 || tr.ToolCalls != 3 {
		t.Errorf("second transition = %+v", tr)
	}
	if kinds := f.kinds(); kinds[len(kinds)-1] != EventCompleted {
		t.Errorf("last event = %s", kinds[len(kinds)-1])
	}
	// Pack tools went through the runtime one batch per round, with the round index.
	if len(f.toolCalls) != 2 || f.toolCalls[0][0].Tool != "verify_account" || f.toolCalls[1][0].Tool != "get_balance" || f.toolCalls[1][0].Round != 3 {
		t.Errorf("tool batches = %+v", f.toolCalls)
	}
	// Transition tool result is the scheduled record.
	var tres map[string]string
	for _, msg := range st.Transcript {
		if msg.Name == ToolTransition && msg.State == "verifying" {
			_ = json.Unmarshal([]byte(msg.Text), &tres)
		}
	}
	if tres["status"] != "transition_scheduled" || tres["target_state"] != "triage" {
		t.Errorf("transition result = %v", tres)
	}
	if _, err := m.Turn(f, "more?"); !errors.Is(err, ErrClosed) {
		t.Errorf("turn after completion: %v, want ErrClosed", err)
	}
}

// TestTransitionSchema checks the exact §8.6 input schema with sorted events.
func TestTransitionSchema(t *testing.T) {
	f := newFake(t, calls("", transition("AccountVerified", "x")))
	f.mu = append(f.mu, exampleScript()[2:]...)
	m := start(t, mustPack(t, examplePack(t, "agent")), f)
	mustTurn(t, m, f, "hi")
	var spec convo.ToolSpec
	for _, s := range f.rounds[1].In.Tools {
		if s.Name == ToolTransition {
			spec = s
		}
	}
	want := `{"type":"object","properties":{"event":{"type":"string","enum":["EscalateToAgent","ServeBalance"],"description":"The workflow event to trigger."},"context":{"type":"string","description":"Summary of relevant context to carry forward."}},"required":["event","context"]}`
	if string(spec.Parameters) != want {
		t.Errorf("schema = %s\nwant     %s", spec.Parameters, want)
	}
}

// TestControlUser yields after the transition; the next message runs in triage with
// the hand-over bound.
func TestControlUser(t *testing.T) {
	for _, ctl := range []string{"", "user"} {
		f := newFake(t, exampleScript()[:2]...)
		f.mu = append(f.mu, calls("Routing you.", transition("ServeBalance", "balance")), exampleScript()[3], exampleScript()[4])
		m := start(t, mustPack(t, examplePack(t, ctl)), f)
		res := mustTurn(t, m, f, "balance please")
		if res.Status != StatusAwaitingUser || res.State != "triage" || res.Reply != "Let me check that account." || len(f.rounds) != 2 {
			t.Fatalf("control %q: first turn = %+v after %d rounds", ctl, res, len(f.rounds))
		}
		res = mustTurn(t, m, f, "go on")
		if f.rounds[2].In.State != "triage" || !strings.Contains(f.rounds[2].In.System, "Hand-over: wants balance") {
			t.Errorf("control %q: second turn round = %+v", ctl, f.rounds[2].In)
		}
		if f.rounds[2].In.Transcript.To != 6 {
			t.Errorf("control %q: persistent state should see the whole history, ref %+v", ctl, f.rounds[2].In.Transcript)
		}
		if res.Status != StatusCompleted || res.Reply != "Routing you.\n\nYour balance is $42.00." {
			t.Errorf("control %q: second turn = %+v", ctl, res)
		}
	}
}

// loopPack is an all-agent loop a <-> b; a has max_visits 2.
func loopPack(t *testing.T, onMax, budget string) *Machine {
	t.Helper()
	om := ""
	if onMax != "" {
		om = `,"on_max_visits":"` + onMax + `"`
	}
	p := simplePack(t, "start", `{
		"start":{"prompt_task":"start","on_event":{"Go":"a"}},
		"a":{"prompt_task":"a","control":"agent","max_visits":2`+om+`,"on_event":{"Next":"b"}},
		"b":{"prompt_task":"b","control":"agent","on_event":{"Back":"a"}},
		"done":{"prompt_task":"done","terminal":true}
	}`, budget,
		prompt("start", "start", `"tools":["lookup"]`), prompt("a", "a", ""), prompt("b", "b", ""), prompt("done", "done", ""))
	return &Machine{cfg: Config{Pack: p}}
}

// loopModel always transitions onward; in done it answers text.
func loopModel(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
	switch in.State {
	case "start":
		return calls("", transition("Go", "go")), nil
	case "a":
		return calls("in a", transition("Next", "n")), nil
	case "b":
		return calls("", transition("Back", "b")), nil
	}
	return text("done."), nil
}

func TestAgentLoopMaxVisits(t *testing.T) {
	f := newFake(t)
	f.next = loopModel
	m := start(t, loopPack(t, "", "").cfg.Pack, f)
	res := mustTurn(t, m, f, "loop")
	// start → a(1) → b(1) → a(2) → b(2) → a: third entry fails.
	if res.Status != StatusMaxVisitsExceeded || res.ErrorCode != protocol.CodeMaxVisitsExceeded || res.State != "b" || !res.Done() {
		t.Fatalf("result = %+v", res)
	}
	if res.Reply != "in a\n\nin a" {
		t.Errorf("reply = %q", res.Reply)
	}
	mv := f.eventsOf(EventMaxVisits)
	if len(mv) != 1 || !mv[0].MaxVisits.Terminated || mv[0].MaxVisits.OriginalTarget != "a" || mv[0].MaxVisits.VisitCount != 2 || mv[0].MaxVisits.MaxVisits != 2 {
		t.Errorf("max visits events = %+v", mv)
	}
	if st := m.State(); st.VisitCounts["a"] != 2 || st.VisitCounts["b"] != 2 || st.TotalVisits != 5 {
		t.Errorf("visits = %v total %d", st.VisitCounts, st.TotalVisits)
	}
}

func TestAgentLoopRedirect(t *testing.T) {
	f := newFake(t)
	f.next = loopModel
	m := start(t, loopPack(t, "done", "").cfg.Pack, f)
	res := mustTurn(t, m, f, "loop")
	if res.Status != StatusCompleted || res.State != "done" || res.Reply != "in a\n\nin a\n\ndone." {
		t.Fatalf("result = %+v", res)
	}
	trs := f.eventsOf(EventTransition)
	last := trs[len(trs)-1].Transition
	if !last.Redirected || last.OriginalTarget != "a" || last.To != "done" || last.Visits != 1 {
		t.Errorf("last transition = %+v", last)
	}
	mv := f.eventsOf(EventMaxVisits)
	if len(mv) != 1 || mv[0].MaxVisits.Terminated || mv[0].MaxVisits.RedirectedTo != "done" {
		t.Errorf("max visits events = %+v", mv)
	}
	if st := m.State(); st.VisitCounts["a"] != 2 || st.VisitCounts["done"] != 1 {
		t.Errorf("visits = %v", st.VisitCounts)
	}
}

func TestBudgetTotalVisits(t *testing.T) {
	f := newFake(t)
	f.next = loopModel
	m := start(t, loopPack(t, "", `{"max_total_visits":3}`).cfg.Pack, f)
	res := mustTurn(t, m, f, "loop")
	// start(1) a(2) b(3): the attempt to enter a again finds 3 >= 3.
	if res.Status != StatusBudgetExhausted || res.ErrorCode != protocol.CodeBudgetExhausted || res.State != "b" || res.Reply != "in a" {
		t.Fatalf("result = %+v", res)
	}
	b := f.eventsOf(EventBudgetExhausted)
	if len(b) != 1 || b[0].Budget.Limit != LimitTotalVisits || b[0].Budget.Current != 3 || b[0].Budget.Max != 3 {
		t.Errorf("budget events = %+v", b)
	}
}

func TestBudgetToolCallsBeforeBatch(t *testing.T) {
	f := newFake(t,
		calls("", call("lookup", `{"q":"1"}`), call("lookup", `{"q":"2"}`)),
		calls("", call("lookup", `{"q":"3"}`), call("lookup", `{"q":"4"}`)),
	)
	m := start(t, loopPack(t, "", `{"max_tool_calls":3}`).cfg.Pack, f)
	res := mustTurn(t, m, f, "look")
	if res.Status != StatusBudgetExhausted || len(f.toolCalls) != 1 {
		t.Fatalf("result = %+v, tool batches %d", res, len(f.toolCalls))
	}
	b := f.eventsOf(EventBudgetExhausted)
	if len(b) != 1 || b[0].Budget.Limit != LimitToolCalls || b[0].Budget.Current != 4 || b[0].Budget.Max != 3 {
		t.Errorf("budget events = %+v", b)
	}
	if m.State().TotalToolCalls != 2 {
		t.Errorf("tool calls = %d, want 2 (no call runs past the cap)", m.State().TotalToolCalls)
	}
}

func TestBudgetToolCallsAtTransition(t *testing.T) {
	f := newFake(t, calls("", call("lookup", `{}`), transition("Go", "x")))
	m := start(t, loopPack(t, "", `{"max_tool_calls":2}`).cfg.Pack, f)
	res := mustTurn(t, m, f, "go")
	if res.Status != StatusBudgetExhausted || res.State != "start" {
		t.Fatalf("result = %+v", res)
	}
	if b := f.eventsOf(EventBudgetExhausted); len(b) != 1 || b[0].Budget.Limit != LimitToolCalls || b[0].Budget.Current != 2 {
		t.Errorf("budget events = %+v", b)
	}
}

func TestBudgetWallTime(t *testing.T) {
	f := newFake(t)
	f.next = loopModel
	f.tick = 100 * time.Second
	p := loopPack(t, "", `{"max_wall_time_sec":250}`).cfg.Pack
	p.Workflow.States["a"].MaxVisits = 0
	m := start(t, p, f)
	res := mustTurn(t, m, f, "loop")
	// Rounds start at 0, 100 and 200 s; the commit after the third round sees 300 s.
	if res.Status != StatusBudgetExhausted || len(f.rounds) != 3 {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
	if b := f.eventsOf(EventBudgetExhausted); len(b) != 1 || b[0].Budget.Limit != LimitWallTime || b[0].Budget.Current != 300 || b[0].Budget.Max != 250 {
		t.Errorf("budget events = %+v", b)
	}

	// A turn that starts after the limit runs no round at all.
	f2 := newFake(t)
	m2 := start(t, p, f2)
	f2.now = t0.Add(251 * time.Second)
	res = mustTurn(t, m2, f2, "late")
	if res.Status != StatusBudgetExhausted || len(f2.rounds) != 0 {
		t.Errorf("late turn = %+v after %d rounds", res, len(f2.rounds))
	}
}

func TestTransientResetsContext(t *testing.T) {
	p := mustPack(t, examplePack(t, "agent"))
	p.Workflow.States["triage"].Persistence = "transient"
	f := newFake(t, exampleScript()...)
	m := start(t, p, f)
	mustTurn(t, m, f, "What's my balance?")
	tri := f.rounds[2]
	if tri.In.State != "triage" || tri.In.Transcript.From != 5 || len(tri.Messages) != 1 ||
		tri.Messages[0].Role != convo.RoleUser || tri.Messages[0].Text != "What's my balance?" || tri.Messages[0].State != "triage" {
		t.Fatalf("transient round sees %+v via %+v", tri.Messages, tri.In.Transcript)
	}
	if !strings.Contains(tri.In.System, "wants balance") {
		t.Errorf("hand-over missing from %q", tri.In.System)
	}
	// resolution is persistent-by-default: its context continues from triage's start.
	if f.rounds[3].In.Transcript.From != 5 {
		t.Errorf("resolution ref = %+v", f.rounds[3].In.Transcript)
	}
}

func TestTransientYieldStartsWithNextMessage(t *testing.T) {
	p := mustPack(t, examplePack(t, "user"))
	p.Workflow.States["triage"].Persistence = "transient"
	f := newFake(t, exampleScript()[:2]...)
	f.mu = append(f.mu, text("Hi from triage."))
	m := start(t, p, f)
	mustTurn(t, m, f, "first")
	mustTurn(t, m, f, "second")
	r := f.rounds[2]
	if len(r.Messages) != 1 || r.Messages[0].Text != "second" {
		t.Errorf("triage sees %+v", r.Messages)
	}
}

func TestInvalidAndDuplicateTransitions(t *testing.T) {
	f := newFake(t,
		calls("", transition("Nope", "x")),
		calls("", transition("AccountVerified", "one"), transition("AccountVerified", "two")),
	)
	m := start(t, mustPack(t, examplePack(t, "")), f)
	res := mustTurn(t, m, f, "hi")
	if res.Status != StatusAwaitingUser || res.State != "triage" || len(f.rounds) != 2 {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
	// Round 1 ran in the same state after the error result.
	if f.rounds[1].In.State != "verifying" {
		t.Errorf("round 1 state = %q", f.rounds[1].In.State)
	}
	results := map[string]convo.Message{}
	for _, msg := range m.State().Transcript {
		if msg.Role == convo.RoleTool {
			results[msg.ToolCallID] = msg
		}
	}
	bad := results["call_0_0_workflow__transition"]
	if !bad.IsError || !strings.Contains(bad.Text, `unknown event \"Nope\"`) || !strings.Contains(bad.Text, "valid events: AccountVerified") {
		t.Errorf("unknown event result = %+v", bad)
	}
	dup := results["call_1_1_workflow__transition"]
	if !dup.IsError || !strings.Contains(dup.Text, "one transition per round") {
		t.Errorf("duplicate result = %+v", dup)
	}
	if ok := results["call_1_0_workflow__transition"]; ok.IsError {
		t.Errorf("first transition rejected: %+v", ok)
	}
	if m.State().LastContext != "one" || m.State().VisitCounts["triage"] != 1 {
		t.Errorf("state = %+v", m.State())
	}
	// triage is control user: the reply holds no text, and the turn yields.
	if res.Reply != "" {
		t.Errorf("reply = %q", res.Reply)
	}
}

func TestMaxRounds(t *testing.T) {
	f := newFake(t)
	f.next = func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		return calls("working", call("lookup", `{}`)), nil
	}
	p := simplePack(t, "s", `{"s":{"prompt_task":"s","on_event":{"Done":"d"}},"d":{"prompt_task":"d","terminal":true}}`, "",
		prompt("s", "s", `"tools":["lookup"],"tool_policy":{"max_rounds":2,"tool_choice":"required"}`), prompt("d", "d", ""))
	m := start(t, p, f)
	res := mustTurn(t, m, f, "go")
	if res.Status != StatusFailed || res.ErrorCode != protocol.CodeMaxRoundsExceeded || len(f.rounds) != 2 || res.Reply != "working\n\nworking" {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
	if f.rounds[0].In.ToolChoice != "required" || f.rounds[1].In.ToolChoice != "" {
		t.Errorf("tool choice = %q, %q; want required only on the first round", f.rounds[0].In.ToolChoice, f.rounds[1].In.ToolChoice)
	}
}

func TestBlocklistAndPerTurnLimit(t *testing.T) {
	f := newFake(t,
		calls("", call("danger", `{}`), call("lookup", `{"q":"a"}`), call("lookup", `{"q":"b"}`), call("unknown_tool", `{}`)),
		text("ok"),
	)
	p := simplePack(t, "s", `{"s":{"prompt_task":"s","on_event":{"Done":"d"}},"d":{"prompt_task":"d","terminal":true}}`, "",
		prompt("s", "s", `"tools":["lookup","danger"],"tool_policy":{"blocklist":["danger"],"max_tool_calls_per_turn":3}`), prompt("d", "d", ""))
	m := start(t, p, f)
	res := mustTurn(t, m, f, "go")
	if res.Status != StatusAwaitingUser || res.Reply != "ok" {
		t.Fatalf("result = %+v", res)
	}
	if names := toolNames(f.rounds[0].In.Tools); !reflect.DeepEqual(names, []string{"lookup", ToolTransition}) {
		t.Errorf("offered tools = %v", names)
	}
	if len(f.toolCalls) != 1 || len(f.toolCalls[0]) != 2 || f.toolCalls[0][0].Tool != "lookup" || f.toolCalls[0][1].CallID != "call_0_2_lookup" {
		t.Errorf("executed = %+v", f.toolCalls)
	}
	var tools []convo.Message
	for _, msg := range m.State().Transcript {
		if msg.Role == convo.RoleTool {
			tools = append(tools, msg)
		}
	}
	if len(tools) != 4 || !tools[0].IsError || !strings.Contains(tools[0].Text, "blocked by policy") || tools[1].IsError || tools[2].IsError ||
		!tools[3].IsError || !strings.Contains(tools[3].Text, "tool call limit") {
		t.Errorf("tool results = %+v", tools)
	}
	if m.State().TotalToolCalls != 4 {
		t.Errorf("tool calls = %d, every call counts", m.State().TotalToolCalls)
	}
	// An unknown tool within the limit is an error result naming the available tools.
	f2 := newFake(t, calls("", call("unknown_tool", `{}`)), text("ok"))
	m2 := start(t, p, f2)
	mustTurn(t, m2, f2, "go")
	if msg := m2.State().Transcript[2]; !msg.IsError || !strings.Contains(msg.Text, "available tools: lookup, workflow__transition") {
		t.Errorf("unknown tool result = %+v", msg)
	}
}

func TestArtifacts(t *testing.T) {
	p := simplePack(t, "s", `{
		"s":{"prompt_task":"s","on_event":{"Done":"d"},"artifacts":{"notes":{"type":"text/plain","mode":"append"},"sha":{"type":"text/plain"}}},
		"d":{"prompt_task":"d","terminal":true,"artifacts":{"summary":{"type":"text/plain"}}}}`, "",
		prompt("s", "Notes: {{artifacts.notes}} SHA: {{artifacts.sha}}", ""), prompt("d", "Final {{artifacts.notes}}", ""))
	f := newFake(t,
		calls("", call(ToolSetArtifact, `{"name":"notes","value":"a"}`), call(ToolSetArtifact, `{"name":"sha","value":"1"}`)),
		calls("", call(ToolSetArtifact, `{"name":"notes","value":"b"}`), call(ToolSetArtifact, `{"name":"sha","value":"2"}`),
			call(ToolSetArtifact, `{"name":"bogus","value":"x"}`), transition("Done", "fin")),
		text("Finished."),
	)
	m := start(t, p, f)
	res := mustTurn(t, m, f, "go")
	if res.Status != StatusCompleted {
		t.Fatalf("result = %+v", res)
	}
	if names := toolNames(f.rounds[0].In.Tools); !reflect.DeepEqual(names, []string{ToolSetArtifact, ToolTransition}) {
		t.Errorf("tools = %v", names)
	}
	var sc struct {
		Properties struct {
			Name struct{ Enum []string } `json:"name"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(f.rounds[0].In.Tools[0].Parameters, &sc)
	if !reflect.DeepEqual(sc.Properties.Name.Enum, []string{"notes", "sha", "summary"}) {
		t.Errorf("artifact enum = %v", sc.Properties.Name.Enum)
	}
	if f.rounds[1].In.System != "Notes: a SHA: 1" || f.rounds[2].In.System != "Final ab" {
		t.Errorf("systems = %q, %q", f.rounds[1].In.System, f.rounds[2].In.System)
	}
	if st := m.State(); !reflect.DeepEqual(st.Artifacts, map[string]string{"notes": "ab", "sha": "2"}) {
		t.Errorf("artifacts = %v", st.Artifacts)
	}
	if c := f.eventsOf(EventCompleted); len(c) != 1 || c[0].Completed.Artifacts["notes"] != "ab" {
		t.Errorf("completed = %+v", c)
	}
	if h := m.State().History; len(h) != 1 || h[0].Artifacts["sha"] != "2" {
		t.Errorf("history = %+v", h)
	}
	if bogus := m.State().Transcript[7]; !bogus.IsError || !strings.Contains(bogus.Text, "unknown artifact") {
		t.Errorf("bogus artifact result = %+v", bogus)
	}
}

// externalPack: the agent routes into an external approval state.
func externalPack(t *testing.T) string {
	return `{"id":"refund","name":"Refund","version":"1.0.0",
	"template_engine":{"version":"v1","syntax":"{{variable}}"},
	"prompts":{
		"intake":{"id":"intake","name":"Intake","version":"1.0.0","system_template":"Intake."},
		"approval":{"id":"approval","name":"Approval","version":"1.0.0","system_template":"Waiting: {{workflow_context}}"},
		"refunded":{"id":"refunded","name":"Refunded","version":"1.0.0","system_template":"Tell the outcome: {{workflow_context}}"},
		"rework":{"id":"rework","name":"Rework","version":"1.0.0","system_template":"Rework: {{workflow_context}}"}
	},
	"workflow":{"version":2,"entry":"intake","states":{
		"intake":{"prompt_task":"intake","on_event":{"NeedsApproval":"approval"}},
		"approval":{"prompt_task":"approval","orchestration":"external","on_event":{"Rejected":"rework","Approved":"refunded"}},
		"refunded":{"prompt_task":"refunded","terminal":true},
		"rework":{"prompt_task":"rework","on_event":{"NeedsApproval":"approval"}}
	}}}`
}

func TestExternalInjectTerminal(t *testing.T) {
	f := newFake(t,
		calls("I'll ask a manager.", transition("NeedsApproval", "refund $150")),
		text("Still waiting for the manager."),
		text("Your refund of $150 was approved."),
	)
	m := start(t, mustPack(t, externalPack(t)), f)
	if err := m.CanInject("Approved"); err == nil || !strings.Contains(err.Error(), "not external or hybrid") {
		t.Errorf("inject into internal state: %v", err)
	}
	res := mustTurn(t, m, f, "refund please")
	if res.Status != StatusAwaitingEvent || res.Awaiting == nil || res.Awaiting.State != "approval" ||
		!reflect.DeepEqual(res.Awaiting.Events, []string{"Approved", "Rejected"}) || res.Reply != "I'll ask a manager." {
		t.Fatalf("result = %+v", res)
	}
	// The external state still serves user turns, without the transition tool.
	res = mustTurn(t, m, f, "any news?")
	if res.Status != StatusAwaitingEvent || len(f.rounds[1].In.Tools) != 0 || f.rounds[1].In.State != "approval" {
		t.Errorf("turn in external state = %+v, tools %v", res, f.rounds[1].In.Tools)
	}
	if err := m.CanInject("Bogus"); err == nil || !strings.Contains(err.Error(), "valid events: Approved, Rejected") {
		t.Errorf("bogus event: %v", err)
	}
	f.now = t0.Add(14 * 24 * time.Hour)
	res, err := m.Inject(f, "Approved", "approved by Jo")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCompleted || res.Reply != "Your refund of $150 was approved." || len(f.rounds) != 3 {
		t.Fatalf("inject = %+v after %d rounds", res, len(f.rounds))
	}
	last := f.rounds[2]
	if last.In.State != "refunded" || last.In.System != "Tell the outcome: approved by Jo" || len(last.In.Tools) != 0 {
		t.Errorf("terminal round = %+v", last.In)
	}
	if msg := last.Messages[len(last.Messages)-1]; msg.Role != convo.RoleUser || !strings.Contains(msg.Text, "Approved") {
		t.Errorf("event message = %+v", msg)
	}
	trs := f.eventsOf(EventTransition)
	if tr := trs[len(trs)-1].Transition; tr.Origin != OriginExternal || tr.Event != "Approved" || tr.To != "refunded" {
		t.Errorf("injected transition = %+v", tr)
	}
	if _, err := m.Inject(f, "Approved", ""); !errors.Is(err, ErrClosed) {
		t.Errorf("inject after completion: %v", err)
	}
}

func TestExternalInjectNonTerminal(t *testing.T) {
	f := newFake(t, calls("", transition("NeedsApproval", "x")), text("Let's rework it."))
	m := start(t, mustPack(t, externalPack(t)), f)
	mustTurn(t, m, f, "refund")
	res, err := m.Inject(f, "Rejected", "too large")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusAwaitingUser || res.State != "rework" || res.Reply != "" || len(f.rounds) != 1 {
		t.Fatalf("inject = %+v after %d rounds", res, len(f.rounds))
	}
	mustTurn(t, m, f, "ok what now")
	if f.rounds[1].In.System != "Rework: too large" {
		t.Errorf("system = %q", f.rounds[1].In.System)
	}
}

func TestValidators(t *testing.T) {
	p := simplePack(t, "s", `{"s":{"prompt_task":"s","on_event":{"Done":"d"}},"d":{"prompt_task":"d","terminal":true}}`, "",
		prompt("s", "s", `"validators":[
			{"type":"banned_words","params":{"words":["secret"]},"message":"[withheld]"},
			{"type":"regex_match","params":{"pattern":"^[A-Z]"}},
			{"type":"max_length","params":{"max_characters":10}},
			{"type":"banned_words","enabled":false,"params":{"words":["Hello"]}},
			{"type":"sentiment","params":{}}
		]`), prompt("d", "d", ""))
	cases := []struct{ in, want, action string }{
		{"Hello there", "Hello ther", "truncated"},
		{"The SECRET is out", "[withheld]", "blocked"},
		{"secretive Fine", "[withheld]", "blocked"}, // regex: lowercase start
		{"Secretive", "Secretive", ""},
		{"Ok.", "Ok.", ""},
	}
	for _, c := range cases {
		f := newFake(t, text(c.in))
		m := start(t, p, f)
		res := mustTurn(t, m, f, "x")
		if c.in == "secretive Fine" {
			c.want = DefaultBlockedText
		}
		if res.Reply != c.want {
			t.Errorf("%q: reply %q, want %q", c.in, res.Reply, c.want)
		}
		v := f.eventsOf(EventValidator)
		if c.action == "" && len(v) != 0 || c.action != "" && (len(v) != 1 || v[0].Validator.Action != c.action) {
			t.Errorf("%q: validator events %+v", c.in, v)
		}
		if got := m.State().Transcript[1].Text; got != c.want {
			t.Errorf("%q: transcript keeps %q", c.in, got)
		}
	}
}

func TestDeterminism(t *testing.T) {
	run := func() []byte {
		f := newFake(t, exampleScript()...)
		m := start(t, mustPack(t, examplePack(t, "agent")), f)
		mustTurn(t, m, f, "balance")
		b, err := json.Marshal(m.State())
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := json.Marshal(f.events)
		return append(b, evs...)
	}
	a, b := run(), run()
	if string(a) != string(b) {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
}

func TestResumeContinues(t *testing.T) {
	p := mustPack(t, examplePack(t, "user"))
	f := newFake(t, exampleScript()[:2]...)
	m := start(t, p, f)
	mustTurn(t, m, f, "hi")
	raw, _ := json.Marshal(m.State())
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	m2, err := Resume(Config{RunID: "run-1", NodeID: "chat", Pack: p, Vars: map[string]any{"customer": "Ada"}}, st)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m2
	f.mu = append(f.mu, calls("", transition("ServeBalance", "b")), exampleScript()[3], exampleScript()[4])
	res := mustTurn(t, m2, f, "go")
	if res.Status != StatusCompleted || f.rounds[2].In.Round != 2 || !strings.Contains(f.rounds[2].In.System, "wants balance") {
		t.Errorf("resumed turn = %+v, round %+v", res, f.rounds[2].In)
	}
	if _, err := Resume(Config{Pack: mustPack(t, externalPack(t))}, st); err == nil {
		t.Error("resume with another pack succeeded")
	}
}

func TestStartErrors(t *testing.T) {
	p := mustPack(t, examplePack(t, "agent"))
	if _, err := Start(Config{Pack: p}, t0); err == nil || !strings.Contains(err.Error(), `required variable "customer" is missing`) {
		t.Errorf("missing variable: %v", err)
	}
	p.Workflow.Entry = "nowhere"
	if _, err := Start(Config{Pack: p, Vars: map[string]any{"customer": "x"}}, t0); err == nil {
		t.Error("bad entry accepted")
	}
}

type codedErr struct{ code string }

func (e codedErr) Error() string     { return "provider said no" }
func (e codedErr) ErrorCode() string { return e.code }

func TestRuntimeFailures(t *testing.T) {
	f := newFake(t)
	f.next = func(convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		return nil, codedErr{"ModelAuthentication"}
	}
	m := start(t, mustPack(t, examplePack(t, "")), f)
	res := mustTurn(t, m, f, "hi")
	if res.Status != StatusFailed || res.ErrorCode != "ModelAuthentication" || !strings.Contains(res.ErrorMessage, "provider said no") {
		t.Errorf("model failure = %+v", res)
	}

	f2 := newFake(t, exampleScript()...)
	f2.toolErr = errors.New("executor down")
	m2 := start(t, mustPack(t, examplePack(t, "")), f2)
	res = mustTurn(t, m2, f2, "hi")
	if res.Status != StatusFailed || res.ErrorCode != protocol.CodeToolError || res.Reply != "Let me check that account." {
		t.Errorf("tool failure = %+v", res)
	}
}

func TestHybridAndExternalTerminal(t *testing.T) {
	p := mustPack(t, externalPack(t))
	p.Workflow.States["approval"].Orchestration = "hybrid"
	f := newFake(t, calls("", transition("NeedsApproval", "x")))
	m := start(t, p, f)
	res := mustTurn(t, m, f, "refund")
	// A hybrid state is entered like an internal one: control user yields, and the
	// transition tool stays available to the model; callers may inject too.
	if res.Status != StatusAwaitingUser || res.State != "approval" || res.Awaiting != nil {
		t.Fatalf("hybrid entry = %+v", res)
	}
	if err := m.CanInject("Approved"); err != nil {
		t.Errorf("inject into hybrid: %v", err)
	}

	// An external state that is also terminal is a hand-off: no round runs in it.
	p2 := mustPack(t, externalPack(t))
	p2.Workflow.States["approval"].OnEvent = nil
	f2 := newFake(t, calls("Handing you over.", transition("NeedsApproval", "x")))
	m2 := start(t, p2, f2)
	res = mustTurn(t, m2, f2, "refund")
	if res.Status != StatusCompleted || res.State != "approval" || len(f2.rounds) != 1 || res.Reply != "Handing you over." {
		t.Errorf("external terminal = %+v after %d rounds", res, len(f2.rounds))
	}
}

// TestCheckpointCarriesTheLatestRoundOnly: the state carried across continue-as-new
// holds the messages since the latest round, not the transcript; the resumed machine
// numbers messages on, keeps the digest, and pages from what it holds.
func TestCheckpointCarriesTheLatestRoundOnly(t *testing.T) {
	p := mustPack(t, examplePack(t, "user"))
	f := newFake(t, exampleScript()[:2]...)
	m := start(t, p, f)
	mustTurn(t, m, f, "hi")
	full := m.State()
	if len(full.Transcript) < 4 || full.TranscriptDigest != convo.TranscriptDigest(full.Transcript) {
		t.Fatalf("before: %d messages, digest %q", len(full.Transcript), full.TranscriptDigest)
	}
	cp := m.Checkpoint()
	if want := convo.TranscriptTail(full.Transcript); !reflect.DeepEqual(cp.Transcript, want) || cp.TranscriptBase != len(full.Transcript)-len(want) {
		t.Fatalf("checkpoint holds %d messages from %d, want the tail of %d", len(cp.Transcript), cp.TranscriptBase, len(want))
	}
	raw, _ := json.Marshal(cp)
	var st State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	m2, err := Resume(Config{RunID: "run-1", NodeID: "chat", Pack: p, Vars: map[string]any{"customer": "Ada"}}, st)
	if err != nil {
		t.Fatal(err)
	}
	if m2.TranscriptLen() != len(full.Transcript) || m2.TranscriptBase() != cp.TranscriptBase {
		t.Fatalf("resumed: len %d base %d", m2.TranscriptLen(), m2.TranscriptBase())
	}
	f.m = m2
	f.mu = append(f.mu, calls("", transition("ServeBalance", "b")), exampleScript()[3], exampleScript()[4])
	mustTurn(t, m2, f, "go")
	ref := f.rounds[2].In.Transcript
	if ref.To != len(full.Transcript)+1 {
		t.Fatalf("the next round's ref ends at %d, want %d", ref.To, len(full.Transcript)+1)
	}
	// The digest is the whole transcript's, as if nothing had been cut.
	whole := append(append([]convo.Message(nil), full.Transcript...), convo.Message{Role: convo.RoleUser, Text: "go", State: "triage"})
	if ref.Digest != convo.TranscriptDigest(whole) {
		t.Fatal("the digest after continue-as-new differs from the uncut transcript's")
	}
	if ref.To-len(ref.Tail) < m2.TranscriptBase() || len(ref.Tail) == 0 {
		t.Fatalf("the tail (%d messages) must lie within the held messages (from %d)", len(ref.Tail), m2.TranscriptBase())
	}
	msgs, start := m2.TranscriptPage(0, m2.TranscriptLen(), 1)
	if len(msgs) != 1 || start != m2.TranscriptLen()-1 {
		t.Fatalf("a one-byte page holds the newest message: %d from %d", len(msgs), start)
	}
	msgs, start = m2.TranscriptPage(0, m2.TranscriptLen(), 1<<20)
	if start != m2.TranscriptBase() || len(msgs) != m2.TranscriptLen()-start {
		t.Fatalf("a large page holds what the machine has: %d from %d", len(msgs), start)
	}
}

// TestArtifactsAreBounded: a set_artifact that would push the artifacts past
// MaxArtifactBytes gets an error result and changes nothing; only the newest history
// entries keep artifact snapshots.
func TestArtifactsAreBounded(t *testing.T) {
	p := simplePack(t, "s", `{
		"s":{"prompt_task":"s","on_event":{"Again":"s"},"artifacts":{"notes":{"type":"text/plain","mode":"append"}}}}`, "",
		prompt("s", "Notes.", ""))
	half := strings.Repeat("n", MaxArtifactBytes/2+1)
	var rounds []*convo.ModelRoundResult
	rounds = append(rounds,
		calls("", call(ToolSetArtifact, `{"name":"notes","value":"`+half+`"}`)),
		calls("", call(ToolSetArtifact, `{"name":"notes","value":"`+half+`"}`)),
		text("done"))
	for i := 0; i < HistoryArtifactSnapshots+3; i++ {
		rounds = append(rounds, calls("", transition("Again", "x")), text("again"))
	}
	f := newFake(t, rounds...)
	m := start(t, p, f)
	mustTurn(t, m, f, "go")
	st := m.State()
	if len(st.Artifacts["notes"]) != len(half) {
		t.Fatalf("notes hold %d bytes, want %d (the second append refused)", len(st.Artifacts["notes"]), len(half))
	}
	refused := st.Transcript[4]
	if !refused.IsError || !strings.Contains(refused.Text, "at most 32768 bytes") {
		t.Fatalf("refused set_artifact result: %+v", refused)
	}
	for i := 0; i < HistoryArtifactSnapshots+3; i++ {
		mustTurn(t, m, f, "again")
	}
	h := m.State().History
	for i, tr := range h {
		if keep := i >= len(h)-HistoryArtifactSnapshots; keep != (tr.Artifacts != nil) {
			t.Fatalf("history entry %d of %d: artifacts %v", i, len(h), tr.Artifacts != nil)
		}
	}
}
