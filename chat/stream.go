package chat

import (
	"cmp"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/wop-dev/wop/protocol"
)

// streamedReply is a model reply shown as it streamed (ai.message.chunk events): one
// round's, or, once its rounds ended, the turn's (their texts joined).
type streamedReply struct {
	key       string // node, round and attempt: a retried round streams anew
	messageID string // the agent turn it is for, when the host names it
	speaker   string
	text      string
	open      bool // its line is on the terminal and not ended
}

// is reports whether the agent turn (messageID, speaker, text) is this reply, already
// on the terminal.
func (r *streamedReply) is(messageID, speaker, text string) bool {
	if r.key == "" || r.speaker != speaker || strings.TrimSpace(r.text) != text {
		return false
	}
	return r.messageID == "" || messageID == "" || r.messageID == messageID
}

// chunkPayload is the part of an ai.message.chunk payload the chat reads.
type chunkPayload struct {
	Chunk     string `json:"chunk"`
	IsLast    bool   `json:"isLast"`
	Aborted   bool   `json:"aborted"`
	Round     int    `json:"round"`
	Attempt   int    `json:"attempt"`
	MessageID string `json:"messageId"`
	SpeakerID string `json:"speakerId"`
	Meta      struct {
		ToolCalls []json.RawMessage `json:"toolCalls"`
	} `json:"meta"`
}

// A turn's events are shown in their order. A model round's reply streams as it is
// written, but the durable events of the round before it (its tool calls and their
// results, the state change a transition makes) reach the chat later: the run records
// them when the workflow task ends, and a turn of the scripted mock runs all its rounds
// in one task. So a round's chunks are held back while a round before it that asked
// for tool calls has not shown its results (and, when it changed state, the state
// change), and shown once it has. The turn's own events (its agent turn, a wait, the
// run's end) show whatever is held first.

// nodeRound names one model round of a node.
type nodeRound struct {
	node  string
	round int
}

// roundTail is what the chat has shown of a round's durable events.
type roundTail struct {
	calls      int  // tool calls the round asked for
	returned   int  // their results shown
	transition bool // a workflow__transition of the round succeeded: a state change follows
	handoff    bool // that state change was shown
	done       bool // a later round's record was shown: nothing of this one is still to come
}

func (t *roundTail) shown() bool {
	return t.done || (t.returned >= t.calls && (!t.transition || t.handoff))
}

// tail returns the round's tail, creating it.
func (s *session) tail(nr nodeRound) *roundTail {
	if s.tails == nil {
		s.tails = map[nodeRound]*roundTail{}
	}
	t := s.tails[nr]
	if t == nil {
		t = &roundTail{}
		s.tails[nr] = t
	}
	return t
}

// mustHold reports whether a chunk of round nr waits for an earlier round's events (or
// for chunks held before it). Called with s.mu held.
func (s *session) mustHold(nr nodeRound) bool {
	for _, h := range s.held {
		if h.nr.node == nr.node {
			return true
		}
	}
	for k, t := range s.tails {
		if k.node == nr.node && k.round < nr.round && t.calls > 0 && !t.shown() {
			return true
		}
	}
	return false
}

// heldChunk is a chunk held back.
type heldChunk struct {
	nr nodeRound
	re runEvent
}

// turnEvent reports whether a durable event belongs to the turn as a whole (its agent
// turn, its close, a wait it raised, the run's end): what is held is shown before it.
func turnEvent(typ string) bool {
	switch typ {
	case protocol.EvConversationExchanged, protocol.EvConversationClosed, protocol.EvInterruptRequested,
		protocol.EvRunCompleted, protocol.EvRunFailed, protocol.EvRunCancelled:
		return true
	}
	return false
}

// releaseHeld shows every chunk held back, before a turn's own event.
func (s *session) releaseHeld() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseAll()
}

