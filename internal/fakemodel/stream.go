// Package fakemodel speaks the streaming wire formats of the model providers the host
// supports, for tests and `wop bench`: OpenAI chat completions (stream: true, server-sent
// `data:` chunks ending in [DONE]; Azure OpenAI's too), Anthropic messages (named
// server-sent events from message_start to message_stop), Gemini's generateContent and
// streamGenerateContent (cloud.go) and Bedrock's Converse and ConverseStream (AWS
// event-stream frames). It converts a whole answer (the JSON a non-streamed
// call returns) into the events a streamed call returns, and Server answers requests
// with scripted replies, piece by piece, at a chosen pace. Replies stream in the pieces of
// convo.Pieces, as the scripted mock provider streams them.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wop-dev/wop/convo"
)

// OpenAIChunks converts a chat completion into the chunks of the same completion
// streamed with stream_options.include_usage: a first chunk with the role, one per
// piece of content (or refusal), tool calls as a header chunk (id, name) and their
// arguments in two halves, a chunk with the finish reason, and a last chunk with the
// usage and no choices. Each chunk is one `data:` payload (an Event without a name);
// the stream ends with `data: [DONE]`, which is not among them.
func OpenAIChunks(completion []byte) ([]Event, error) {
	var c map[string]any
	if err := json.Unmarshal(completion, &c); err != nil {
		return nil, fmt.Errorf("not a chat completion: %w", err)
	}
	base := func() map[string]any {
		m := map[string]any{"object": "chat.completion.chunk"}
		for _, k := range []string{"id", "created", "model", "system_fingerprint"} {
			if v, ok := c[k]; ok {
				m[k] = v
			}
		}
		return m
	}
	var out []Event
	piece := false // the next chunk streams a piece of the reply
	add := func(m map[string]any) {
		b, _ := json.Marshal(m)
		out = append(out, Event{Data: b, Piece: piece})
		piece = false
	}
	choices, _ := c["choices"].([]any)
	if len(choices) == 0 {
		m := base()
		m["choices"] = []any{}
		add(m)
	}
	for _, ch := range choices {
		choice, _ := ch.(map[string]any)
		idx := choice["index"]
		msg, _ := choice["message"].(map[string]any)
		delta := func(d map[string]any, finish any) {
			m := base()
			m["choices"] = []any{map[string]any{"index": idx, "delta": d, "finish_reason": finish}}
			add(m)
		}
		delta(map[string]any{"role": "assistant", "content": ""}, nil)
		if s, _ := msg["content"].(string); s != "" {
			for _, p := range convo.Pieces(s) {
				piece = true
				delta(map[string]any{"content": p}, nil)
			}
		}
		if s, _ := msg["refusal"].(string); s != "" {
			for _, p := range convo.Pieces(s) {
				piece = true
				delta(map[string]any{"refusal": p}, nil)
			}
		}
		calls, _ := msg["tool_calls"].([]any)
		for i, tc := range calls {
			call, _ := tc.(map[string]any)
			fn, _ := call["function"].(map[string]any)
			args, _ := fn["arguments"].(string)
			head := map[string]any{"index": i, "id": call["id"], "type": call["type"],
				"function": map[string]any{"name": fn["name"], "arguments": ""}}
			piece = true
			delta(map[string]any{"tool_calls": []any{head}}, nil)
			half := len(args) / 2
			for _, part := range []string{args[:half], args[half:]} {
				if part != "" {
					piece = true
					delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil)
				}
			}
		}
		delta(map[string]any{}, choice["finish_reason"])
	}
	if u, ok := c["usage"]; ok {
		m := base()
		m["choices"] = []any{}
		m["usage"] = u
		add(m)
	}
	return out, nil
}

// Event is one server-sent event: its name (none for OpenAI's chunks) and data. Piece
// marks the events that stream a piece of the reply (text or a tool call), which a
// paced server waits before.
type Event struct {
	Name  string
	Data  []byte
	Piece bool
}

