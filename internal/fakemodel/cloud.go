package fakemodel

// The wire formats of the cloud providers: Gemini's generateContent (whole, or
// streamGenerateContent?alt=sse: server-sent `data:` chunks, each a
// GenerateContentResponse), and Bedrock's Converse (whole JSON, or ConverseStream: AWS
// event-stream binary frames, one event per frame). Azure OpenAI speaks OpenAI's chat
// completions under /openai/deployments/{deployment}/.

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/wop-dev/wop/convo"
)

// GeminiResponse is the GenerateContentResponse of r, as generateContent returns it:
// one candidate with the text part and a functionCall part per tool call (the first
// carrying a thoughtSignature when r has Signature), the finish reason and the usage.
func (r Reply) GeminiResponse() []byte {
	var parts []any
	if r.Text != "" {
		parts = append(parts, map[string]any{"text": r.Text})
	}
	parts = append(parts, r.geminiCalls()...)
	in, out := r.usage()
	b, _ := json.Marshal(map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out},
		"modelVersion":  r.model(),
	})
	return b
}

func (r Reply) geminiCalls() []any {
	var parts []any
	for i, c := range r.ToolCalls {
		var args any = map[string]any{}
		if strings.TrimSpace(c.Arguments) != "" {
			_ = json.Unmarshal([]byte(c.Arguments), &args)
		}
		part := map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}}
		if i == 0 && len(r.Signature) > 0 {
			part["thoughtSignature"] = r.Signature // []byte encodes as base64, as the API sends it
		}
		parts = append(parts, part)
	}
	return parts
}

// GeminiChunks is r as streamGenerateContent streams it: a chunk per piece of text, a
// chunk with the function calls, and a last chunk with the finish reason and the usage.
func (r Reply) GeminiChunks() []Event {
	var out []Event
	chunk := func(parts []any, last, piece bool) {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		m := map[string]any{"candidates": []any{cand}, "modelVersion": r.model()}
		if last {
			cand["finishReason"] = "STOP"
			in, o := r.usage()
			m["usageMetadata"] = map[string]any{"promptTokenCount": in, "candidatesTokenCount": o, "totalTokenCount": in + o}
		}
		b, _ := json.Marshal(m)
		out = append(out, Event{Data: b, Piece: piece})
	}
	for _, p := range convo.Pieces(r.Text) {
		chunk([]any{map[string]any{"text": p}}, false, true)
	}
	if calls := r.geminiCalls(); len(calls) > 0 {
		chunk(calls, false, true)
	}
	chunk([]any{map[string]any{"text": ""}}, true, false)
	return out
}

// BedrockConverse is the Converse answer of r.
func (r Reply) BedrockConverse() []byte {
	content, stop := r.bedrockContent()
	in, out := r.usage()
	b, _ := json.Marshal(map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": stop,
		"usage":      map[string]any{"inputTokens": in, "outputTokens": out, "totalTokens": in + out},
		"metrics":    map[string]any{"latencyMs": 1},
	})
	return b
}

func (r Reply) bedrockContent() ([]any, string) {
	content := []any{}
	if r.Text != "" {
		content = append(content, map[string]any{"text": r.Text})
	}
	stop := "end_turn"
	for _, c := range r.ToolCalls {
		stop = "tool_use"
		var input any = map[string]any{}
		if strings.TrimSpace(c.Arguments) != "" {
			_ = json.Unmarshal([]byte(c.Arguments), &input)
		}
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": c.ID, "name": c.Name, "input": input}})
	}
	return content, stop
}

// BedrockEvents is r as ConverseStream streams it: messageStart, for each content block
// its deltas (text by pieces; a tool use's start, then its input JSON in two halves)
// and its stop, messageStop and metadata (usage). Each Event's Name is the event type
// and its Data the event's JSON payload; EncodeEventStream frames them.
func (r Reply) BedrockEvents() []Event {
	var out []Event
	add := func(name string, v map[string]any, piece bool) {
		b, _ := json.Marshal(v)
		out = append(out, Event{Name: name, Data: b, Piece: piece})
	}
	add("messageStart", map[string]any{"role": "assistant"}, false)
	block := 0
	if r.Text != "" {
		for _, p := range convo.Pieces(r.Text) {
			add("contentBlockDelta", map[string]any{"contentBlockIndex": block, "delta": map[string]any{"text": p}}, true)
		}
		add("contentBlockStop", map[string]any{"contentBlockIndex": block}, false)
		block++
	}
	_, stop := r.bedrockContent()
	for _, c := range r.ToolCalls {
		add("contentBlockStart", map[string]any{"contentBlockIndex": block,
			"start": map[string]any{"toolUse": map[string]any{"toolUseId": c.ID, "name": c.Name}}}, true)
		args := c.Arguments
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			if part != "" {
				add("contentBlockDelta", map[string]any{"contentBlockIndex": block, "delta": map[string]any{"toolUse": map[string]any{"input": part}}}, false)
			}
		}
		add("contentBlockStop", map[string]any{"contentBlockIndex": block}, false)
		block++
	}
	add("messageStop", map[string]any{"stopReason": stop}, false)
	in, o := r.usage()
	add("metadata", map[string]any{"usage": map[string]any{"inputTokens": in, "outputTokens": o, "totalTokens": in + o},
		"metrics": map[string]any{"latencyMs": 1}}, false)
	return out
}

// EncodeEventStream frames one event in the AWS event-stream encoding: an event
// message (Name its :event-type, Data its JSON payload), or, when exception is set, an
// exception message of that type (Data its payload, {"message": ...}).
func EncodeEventStream(ev Event, exception string) []byte {
	msg := eventstream.Message{Payload: ev.Data}
	if exception != "" {
		msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
		msg.Headers.Set(":exception-type", eventstream.StringValue(exception))
	} else {
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		msg.Headers.Set(":event-type", eventstream.StringValue(ev.Name))
	}
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	var buf bytes.Buffer
	_ = eventstream.NewEncoder().Encode(&buf, msg)
	return buf.Bytes()
}
