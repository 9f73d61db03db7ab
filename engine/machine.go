package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
)

// Runtime is everything the Machine needs from its host. The run workflow implements
// it with activities (Model, Tools), workflow.Now (Now) and its run event log (Emit).
// Model and Tools errors end the turn with status failed; an error that has an
// `ErrorCode() string` method lends its code to the TurnResult. A Model error that
// wraps ErrUnavailable ends only the turn (TurnResult.TurnError).
type Runtime interface {
	// Model runs one model round.
	Model(in convo.ModelRoundInput) (*convo.ModelRoundResult, error)
	// Tools executes a batch of pack tool calls; the results are in call order.
	Tools(calls []convo.ToolCallInput) ([]*convo.ToolCallResult, error)
	// Now is the current (workflow) time.
	Now() time.Time
	// Emit records an engine event.
	Emit(ev Event)
	// Stopped reports whether the host wants the turn to end now (the run is being
	// cancelled). The machine asks before every model round and every tool batch; a
	// Model or Tools error that wraps ErrStopped stops it as well. A stopped turn ends
	// with status stopped and the run is over (see stop.go).
	Stopped() bool
}

// Run statuses (State.Status, TurnResult.Status).
const (
	StatusAwaitingUser      = "awaiting_user"       // the next user message drives the current state
	StatusAwaitingEvent     = "awaiting_event"      // in an external state: waits for an injected event (and still serves user turns)
	StatusCompleted         = "completed"           // a terminal state's prompt answered; the run is over
	StatusMaxVisitsExceeded = "max_visits_exceeded" // max_visits hit without on_max_visits; the run is over
	StatusBudgetExhausted   = "budget_exhausted"    // an engine.budget limit was reached; the run is over
	StatusFailed            = "failed"              // a model/tool failure, max_rounds, or an unsupported state; the run is over
	StatusStopped           = "stopped"             // the host stopped the turn (Runtime.Stopped); the run is over
)

// Budget limit names (BudgetEvent.Limit), as engine.budget spells them.
const (
	LimitTotalVisits = "max_total_visits"
	LimitToolCalls   = "max_tool_calls"
	LimitWallTime    = "max_wall_time_sec"
)

// Names of the implicit tools the engine answers itself.
const (
	ToolTransition    = "workflow__transition"
	ToolSetArtifact   = "workflow__set_artifact"
	ToolSkillActivate = packs.SkillActivateToolName
)

// Policy defaults (the schema's, promptpack-workflow.md §5.2).
const (
	DefaultMaxRounds           = 5
	DefaultMaxToolCallsPerTurn = 10
	// HistoryCap is the number of transitions State.History keeps.
	HistoryCap = 1000
	// HistoryArtifactSnapshots is the number of the newest State.History entries that
	// keep their artifact snapshot; older entries drop it, so the history stays small
	// whatever the artifacts hold.
	HistoryArtifactSnapshots = 8
	// MaxArtifactBytes bounds the artifacts of a run, all values together: a
	// workflow__set_artifact call that would exceed it gets an error result and changes
	// nothing.
	MaxArtifactBytes = 32 << 10
)

// ErrClosed is returned by Turn and Inject once the run has ended.
var ErrClosed = errors.New("engine: the pack run has ended and accepts no more messages or events")

// Config identifies a run and the pack it executes.
type Config struct {
	RunID  string
	NodeID string
	Pack   *packs.Pack
	// Vars are the template variables (the run's inputs).
	Vars map[string]any
	// Limits are the host's limits on the work of one turn; zero fields impose none.
	Limits TurnLimits
	// OneTurn completes the run after its first turn, wherever that turn left it: a run
	// that answers one call of an agent (packs.Pack.AsAgentCall).
	OneTurn bool
}

// Transition is one entry of State.History.
type Transition struct {
	From           string            `json:"from"`
	To             string            `json:"to"`
	Event          string            `json:"event"`
	Origin         string            `json:"origin"`
	Redirected     bool              `json:"redirected,omitempty"`
	OriginalTarget string            `json:"original_target,omitempty"`
	Timestamp      time.Time         `json:"timestamp"`
	Artifacts      map[string]string `json:"artifacts,omitempty"` // snapshot once any is set
}

