package chunks

// Round identifies the model round a stream of chunks belongs to.
type Round struct {
	RunID  string `json:"runId"`
	NodeID string `json:"nodeId,omitempty"`
	State  string `json:"state,omitempty"`
	// Round is the model round's index within the run (ModelRoundInput.Round).
	Round int `json:"round"`
	// MessageID is the conversation message the reply is for (the agent turn that the
	// round's text becomes part of), when the workflow named it.
	MessageID string `json:"messageId,omitempty"`
	// Attempt is the activity attempt (1 for the first). A retried round publishes a
	// new stream with a higher attempt; its sequence starts at 0 again.
	Attempt int `json:"attempt"`
	// Speaker is the agent whose reply this is, as the conversation's turns name it
	// (the pack id).
	Speaker string `json:"speakerId,omitempty"`
	// Provider and Model say who is answering (canonical provider id, model name).
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
}

// Chunk is one piece of a model reply as it streams, with the round it belongs to.
// Within one (round, attempt), Seq counts from 0 without gaps; the stream's last chunk
// has Last set and carries the round's outcome.
type Chunk struct {
	Round
	Seq  int    `json:"seq"`
	Text string `json:"text"`
	Last bool   `json:"last,omitempty"`
	// On the last chunk: the attempt failed (Aborted, with the error's type) and the text
	// streamed so far is void, or it succeeded with FinishReason, Usage and ToolCalls.
	Aborted      bool       `json:"aborted,omitempty"`
	Error        string     `json:"error,omitempty"`
	FinishReason string     `json:"finishReason,omitempty"`
	Usage        *Usage     `json:"usage,omitempty"`
	ToolCalls    []ToolCall `json:"toolCalls,omitempty"`
	// Truncated is set on the last chunk when the stream outgrew the hub's bound and
	// text chunks were left out (the round's result still holds the whole reply).
	Truncated bool `json:"truncated,omitempty"`
}

// Usage is the token usage of a round.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// ToolCall is a tool call the model asked for; Arguments is JSON text.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Final is the outcome of a round that succeeded, carried by its last chunk.
type Final struct {
	FinishReason string
	Model        string
	Usage        Usage
	ToolCalls    []ToolCall
}

// StreamID identifies one stream of a run: a round's attempt in one node.
type StreamID struct {
	NodeID  string
	Round   int
	Attempt int
}

// Stream is the stream c belongs to.
func (c *Chunk) Stream() StreamID {
	return StreamID{NodeID: c.NodeID, Round: c.Round.Round, Attempt: c.Attempt}
}

// size approximates the memory a chunk holds.
func (c *Chunk) size() int {
	n := 160 + len(c.RunID) + len(c.NodeID) + len(c.State) + len(c.MessageID) + len(c.Speaker) + len(c.Text) + len(c.Error)
	for _, t := range c.ToolCalls {
		n += len(t.ID) + len(t.Name) + len(t.Arguments)
	}
	return n
}
