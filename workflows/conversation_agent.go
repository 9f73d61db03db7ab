package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// conversationAgent is the contract between the conversation host (conversation.go) and an
// agent that answers a conversation. The host owns the event log, turn numbering,
// messageIds, validation of client turns, de-duplication, the conversation timeout,
// the pending interrupts' lifecycle, continue-as-new and fork replay. The agent owns
// what it says and its own state.
//
// All methods run in workflow code (deterministic: no I/O, no time.Now, no map ranges
// without sorted keys); they may execute activities and timers through ctx. The host
// calls them one at a time from the run's main coroutine; resolves that arrive while a
// method runs are queued and delivered afterwards in arrival order.
//
//   - Open is called once when the node is entered (not again after continue-as-new,
//     and not on a fork replay). It calls no model. Its opening configures the
//     conversation: the agent id, roster, turn content schema, timeout, the initial
//     (turn 0, role system) content, and optionally a first user message that the host
//     records as turn 1 and immediately passes to Reply.
//   - Reply is called for every accepted user turn (already recorded as
//     conversation.exchanged). The returned agentReply becomes the agent's turn, and
//     may close the conversation or raise/clear the agent's own interrupt.
//   - CheckInject validates an InjectedEvent without side effects (it serves the API's
//     synchronous check; return an error for an unknown event, a *refusedCheck for a
//     refusal with its own code and details). Inject applies it. Injected events reach
//     the agent only while it has its own interrupt pending.
//   - MisroutedEvent refuses an injected event (the resolve's value, {"event": …})
//     addressed to the conversation's interrupt, where one lands when the agent raised
//     no interrupt of its own; nil lets the conversation take the value as a message.
//   - ApprovesToolCalls reports whether the agent raises tool approvals on its node:
//     then a decision addressed to the node while none is pending is refused rather
//     than taken as a message.
//   - TranscriptPage answers activities.TranscriptPageQuery for keys that start with
//     the node id ("<nodeId>", "<nodeId>/…" or "<nodeId>:…") from the messages this
//     execution holds (Base, Len and the newest messages of the range; the host adds
//     the earlier executions).
//   - Status fills Snapshot.Pack (nil when the agent is not a pack).
//   - Save returns the agent's state for continue-as-new; the factory receives it back
//     as saved (nil on a fresh start). It must be bounded: no transcript or log that
//     grows with the conversation (see carry.go).
//
// Optional: an agent that also implements turnObserver is shown every turn the host
// re-folds from the source log on a fork replay (no Reply is called then), so it can
// rebuild its state — e.g. a pack reads recorded model results from c.SourceEvents()
// instead of calling a model again.
type conversationAgent interface {
	Open(ctx workflow.Context, c *conversation) (opening, error)
	Reply(ctx workflow.Context, c *conversation, user protocol.Turn) (agentReply, error)
	CheckInject(c *conversation, ev InjectedEvent) error
	Inject(ctx workflow.Context, c *conversation, ev InjectedEvent) (agentReply, error)
	MisroutedEvent(c *conversation, value json.RawMessage) *ResolveCheck
	ApprovesToolCalls() bool
	TranscriptPage(req activities.TranscriptPageRequest) (activities.TranscriptPage, error)
	Status() *PackStatus
	Save() (json.RawMessage, error)
}

// refusedCheck is an error of CheckInject that carries the refusal the resolve answers.
type refusedCheck struct{ check ResolveCheck }

func (e *refusedCheck) Error() string { return e.check.Message }

// turnObserver is implemented by agents that rebuild state from replayed turns.
type turnObserver interface {
	Observe(ctx workflow.Context, c *conversation, t protocol.Turn)
}

// agentFactory builds the agent of node n. saved is the agent's Save() output after a
// continue-as-new, else nil. c is the node's conversation (ID, NodeID set).
type agentFactory func(ctx workflow.Context, c *conversation, n *Node, saved json.RawMessage) (conversationAgent, error)