// State is the serialisable run state of a pack (promptpack-workflow.md §8.2 plus the
// REC additions). It is carried across continue-as-new; encoding/json writes maps in
// key order, so equal states encode to equal bytes.
type State struct {
	PackID      string `json:"pack_id"`
	PackVersion string `json:"pack_version"`
	PackHash    string `json:"pack_hash,omitempty"`

	CurrentState   string         `json:"current_state"`
	Status         string         `json:"status"`
	TerminalReason string         `json:"terminal_reason,omitempty"`
	ErrorCode      string         `json:"error_code,omitempty"`
	ErrorMessage   string         `json:"error_message,omitempty"`
	VisitCounts    map[string]int `json:"visit_counts"`
	TotalVisits    int            `json:"total_visits"`
	TotalToolCalls int            `json:"total_tool_calls"`
	// ModelRounds counts the model rounds of the run; it is the next round's index.
	ModelRounds int               `json:"model_rounds"`
	Transitions int               `json:"transitions"`
	Turns       int               `json:"turns"`
	Artifacts   map[string]string `json:"artifacts,omitempty"`
	// LastContext is bound as {{workflow_context}} until the next transition.
	LastContext string       `json:"last_context,omitempty"`
	Usage       convo.Usage  `json:"usage"`
	History     []Transition `json:"history,omitempty"`
	StartedAt   time.Time    `json:"started_at"`
	UpdatedAt   time.Time    `json:"updated_at"`

	// Transcript is the model-facing conversation, append-only, from message
	// TranscriptBase on. A run carries only the messages of its latest round across
	// continue-as-new (Checkpoint); the earlier ones stay with the execution that
	// appended them and are read through the run's transcript query. States carried
	// before the base existed hold the whole transcript (base 0).
	Transcript     []convo.Message `json:"transcript,omitempty"`
	TranscriptBase int             `json:"transcript_base,omitempty"`
	// TranscriptDigest is the digest of the whole transcript, messages [0, Len)
	// (convo.ExtendTranscriptDigest), extended as messages are appended.
	TranscriptDigest string `json:"transcript_digest,omitempty"`
	// ContextStart is the index in the transcript where the current state's context
	// starts; a transient state moves it forward on entry.
	ContextStart int `json:"context_start"`
}

// Segment is the text of one model round, with the state that produced it.
type Segment struct {
	State string `json:"state"`
	Text  string `json:"text"`
}

// AwaitingEvent names the external state a run waits in and the events it accepts.
type AwaitingEvent struct {
	State  string   `json:"state"`
	Events []string `json:"events"` // sorted
}

// TurnResult is the outcome of a Turn or an Inject.
type TurnResult struct {
	// Reply is the non-empty segments joined with a blank line.
	Reply    string    `json:"reply"`
	Segments []Segment `json:"segments,omitempty"`
	// Status is the run status after the turn.
	Status string `json:"status"`
	// State is the current workflow state after the turn.
	State string `json:"state"`
	// ErrorCode is why the turn ended the run: a code of package protocol
	// (CodeMaxVisitsExceeded, CodeModelError, ...) or the code a Runtime error carries.
	ErrorCode    string         `json:"errorCode,omitempty"`
	ErrorMessage string         `json:"errorMessage,omitempty"`
	Awaiting     *AwaitingEvent `json:"awaiting,omitempty"`
	// TurnError is set when the turn ended early without ending the run: a model round
	// the Runtime could not get answered (ErrUnavailable). Status is then the idle
	// status of the current state.
	TurnError *TurnError `json:"turnError,omitempty"`
	// Transitions lists the transitions committed during the turn.
	Transitions []Transition `json:"transitions,omitempty"`
}

// Done reports whether the run ended with this turn.
func (r *TurnResult) Done() bool { return isClosed(r.Status) }

// Machine executes one pack run. It is not safe for concurrent use; the workflow
// drives it from one coroutine at a time.
type Machine struct {
	cfg Config
	st  *State
	// loops are the states on loops the pack does not bound (inLoop), computed once.
	loops map[string]bool
}

// Start validates the pack and the variables and enters the entry state (visit 1).
func Start(cfg Config, now time.Time) (*Machine, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if err := packs.CheckVariables(cfg.Pack, cfg.Vars); err != nil {
		return nil, fmt.Errorf("engine: pack %q: %w", cfg.Pack.ID, err)
	}
	wf := cfg.Pack.Workflow
	st := &State{
		PackID:       cfg.Pack.ID,
		PackVersion:  cfg.Pack.Version,
		PackHash:     cfg.Pack.Hash,
		CurrentState: wf.Entry,
		VisitCounts:  map[string]int{wf.Entry: 1},
		TotalVisits:  1,
		Artifacts:    map[string]string{},
		StartedAt:    now,
		UpdatedAt:    now,
	}
	m := &Machine{cfg: cfg, st: st}
	st.Status = m.idleStatus()
	return m, nil
}

