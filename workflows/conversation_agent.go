package workflows

import (
	"encoding/json"
	"sync"

	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// ConversationAgent is the contract between the conversation host (conversation.go)
// and an agent that answers a conversation. The host owns the event log, turn
// numbering, messageIds, validation of client turns, de-duplication, the conversation
// timeout, the pending interrupts' lifecycle, continue-as-new and fork replay. The
// agent owns what it says and its own state. The run core asks an agent only through
// this interface and the optional ones below, never by its type, so an agent may live
// in a package of its own (the PromptPack agent does, package packagent).
//
// All methods run in workflow code (deterministic: no I/O, no time.Now, no map ranges
// without sorted keys); they may execute activities and timers through ctx. The host
// calls them one at a time from the run's main coroutine; resolves that arrive while a
// method runs are queued and delivered afterwards in arrival order. c is the node's
// conversation; its methods are the host's services (conversation.go,
// conversation_host.go), and its fields are the host's to change.
//
//   - Open is called once when the node is entered (not again after continue-as-new,
//     and not on a fork replay). It calls no model. Its Opening configures the
//     conversation: the agent id, roster, turn content schema, timeout, the initial
//     (turn 0, role system) content, and optionally a first user message that the host
//     records as turn 1 and immediately passes to Reply.
//   - Reply is called for every accepted user turn (already recorded as
//     conversation.exchanged). The returned AgentReply becomes the agent's turn, and
//     may close the conversation or raise/clear the agent's own interrupt.
//   - CheckInject validates an InjectedEvent without side effects (it serves the API's
//     synchronous check; return an error for an unknown event, a *RefusedCheck for a
//     refusal with its own code and details). Inject applies it. Injected events reach
//     the agent only while it has its own interrupt pending.
//   - MisroutedEvent refuses an injected event (the resolve's value, {"event": …})
//     addressed to the conversation's interrupt, where one lands when the agent raised
//     no interrupt of its own; nil lets the conversation take the value as a message.
//   - ApprovesToolCalls reports whether the agent raises tool approvals on its node
//     (Conversation.AwaitToolDecision): then a decision addressed to the node while
//     none is pending is refused rather than taken as a message.
//   - TranscriptPage answers activities.TranscriptPageQuery for keys that start with
//     the node id ("<nodeId>", "<nodeId>/…" or "<nodeId>:…") from the messages this
//     execution holds (Base, Len and the newest messages of the range; the host adds
//     the earlier executions).
//   - Status fills Snapshot.Pack (nil when the agent is not a pack).
//   - Save returns the agent's state for continue-as-new; the factory receives it back
//     as saved (nil on a fresh start). It must be bounded: no transcript or log that
//     grows with the conversation (see carry.go).
//
// Optional: an agent that also implements TurnObserver is shown every turn the host
// re-folds from the source log on a fork replay (no Reply is called then), so it can
// rebuild its state — e.g. a pack reads recorded model results from c.SourceEvents()
// instead of calling a model again; one that implements ReplayFolder folds the
// source's recording in causal order.
type ConversationAgent interface {
	Open(ctx workflow.Context, c *Conversation) (Opening, error)
	Reply(ctx workflow.Context, c *Conversation, user protocol.Turn) (AgentReply, error)
	CheckInject(c *Conversation, ev InjectedEvent) error
	Inject(ctx workflow.Context, c *Conversation, ev InjectedEvent) (AgentReply, error)
	MisroutedEvent(c *Conversation, value json.RawMessage) *ResolveCheck
	ApprovesToolCalls() bool
	TranscriptPage(req activities.TranscriptPageRequest) (activities.TranscriptPage, error)
	Status() *PackStatus
	Save() (json.RawMessage, error)
}

// RefusedCheck is an error of CheckInject that carries the refusal the resolve answers.
type RefusedCheck struct{ Check ResolveCheck }

func (e *RefusedCheck) Error() string { return e.Check.Message }

// TurnObserver is implemented by agents that rebuild state from replayed turns.
type TurnObserver interface {
	Observe(ctx workflow.Context, c *Conversation, t protocol.Turn)
}

// ReplayFolder is implemented by agents that fold a source run's recording in causal
// order on a fork replay: FoldBefore is called before the host re-emits each recorded
// conversation event (after conversation.opened), ReplayDone when the recording is
// re-folded (closed says whether the source closed the conversation).
type ReplayFolder interface {
	FoldBefore(ctx workflow.Context, c *Conversation, e Event)
	ReplayDone(ctx workflow.Context, c *Conversation, closed bool)
}

// AgentFactory builds the agent of node n. saved is the agent's Save() output after a
// continue-as-new, else nil. c is the node's conversation (ID, NodeID set); a factory
// may set its Channel.
type AgentFactory func(ctx workflow.Context, c *Conversation, n *Node, saved json.RawMessage) (ConversationAgent, error)

// agentFactories maps node type ids to agent factories. It is filled by RegisterAgent
// in code (this package's init functions, and the process that assembles a worker
// before the worker starts), never from configuration, so it is the same on every
// replay.
var agentFactories = struct {
	sync.RWMutex
	m map[string]AgentFactory
}{m: map[string]AgentFactory{}}

// RegisterAgent makes typeID a conversation node type served by f. The run core
// registers core.conversationGate (gate.go); packagent.Register registers
// vendor.wop.pack, where a worker is assembled (worker.Register) and in tests that
// build workers. Register before the worker starts: a node whose type has no agent
// fails capability_not_provided.
func RegisterAgent(typeID string, f AgentFactory) {
	agentFactories.Lock()
	defer agentFactories.Unlock()
	agentFactories.m[typeID] = f
}

// agentFactoryOf is the factory registered for typeID.
func agentFactoryOf(typeID string) (AgentFactory, bool) {
	agentFactories.RLock()
	defer agentFactories.RUnlock()
	f, ok := agentFactories.m[typeID]
	return f, ok
}

// opening configures a conversation when the agent opens it.
type Opening struct {
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
	Raise *AgentInterrupt
	// AutoResume: the host appends AutoReply as one agent turn and closes the
	// conversation without any client call (conformance mockAutoResume).
	AutoResume bool
	AutoReply  AgentReply
}

// agentReply is what an agent answers.
type AgentReply struct {
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
	Raise *AgentInterrupt
	Clear bool
	// Close ends the conversation after the turn above.
	Close *CloseRequest
	// Model is the model that answered the turn, when a model did (turnparts.go).
	Model *protocol.TurnModel
	// Notice, when set, is recorded as a system turn after the agent's: a turn that
	// ended without its answer says why (the model was unavailable), and the
	// conversation stays open.
	Notice *TurnNotice
}

// turnNotice is a system turn the host adds to a conversation: {"text", "error"}.
type TurnNotice struct {
	Text  string
	Error *protocol.RunError
}

// agentInterrupt is an interrupt an agent raises next to its conversation.
type AgentInterrupt struct {
	Kind         string          // default "external-event"
	EventType    string          // external-event data.eventType
	Correlation  json.RawMessage // external-event data.correlation (default {})
	Data         json.RawMessage // data for other kinds (verbatim)
	ResumeSchema json.RawMessage
	TimeoutMs    int64
	Describe     string // words for the Temporal UI
}

// closeRequest ends a conversation.
type CloseRequest struct {
	// Outcome is conversation.closed.outcome (nil = null). Ignored when Error is set.
	Outcome json.RawMessage
	// FinalText is the text of the system final turn (default "Conversation closed.").
	FinalText string
	// Error fails the node (and the run) after closing, e.g. max_visits_exceeded,
	// budget_exhausted or a provider failure; the outcome is then null.
	Error *protocol.RunError
}
