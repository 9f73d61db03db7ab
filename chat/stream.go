package chat

import (
	"encoding/json"
	"strconv"
	"strings"
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

// showChunk writes a piece of a streaming reply on the reply's open line. A reply that
// ends with tool calls is not the turn yet: the thinking indicator comes back. A failed
// attempt's line ends with a note; its retry streams on a line of its own.
func (s *session) showChunk(re runEvent) {
	var p chunkPayload
	if json.Unmarshal(re.Payload, &p) != nil {
		return
	}
	key := re.NodeID + "\x00" + strconv.Itoa(p.Round) + "\x00" + strconv.Itoa(p.Attempt)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streaming.key != key {
		if s.streaming.open {
			s.v.endStream("")
		}
		s.streaming = streamedReply{key: key, messageID: p.MessageID, speaker: orDefault(p.SpeakerID, "agent")}
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
		if len(p.Meta.ToolCalls) > 0 {
			s.v.startThinking()
		}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
