package packs

import (
	"encoding/json"
	"maps"
	"slices"
)

// Who is meant to answer a pack's conversation. PromptPack calls the other party of a
// conversation "the user" (control: user yields the turn to it); for most packs that
// is the end user who started the run from an app or `wop chat`. A pack says when it
// is someone else, a member of staff working from the approvals inbox (a human
// handoff, a reviewer who talks to the agent), with the host's namespaced annotation
//
//	workflow.states.<state>.extensions.wop.answered_by: operator   # this state
//	metadata.wop.answered_by: operator                             # every state
//
// A state's value wins over the pack's; unset means AnsweredByUser. The inbox lists a
// conversation as operator work only while its state is answered by an operator.
const (
	AnsweredByUser     = "user"
	AnsweredByOperator = "operator"
)

// hostNamespace is the key of the host's own annotations in a pack's metadata and in
// a state's extensions.
const hostNamespace = "wop"

// hostAnnotation is what the host reads of its namespace.
type hostAnnotation struct {
	AnsweredBy string `json:"answered_by"`
}

// readHost returns the host's annotation under raw's "wop" key (zero when absent or not
// an object; the validator reports those).
func readHost(raw json.RawMessage) hostAnnotation {
	var outer map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &outer) != nil {
		return hostAnnotation{}
	}
	var h hostAnnotation
	_ = json.Unmarshal(outer[hostNamespace], &h)
	return h
}

// AnsweredBy says who is meant to answer the conversation while it is in state:
// AnsweredByOperator or AnsweredByUser.
func (p *Pack) AnsweredBy(state string) string {
	if p == nil {
		return AnsweredByUser
	}
	if p.Workflow != nil {
		if st := p.Workflow.States[state]; st != nil {
			if v := readHost(st.Extensions).AnsweredBy; v != "" {
				return v
			}
		}
	}
	if v := readHost(p.Metadata).AnsweredBy; v != "" {
		return v
	}
	return AnsweredByUser
}

// OperatorAnswered reports whether an operator answers the pack's conversation in any
// of its states.
func (p *Pack) OperatorAnswered() bool {
	if p == nil {
		return false
	}
	if readHost(p.Metadata).AnsweredBy == AnsweredByOperator {
		return true
	}
	if p.Workflow == nil {
		return false
	}
	for _, st := range p.Workflow.States {
		if readHost(st.Extensions).AnsweredBy == AnsweredByOperator {
			return true
		}
	}
	return false
}

// checkHostAnnotations checks the host's namespace in the pack's metadata and in every
// state's extensions: an object whose only field is answered_by, user or operator.
func (c *checker) checkHostAnnotations() {
	c.checkHostAnnotation(toks("metadata"))
	if c.p.Workflow == nil {
		return
	}
	for _, sn := range slices.Sorted(maps.Keys(c.p.Workflow.States)) {
		c.checkHostAnnotation(toks("workflow", "states", sn, "extensions"))
	}
}

func (c *checker) checkHostAnnotation(at []string) {
	n := c.root
	for _, tok := range at {
		if n = n.get(tok); n == nil {
			return
		}
	}
	ns := n.get(hostNamespace)
	if ns == nil {
		return
	}
	base := append(append([]string(nil), at...), hostNamespace)
	if ns.kind != kindObject {
		c.errorAt(base, "must be a mapping of the host's annotations, e.g. {answered_by: operator} (got %s)", describeValue(ns))
		return
	}
	for _, f := range ns.fields {
		if f.key != "answered_by" {
			c.at(SeverityWarning, append(base, f.key), true, "unknown host annotation %q: this host reads answered_by", f.key)
			continue
		}
		v := f.val
		if v.kind != kindString || (v.str != AnsweredByUser && v.str != AnsweredByOperator) {
			c.errorAt(append(base, f.key), "must be %q (the end user, the default) or %q (staff, in the inbox) (got %s)", AnsweredByUser, AnsweredByOperator, describeValue(v))
		}
	}
}