// Resume continues a run from a State carried across continue-as-new.
func Resume(cfg Config, st State) (*Machine, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if st.PackID != cfg.Pack.ID {
		return nil, fmt.Errorf("engine: resume: the state belongs to pack %q, not %q", st.PackID, cfg.Pack.ID)
	}
	if cfg.Pack.Workflow.States[st.CurrentState] == nil {
		return nil, fmt.Errorf("engine: resume: pack %q has no state %q", cfg.Pack.ID, st.CurrentState)
	}
	if st.VisitCounts == nil {
		st.VisitCounts = map[string]int{}
	}
	if st.Artifacts == nil {
		st.Artifacts = map[string]string{}
	}
	if st.TranscriptDigest == "" && st.TranscriptBase == 0 {
		// A state carried before the digest was kept holds the whole transcript.
		st.TranscriptDigest = convo.ExtendTranscriptDigest("", st.Transcript...)
	}
	return &Machine{cfg: cfg, st: &st}, nil
}

func checkConfig(cfg Config) error {
	p := cfg.Pack
	if p == nil {
		return errors.New("engine: config has no pack")
	}
	if p.Workflow == nil || len(p.Workflow.States) == 0 {
		return fmt.Errorf("engine: pack %q has no workflow; only packs with a workflow can run as a conversation", p.ID)
	}
	if p.Workflow.States[p.Workflow.Entry] == nil {
		return fmt.Errorf("engine: pack %q: workflow entry %q is not a state", p.ID, p.Workflow.Entry)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Workflow.States)) {
		s := p.Workflow.States[name]
		if s == nil {
			return fmt.Errorf("engine: pack %q: state %q is empty", p.ID, name)
		}
		if s.Orchestration != packs.OrchestrationComposition && p.Prompts[s.PromptTask] == nil {
			return fmt.Errorf("engine: pack %q: state %q runs prompt %q, which the pack does not declare", p.ID, name, s.PromptTask)
		}
	}
	return nil
}

// State returns a copy of the run state.
func (m *Machine) State() State {
	st := *m.st
	st.VisitCounts = copyMap(m.st.VisitCounts)
	st.Artifacts = copyMap(m.st.Artifacts)
	st.History = append([]Transition(nil), m.st.History...)
	st.Transcript = append([]convo.Message(nil), m.st.Transcript...)
	return st
}

// Rewind sets the run state back to st, a State taken before a turn the host stopped
// (State): the turn is then as if it had not begun, and may be taken again.
func (m *Machine) Rewind(st State) { m.st = &st }

// Counters returns a copy of the run state without its transcript and history: what
// status reports need, at a cost that does not grow with the conversation.
func (m *Machine) Counters() State {
	st := *m.st
	st.VisitCounts = copyMap(m.st.VisitCounts)
	st.Artifacts = copyMap(m.st.Artifacts)
	st.History = nil
	st.Transcript = nil
	return st
}

// Checkpoint returns the state to carry across continue-as-new. Its transcript is cut
// to the messages since the latest model round (convo.TranscriptTail: what the
// next round's TranscriptRef carries inline) or to none when those exceed the tail's
// bounds; the execution that appended the others keeps answering for them.
func (m *Machine) Checkpoint() State {
	st := m.Counters()
	st.History = append([]Transition(nil), m.st.History...)
	tail := convo.TranscriptTail(m.st.Transcript)
	st.Transcript = tail
	st.TranscriptBase = m.TranscriptLen() - len(tail)
	return st
}

// Status is the current run status.
func (m *Machine) Status() string { return m.st.Status }

// Closed reports whether the run has ended (completed, max_visits_exceeded,
// budget_exhausted or failed); Turn and Inject then return ErrClosed.
func (m *Machine) Closed() bool { return isClosed(m.st.Status) }

// CurrentState is the name of the current workflow state.
func (m *Machine) CurrentState() string { return m.st.CurrentState }

// Pack returns the pack the machine runs.
func (m *Machine) Pack() *packs.Pack { return m.cfg.Pack }

// TranscriptLen is the number of messages in the transcript.
func (m *Machine) TranscriptLen() int { return m.st.TranscriptBase + len(m.st.Transcript) }

