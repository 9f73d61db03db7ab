package packs

import (
	"maps"
	"slices"
)

// Which loops can spin within one turn, and which of them the pack bounds.
//
// A turn goes on after a transition only into a control: agent state (RFC 0014); a
// control: user, terminal or external state ends it (a terminal one after its own
// rounds, which max_rounds bounds). So a loop can spin within a turn only through
// control: agent states. The pack bounds such a loop when any engine.budget limit is
// set, or when every way round it enters a state whose max_visits stops it: once a
// state's max_visits is reached an attempt to enter it ends the run (no on_max_visits)
// or goes to its on_max_visits target, unchecked (one hop), so the loop can go on only
// through that redirect.

// SpinsInTurn reports whether a transition into the state continues the turn: the
// state is control: agent and neither terminal, external nor a composition.
func (s *State) SpinsInTurn() bool {
	if s == nil || s.Control != ControlAgent || s.IsTerminal() {
		return false
	}
	o := s.OrchestrationOrDefault()
	return o != OrchestrationExternal && o != OrchestrationComposition
}

// HasBudget reports whether the workflow's engine.budget sets any limit.
func (w *Workflow) HasBudget() bool {
	if w == nil || w.Engine == nil || w.Engine.Budget == nil {
		return false
	}
	b := w.Engine.Budget
	return b.MaxTotalVisits > 0 || b.MaxToolCalls > 0 || b.MaxWallTimeSec > 0
}

// UnboundedLoops returns the loops (strongly connected sets of states, each sorted,
// ordered by their first state) that can spin within one turn with nothing in the
// pack to stop them: control: agent states that can hand over to each other for ever
// once every max_visits on the way is spent. Nil when the pack has no workflow or
// sets an engine.budget limit.
func (p *Pack) UnboundedLoops() [][]string {
	if p.Workflow.HasBudget() {
		return nil
	}
	return p.agentLoops()
}

// agentLoops returns the loops UnboundedLoops does, whatever the engine.budget.
func (p *Pack) agentLoops() [][]string {
	w := p.Workflow
	if w == nil {
		return nil
	}
	next := func(u string) []string {
		set := map[string]bool{}
		for _, t := range w.States[u].OnEvent {
			ts := w.States[t]
			switch {
			case ts == nil:
			case ts.MaxVisits == 0:
				set[t] = true
			case ts.OnMaxVisits != "":
				set[ts.OnMaxVisits] = true // the redirect is not checked again
			}
		}
		var out []string
		for _, t := range slices.Sorted(maps.Keys(set)) {
			if w.States[t].SpinsInTurn() {
				out = append(out, t)
			}
		}
		return out
	}
	var nodes []string
	for _, sn := range w.StateNames() {
		if w.States[sn].SpinsInTurn() {
			nodes = append(nodes, sn)
		}
	}
	return cycles(nodes, next)
}

// UnboundedLoopStates is the set of the states on UnboundedLoops.
func (p *Pack) UnboundedLoopStates() map[string]bool {
	out := map[string]bool{}
	for _, loop := range p.UnboundedLoops() {
		for _, s := range loop {
			out[s] = true
		}
	}
	return out
}

// cycles returns the strongly connected components of the graph (nodes, next) that
// hold a cycle (more than one node, or a node with an edge to itself), each sorted,
// ordered by their first node (Tarjan's algorithm; nodes and next are sorted, so the
// result is deterministic).
func cycles(nodes []string, next func(string) []string) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	n := 0
	var out [][]string
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		onStack[v] = true
		for _, t := range next(v) {
			if _, seen := index[t]; !seen {
				strong(t)
				low[v] = min(low[v], low[t])
			} else if onStack[t] {
				low[v] = min(low[v], index[t])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[x] = false
			comp = append(comp, x)
			if x == v {
				break
			}
		}
		slices.Sort(comp)
		if len(comp) > 1 || slices.Contains(next(v), v) {
			out = append(out, comp)
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			strong(v)
		}
	}
	slices.SortFunc(out, func(a, b []string) int {
		if a[0] < b[0] {
			return -1
		}
		if a[0] > b[0] {
			return 1
		}
		return 0
	})
	return out
}