// AnthropicEvents converts a message into the events of the same message streamed:
// message_start (no content, input tokens), for each content block its start, its
// deltas (text by pieces, tool input JSON in two halves) and its stop, message_delta
// (stop reason, output tokens) and message_stop. An empty object converts to no events.
func AnthropicEvents(message []byte) ([]Event, error) {
	var m map[string]any
	if err := json.Unmarshal(message, &m); err != nil {
		return nil, fmt.Errorf("not a message: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	var out []Event
	add := func(name string, v map[string]any) {
		v["type"] = name
		b, _ := json.Marshal(v)
		out = append(out, Event{Name: name, Data: b, Piece: name == "content_block_delta"})
	}
	usage, _ := m["usage"].(map[string]any)
	startUsage := map[string]any{"input_tokens": usage["input_tokens"], "output_tokens": 1}
	start := map[string]any{}
	for k, v := range m {
		switch k {
		case "content", "stop_reason", "stop_sequence", "usage":
		default:
			start[k] = v
		}
	}
	start["content"], start["stop_reason"], start["stop_sequence"], start["usage"] = []any{}, nil, nil, startUsage
	add("message_start", map[string]any{"message": start})
	blocks, _ := m["content"].([]any)
	for i, b := range blocks {
		block, _ := b.(map[string]any)
		switch block["type"] {
		case "text":
			add("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			text, _ := block["text"].(string)
			for _, p := range convo.Pieces(text) {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": p}})
			}
		case "tool_use":
			add("content_block_start", map[string]any{"index": i, "content_block": map[string]any{
				"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(block["input"])
			half := len(in) / 2
			for _, part := range []string{string(in[:half]), string(in[half:])} {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		default:
			add("content_block_start", map[string]any{"index": i, "content_block": block})
		}
		add("content_block_stop", map[string]any{"index": i})
	}
	add("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": m["stop_reason"], "stop_sequence": m["stop_sequence"]},
		"usage": map[string]any{"output_tokens": usage["output_tokens"]},
	})
	add("message_stop", map[string]any{})
	return out, nil
}

// Reply is one scripted answer of Server.
type Reply struct {
	// Text is the reply's text, streamed by Pieces.
	Text string
	// ToolCalls are the calls the model asks for.
	ToolCalls []ToolCall
	// Model names the model in the answer (default "fake-model").
	Model string
	// InputTokens and OutputTokens are the usage reported (defaults 10 and the pieces).
	InputTokens, OutputTokens int
	// Signature is the thought signature Gemini sends with the first function call.
	Signature []byte
	// Fail answers the call with an error response instead.
	Fail *Failure
	// StreamException ends a Bedrock stream after its first event with an exception of
	// this type (ThrottlingException, ModelStreamErrorException, ...).
	StreamException string
}

// Failure is an error response: status, headers and body as sent.
type Failure struct {
	Status int
	Header map[string]string
	Body   string
}

// ToolCall is a tool call of a Reply; Arguments is a JSON object.
type ToolCall struct {
	ID, Name, Arguments string
}

func (r Reply) model() string {
	if r.Model == "" {
		return "fake-model"
	}
	return r.Model
}

func (r Reply) usage() (in, out int) {
	in, out = r.InputTokens, r.OutputTokens
	if in == 0 {
		in = 10
	}
	if out == 0 {
		out = len(convo.Pieces(r.Text)) + len(r.ToolCalls)
	}
	return in, out
}

// OpenAICompletion is the chat completion of r, as a non-streamed call returns it.
func (r Reply) OpenAICompletion(id string) []byte {
	msg := map[string]any{"role": "assistant", "content": r.Text}
	finish := "stop"
	if len(r.ToolCalls) > 0 {
		finish = "tool_calls"
		var calls []any
		for _, c := range r.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
	}
	in, out := r.usage()
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "chat.completion", "created": 1700000000, "model": r.model(),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	})
	return b
}

// AnthropicMessage is the message of r, as a non-streamed call returns it.
func (r Reply) AnthropicMessage(id string) []byte {
	var content []any
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	stop := "end_turn"
	for _, c := range r.ToolCalls {
		stop = "tool_use"
		var input any = map[string]any{}
		if strings.TrimSpace(c.Arguments) != "" {
			_ = json.Unmarshal([]byte(c.Arguments), &input)
		}
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
	}
	if content == nil {
		content = []any{}
	}
	in, out := r.usage()
	b, _ := json.Marshal(map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": r.model(), "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": in, "output_tokens": out},
	})
	return b
}
