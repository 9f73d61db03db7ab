// Package packs loads, validates and renders PromptPack packs (spec v1.9, with the
// RFC 0005/0009/0014 workflow extension). It is pure Go: no Temporal, no network.
//
// A *Pack is a plain value that serialises to JSON with the pack's own field names,
// so a run can carry the exact pack it executes in its workflow input and replay it
// later without reading the packs folder again.
package packs

import "encoding/json"

// Pack is one loaded PromptPack. Fields a Level-2 runtime executes are typed; fields it
// only tolerates are kept as raw JSON so nothing is dropped.
type Pack struct {
	Schema         string             `json:"$schema,omitempty"`
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	Version        string             `json:"version"`
	Description    string             `json:"description,omitempty"`
	TemplateEngine TemplateEngine     `json:"template_engine"`
	Prompts        map[string]*Prompt `json:"prompts"`
	Fragments      map[string]string  `json:"fragments,omitempty"`
	Tools          map[string]*Tool   `json:"tools,omitempty"`
	Workflow       *Workflow          `json:"workflow,omitempty"`
	Requires       *Requires          `json:"requires,omitempty"`

	// Tolerated, not executed.
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	Compilation  json.RawMessage `json:"compilation,omitempty"`
	Evals        json.RawMessage `json:"evals,omitempty"`
	Agents       json.RawMessage `json:"agents,omitempty"`
	Skills       json.RawMessage `json:"skills,omitempty"`
	Compositions json.RawMessage `json:"compositions,omitempty"`

	// Hash is "sha256:<hex>" over the pack's canonical JSON form (computed by the loader,
	// not part of the file). A run records it so it can be pinned to exactly what it ran.
	Hash string `json:"-"`

	// LoadedSkills are the skills of Skills, loaded (RFC 0008; skills.go): inline ones
	// by Parse, those of path sources by LoadFile. Not part of the file; part of the hash.
	LoadedSkills []Skill `json:"loaded_skills,omitempty"`

	// promptOrder is the prompts' keys in file order (DefaultPrompt); the loader sets it.
	promptOrder []string
}

// TemplateEngine declares the template syntax of the pack.
type TemplateEngine struct {
	Version  string   `json:"version"`
	Syntax   string   `json:"syntax"`
	Features []string `json:"features,omitempty"`
}

// Prompt is one entry of the pack's prompts map (a "task").
type Prompt struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	Version        string          `json:"version"`
	SystemTemplate string          `json:"system_template"`
	Variables      []Variable      `json:"variables,omitempty"`
	Tools          []string        `json:"tools,omitempty"`
	ToolPolicy     *ToolPolicy     `json:"tool_policy,omitempty"`
	Parameters     *Parameters     `json:"parameters,omitempty"`
	Validators     []Validator     `json:"validators,omitempty"`
	Provider       string          `json:"provider,omitempty"`
	ModelOverrides json.RawMessage `json:"model_overrides,omitempty"`

	// Tolerated, not executed.
	Pipeline     json.RawMessage `json:"pipeline,omitempty"`
	Evals        json.RawMessage `json:"evals,omitempty"`
	TestedModels json.RawMessage `json:"tested_models,omitempty"`
	Media        json.RawMessage `json:"media,omitempty"`
	Extensions   json.RawMessage `json:"extensions,omitempty"`
}

// Variable is a template variable declaration (RFC 0003).
type Variable struct {
	Name        string          `json:"name"`
	Type        string          `json:"type,omitempty"`
	Required    bool            `json:"required"`
	Default     json.RawMessage `json:"default,omitempty"`
	Description string          `json:"description,omitempty"`
	Example     json.RawMessage `json:"example,omitempty"`
	Validation  json.RawMessage `json:"validation,omitempty"`
	Binding     json.RawMessage `json:"binding,omitempty"`
}

// ToolPolicy bounds the tool loop of one prompt.
type ToolPolicy struct {
	ToolChoice          string   `json:"tool_choice,omitempty"`             // auto (default) | required | none
	MaxRounds           int      `json:"max_rounds,omitempty"`              // default 5
	MaxToolCallsPerTurn int      `json:"max_tool_calls_per_turn,omitempty"` // default 10
	Blocklist           []string `json:"blocklist,omitempty"`
}

// Parameters are the model sampling parameters of a prompt.
type Parameters struct {
	Temperature      *float64 `json:"temperature,omitempty"`
	MaxTokens        *int     `json:"max_tokens,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	TopK             *int     `json:"top_k,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
}

// Validator is an output guardrail declared on a prompt.
type Validator struct {
	ID              string          `json:"id,omitempty"`
	Type            string          `json:"type"`
	Enabled         *bool           `json:"enabled,omitempty"`
	Message         string          `json:"message,omitempty"`
	FailOnViolation *bool           `json:"fail_on_violation,omitempty"` // deprecated (RFC 0015), ignored
	Params          json.RawMessage `json:"params,omitempty"`
	Extensions      json.RawMessage `json:"extensions,omitempty"`
}

// Tool is a pack-level tool declaration. The host supplies the implementation.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON Schema object
	ActionScope json.RawMessage `json:"action_scope,omitempty"`
	Extensions  json.RawMessage `json:"extensions,omitempty"`
}

// Requires names the logical providers a pack needs (RFC 0012).
type Requires struct {
	Providers json.RawMessage `json:"providers,omitempty"`
}

// Workflow is the pack's state machine (RFC 0005, 0009, 0014).
type Workflow struct {
	Version int               `json:"version"`
	Entry   string            `json:"entry"`
	States  map[string]*State `json:"states"`
	Engine  *Engine           `json:"engine,omitempty"`
}

// Engine is the open engine block; Budget is its standardised key.
type Engine struct {
	Budget *Budget `json:"budget,omitempty"`
	// Extra holds every other engine key, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

// Budget bounds a whole run. Zero means no limit.
type Budget struct {
	MaxTotalVisits int `json:"max_total_visits,omitempty"`
	MaxToolCalls   int `json:"max_tool_calls,omitempty"`
	MaxWallTimeSec int `json:"max_wall_time_sec,omitempty"`
}

// Control values (RFC 0014). An absent control is ControlUser.
const (
	ControlUser  = "user"
	ControlAgent = "agent"
)

// Orchestration values. An absent orchestration is OrchestrationInternal.
const (
	OrchestrationInternal    = "internal"
	OrchestrationExternal    = "external"
	OrchestrationHybrid      = "hybrid"
	OrchestrationComposition = "composition"
)

// State is one workflow state.
type State struct {
	PromptTask    string               `json:"prompt_task,omitempty"`
	Description   string               `json:"description,omitempty"`
	OnEvent       map[string]string    `json:"on_event,omitempty"`
	Persistence   string               `json:"persistence,omitempty"` // transient | persistent
	Orchestration string               `json:"orchestration,omitempty"`
	Control       string               `json:"control,omitempty"`
	Composition   string               `json:"composition,omitempty"`
	Skills        json.RawMessage      `json:"skills,omitempty"`
	Terminal      bool                 `json:"terminal,omitempty"`
	MaxVisits     int                  `json:"max_visits,omitempty"`
	OnMaxVisits   string               `json:"on_max_visits,omitempty"`
	Artifacts     map[string]*Artifact `json:"artifacts,omitempty"`
	Extensions    json.RawMessage      `json:"extensions,omitempty"`

	// conversation marks the one state of a pack without a workflow (AsConversation):
	// it is not terminal although it has no on_event.
	conversation bool
}

// Artifact is a workflow-scoped artifact slot (RFC 0009).
type Artifact struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Mode        string `json:"mode,omitempty"` // replace (default) | append
}
