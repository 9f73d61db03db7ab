package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// topoOrder returns the definition's nodes in an execution order that honours every
// edge; ties are broken by the nodes' order in the definition, so the order is
// deterministic. A cycle is an error.
func topoOrder(def *Definition) ([]*Node, error) {
	index := make(map[string]int, len(def.Nodes))
	for i := range def.Nodes {
		if _, dup := index[def.Nodes[i].ID]; dup {
			return nil, fmt.Errorf("definition %q: duplicate node id %q", def.ID, def.Nodes[i].ID)
		}
		index[def.Nodes[i].ID] = i
	}
	indeg := make([]int, len(def.Nodes))
	next := make([][]int, len(def.Nodes))
	for _, e := range def.Edges {
		s, ok1 := index[e.SourceNodeID]
		t, ok2 := index[e.TargetNodeID]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("definition %q: edge %q connects unknown node %q -> %q", def.ID, e.ID, e.SourceNodeID, e.TargetNodeID)
		}
		indeg[t]++
		next[s] = append(next[s], t)
	}
	var ready []int
	for i := range def.Nodes {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	var out []*Node
	for len(ready) > 0 {
		sort.Ints(ready)
		i := ready[0]
		ready = ready[1:]
		out = append(out, &def.Nodes[i])
		for _, t := range next[i] {
			indeg[t]--
			if indeg[t] == 0 {
				ready = append(ready, t)
			}
		}
	}
	if len(out) != len(def.Nodes) {
		return nil, fmt.Errorf("definition %q: the edges form a cycle", def.ID)
	}
	return out, nil
}

// portValue is an OpenWOP PortValue.
type portValue struct {
	Type         string          `json:"type"`
	Value        json.RawMessage `json:"value"`
	VariableName string          `json:"variableName"`
	NodeID       string          `json:"nodeId"`
	OutputKey    string          `json:"outputKey"`
	Optional     bool            `json:"optional"`
	Expression   string          `json:"expression"`
}