// sawDurable updates the rounds' tails with a durable event of the run, once it is
// shown, and shows the chunks that no longer wait.
func (s *session) sawDurable(re runEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch re.Type {
	case protocol.EvAgentDecided:
		var p struct {
			Decision struct {
				Round     *int              `json:"round"`
				ToolCalls []json.RawMessage `json:"toolCalls"`
			} `json:"decision"`
		}
		if json.Unmarshal(re.Payload, &p) != nil || p.Decision.Round == nil {
			return
		}
		r := *p.Decision.Round
		for k, t := range s.tails {
			if k.node == re.NodeID && k.round < r {
				t.done = true // the log records a round after all of the one before
			}
		}
		if n := len(p.Decision.ToolCalls); n > 0 {
			s.tail(nodeRound{re.NodeID, r}).calls = max(s.tail(nodeRound{re.NodeID, r}).calls, n)
		}
	case protocol.EvAgentToolReturned:
		var p struct {
			Round    *int   `json:"round"`
			ToolName string `json:"toolName"`
			Status   string `json:"status"`
		}
		if json.Unmarshal(re.Payload, &p) != nil || p.Round == nil {
			return
		}
		t := s.tail(nodeRound{re.NodeID, *p.Round})
		t.returned++
		if p.ToolName == toolTransition && p.Status == "ok" {
			t.transition = true
		}
	case protocol.EvAgentHandoff:
		var oldest *roundTail
		oldestRound := 0
		for k, t := range s.tails {
			if k.node == re.NodeID && t.transition && !t.handoff && (oldest == nil || k.round < oldestRound) {
				oldest, oldestRound = t, k.round
			}
		}
		if oldest != nil {
			oldest.handoff = true
		}
	}
	s.release()
}

// release shows the held chunks that no longer wait, in order. Called with s.mu held.
func (s *session) release() {
	for len(s.held) > 0 {
		h := s.held[0]
		s.held = s.held[1:]
		if s.mustHold(h.nr) {
			s.held = append([]heldChunk{h}, s.held...)
			return
		}
		s.drawChunk(h.re)
	}
}

// releaseAll shows every held chunk: the turn's own events follow them. Called with
// s.mu held.
func (s *session) releaseAll() {
	held := s.held
	s.held = nil
	for k, t := range s.tails {
		t.done = true
		delete(s.tails, k)
	}
	for _, h := range held {
		s.drawChunk(h.re)
	}
}

// showChunk shows a piece of a streaming reply, or holds it back while the events of
// an earlier round of the turn are still to be shown.
func (s *session) showChunk(re runEvent) {
	var p chunkPayload
	if json.Unmarshal(re.Payload, &p) != nil {
		return
	}
	nr := nodeRound{re.NodeID, p.Round}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mustHold(nr) {
		s.held = append(s.held, heldChunk{nr: nr, re: re})
		return
	}
	s.drawChunk(re)
}

// drawChunk writes a piece of a streaming reply on the reply's open line. A reply that
// ends with tool calls is not the turn yet: the thinking indicator comes back, and the
// next round's reply waits for the calls' results. A failed attempt's line ends with a
// note; its retry streams on a line of its own. Called with s.mu held.
func (s *session) drawChunk(re runEvent) {
	var p chunkPayload
	if json.Unmarshal(re.Payload, &p) != nil {
		return
	}
	key := re.NodeID + "\x00" + strconv.Itoa(p.Round) + "\x00" + strconv.Itoa(p.Attempt)
	if s.streaming.key != key {
		if s.streaming.open {
			s.v.endStream("")
		}
		s.streaming = streamedReply{key: key, messageID: p.MessageID, speaker: cmp.Or(p.SpeakerID, "agent")}
	}
	r := &s.streaming
	text := p.Chunk
	if !r.open {
		text = strings.TrimLeft(text, " \t\r\n")
	}
	if text != "" && !p.Aborted {
		if !r.open {
			s.v.stopThinking()
			r.open = true
		}
		s.v.streamText(r.speaker, text)
		r.text += text
	}
	if !p.IsLast {
		return
	}
	switch {
	case p.Aborted:
		if r.open {
			s.v.endStream("(interrupted; the model is asked again)")
		}
		s.streaming = streamedReply{}
	default:
		if r.open {
			s.v.endStream("")
			// A turn's reply joins the texts of its rounds with a blank line.
			if s.streamed.key != "" && r.messageID != "" && s.streamed.messageID == r.messageID {
				s.streamed.text = strings.TrimSpace(s.streamed.text) + "\n\n" + strings.TrimSpace(r.text)
			} else {
				s.streamed = *r
			}
		}
		s.streaming = streamedReply{}
		if n := len(p.Meta.ToolCalls); n > 0 {
			t := s.tail(nodeRound{re.NodeID, p.Round})
			t.calls = max(t.calls, n)
			s.v.startThinking()
		}
	}
}