// TranscriptBase is the index of the first message this machine holds; earlier ones
// were appended by earlier executions of the run.
func (m *Machine) TranscriptBase() int { return m.st.TranscriptBase }

// Transcript returns messages [from, to) of the transcript, clamped to the messages
// the machine holds, [TranscriptBase, TranscriptLen).
func (m *Machine) Transcript(from, to int) []convo.Message {
	base, n := m.st.TranscriptBase, m.TranscriptLen()
	from = max(base, min(from, n))
	to = max(from, min(to, n))
	return append([]convo.Message(nil), m.st.Transcript[from-base:to-base]...)
}

// TranscriptPage returns the newest messages of [from, to) that the machine holds,
// at most maxBytes of them (convo.MessageBytes) but at least one, and the index
// of the first one returned.
func (m *Machine) TranscriptPage(from, to, maxBytes int) ([]convo.Message, int) {
	base, n := m.st.TranscriptBase, m.TranscriptLen()
	from = max(base, min(from, n))
	to = max(from, min(to, n))
	start, size := to, 0
	for start > from {
		b := convo.MessageBytes(&m.st.Transcript[start-1-base])
		if start < to && size+b > maxBytes {
			break
		}
		size += b
		start--
	}
	return append([]convo.Message(nil), m.st.Transcript[start-base:to-base]...), start
}

// appendMessage adds a message to the transcript and its digest.
func (m *Machine) appendMessage(msg convo.Message) {
	m.st.Transcript = append(m.st.Transcript, msg)
	m.st.TranscriptDigest = convo.ExtendTranscriptDigest(m.st.TranscriptDigest, msg)
}

// Awaiting returns the external state the run waits in, or nil.
func (m *Machine) Awaiting() *AwaitingEvent {
	if m.st.Status != StatusAwaitingEvent {
		return nil
	}
	return &AwaitingEvent{State: m.st.CurrentState, Events: m.state().Events()}
}

// Events returns the sorted events of the current state.
func (m *Machine) Events() []string { return m.state().Events() }

func (m *Machine) state() *packs.State { return m.cfg.Pack.Workflow.States[m.st.CurrentState] }

// isTerminal reports whether a state is terminal: terminal: true or no on_event.
func isTerminal(s *packs.State) bool { return s.IsTerminal() }

func isClosed(status string) bool {
	switch status {
	case StatusCompleted, StatusMaxVisitsExceeded, StatusBudgetExhausted, StatusFailed, StatusStopped:
		return true
	}
	return false
}

// idleStatus is the status of a run that waits in its current state.
func (m *Machine) idleStatus() string {
	if m.state().Orchestration == packs.OrchestrationExternal && !isTerminal(m.state()) {
		return StatusAwaitingEvent
	}
	return StatusAwaitingUser
}

// CanInject reports whether event may be injected now: the run is open, the current
// state is external or hybrid and not terminal, and it declares the event.
func (m *Machine) CanInject(event string) error {
	if isClosed(m.st.Status) {
		return ErrClosed
	}
	s := m.state()
	if s.Orchestration != packs.OrchestrationExternal && s.Orchestration != packs.OrchestrationHybrid {
		return fmt.Errorf("engine: state %q is not external or hybrid; events can be injected only into external or hybrid states", m.st.CurrentState)
	}
	if isTerminal(s) {
		return fmt.Errorf("engine: state %q is terminal and accepts no events", m.st.CurrentState)
	}
	if _, ok := s.OnEvent[event]; !ok {
		return fmt.Errorf("engine: state %q has no event %q; valid events: %s", m.st.CurrentState, event, joinEvents(s.Events()))
	}
	return nil
}

// turn is the bookkeeping of one Turn or Inject.
type turn struct {
	rt         Runtime
	res        *TurnResult
	trigger    *convo.Message // the message that started the turn, copied on transient entry
	segRounds  int            // model rounds in the current state segment
	segCalls   int            // tool calls in the current state segment
	rounds     int            // model rounds of the whole turn (Config.Limits)
	calls      int            // tool calls of the whole turn (Config.Limits)
	loopRounds int            // rounds of the turn in states on loops the pack does not bound
	loopCalls  int            // tool calls of the turn in such states
	transition *pendingTransition
}

type pendingTransition struct {
	event, context string
	extras         map[string]any
}

