package engine

import "encoding/json"

// Event kinds the Machine emits through Runtime.Emit. The run workflow maps them to
// OpenWOP run events (agent.handoff, agent.toolCalled, agent.toolReturned,
// provider.usage, cap.breached, workflow.loopback-limit).
const (
	EventTransition      = "transition"       // a committed transition (Transition)
	EventModelRound      = "model_round"      // one model round finished (Round)
	EventToolCall        = "tool_call"        // the model asked for a tool call (ToolCall)
	EventToolResult      = "tool_result"      // the call's result (ToolResult)
	EventMaxVisits       = "max_visits"       // max_visits hit: redirect or end (MaxVisits)
	EventBudgetExhausted = "budget_exhausted" // a budget limit ended the run (Budget)
	EventValidator       = "validator"        // a validator rewrote or blocked a round's text (Validator)
	EventCompleted       = "completed"        // the run reached its end in a terminal state (Completed)
)

// Event is one engine event. Kind says which of the pointer fields is set. State is the
// workflow state current when the event happened (for a transition, the state it left).
type Event struct {
	Kind       string           `json:"kind"`
	State      string           `json:"state"`
	Transition *TransitionEvent `json:"transition,omitempty"`
	Round      *RoundEvent      `json:"round,omitempty"`
	ToolCall   *ToolCallEvent   `json:"toolCall,omitempty"`
	ToolResult *ToolResultEvent `json:"toolResult,omitempty"`
	MaxVisits  *MaxVisitsEvent  `json:"maxVisits,omitempty"`
	Budget     *BudgetEvent     `json:"budget,omitempty"`
	Validator  *ValidatorEvent  `json:"validator,omitempty"`
	Completed  *CompletedEvent  `json:"completed,omitempty"`
}

// Transition origins.
const (
	OriginAgent    = "agent"    // the model called workflow__transition
	OriginExternal = "external" // a caller injected the event
)

// TransitionEvent describes one committed transition.
type TransitionEvent struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Event   string `json:"event"`
	Context string `json:"context,omitempty"`
	Origin  string `json:"origin"` // OriginAgent | OriginExternal
	// Redirected is set when max_visits sent the transition to on_max_visits instead
	// of OriginalTarget.
	Redirected     bool   `json:"redirected,omitempty"`
	OriginalTarget string `json:"originalTarget,omitempty"`
	// Visits is the visit count of To after the commit.
	Visits      int `json:"visits"`
	TotalVisits int `json:"totalVisits"`
	ToolCalls   int `json:"toolCalls"`
	Transitions int `json:"transitions"`
	// HostExtras are the transition call's arguments beyond event and context, as JSON.
	HostExtras map[string]any `json:"hostExtras,omitempty"`
}

// RoundEvent describes one finished model round.
type RoundEvent struct {
	Round        int    `json:"round"`        // global 0-based round index of the run
	StateRound   int    `json:"stateRound"`   // 1-based round within the current state segment
	Prompt       string `json:"prompt"`       // prompt key
	Provider     string `json:"provider"`     // canonical provider id
	Model        string `json:"model"`        // model name
	InputTokens  int    `json:"inputTokens"`  // this round
	OutputTokens int    `json:"outputTokens"` // this round
	ToolCalls    int    `json:"toolCalls"`    // calls the round asked for
	FinishReason string `json:"finishReason,omitempty"`
}

// ToolCallEvent describes one tool call the model asked for.
type ToolCallEvent struct {
	Round  int             `json:"round"`
	CallID string          `json:"callId"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"` // JSON object, as the model sent it
	// System is set for workflow__* tools, which the engine answers itself.
	System bool `json:"system,omitempty"`
}

// ToolResultEvent describes the result of one tool call.
type ToolResultEvent struct {
	Round   int             `json:"round"`
	CallID  string          `json:"callId"`
	Tool    string          `json:"tool"`
	Content json.RawMessage `json:"content"` // JSON
	IsError bool            `json:"isError,omitempty"`
}

// MaxVisitsEvent reports a transition that hit its target's max_visits.
type MaxVisitsEvent struct {
	From           string `json:"from"`
	OriginalTarget string `json:"originalTarget"`
	Event          string `json:"event"`
	VisitCount     int    `json:"visitCount"`
	MaxVisits      int    `json:"maxVisits"`
	RedirectedTo   string `json:"redirectedTo,omitempty"`
	Terminated     bool   `json:"terminated"` // true: the run ended max_visits_exceeded
}

// BudgetEvent reports an exhausted engine.budget limit.
type BudgetEvent struct {
	// Limit is max_total_visits, max_tool_calls or max_wall_time_sec for the pack's
	// budget, LimitTurnRounds or LimitTurnToolCalls for a host limit (Host set).
	Limit       string `json:"limit"`
	Current     int    `json:"current"`
	Max         int    `json:"max"`
	Transitions int    `json:"transitions"`
	// Host is set when the limit is the host's (Config.Limits), not the pack's.
	Host bool `json:"host,omitempty"`
}

// ValidatorEvent reports a validator that changed a round's text.
type ValidatorEvent struct {
	ID     string `json:"id,omitempty"`
	Type   string `json:"type"`
	Action string `json:"action"` // "blocked" (text replaced) or "truncated"
	Reason string `json:"reason"`
}

// CompletedEvent reports the end of the run in a terminal state.
type CompletedEvent struct {
	FinalState  string            `json:"finalState"`
	Transitions int               `json:"transitions"`
	Artifacts   map[string]string `json:"artifacts,omitempty"`
}
