package workflows

import "encoding/json"

// Definition is an OpenWOP workflow definition (schemas/workflow-definition.schema.json).
// Fields the interpreter does not use are kept verbatim so GET /v1/workflows/{id}
// returns what was registered.
type Definition struct {
	ID                 string                     `json:"id"`
	Name               string                     `json:"name"`
	Version            string                     `json:"version"`
	Description        string                     `json:"description,omitempty"`
	Nodes              []Node                     `json:"nodes"`
	Edges              []Edge                     `json:"edges"`
	Triggers           []json.RawMessage          `json:"triggers"`
	Variables          []Variable                 `json:"variables"`
	Metadata           json.RawMessage            `json:"metadata"`
	Settings           json.RawMessage            `json:"settings"`
	Channels           map[string]Channel         `json:"channels,omitempty"`
	ConfigurableSchema json.RawMessage            `json:"configurableSchema,omitempty"`
	Extra              map[string]json.RawMessage `json:"-"`
}

// Node is one node of a definition.
type Node struct {
	ID       string                     `json:"id"`
	TypeID   string                     `json:"typeId"`
	Name     string                     `json:"name"`
	Position json.RawMessage            `json:"position"`
	Config   json.RawMessage            `json:"config"`
	Inputs   map[string]json.RawMessage `json:"inputs"` // port -> PortValue
	Disabled bool                       `json:"disabled,omitempty"`
}

// Edge connects two nodes, optionally under a condition.
type Edge struct {
	ID           string          `json:"id"`
	SourceNodeID string          `json:"sourceNodeId"`
	TargetNodeID string          `json:"targetNodeId"`
	SourceOutput string          `json:"sourceOutput,omitempty"`
	TargetInput  string          `json:"targetInput,omitempty"`
	Condition    json.RawMessage `json:"condition,omitempty"`
	TriggerRule  string          `json:"triggerRule,omitempty"`
	Label        string          `json:"label,omitempty"`
}

// Variable is a declared run input.
type Variable struct {
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Required     bool            `json:"required,omitempty"`
	DefaultValue json.RawMessage `json:"defaultValue,omitempty"`
	Sensitive    bool            `json:"sensitive,omitempty"`
	Format       string          `json:"format,omitempty"`
	Description  string          `json:"description,omitempty"`
}

// Channel is a declared state channel, e.g. {"schema":{"type":"array"},"reducer":"message"}.
type Channel struct {
	Schema  json.RawMessage `json:"schema"`
	Reducer string          `json:"reducer"`
}