// Turn answers one user message (promptpack-workflow.md §8.9, REC).
func (m *Machine) Turn(rt Runtime, userText string) (*TurnResult, error) {
	if isClosed(m.st.Status) {
		return nil, ErrClosed
	}
	m.st.Turns++
	t := &turn{rt: rt, res: &TurnResult{}}
	if s := m.state(); s.Orchestration != packs.OrchestrationComposition {
		if reply, blocked := m.validateInput(t, m.cfg.Pack.Prompts[s.PromptTask], userText); blocked {
			// The model does not answer it, nor read it later: the transcript keeps a note.
			m.appendMessage(convo.Message{Role: convo.RoleUser, Text: BlockedInputText, State: m.st.CurrentState})
			t.res.Segments = append(t.res.Segments, Segment{State: m.st.CurrentState, Text: reply})
			m.endOneTurn(t)
			return m.finish(t), nil
		}
	}
	msg := convo.Message{Role: convo.RoleUser, Text: userText, State: m.st.CurrentState}
	m.appendMessage(msg)
	t.trigger = &msg
	m.loop(t)
	m.endOneTurn(t)
	return m.finish(t), nil
}

// endOneTurn completes a run of Config.OneTurn after its turn.
func (m *Machine) endOneTurn(t *turn) {
	if m.cfg.OneTurn && !isClosed(m.st.Status) {
		m.complete(t)
		m.st.TerminalReason = fmt.Sprintf("answered the call in state %q", m.st.CurrentState)
	}
}

// BlockedInputText stands in the transcript for a user message an input validator
// blocked.
const BlockedInputText = "[This message was blocked by a validator and not answered.]"

// Inject applies an external event to an external or hybrid state. A non-terminal
// target runs no round (its prompt answers the next user message, with the event's
// context as {{workflow_context}}); a terminal target's prompt runs once so the user is
// told the outcome, and the run completes.
func (m *Machine) Inject(rt Runtime, event, context string) (*TurnResult, error) {
	if err := m.CanInject(event); err != nil {
		return nil, err
	}
	t := &turn{rt: rt, res: &TurnResult{}}
	if !m.commit(t, event, context, nil, OriginExternal) {
		return m.finish(t), nil
	}
	target := m.state()
	if !isTerminal(target) {
		m.st.Status = m.idleStatus()
		return m.finish(t), nil
	}
	if target.Orchestration == packs.OrchestrationComposition {
		m.fail(protocol.CodeUnsupportedState, fmt.Sprintf("state %q is a composition state; compositions are not supported", m.st.CurrentState))
		return m.finish(t), nil
	}
	msg := convo.Message{
		Role:  convo.RoleUser,
		Text:  fmt.Sprintf("[Event %s from outside the conversation] %s", event, context),
		State: m.st.CurrentState,
	}
	m.st.Turns++
	m.appendMessage(msg)
	t.trigger = &msg
	m.loop(t)
	return m.finish(t), nil
}

// finish completes the TurnResult from the run state.
func (m *Machine) finish(t *turn) *TurnResult {
	r := t.res
	r.Status = m.st.Status
	r.State = m.st.CurrentState
	r.ErrorCode = m.st.ErrorCode
	r.ErrorMessage = m.st.ErrorMessage
	r.Awaiting = m.Awaiting()
	for _, s := range r.Segments {
		if r.Reply != "" {
			r.Reply += "\n\n"
		}
		r.Reply += s.Text
	}
	m.st.UpdatedAt = t.rt.Now()
	return r
}

