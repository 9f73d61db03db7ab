package workflows

import "fmt"

// shouldRun decides from the node's incoming edges whether it runs. A node without
// incoming edges runs. Otherwise an edge is taken when its source completed and its
// condition holds, and the node's trigger rule (the first incoming edge that names one;
// all_success by default) decides:
//
//	all_success   every incoming edge taken
//	any_success   at least one taken
//	all_complete  always: every source has finished (nodes run in topological order)
//	none_failed   always: a failed node ends the run, so no source failed
//	any_failed    never, for the same reason
//
// Runs that started before these rules (no GateTriggerRules marker) keep the earlier
// reading: all_success when an edge names it, otherwise any edge taken.
func (r *runner) shouldRun(n *Node) (bool, error) {
	if n.Disabled {
		return false, nil
	}
	var incoming, taken, failed int
	rule, legacyAll := "", false
	for _, e := range r.in.Definition.Edges {
		if e.TargetNodeID != n.ID {
			continue
		}
		incoming++
		if rule == "" {
			rule = e.TriggerRule
		}
		if e.TriggerRule == "all_success" {
			legacyAll = true
		}
		rec := r.record(e.SourceNodeID)
		if rec != nil && rec.State == "failed" {
			failed++ // a routed failure (rejection.go); before, a failed node ended the run
		}
		if rec == nil || rec.State != "completed" {
			continue
		}
		ok, err := r.evalCondition(e)
		if err != nil {
			return false, fmt.Errorf("edge %q: %w", e.ID, err)
		}
		if ok {
			taken++
		}
	}
	if incoming == 0 {
		return true, nil
	}
	if r.legacyTriggerRules {
		if legacyAll {
			return taken == incoming, nil
		}
		return taken > 0, nil
	}
	switch rule {
	case "", "all_success":
		return taken == incoming, nil
	case "any_success":
		return taken > 0, nil
	case "all_complete":
		return true, nil
	case "none_failed":
		return failed == 0, nil
	case "any_failed":
		return failed > 0, nil
	}
	return false, fmt.Errorf("node %q: unknown triggerRule %q (all_success, any_success, all_complete, none_failed, any_failed)", n.ID, rule)
}

// checkTriggerRulesVersion marks, for a definition whose edges the change affects (a
// node with several incoming edges, or a rule other than all_success and any_success),
// whether this run reads trigger rules as it started with. A continued run keeps the
// reading its first execution chose.
func (r *runner) checkTriggerRulesVersion() {
	if r.carried != nil {
		r.legacyTriggerRules = r.carried.TriggerRules == 0
		return
	}
	counts := map[string]int{}
	affected := false
	for _, e := range r.in.Definition.Edges {
		counts[e.TargetNodeID]++
		if counts[e.TargetNodeID] > 1 {
			affected = true
		}
		switch e.TriggerRule {
		case "", "all_success", "any_success":
		default:
			affected = true
		}
	}
	if affected {
		r.legacyTriggerRules = !r.changed(GateTriggerRules)
	}
}