// agentFactories maps node type ids to agent factories. It is filled by init functions
// of this package only (code, not configuration), so it is the same on every replay.
var agentFactories = map[string]agentFactory{}

// registerAgent makes typeID a conversation node type served by f. The pack engine
// registers "vendor.wop.pack" from workflows/pack*.go.
func registerAgent(typeID string, f agentFactory) { agentFactories[typeID] = f }

// opening configures a conversation when the agent opens it.
type opening struct {
	// AgentID drives the conversation: conversation.opened.agentId, the `from` and
	// default `speakerId` of agent turns. It must match ^[A-Za-z0-9._~:-]{1,128}$
	// (e.g. "host:support").
	AgentID string
	// Title of the conversation (conversation.start data).
	Title string
	// InitialContent is turn 0 (role system). Nil means {"text": InitialText}.
	InitialText    string
	InitialContent json.RawMessage
	// Participants, when set, is the speaking roster: client agent turns must name one
	// of them as speakerId. The host adds AgentID to it when missing.
	Participants []protocol.Participant
	// Schema validates the content of client turns.
	Schema json.RawMessage
	// TimeoutMs bounds the whole conversation (0 = none). On expiry the host closes it
	// with outcome null and a system final turn, and the node fails interrupt_timeout.
	TimeoutMs int64
	// TimeoutCode and TimeoutText, when set, replace the error code and the final
	// turn's words of that expiry (a pack's wall-time budget is budget_exhausted).
	TimeoutCode string
	TimeoutText string
	// FirstUserText, when set, is recorded as user turn 1 and answered at once.
	FirstUserText string
	// Raise, when set, raises the agent's own interrupt as the conversation opens
	// (before the first user turn), as agentReply.Raise does later.
	Raise *agentInterrupt
	// AutoResume: the host appends AutoReply as one agent turn and closes the
	// conversation without any client call (conformance mockAutoResume).
	AutoResume bool
	AutoReply  agentReply
}

// agentReply is what an agent answers.
type agentReply struct {
	// Text and State become the turn content {"text": Text, "state": State} (State
	// omitted when empty); Content, when set, is used verbatim instead.
	Text    string
	State   string
	Content json.RawMessage
	// SpeakerID of the turn; defaults to the opening's AgentID.
	SpeakerID string
	// Silent: no agent turn is recorded (e.g. an injected event into a non-terminal
	// state, or a gate that only records client turns).
	Silent bool
	// Raise raises the agent's own interrupt on the node (replacing a pending one);
	// Clear removes a pending one without a resolution. While it is pending the run is
	// waiting-external (for external-event) and resolves whose value has an "event"
	// field go to Inject.
	Raise *agentInterrupt
	Clear bool
	// Close ends the conversation after the turn above.
	Close *closeRequest
	// Model is the model that answered the turn, when a model did (turnparts.go).
	Model *protocol.TurnModel
	// Notice, when set, is recorded as a system turn after the agent's: a turn that
	// ended without its answer says why (the model was unavailable), and the
	// conversation stays open.
	Notice *turnNotice
}

// turnNotice is a system turn the host adds to a conversation: {"text", "error"}.
type turnNotice struct {
	Text  string
	Error *protocol.RunError
}

// agentInterrupt is an interrupt an agent raises next to its conversation.
type agentInterrupt struct {
	Kind         string          // default "external-event"
	EventType    string          // external-event data.eventType
	Correlation  json.RawMessage // external-event data.correlation (default {})
	Data         json.RawMessage // data for other kinds (verbatim)
	ResumeSchema json.RawMessage
	TimeoutMs    int64
	Describe     string // words for the Temporal UI
}

// closeRequest ends a conversation.
type closeRequest struct {
	// Outcome is conversation.closed.outcome (nil = null). Ignored when Error is set.
	Outcome json.RawMessage
	// FinalText is the text of the system final turn (default "Conversation closed.").
	FinalText string
	// Error fails the node (and the run) after closing, e.g. max_visits_exceeded,
	// budget_exhausted or a provider failure; the outcome is then null.
	Error *protocol.RunError
}