// loop runs model rounds in the current state until the turn ends (§8.9 steps 1–6).
func (m *Machine) loop(t *turn) {
	for {
		if m.stopped(t, nil) || m.wallTimeExhausted(t) || m.turnRoundsReached(t) {
			return
		}
		sname := m.st.CurrentState
		s := m.state()
		if s.Orchestration == packs.OrchestrationComposition {
			m.fail(protocol.CodeUnsupportedState, fmt.Sprintf("state %q is a composition state; compositions are not supported", sname))
			return
		}
		prompt := m.cfg.Pack.Prompts[s.PromptTask]
		policy := policyOf(prompt)

		in, err := m.roundInput(t, s, prompt)
		if err != nil {
			m.fail(protocol.CodeRenderError, fmt.Sprintf("state %q: %v", sname, err))
			return
		}
		out, err := t.rt.Model(in)
		if m.stopped(t, err) || m.unavailable(t, err) {
			return
		}
		if err != nil {
			m.fail(errorCode(err, protocol.CodeModelError), fmt.Sprintf("model round %d in state %q failed: %v", in.Round, sname, err))
			return
		}
		if out == nil {
			out = &convo.ModelRoundResult{}
		}
		m.st.ModelRounds++
		t.segRounds++
		t.rounds++
		if m.inLoop() {
			t.loopRounds++
		}
		m.st.Usage.InputTokens += out.Usage.InputTokens
		m.st.Usage.OutputTokens += out.Usage.OutputTokens
		t.rt.Emit(Event{Kind: EventModelRound, State: sname, Round: &RoundEvent{
			Round: in.Round, StateRound: t.segRounds, Prompt: s.PromptTask, Provider: out.Provider, Model: out.Model,
			InputTokens: out.Usage.InputTokens, OutputTokens: out.Usage.OutputTokens, ToolCalls: len(out.ToolCalls),
			FinishReason: out.FinishReason,
		}})

		text := m.validate(t, prompt, out.Text)
		calls := make([]convo.ToolCall, len(out.ToolCalls))
		for i, c := range out.ToolCalls {
			if c.ID == "" {
				c.ID = fmt.Sprintf("call_%d_%d_%s", in.Round, i, c.Name)
			}
			if len(c.Args) == 0 {
				c.Args = json.RawMessage(`{}`)
			}
			calls[i] = c
		}
		m.appendMessage(convo.Message{
			Role: convo.RoleAssistant, Text: text, ToolCalls: calls, State: sname,
		})
		if text != "" {
			t.res.Segments = append(t.res.Segments, Segment{State: sname, Text: text})
		}

		if len(calls) == 0 {
			if isTerminal(s) {
				m.complete(t)
			} else {
				m.st.Status = m.idleStatus()
			}
			return
		}

		if b := m.budget(); b != nil && b.MaxToolCalls > 0 && m.st.TotalToolCalls+len(calls) > b.MaxToolCalls {
			m.exhaust(t, LimitToolCalls, m.st.TotalToolCalls+len(calls), b.MaxToolCalls)
			return
		}
		if m.turnCallsExceeded(t, len(calls)) {
			return
		}
		if !m.runTools(t, in.Round, s, prompt, policy, calls) {
			return
		}

		if pt := t.transition; pt != nil {
			t.transition = nil
			if !m.commit(t, pt.event, pt.context, pt.extras, OriginAgent) {
				return
			}
			target := m.state()
			switch {
			case target.Orchestration == packs.OrchestrationExternal:
				if isTerminal(target) {
					m.complete(t)
				} else {
					m.st.Status = StatusAwaitingEvent
				}
				return
			case isTerminal(target) || target.Control == packs.ControlAgent:
				t.segRounds, t.segCalls = 0, 0
				m.copyTrigger(t, target)
				continue
			default:
				m.st.Status = StatusAwaitingUser
				return
			}
		}
		if t.segRounds >= policy.MaxRounds {
			m.fail(protocol.CodeMaxRoundsExceeded, fmt.Sprintf("state %q: the model still called tools after max_rounds (%d) rounds", sname, policy.MaxRounds))
			return
		}
	}
}

// copyTrigger starts a transient state's context with the turn's triggering message,
// when the turn goes on in that state (the hand-over itself is {{workflow_context}}).
func (m *Machine) copyTrigger(t *turn, target *packs.State) {
	if target.Persistence != "transient" || t.trigger == nil {
		return
	}
	msg := *t.trigger
	msg.State = m.st.CurrentState
	m.appendMessage(msg)
}

