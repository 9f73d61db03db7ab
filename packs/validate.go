package packs

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// checker collects semantic diagnostics for one pack, positioned through the source tree.
type checker struct {
	file  string
	root  *node
	p     *Pack
	diags Diagnostics
}

// at records a diagnostic at the value reached by the path tokens (or its key, when key is true).
func (c *checker) at(sev string, tokens []string, key bool, format string, args ...any) {
	ps := c.root.locate(tokens, key)
	path := ps.path
	c.diags = append(c.diags, Diagnostic{File: c.file, Line: ps.line, Col: ps.col, Severity: sev, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) errorAt(tokens []string, format string, args ...any) {
	c.at(SeverityError, tokens, false, format, args...)
}

func (c *checker) warnAt(tokens []string, format string, args ...any) {
	c.at(SeverityWarning, tokens, false, format, args...)
}

// warnAtKey records a warning at the key of the value reached by tokens (e.g. a state's name).
func (c *checker) warnAtKey(tokens []string, format string, args ...any) {
	c.at(SeverityWarning, tokens, true, format, args...)
}

func toks(parts ...string) []string { return parts }

var pascalCase = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]*$`)

// semanticDiagnostics runs the checks of promptpack-workflow.md §7.3 (and the reference,
// template and RFC 0014 rules) on a schema-valid pack. Maps are walked in sorted order.
func semanticDiagnostics(file string, root *node, p *Pack) Diagnostics {
	c := &checker{file: file, root: root, p: p}
	if p.TemplateEngine.Syntax != "{{variable}}" {
		c.warnAt(toks("template_engine", "syntax"), "template syntax %q is not supported; this runtime renders {{variable}} placeholders only", p.TemplateEngine.Syntax)
	}
	for i, f := range p.TemplateEngine.Features {
		switch f {
		case "conditionals", "loops", "filters":
			c.warnAt(toks("template_engine", "features", strconv.Itoa(i)), "template feature %q is not supported by this runtime; such markup is left in the prompt as written", f)
		}
	}
	c.checkTools()
	c.checkPrompts()
	c.checkWorkflow()
	c.checkAgents()
	c.checkProviders()
	c.checkSkills()
	c.checkHostAnnotations()
	return c.diags
}

func (c *checker) checkTools() {
	for _, key := range slices.Sorted(maps.Keys(c.p.Tools)) {
		t := c.p.Tools[key]
		if t.Name != key {
			c.errorAt(toks("tools", key, "name"), "tool name %q must equal its key %q (models call tools by name)", t.Name, key)
		}
	}
}

func (c *checker) checkPrompts() {
	for _, key := range slices.Sorted(maps.Keys(c.p.Prompts)) {
		pr := c.p.Prompts[key]
		base := toks("prompts", key)
		if pr.ID != key {
			c.warnAt(append(base, "id"), "prompt id %q differs from its key %q; states and agents refer to the key", pr.ID, key)
		}
		members := c.p.AgentMembers()
		for i, name := range pr.Tools {
			if members[name] && c.p.Tools[name] == nil {
				// RFC 0007: a member's key in tools is a call of that agent.
				if name == key {
					c.warnAt(append(base, "tools", strconv.Itoa(i)), "prompt %q lists its own agent %q as a tool (RFC 0007); an agent does not call itself, so the call is refused", key, name)
				}
				continue
			}
			if _, ok := c.p.Tools[name]; !ok {
				if c.p.Prompts[name] != nil && len(c.p.Agents) > 0 {
					c.errorAt(append(base, "tools", strconv.Itoa(i)), "tool %q is not declared in the pack's tools; prompt %q is not one of agents.members, so it cannot be called as an agent (RFC 0007)", name, name)
					continue
				}
				msg := fmt.Sprintf("tool %q is not declared in the pack's tools", name)
				if s := suggest(name, c.p.ToolNames()); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				c.errorAt(append(base, "tools", strconv.Itoa(i)), "%s", msg)
			}
		}
		if pr.ToolPolicy != nil {
			for i, name := range pr.ToolPolicy.Blocklist {
				if !containsString(pr.Tools, name) {
					c.warnAt(append(base, "tool_policy", "blocklist", strconv.Itoa(i)), "blocklisted tool %q is not in this prompt's tools, so blocking it has no effect", name)
				}
			}
		}
		seen := map[string]int{}
		for i, v := range pr.Variables {
			vt := append(base, "variables", strconv.Itoa(i))
			if j, dup := seen[v.Name]; dup {
				c.errorAt(append(vt, "name"), "variable %q is declared twice (first at variables[%d])", v.Name, j)
			}
			seen[v.Name] = i
			if v.Required && len(v.Default) > 0 {
				c.warnAt(append(vt, "default"), "variable %q is required and has a default, which RFC 0003 advises against; a run that gives no value gets the default (drop one of them)", v.Name)
			}
			c.checkVariableRules(vt, v)
		}
		for i, val := range pr.Validators {
			if val.FailOnViolation != nil {
				c.warnAt(append(base, "validators", strconv.Itoa(i), "fail_on_violation"), "fail_on_violation is deprecated (RFC 0015) and ignored: a triggered validator always enforces; use enabled: false to turn it off")
			}
		}
		c.checkTemplate(key, pr)
	}
}

func (c *checker) checkVariableRules(vt []string, v Variable) {
	if len(v.Validation) == 0 {
		return
	}
	var rules variableRules
	if err := json.Unmarshal(v.Validation, &rules); err != nil {
		c.errorAt(append(vt, "validation"), "cannot read validation rules: %v", err)
		return
	}
	if rules.Pattern != nil {
		if _, err := regexp.Compile(*rules.Pattern); err != nil {
			c.errorAt(append(vt, "validation", "pattern"), "pattern %q does not compile: %v", *rules.Pattern, err)
		}
	}
	if rules.MinLength != nil && rules.MaxLength != nil && *rules.MinLength > *rules.MaxLength {
		c.errorAt(append(vt, "validation"), "min_length %d is greater than max_length %d; no value can pass", *rules.MinLength, *rules.MaxLength)
	}
	if rules.Minimum != nil && rules.Maximum != nil && *rules.Minimum > *rules.Maximum {
		c.errorAt(append(vt, "validation"), "minimum %s is greater than maximum %s; no value can pass", formatFloat(*rules.Minimum), formatFloat(*rules.Maximum))
	}
}

// checkTemplate checks the placeholders of a prompt's template (with its fragments
// expanded), each reported at its own line and column where the source allows.
func (c *checker) checkTemplate(key string, pr *Prompt) {
	at := toks("prompts", key, "system_template")
	tmplNode := c.root.lookupTokens(at)
	phs, cyc := templateRefs(c.p, pr.SystemTemplate)
	if cyc != "" {
		c.errorAt(at, "fragments include each other in a cycle (%s)", cyc)
	}
	declared := map[string]bool{}
	for _, v := range pr.Variables {
		declared[v.Name] = true
	}
	reported := map[string]bool{}
	statesUsing := c.statesUsing(key)
	for _, ph := range phs {
		warn := func(dedupeKey, format string, args ...any) {
			if reported[dedupeKey] {
				return
			}
			reported[dedupeKey] = true
			line, col := tmplNode.offsetPos(ph.off)
			c.diags = append(c.diags, Diagnostic{File: c.file, Line: line, Col: col, Severity: SeverityWarning,
				Path: dotPath(at...), Message: fmt.Sprintf(format, args...)})
		}
		rf := ph.rf
		switch {
		case !ph.isRef:
			warn("!"+ph.body, "{{%s}} is not a variable reference; only {{name}}, dot paths and [i] indexes are supported, so it is left as written", ph.body)
		case rf.root == varWorkflowContext && len(rf.segs) == 0:
		case rf.root == nsFragments:
			if len(rf.segs) != 1 || rf.segs[0].isIdx {
				warn(rf.raw, "{{%s}} is not a valid fragment reference; write {{fragments.<name>}}", rf.raw)
				continue
			}
			if _, ok := c.p.Fragments[rf.segs[0].key]; !ok {
				msg := fmt.Sprintf("{{%s}} names no fragment; it renders as an empty string", rf.raw)
				if s := suggest(rf.segs[0].key, slices.Sorted(maps.Keys(c.p.Fragments))); s != "" {
					msg += fmt.Sprintf(" (did you mean fragments.%s?)", s)
				}
				warn(rf.raw, "%s", msg)
			}
		case rf.root == nsArtifacts:
			if len(rf.segs) == 0 || rf.segs[0].isIdx {
				warn(rf.raw, "{{%s}} is not a valid artifact reference; write {{artifacts.<name>}}", rf.raw)
				continue
			}
			name := rf.segs[0].key
			if !containsString(c.p.ArtifactNames(), name) {
				warn(rf.raw, "{{%s}} names an artifact no workflow state declares; it renders as an empty string", rf.raw)
				continue
			}
			for _, sn := range statesUsing {
				if c.p.Workflow.States[sn].Artifacts[name] == nil && !reported[sn+"\x00"+name] {
					reported[sn+"\x00"+name] = true
					c.warnAtKey(toks("workflow", "states", sn), "state %q runs prompt %q, which reads {{artifacts.%s}}, but the state declares no artifact %q (RFC 0009)", sn, key, name, name)
				}
			}
		default:
			if !declared[rf.root] {
				warn(rf.root, "{{%s}} names no declared variable of prompt %q; it renders as an empty string unless the run supplies %q", rf.raw, key, rf.root)
			}
		}
	}
}

// statesUsing returns the states (sorted) whose prompt_task is key.
func (c *checker) statesUsing(key string) []string {
	if c.p.Workflow == nil {
		return nil
	}
	var out []string
	for _, sn := range c.p.Workflow.StateNames() {
		if c.p.Workflow.States[sn].PromptTask == key {
			out = append(out, sn)
		}
	}
	return out
}

func (c *checker) checkWorkflow() {
	w := c.p.Workflow
	if w == nil {
		return
	}
	if w.Version != 1 && w.Version != 2 {
		c.errorAt(toks("workflow", "version"), "workflow version %d is not supported; use 1 or 2", w.Version)
	}
	names := w.StateNames()
	if _, ok := w.States[w.Entry]; !ok {
		c.errorAt(toks("workflow", "entry"), "entry %q is not a state%s", w.Entry, c.stateHint(w.Entry))
	}
	compositions := map[string]bool{}
	if n := c.root.get("compositions"); n != nil {
		for _, f := range n.fields {
			compositions[f.key] = true
		}
	}
	for _, sn := range names {
		st := w.States[sn]
		base := toks("workflow", "states", sn)
		orch := st.OrchestrationOrDefault()
		if orch == OrchestrationComposition {
			if st.Composition != "" && !compositions[st.Composition] {
				c.errorAt(append(base, "composition"), "composition %q is not defined in the pack's compositions", st.Composition)
			}
		} else {
			if st.Composition != "" {
				c.errorAt(append(base, "composition"), "composition is set but orchestration is %q; set orchestration: composition or remove composition", orch)
			}
			if _, ok := c.p.Prompts[st.PromptTask]; !ok {
				msg := fmt.Sprintf("prompt_task %q is not a prompt of this pack", st.PromptTask)
				if s := suggest(st.PromptTask, c.p.PromptKeys()); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				c.errorAt(append(base, "prompt_task"), "%s", msg)
			}
		}
		if st.Persistence != "" && st.Persistence != "transient" && st.Persistence != "persistent" {
			c.errorAt(append(base, "persistence"), "must be one of \"transient\", \"persistent\" (got %q)", st.Persistence)
		}
		for _, ev := range st.Events() {
			target := st.OnEvent[ev]
			if _, ok := w.States[target]; !ok {
				c.errorAt(append(base, "on_event", ev), "event %q goes to %q, which is not a state%s", ev, target, c.stateHint(target))
			}
			if !pascalCase.MatchString(ev) {
				c.at(SeverityWarning, append(base, "on_event", ev), true, "event name %q is not PascalCase (e.g. %q); models pick events more reliably when they read as names", ev, pascalHint(ev))
			}
		}
		if st.OnMaxVisits != "" {
			target, ok := w.States[st.OnMaxVisits]
			switch {
			case !ok:
				c.errorAt(append(base, "on_max_visits"), "on_max_visits %q is not a state%s", st.OnMaxVisits, c.stateHint(st.OnMaxVisits))
			case target.MaxVisits > 0:
				c.warnAt(append(base, "on_max_visits"), "on_max_visits target %q has max_visits itself: a potential redirect chain (the redirect ignores its limit)", st.OnMaxVisits)
			}
			if st.MaxVisits == 0 {
				c.warnAt(append(base, "on_max_visits"), "on_max_visits has no effect without max_visits")
			}
		}
		if st.Terminal && len(st.OnEvent) > 0 {
			c.warnAt(append(base, "on_event"), "state is terminal: true, so its on_event transitions never fire")
		}
		if w.Version >= 2 && !st.Terminal && len(st.OnEvent) == 0 && st.MaxVisits == 0 {
			c.warnAtKey(base, "state %q has no on_event, so it ends the workflow; mark it terminal: true", sn)
		}
		if st.Control == ControlAgent && st.IsTerminal() {
			tok := append(base, "control")
			c.warnAt(tok, "control: agent has no effect on a terminal state (RFC 0014): the terminal prompt runs and the workflow completes")
		}
	}
	c.checkGraph()
}

// stateHint suggests a close state name for a misspelt reference.
func (c *checker) stateHint(name string) string {
	if s := suggest(name, c.p.Workflow.StateNames()); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

func pascalHint(ev string) string {
	var b strings.Builder
	up := true
	for _, r := range ev {
		if r == '_' || r == '-' || r == ' ' || r == '.' {
			up = true
			continue
		}
		if up {
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// successors returns the states a state can lead to: its on_event targets (unless it is
// terminal: true) and its on_max_visits redirect (when it has max_visits), sorted,
// deduplicated and restricted to existing states.
func (c *checker) successors(sn string) []string {
	w := c.p.Workflow
	st := w.States[sn]
	set := map[string]bool{}
	if !st.Terminal { // a terminal state's on_event never fires
		for _, t := range st.OnEvent {
			if _, ok := w.States[t]; ok {
				set[t] = true
			}
		}
	}
	if _, ok := w.States[st.OnMaxVisits]; ok && st.MaxVisits > 0 { // the redirect needs a cap
		set[st.OnMaxVisits] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func (c *checker) checkGraph() {
	w := c.p.Workflow
	if _, ok := w.States[w.Entry]; !ok {
		return
	}
	names := w.StateNames()

	// Reachability from entry (on_max_visits redirects count as edges).
	reach := map[string]bool{w.Entry: true}
	queue := []string{w.Entry}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, t := range c.successors(s) {
			if !reach[t] {
				reach[t] = true
				queue = append(queue, t)
			}
		}
	}
	for _, sn := range names {
		if !reach[sn] {
			c.warnAtKey(toks("workflow", "states", sn), "state %q is unreachable from the entry state %q", sn, w.Entry)
		}
	}

	c.checkAgentLoops()

	// RFC 0009: a total-visit budget below the sum of the reachable per-state caps.
	if w.Engine != nil && w.Engine.Budget != nil && w.Engine.Budget.MaxTotalVisits > 0 {
		sum := 0
		for _, sn := range names {
			if reach[sn] {
				sum += w.States[sn].MaxVisits
			}
		}
		if max := w.Engine.Budget.MaxTotalVisits; max < sum {
			c.warnAt(toks("workflow", "engine", "budget", "max_total_visits"), "max_total_visits %d is smaller than the sum of max_visits over reachable states (%d); the budget will cut loops short before their own limits", max, sum)
		}
	}
}

// checkAgentLoops warns about the loops that can really spin: control: agent states
// that can hand over to each other within one turn with nothing in the pack to stop
// them (Pack.UnboundedLoops). A loop with no way out to a state that ends the turn is
// RFC 0014 rule 4's; one the model may leave is reported too, since only the host's
// per-turn limit stops it when the model does not. Loops through a control: user
// state stop at every visit of it, so they are not reported; nor are loops a
// max_visits or an engine.budget bounds. It also warns where the host's per-turn limit
// would cut a state's own bound inside such a loop.
func (c *checker) checkAgentLoops() {
	w := c.p.Workflow
	for _, comp := range c.p.agentLoops() {
		if !c.canLeaveAgentLoop(comp) {
			c.warnAtKey(toks("workflow", "states", comp[0]), "states %s form a control: agent loop that no max_visits stops and with no way out to a control: user or terminal state; %s (RFC 0014)", strings.Join(quoteEach(comp), ", "), c.agentLoopBound())
		}
		if w.HasBudget() {
			continue
		}
		if c.canLeaveAgentLoop(comp) {
			who := fmt.Sprintf("states %s can hand over to each other", strings.Join(quoteEach(comp), ", "))
			if len(comp) == 1 {
				who = fmt.Sprintf("state %q can hand over to itself", comp[0])
			}
			c.warnAtKey(toks("workflow", "states", comp[0]), "%s within one turn (control: agent) and no max_visits or engine.budget stops it; if the model keeps looping, %s ends the run with loop_limit_exceeded", who, hostRoundLimit)
		}
		for _, sn := range comp {
			pr := c.p.Prompts[w.States[sn].PromptTask]
			if pr == nil || pr.ToolPolicy == nil {
				continue
			}
			if mr := pr.ToolPolicy.MaxRounds; mr > hostRoundDefault {
				c.warnAt(toks("prompts", w.States[sn].PromptTask, "tool_policy", "max_rounds"), "max_rounds %d is more than %s allows in state %q, which is on a loop the pack does not bound; the host's limit cuts it", mr, hostRoundLimit, sn)
			}
			if mc := pr.ToolPolicy.MaxToolCallsPerTurn; mc > hostCallDefault {
				c.warnAt(toks("prompts", w.States[sn].PromptTask, "tool_policy", "max_tool_calls_per_turn"), "max_tool_calls_per_turn %d is more than %s allows in state %q, which is on a loop the pack does not bound; the host's limit cuts it", mc, hostCallLimit, sn)
			}
		}
	}
}

// hostRoundLimit names the host's limit on model rounds per user turn (the engine's
// DefaultHostMaxRoundsPerTurn is its default).
const hostRoundLimit = "the host's limit of model rounds per user turn (WOP_MAX_ROUNDS_PER_TURN, 25 by default)"

// hostCallLimit names the host's limit on tool calls per user turn.
const hostCallLimit = "the host's limit of tool calls per user turn (WOP_MAX_TOOL_CALLS_PER_TURN, 50 by default)"

// The defaults of the host's per-turn limits (engine.DefaultHostMaxRoundsPerTurn and
// DefaultHostMaxToolCallsPerTurn; package engine imports this one).
const (
	hostRoundDefault = 25
	hostCallDefault  = 50
)

// budgetLimits lists the limits the pack's engine.budget sets, e.g.
// "max_total_visits 20, max_tool_calls 30"; empty when it sets none.
func (c *checker) budgetLimits() string {
	w := c.p.Workflow
	if w.Engine == nil || w.Engine.Budget == nil {
		return ""
	}
	b := w.Engine.Budget
	var parts []string
	if b.MaxTotalVisits > 0 {
		parts = append(parts, fmt.Sprintf("max_total_visits %d", b.MaxTotalVisits))
	}
	if b.MaxToolCalls > 0 {
		parts = append(parts, fmt.Sprintf("max_tool_calls %d", b.MaxToolCalls))
	}
	if b.MaxWallTimeSec > 0 {
		parts = append(parts, fmt.Sprintf("max_wall_time_sec %d", b.MaxWallTimeSec))
	}
	return strings.Join(parts, ", ")
}

// agentLoopBound says what ends a control: agent loop the model cannot leave, which
// runs within one turn.
func (c *checker) agentLoopBound() string {
	if b := c.budgetLimits(); b != "" {
		return "the model would loop until engine.budget (" + b + ") ends the run"
	}
	return "the pack declares no engine.budget, so the model would loop until " + hostRoundLimit + " ends the run with loop_limit_exceeded"
}

// canLeaveAgentLoop reports whether a state that ends the turn is reachable from the loop.
func (c *checker) canLeaveAgentLoop(comp []string) bool {
	w := c.p.Workflow
	seen := map[string]bool{}
	queue := append([]string(nil), comp...)
	for _, s := range comp {
		seen[s] = true
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		st := w.States[s]
		if st.ControlOrDefault() == ControlUser || st.IsTerminal() || st.OrchestrationOrDefault() == OrchestrationExternal {
			return true
		}
		for _, t := range c.successors(s) {
			if !seen[t] {
				seen[t] = true
				queue = append(queue, t)
			}
		}
	}
	return false
}

// checkAgents validates the references of the agents block (RFC 0007, RFC 0011), read from
// the source tree since the runtime keeps agents as raw JSON.
func (c *checker) checkAgents() {
	a := c.root.get("agents")
	if a == nil || a.kind != kindObject {
		return
	}
	members := a.get("members")
	if e := a.get("entry"); e != nil && e.kind == kindString {
		if _, ok := c.p.Prompts[e.str]; !ok {
			c.errorAt(toks("agents", "entry"), "agents entry %q is not a prompt of this pack", e.str)
		} else if members != nil && members.get(e.str) == nil {
			c.warnAt(toks("agents", "entry"), "agents entry %q is not one of agents.members", e.str)
		}
	}
	if members == nil || members.kind != kindObject {
		return
	}
	fields := append([]field(nil), members.fields...)
	sort.Slice(fields, func(i, j int) bool { return fields[i].key < fields[j].key })
	for _, f := range fields {
		if _, ok := c.p.Prompts[f.key]; !ok {
			c.at(SeverityError, toks("agents", "members", f.key), true, "agent member %q is not a prompt of this pack", f.key)
		}
		st := f.val.get("state")
		if st == nil || st.kind != kindString {
			continue
		}
		if c.p.Workflow == nil {
			c.errorAt(toks("agents", "members", f.key, "state"), "agent member %q starts at state %q, but the pack has no workflow", f.key, st.str)
		} else if _, ok := c.p.Workflow.States[st.str]; !ok {
			c.errorAt(toks("agents", "members", f.key, "state"), "agent member %q starts at state %q, which is not a state%s", f.key, st.str, c.stateHint(st.str))
		}
	}
}

// checkProviders checks requires.providers (RFC 0012) and the prompts' provider
// references (RFC 0017): keys are unique; a prompt's provider is default or a declared
// key; warnings for a reference to an optional requirement, for a conversational
// prompt on a provider whose role is not llm, and for a required provider this host
// cannot bind (its workers serve chat models only, so such a pack's runs are refused).
func (c *checker) checkProviders() {
	reqs := c.p.ProviderRequirements()
	seen := map[string]int{}
	var keys []string
	for i, r := range reqs {
		at := toks("requires", "providers", strconv.Itoa(i))
		if j, dup := seen[r.Key]; dup {
			c.errorAt(at, "provider key %q is declared twice (first at requires.providers[%d]); the key is the only thing that tells requirements apart (RFC 0012)", r.Key, j)
			continue
		}
		seen[r.Key] = i
		keys = append(keys, r.Key)
		if r.Required && r.Role != RoleLLM {
			c.warnAt(at, "provider %q has role %q; this host's workers serve chat models (role llm) only, so runs of the pack are refused until it is required: false", r.Key, r.Role)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(c.p.Prompts)) {
		ref := c.p.Prompts[key].Provider
		if ref == "" || ref == DefaultProviderKey {
			continue
		}
		at := toks("prompts", key, "provider")
		r := c.p.ProviderRequirement(ref)
		switch {
		case r == nil:
			msg := fmt.Sprintf("provider %q is not a key of requires.providers; declare it there or use %q (RFC 0017)", ref, DefaultProviderKey)
			if s := suggest(ref, keys); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			c.errorAt(at, "%s", msg)
		case r.Role != RoleLLM:
			c.warnAt(at, "provider %q has role %q, but prompt %q holds a conversation, which needs a chat model (role llm; RFC 0017)", ref, r.Role, key)
		case !r.Required:
			c.warnAt(at, "provider %q is declared required: false; a prompt that names it has no fallback when it is unbound (RFC 0017), and on this host it runs on the primary model then", ref)
		}
	}
}