// lookupPath reads a dotted path ("variables.payload.a", "nodes.n1.outputs.x",
// "inputs.x") from the run's state.
func (r *runner) lookupPath(path string) (json.RawMessage, bool) {
	path = strings.TrimSpace(path)
	path = strings.TrimSuffix(strings.TrimPrefix(path, "{{"), "}}")
	path = strings.TrimPrefix(strings.TrimSpace(path), "$.")
	parts := strings.Split(path, ".")
	if len(parts) == 0 || parts[0] == "" {
		return nil, false
	}
	var cur json.RawMessage
	switch parts[0] {
	case "inputs", "variables", "input":
		if len(parts) < 2 {
			return mustJSON(r.variables()), true
		}
		v, ok := r.variables()[parts[1]]
		if !ok {
			return nil, false
		}
		cur, parts = v, parts[2:]
	case "nodes":
		if len(parts) < 3 || parts[2] != "outputs" {
			return nil, false
		}
		outs, ok := r.outputs[parts[1]]
		if !ok {
			return nil, false
		}
		if len(parts) == 3 {
			return mustJSON(outs), true
		}
		v, ok := outs[parts[3]]
		if !ok {
			return nil, false
		}
		cur, parts = v, parts[4:]
	default:
		v, ok := r.variables()[parts[0]]
		if !ok {
			return nil, false
		}
		cur, parts = v, parts[1:]
	}
	for _, p := range parts {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		v, ok := obj[p]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// resolvePort evaluates one PortValue.
func (r *runner) resolvePort(raw json.RawMessage) (json.RawMessage, bool, error) {
	var pv portValue
	if err := json.Unmarshal(raw, &pv); err != nil {
		return nil, false, fmt.Errorf("port value is not a PortValue object: %w", err)
	}
	switch pv.Type {
	case "static":
		return pv.Value, pv.Value != nil, nil
	case "variable":
		v, ok := r.variables()[pv.VariableName]
		if !ok && !pv.Optional {
			return nil, false, fmt.Errorf("variable %q is not set", pv.VariableName)
		}
		return v, ok, nil
	case "connection":
		key := pv.OutputKey
		if key == "" {
			key = "output"
		}
		v, ok := r.outputs[pv.NodeID][key]
		if !ok && !pv.Optional {
			return nil, false, fmt.Errorf("output %q of node %q is not available", key, pv.NodeID)
		}
		return v, ok, nil
	case "expression":
		v, ok := r.lookupPath(pv.Expression)
		return v, ok, nil
	default:
		return nil, false, fmt.Errorf("unsupported port value type %q", pv.Type)
	}
}

// nodeInputs resolves a node's declared inputs plus the values wired in by edges with
// a targetInput.
func (r *runner) nodeInputs(n *Node) (map[string]json.RawMessage, error) {
	in := map[string]json.RawMessage{}
	for _, e := range r.in.Definition.Edges {
		if e.TargetNodeID != n.ID || e.TargetInput == "" {
			continue
		}
		src := e.SourceOutput
		if src == "" {
			src = "output"
		}
		if v, ok := r.outputs[e.SourceNodeID][src]; ok {
			in[e.TargetInput] = v
		}
	}
	ports := make([]string, 0, len(n.Inputs))
	for p := range n.Inputs {
		ports = append(ports, p)
	}
	sort.Strings(ports)
	for _, p := range ports {
		v, ok, err := r.resolvePort(n.Inputs[p])
		if err != nil {
			return nil, fmt.Errorf("input %q of node %q: %w", p, n.ID, err)
		}
		if ok {
			in[p] = v
		}
	}
	return in, nil
}

// edgeCondition is an edge's condition.
type edgeCondition struct {
	Type       string          `json:"type"`
	Left       json.RawMessage `json:"left"`
	Right      json.RawMessage `json:"right"`
	Expression string          `json:"expression"`
}

// leftOperand resolves a condition's left path: first against the edge's source node
// outputs ("approved", "output.approved", "outputs.approved"), then as a run path
// ("variables.x", "nodes.a.outputs.y"). A missing value is null.
func (r *runner) leftOperand(source string, raw json.RawMessage) json.RawMessage {
	var p string
	if json.Unmarshal(raw, &p) != nil {
		return orJSON(raw, "null")
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, "outputs."), "output.")
	if outs, ok := r.outputs[source]; ok {
		parts := strings.Split(rel, ".")
		if v, ok := outs[parts[0]]; ok {
			cur := v
			found := true
			for _, k := range parts[1:] {
				var obj map[string]json.RawMessage
				if json.Unmarshal(cur, &obj) != nil || obj[k] == nil {
					found = false
					break
				}
				cur = obj[k]
			}
			if found {
				return cur
			}
		}
	}
	if v, ok := r.lookupPath(p); ok {
		return v
	}
	return json.RawMessage("null")
}

// evalCondition evaluates an edge condition (equals, notEquals, truthy, falsy,
// contains, regex, expression).
func (r *runner) evalCondition(e Edge) (bool, error) {
	raw := e.Condition
	if len(raw) == 0 || string(raw) == "null" {
		return true, nil
	}
	var c edgeCondition
	if err := json.Unmarshal(raw, &c); err != nil {
		return false, fmt.Errorf("edge condition is not an object: %w", err)
	}
	left := r.leftOperand(e.SourceNodeID, c.Left)
	if c.Type == "expression" {
		v, ok := r.lookupPath(c.Expression)
		return ok && truthy(v), nil
	}
	right := orJSON(c.Right, "null")
	switch c.Type {
	case "equals":
		return jsonEqual(left, right), nil
	case "notEquals":
		return !jsonEqual(left, right), nil
	case "truthy":
		return truthy(left), nil
	case "falsy":
		return !truthy(left), nil
	case "contains":
		var ls string
		var rs string
		if json.Unmarshal(left, &ls) == nil && json.Unmarshal(right, &rs) == nil {
			return strings.Contains(ls, rs), nil
		}
		var arr []json.RawMessage
		if json.Unmarshal(left, &arr) == nil {
			for _, a := range arr {
				if jsonEqual(a, right) {
					return true, nil
				}
			}
		}
		return false, nil
	case "regex":
		var ls, pat string
		if json.Unmarshal(left, &ls) != nil || json.Unmarshal(right, &pat) != nil {
			return false, nil
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return false, fmt.Errorf("edge condition regex %q: %w", pat, err)
		}
		return re.MatchString(ls), nil
	default:
		return false, fmt.Errorf("unsupported edge condition type %q", c.Type)
	}
}

// canonical re-encodes JSON with sorted object keys so equal values compare equal.
func canonical(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v) // encoding/json sorts map keys
	return string(b)
}

func jsonEqual(a, b json.RawMessage) bool { return canonical(a) == canonical(b) }

// truthy follows JavaScript truthiness, which OpenWOP conditions assume.
func truthy(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	default:
		return true
	}
}