// roundInput builds the ModelRoundInput of the next round in state s.
func (m *Machine) roundInput(t *turn, s *packs.State, prompt *packs.Prompt) (convo.ModelRoundInput, error) {
	system, err := packs.Render(m.cfg.Pack, s.PromptTask, m.cfg.Vars, packs.RuntimeVars{
		WorkflowContext: m.st.LastContext, Artifacts: m.st.Artifacts,
	})
	if err != nil {
		return convo.ModelRoundInput{}, err
	}
	system += preloadedSkills(m.offeredSkills(t, s))
	var params json.RawMessage
	if prompt.Parameters != nil {
		if params, err = json.Marshal(prompt.Parameters); err != nil {
			return convo.ModelRoundInput{}, fmt.Errorf("encode parameters of prompt %q: %w", s.PromptTask, err)
		}
	}
	overrides, err := m.modelOverrides(s.PromptTask)
	if err != nil {
		return convo.ModelRoundInput{}, err
	}
	provider := prompt.Provider
	if provider == "" {
		provider = "default" // RFC 0012: the primary LLM
	}
	choice := ""
	if t.segRounds == 0 && prompt.ToolPolicy != nil {
		choice = prompt.ToolPolicy.ToolChoice
	}
	return convo.ModelRoundInput{
		RunID:      m.cfg.RunID,
		PackID:     m.cfg.Pack.ID,
		PackHash:   m.cfg.Pack.Hash,
		NodeID:     m.cfg.NodeID,
		State:      m.st.CurrentState,
		Prompt:     s.PromptTask,
		Round:      m.st.ModelRounds,
		Provider:   provider,
		System:     system,
		Tools:      m.toolSpecs(t, s),
		ToolChoice: choice,
		Parameters: params,
		Transcript: convo.TranscriptRef{
			RunID: m.cfg.RunID, Key: m.cfg.NodeID, From: m.st.ContextStart, To: m.TranscriptLen(),
			Tail: convo.TranscriptTail(m.st.Transcript), Digest: m.st.TranscriptDigest,
		},
		ModelOverrides: overrides,
	}, nil
}

// modelOverrides renders the prompt's model_overrides for the round; the activity
// applies the entry of its provider's model, which only the worker knows.
func (m *Machine) modelOverrides(promptKey string) (map[string]convo.ModelOverride, error) {
	ovs, err := packs.RenderOverrides(m.cfg.Pack, promptKey, m.cfg.Vars, packs.RuntimeVars{
		WorkflowContext: m.st.LastContext, Artifacts: m.st.Artifacts,
	})
	if err != nil || len(ovs) == 0 {
		return nil, err
	}
	out := make(map[string]convo.ModelOverride, len(ovs))
	for _, model := range slices.Sorted(maps.Keys(ovs)) {
		ov := ovs[model]
		o := convo.ModelOverride{System: ov.SystemTemplate, Prefix: ov.Prefix, Suffix: ov.Suffix}
		if ov.Parameters != nil {
			if o.Parameters, err = json.Marshal(ov.Parameters); err != nil {
				return nil, fmt.Errorf("encode model_overrides[%q] parameters of prompt %q: %w", model, promptKey, err)
			}
		}
		out[model] = o
	}
	return out, nil
}

// errorCode returns the code of an error that carries one, else def.
func errorCode(err error, def string) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) && c.ErrorCode() != "" {
		return c.ErrorCode()
	}
	return def
}

// fail ends the run with status failed.
func (m *Machine) fail(code, msg string) {
	m.st.Status = StatusFailed
	m.st.ErrorCode = code
	m.st.ErrorMessage = msg
	m.st.TerminalReason = msg
}

// complete ends the run in its terminal state.
func (m *Machine) complete(t *turn) {
	m.st.Status = StatusCompleted
	m.st.TerminalReason = fmt.Sprintf("completed in terminal state %q", m.st.CurrentState)
	t.rt.Emit(Event{Kind: EventCompleted, State: m.st.CurrentState, Completed: &CompletedEvent{
		FinalState: m.st.CurrentState, Transitions: m.st.Transitions, Artifacts: copyMap(m.st.Artifacts),
	}})
}

// exhaust ends the run with status budget_exhausted.
func (m *Machine) exhaust(t *turn, limit string, current, maxv int) {
	m.st.Status = StatusBudgetExhausted
	m.st.ErrorCode = protocol.CodeBudgetExhausted
	m.st.ErrorMessage = fmt.Sprintf("budget exhausted: %s is %d (current %d) in state %q", limit, maxv, current, m.st.CurrentState)
	m.st.TerminalReason = m.st.ErrorMessage
	t.rt.Emit(Event{Kind: EventBudgetExhausted, State: m.st.CurrentState, Budget: &BudgetEvent{
		Limit: limit, Current: current, Max: maxv, Transitions: m.st.Transitions,
	}})
}

// elapsedSec is the run's wall time in whole seconds.
func (m *Machine) elapsedSec(t *turn) int {
	return int(t.rt.Now().Sub(m.st.StartedAt) / time.Second)
}

// wallTimeExhausted checks max_wall_time_sec, ending the run if it is reached.
func (m *Machine) wallTimeExhausted(t *turn) bool {
	b := m.budget()
	if b == nil || b.MaxWallTimeSec <= 0 {
		return false
	}
	if el := m.elapsedSec(t); el >= b.MaxWallTimeSec {
		m.exhaust(t, LimitWallTime, el, b.MaxWallTimeSec)
		return true
	}
	return false
}

