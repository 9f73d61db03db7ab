package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
)

// unboundedLoop is an all-agent loop a <-> b with no max_visits and no budget: only the
// host's turn limits end a turn in it.
func unboundedLoop(t *testing.T, budget string) Config {
	t.Helper()
	p := simplePack(t, "start", `{
		"start":{"prompt_task":"start","on_event":{"Go":"a"}},
		"a":{"prompt_task":"a","control":"agent","on_event":{"Next":"b"}},
		"b":{"prompt_task":"b","control":"agent","on_event":{"Back":"a"}}
	}`, budget, prompt("start", "start", ""), prompt("a", "a", `"tools":["lookup"]`), prompt("b", "b", ""))
	return Config{RunID: "run-1", NodeID: "chat", Pack: p}
}

func startCfg(t *testing.T, cfg Config, f *fakeRuntime) *Machine {
	t.Helper()
	m, err := Start(cfg, t0)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	f.m = m
	return m
}

func TestHostRoundLimitCountsAcrossStates(t *testing.T) {
	f := newFake(t)
	f.next = loopModel
	cfg := unboundedLoop(t, "")
	cfg.Limits = TurnLimits{MaxRounds: 7}
	m := startCfg(t, cfg, f)
	res := mustTurn(t, m, f, "loop")
	// Every round changes state, so max_rounds (5 per segment) never ends the turn:
	// the host's limit does, after 7 rounds in the loop (and the one in start, which
	// is on no loop).
	if res.Status != StatusBudgetExhausted || res.ErrorCode != protocol.CodeLoopLimitExceeded || !res.Done() || len(f.rounds) != 8 {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
	ev := f.eventsOf(EventBudgetExhausted)
	if len(ev) != 1 || !ev[0].Budget.Host || ev[0].Budget.Limit != LimitTurnRounds || ev[0].Budget.Max != 7 || ev[0].Budget.Current != 7 {
		t.Fatalf("budget events = %+v", ev)
	}
	if _, err := m.Turn(f, "again"); !errors.Is(err, ErrClosed) {
		t.Errorf("a turn after the limit = %v, want ErrClosed", err)
	}
}

func TestHostRoundLimitIsPerTurn(t *testing.T) {
	// Three rounds a turn under a limit of three: every turn fits.
	f := newFake(t)
	f.next = func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		if in.Round%3 == 2 {
			return text("done for now"), nil
		}
		return calls("", call("lookup", `{}`)), nil
	}
	p := simplePack(t, "s", `{"s":{"prompt_task":"s","on_event":{"Done":"d"}},"d":{"prompt_task":"d","terminal":true}}`, "",
		prompt("s", "s", `"tools":["lookup"]`), prompt("d", "d", ""))
	m := startCfg(t, Config{RunID: "run-1", NodeID: "chat", Pack: p, Limits: TurnLimits{MaxRounds: 3}}, f)
	for i := 0; i < 3; i++ {
		if res := mustTurn(t, m, f, fmt.Sprint("turn ", i)); res.Status != StatusAwaitingUser {
			t.Fatalf("turn %d = %+v", i, res)
		}
	}
	if len(f.rounds) != 9 {
		t.Errorf("rounds = %d, want 9", len(f.rounds))
	}
}

func TestHostToolCallLimit(t *testing.T) {
	f := newFake(t)
	f.next = func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		switch in.State {
		case "start":
			return calls("", transition("Go", "go")), nil
		case "a":
			return calls("", call("lookup", `{}`), call("lookup", `{}`), transition("Next", "n")), nil
		}
		return calls("", transition("Back", "b")), nil
	}
	cfg := unboundedLoop(t, "")
	cfg.Limits = TurnLimits{MaxRounds: 100, MaxToolCalls: 6}
	m := startCfg(t, cfg, f)
	res := mustTurn(t, m, f, "loop")
	// start 1 call (on no loop), a 3 calls, b 1 call = 4 in the loop; the next batch in
	// a (3) would make 7.
	if res.Status != StatusBudgetExhausted || res.ErrorCode != protocol.CodeLoopLimitExceeded || res.State != "a" {
		t.Fatalf("result = %+v", res)
	}
	if len(f.toolCalls) != 1 {
		t.Errorf("executed batches = %d, want 1 (the refused batch runs nothing)", len(f.toolCalls))
	}
	ev := f.eventsOf(EventBudgetExhausted)
	if len(ev) != 1 || ev[0].Budget.Limit != LimitTurnToolCalls || ev[0].Budget.Current != 7 || ev[0].Budget.Max != 6 || !ev[0].Budget.Host {
		t.Fatalf("budget events = %+v", ev)
	}
}