// commit processes one event (§8.3): budget → terminal → event → max_visits → commit.
// It reports whether the transition was committed; otherwise the run has ended.
func (m *Machine) commit(t *turn, event, context string, extras map[string]any, origin string) bool {
	from := m.st.CurrentState
	if b := m.budget(); b != nil {
		switch {
		case b.MaxTotalVisits > 0 && m.st.TotalVisits >= b.MaxTotalVisits:
			m.exhaust(t, LimitTotalVisits, m.st.TotalVisits, b.MaxTotalVisits)
			return false
		case b.MaxToolCalls > 0 && m.st.TotalToolCalls >= b.MaxToolCalls:
			m.exhaust(t, LimitToolCalls, m.st.TotalToolCalls, b.MaxToolCalls)
			return false
		case b.MaxWallTimeSec > 0 && m.elapsedSec(t) >= b.MaxWallTimeSec:
			m.exhaust(t, LimitWallTime, m.elapsedSec(t), b.MaxWallTimeSec)
			return false
		}
	}
	s := m.state()
	target, ok := s.OnEvent[event]
	if isTerminal(s) || !ok {
		// Validated before commit (CanInject, the transition tool); reaching here is a bug.
		m.fail(protocol.CodeModelError, fmt.Sprintf("internal error: event %q is not valid in state %q", event, from))
		return false
	}
	final, redirected := target, false
	if ts := m.cfg.Pack.Workflow.States[target]; ts.MaxVisits > 0 && m.st.VisitCounts[target] >= ts.MaxVisits {
		mv := &MaxVisitsEvent{From: from, OriginalTarget: target, Event: event, VisitCount: m.st.VisitCounts[target], MaxVisits: ts.MaxVisits}
		if ts.OnMaxVisits == "" {
			mv.Terminated = true
			t.rt.Emit(Event{Kind: EventMaxVisits, State: from, MaxVisits: mv})
			m.st.Status = StatusMaxVisitsExceeded
			m.st.ErrorCode = protocol.CodeMaxVisitsExceeded
			m.st.ErrorMessage = fmt.Sprintf("max_visits (%d) reached for state %q (event %s from %q) and it has no on_max_visits", ts.MaxVisits, target, event, from)
			m.st.TerminalReason = m.st.ErrorMessage
			return false
		}
		mv.RedirectedTo = ts.OnMaxVisits
		t.rt.Emit(Event{Kind: EventMaxVisits, State: from, MaxVisits: mv})
		final, redirected = ts.OnMaxVisits, true
	}
	now := t.rt.Now()
	tr := Transition{From: from, To: final, Event: event, Origin: origin, Redirected: redirected, Timestamp: now}
	if redirected {
		tr.OriginalTarget = target
	}
	if len(m.st.Artifacts) > 0 {
		tr.Artifacts = copyMap(m.st.Artifacts)
	}
	m.st.History = append(m.st.History, tr)
	if len(m.st.History) > HistoryCap {
		m.st.History = append([]Transition(nil), m.st.History[len(m.st.History)-HistoryCap:]...)
	}
	if i := len(m.st.History) - 1 - HistoryArtifactSnapshots; i >= 0 {
		m.st.History[i].Artifacts = nil
	}
	m.st.VisitCounts[final]++
	m.st.TotalVisits++
	m.st.Transitions++
	m.st.CurrentState = final
	m.st.LastContext = context
	m.st.UpdatedAt = now
	if m.state().Persistence == "transient" {
		m.st.ContextStart = m.TranscriptLen()
	}
	t.res.Transitions = append(t.res.Transitions, tr)
	ev := &TransitionEvent{
		From: from, To: final, Event: event, Context: context, Origin: origin, Redirected: redirected,
		Visits: m.st.VisitCounts[final], TotalVisits: m.st.TotalVisits, ToolCalls: m.st.TotalToolCalls,
		Transitions: m.st.Transitions, HostExtras: extras,
	}
	if redirected {
		ev.OriginalTarget = target
	}
	t.rt.Emit(Event{Kind: EventTransition, State: from, Transition: ev})
	return true
}

// budget is the pack's engine.budget, or nil.
func (m *Machine) budget() *packs.Budget {
	if e := m.cfg.Pack.Workflow.Engine; e != nil {
		return e.Budget
	}
	return nil
}

func copyMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = m[k]
	}
	return out
}