func TestPackBudgetBelowHostLimitWins(t *testing.T) {
	f := newFake(t)
	f.next = loopModel
	cfg := unboundedLoop(t, `{"max_tool_calls":4}`)
	cfg.Limits = TurnLimits{MaxRounds: 25, MaxToolCalls: 50}
	m := startCfg(t, cfg, f)
	res := mustTurn(t, m, f, "loop")
	if res.Status != StatusBudgetExhausted || res.ErrorCode != protocol.CodeBudgetExhausted {
		t.Fatalf("result = %+v", res)
	}
	if ev := f.eventsOf(EventBudgetExhausted); len(ev) != 1 || ev[0].Budget.Host || ev[0].Budget.Limit != LimitToolCalls {
		t.Fatalf("budget events = %+v", ev)
	}
}

func TestStoppedBetweenRounds(t *testing.T) {
	f := newFake(t)
	f.next = loopModel
	f.stop = func() bool { return len(f.rounds) >= 3 }
	m := startCfg(t, unboundedLoop(t, ""), f)
	res := mustTurn(t, m, f, "loop")
	if res.Status != StatusStopped || !res.Done() || len(f.rounds) != 3 || res.ErrorCode != "" {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
	if ev := f.eventsOf(EventBudgetExhausted); len(ev) != 0 {
		t.Errorf("a stopped turn emits no budget event: %+v", ev)
	}
	if _, err := m.Turn(f, "again"); !errors.Is(err, ErrClosed) {
		t.Errorf("a turn after the stop = %v, want ErrClosed", err)
	}
}

func TestStoppedInFlight(t *testing.T) {
	// The model round in flight is stopped: nothing of it enters the state.
	f := newFake(t)
	f.next = func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		if in.Round == 1 {
			return nil, fmt.Errorf("round cancelled: %w", ErrStopped)
		}
		return loopModel(in)
	}
	m := startCfg(t, unboundedLoop(t, ""), f)
	res := mustTurn(t, m, f, "loop")
	if res.Status != StatusStopped || len(f.rounds) != 2 || m.State().ModelRounds != 1 {
		t.Fatalf("result = %+v after %d rounds, state rounds %d", res, len(f.rounds), m.State().ModelRounds)
	}

	// A tool batch in flight is stopped too.
	f2 := newFake(t)
	f2.next = func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		if in.State == "a" {
			return calls("", call("lookup", `{}`)), nil
		}
		return loopModel(in)
	}
	f2.toolErr = fmt.Errorf("tool cancelled: %w", ErrStopped)
	m2 := startCfg(t, unboundedLoop(t, ""), f2)
	if res := mustTurn(t, m2, f2, "loop"); res.Status != StatusStopped || len(f2.toolCalls) != 1 {
		t.Fatalf("tool stop = %+v after %d batches", res, len(f2.toolCalls))
	}

	// Asked before a tool batch, the stop runs no tool.
	f3 := newFake(t)
	f3.next = f2.next
	f3.stop = func() bool { return len(f3.rounds) >= 2 }
	m3 := startCfg(t, unboundedLoop(t, ""), f3)
	if res := mustTurn(t, m3, f3, "loop"); res.Status != StatusStopped || len(f3.toolCalls) != 0 || len(f3.rounds) != 2 {
		t.Fatalf("stop before a batch = %+v after %d rounds and %d batches", res, len(f3.rounds), len(f3.toolCalls))
	}
}

func TestAcceptingAndInjectableStates(t *testing.T) {
	p := mustPack(t, externalPack(t))
	p.Workflow.States["approval"].Orchestration = "hybrid"
	f := newFake(t, calls("", transition("NeedsApproval", "x")))
	m := start(t, p, f)
	if a := m.Accepting(); a != nil {
		t.Fatalf("the entry state is internal, Accepting = %+v", a)
	}
	mustTurn(t, m, f, "refund")
	a := m.Accepting()
	if a == nil || a.State != "approval" || len(a.Events) == 0 {
		t.Fatalf("in the hybrid state Accepting = %+v", a)
	}
	if st := m.InjectableStates(); len(st["approval"]) == 0 || st[m.cfg.Pack.Workflow.Entry] != nil {
		t.Errorf("injectable states = %v", st)
	}
}

// The validator (package packs, which cannot import the engine) names the host's
// default round limit in its loop warnings; it must be this one.
func TestValidatorNamesTheDefaultRoundLimit(t *testing.T) {
	src := `id: l
name: L
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
prompts:
  p: { id: p, name: P, version: 1.0.0, system_template: Go. }
workflow:
  version: 2
  entry: a
  states:
    a: { prompt_task: p, control: agent, on_event: { Next: b } }
    b: { prompt_task: p, control: agent, on_event: { Next: a } }
`
	_, diags, err := packs.Parse("loop.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("WOP_MAX_ROUNDS_PER_TURN, %d by default", DefaultHostMaxRoundsPerTurn)
	if !strings.Contains(diags.String(), want) {
		t.Fatalf("no loop warning names %q:\n%s", want, diags)
	}
	// The warnings where the host's limits cut a prompt's own: both defaults.
	_, diags, err = packs.Load(filepath.Join("..", "packs", "testdata", "packs", "host_caps.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("max_rounds 40 is more than the host's limit of model rounds per user turn (WOP_MAX_ROUNDS_PER_TURN, %d by default)", DefaultHostMaxRoundsPerTurn),
		fmt.Sprintf("max_tool_calls_per_turn 60 is more than the host's limit of tool calls per user turn (WOP_MAX_TOOL_CALLS_PER_TURN, %d by default)", DefaultHostMaxToolCallsPerTurn),
	} {
		if !strings.Contains(diags.String(), want) {
			t.Errorf("no warning says %q:\n%s", want, diags)
		}
	}
}

// unavailableErr is a Runtime error that wraps ErrUnavailable and carries a code, as
// the run workflow's is.
type unavailableErr struct{}

func (unavailableErr) Error() string     { return "the model is unavailable: connection refused" }
func (unavailableErr) Unwrap() error     { return ErrUnavailable }
func (unavailableErr) ErrorCode() string { return protocol.CodeModelUnavailable }

func TestUnavailableEndsTheTurnNotTheRun(t *testing.T) {
	// start → a (text "in a", then the round in b fails): the turn keeps what it did,
	// the run waits in b for the next message, which tries b again.
	f := newFake(t)
	down := true
	f.next = func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		if in.State == "b" && down {
			return nil, unavailableErr{}
		}
		if in.State == "b" {
			return text("back."), nil
		}
		return loopModel(in)
	}
	m := startCfg(t, unboundedLoop(t, ""), f)
	res := mustTurn(t, m, f, "loop")
	if res.Done() || res.Status != StatusAwaitingUser || res.State != "b" || res.TurnError == nil {
		t.Fatalf("result = %+v", res)
	}
	if res.TurnError.Code != protocol.CodeModelUnavailable || !strings.Contains(res.TurnError.Message, "connection refused") {
		t.Errorf("turn error = %+v", res.TurnError)
	}
	if res.Reply != "in a" || res.ErrorCode != "" {
		t.Errorf("the turn keeps its reply so far and fails nothing: %+v", res)
	}
	rounds := m.State().ModelRounds
	if rounds != 2 {
		t.Errorf("model rounds = %d, want 2 (the failed one is not counted)", rounds)
	}

	down = false
	res = mustTurn(t, m, f, "still there?")
	if res.TurnError != nil || res.Reply != "back." || res.State != "b" {
		t.Fatalf("next turn = %+v", res)
	}
	last := f.rounds[len(f.rounds)-1].Messages
	var users []string
	for _, msg := range last {
		if msg.Role == convo.RoleUser {
			users = append(users, msg.Text)
		}
	}
	if len(users) < 2 || users[len(users)-2] != "loop" || users[len(users)-1] != "still there?" {
		t.Errorf("the retried round reads the unanswered message and the new one: %q", users)
	}
}

// visitsLoop is RFC 0014's shape of a loop the pack bounds: a control: agent state that
// hands over to itself, max_visits 30, on_max_visits report (a terminal state, whose
// prompt answers in the same turn).
func visitsLoop(t *testing.T) Config {
	t.Helper()
	p := simplePack(t, "work", `{
		"work":{"prompt_task":"work","control":"agent","max_visits":30,"on_max_visits":"report","on_event":{"Again":"work","Done":"report"}},
		"report":{"prompt_task":"report","control":"user","terminal":true}
	}`, "", prompt("work", "work", ""), prompt("report", "report", ""))
	return Config{RunID: "run-1", NodeID: "chat", Pack: p, Limits: TurnLimits{MaxRounds: DefaultHostMaxRoundsPerTurn, MaxToolCalls: DefaultHostMaxToolCallsPerTurn}}
}

func visitsLoopModel(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
	if in.State == "report" {
		return text("report: 30 attempts"), nil
	}
	return calls("", transition("Again", "once more")), nil
}

// oldLimits is a Runtime of a run recorded before the pack's limits won.
type oldLimits struct{ *fakeRuntime }

func (oldLimits) PackLimitsWin() bool { return false }

func TestPackMaxVisitsLoopReachesOnMaxVisits(t *testing.T) {
	f := newFake(t)
	f.next = visitsLoopModel
	m := startCfg(t, visitsLoop(t), f)
	res := mustTurn(t, m, f, "go")
	// 30 visits of work (the entry is the first): 30 rounds there, the 31st entry is
	// redirected to report, whose round answers. The host's 25 rounds do not cut it.
	if res.Status != StatusCompleted || res.State != "report" || res.Reply != "report: 30 attempts" || len(f.rounds) != 31 {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
	if st := m.State(); st.VisitCounts["work"] != 30 || st.VisitCounts["report"] != 1 {
		t.Errorf("visits = %v", st.VisitCounts)
	}
	if ev := f.eventsOf(EventMaxVisits); len(ev) != 1 || ev[0].MaxVisits.RedirectedTo != "report" {
		t.Errorf("max_visits events = %+v", ev)
	}
	if ev := f.eventsOf(EventBudgetExhausted); len(ev) != 0 {
		t.Errorf("budget events = %+v", ev)
	}
}

func TestPackMaxVisitsLoopRecordedBeforeKeepsTheHostLimit(t *testing.T) {
	f := newFake(t)
	f.next = visitsLoopModel
	m := startCfg(t, visitsLoop(t), f)
	res, err := m.Turn(oldLimits{f}, "go")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusBudgetExhausted || res.ErrorCode != protocol.CodeLoopLimitExceeded || len(f.rounds) != DefaultHostMaxRoundsPerTurn {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
}

func TestHostLimitStillCapsAnUnboundedLoopNextToABoundedOne(t *testing.T) {
	// bounded hands over to itself 20 times (max_visits 20, then spin), then spin_a and
	// spin_b loop for ever: the host's limit counts only the rounds of the loop it
	// bounds, so the turn runs 20 + 7 rounds.
	p := simplePack(t, "bounded", `{
		"bounded":{"prompt_task":"p","control":"agent","max_visits":20,"on_max_visits":"spin_a","on_event":{"Again":"bounded"}},
		"spin_a":{"prompt_task":"p","control":"agent","on_event":{"Next":"spin_b"}},
		"spin_b":{"prompt_task":"p","control":"agent","on_event":{"Next":"spin_a"}}
	}`, "", prompt("p", "p", ""))
	f := newFake(t)
	f.next = func(in convo.ModelRoundInput) (*convo.ModelRoundResult, error) {
		if in.State == "bounded" {
			return calls("", transition("Again", "again")), nil
		}
		return calls("", transition("Next", "next")), nil
	}
	m := startCfg(t, Config{RunID: "run-1", NodeID: "chat", Pack: p, Limits: TurnLimits{MaxRounds: 7}}, f)
	res := mustTurn(t, m, f, "go")
	if res.Status != StatusBudgetExhausted || res.ErrorCode != protocol.CodeLoopLimitExceeded || len(f.rounds) != 27 {
		t.Fatalf("result = %+v after %d rounds", res, len(f.rounds))
	}
}

func TestConversationPackHoldsTheConversation(t *testing.T) {
	p := mustPack(t, `{"id":"chat","name":"Chat","version":"1.0.0",
		"template_engine":{"version":"v1","syntax":"{{variable}}"},
		"prompts":{`+prompt("chat", "You help {{name}}.", `"tools":["lookup"],"variables":[{"name":"name","type":"string","required":true}]`)+`,`+prompt("other", "other", "")+`},
		"tools":{"lookup":{"name":"lookup","description":"Look something up","parameters":{"type":"object","properties":{}}}}}`)
	if _, err := Start(Config{RunID: "run-1", NodeID: "chat", Pack: p}, t0); err == nil {
		t.Fatal("a pack without a workflow started without AsConversation")
	}
	f := newFake(t, calls("", call("lookup", `{}`)), text("found it"), text("anything else?"))
	m := startCfg(t, Config{RunID: "run-1", NodeID: "chat", Pack: p.AsConversation("chat"), Vars: map[string]any{"name": "Ada"}}, f)
	for i, want := range []string{"found it", "anything else?"} {
		res := mustTurn(t, m, f, fmt.Sprint("message ", i))
		if res.Status != StatusAwaitingUser || res.State != "chat" || res.Reply != want || res.Done() {
			t.Fatalf("turn %d = %+v", i, res)
		}
	}
	for _, r := range f.rounds {
		if r.In.System != "You help Ada." {
			t.Errorf("system = %q", r.In.System)
		}
		for _, tool := range r.In.Tools {
			if tool.Name == ToolTransition {
				t.Errorf("round %d offers %s", r.In.Round, ToolTransition)
			}
		}
	}
	if len(f.toolCalls) != 1 || f.toolCalls[0][0].Tool != "lookup" {
		t.Errorf("tool calls = %+v", f.toolCalls)
	}
}

func TestSkillsOfferedPerState(t *testing.T) {
	p := simplePack(t, "a", `{
		"a":{"prompt_task":"a","on_event":{"Next":"b"}},
		"b":{"prompt_task":"b","skills":"none","on_event":{"Back":"a"}}
	}`, "", prompt("a", "Serve.", ""), prompt("b", "Close.", ""))
	p.LoadedSkills = []packs.Skill{
		{Name: "tone", Description: "How we talk.", Instructions: "Be brief."},
		{Name: "pci", Description: "Card rules.", Instructions: "Last four digits only.", Preload: true},
	}
	f := newFake(t, calls("", call(ToolSkillActivate, `{"name":"tone"}`), call(ToolSkillActivate, `{"name":"nope"}`)), text("ok"),
		calls("", transition("Next", "n")), text("bye"))
	m := startCfg(t, Config{RunID: "run-1", NodeID: "chat", Pack: p}, f)
	mustTurn(t, m, f, "hi")
	mustTurn(t, m, f, "go on")
	mustTurn(t, m, f, "bye")
	first := f.rounds[0].In
	if first.System != "Serve.\n\n# Skill: pci\n\nLast four digits only." {
		t.Errorf("system = %q", first.System)
	}
	var spec *convo.ToolSpec
	for i := range first.Tools {
		if first.Tools[i].Name == ToolSkillActivate {
			spec = &first.Tools[i]
		}
	}
	if spec == nil || !strings.Contains(spec.Description, "- tone: How we talk.") || !strings.Contains(string(spec.Parameters), `"enum":["tone","pci"]`) {
		t.Fatalf("skill__activate = %+v", spec)
	}
	msgs := f.rounds[1].Messages
	var results []string
	for _, msg := range msgs {
		if msg.Role == convo.RoleTool {
			results = append(results, msg.Text)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], `"instructions":"Be brief."`) || !strings.Contains(results[1], `unknown skill \"nope\"`) {
		t.Errorf("results = %q", results)
	}
	// State b offers no skills.
	last := f.rounds[3].In
	if last.State != "b" || last.System != "Close." {
		t.Errorf("round in b = %+v", last)
	}
	for _, tool := range last.Tools {
		if tool.Name == ToolSkillActivate {
			t.Error("state b (skills: none) offers skill__activate")
		}
	}
}

// TestAgentCallWithAState: a member whose agents entry names a state (RFC 0011) answers
// a call by running the workflow from that state; the run completes after the turn,
// here where the turn yielded (a control: user state).
func TestAgentCallWithAState(t *testing.T) {
	p := mustPack(t, `{"id":"team","name":"Team","version":"1.0.0",
		"template_engine":{"version":"v1","syntax":"{{variable}}"},
		"prompts":{`+prompt("lead", "Lead.", `"tools":["review"]`)+`,`+prompt("review", "Review.", "")+`,`+prompt("summary", "Summarise.", "")+`},
		"agents":{"entry":"lead","members":{"lead":{},"review":{"description":"Reviews a change.","state":"review"}}},
		"workflow":{"version":2,"entry":"lead","states":{
			"lead":{"prompt_task":"lead","on_event":{"Review":"review"}},
			"review":{"prompt_task":"review","control":"agent","on_event":{"Done":"summary"}},
			"summary":{"prompt_task":"summary","on_event":{"Again":"review"}}}}}`)
	call := p.AsAgentCall("review")
	if call.Workflow.Entry != "review" || len(call.Agents) != 0 || p.Workflow.Entry != "lead" {
		t.Fatalf("agent call workflow = %+v (pack's entry %q)", call.Workflow, p.Workflow.Entry)
	}
	f := newFake(t, calls("Looks fine.", transition("Done", "ok")))
	m := startCfg(t, Config{RunID: "run-1", NodeID: "agent", Pack: call, OneTurn: true}, f)
	res := mustTurn(t, m, f, "Review this change.")
	if res.Status != StatusCompleted || res.State != "summary" || res.Reply != "Looks fine." || len(f.rounds) != 1 {
		t.Fatalf("call = %+v after %d rounds", res, len(f.rounds))
	}
	if ev := f.eventsOf(EventCompleted); len(ev) != 1 || ev[0].Completed.FinalState != "summary" {
		t.Errorf("completed events = %+v", ev)
	}
}
