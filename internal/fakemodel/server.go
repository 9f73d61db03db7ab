package fakemodel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Format is a provider wire format.
type Format string

// The formats Server speaks, by request path.
const (
	OpenAI    Format = "openai"    // POST …/chat/completions (Azure OpenAI too)
	Anthropic Format = "anthropic" // POST …/v1/messages
	Gemini    Format = "gemini"    // POST …/models/{model}:generateContent or :streamGenerateContent?alt=sse
	Bedrock   Format = "bedrock"   // POST /model/{modelId}/converse or /converse-stream
)

// Call is one request Server answered.
type Call struct {
	N      int // 0-based, in arrival order
	Format Format
	Stream bool           // the request asked for a stream
	Body   map[string]any // the decoded request body
	Path   string         // the request's URL path
	Header http.Header    // the request's headers
}

// Server answers model requests in both formats with scripted replies: streamed
// (stream: true) piece by piece, Delay before each piece of text or tool call, or whole.
// It is an http.Handler; serve it with httptest or net/http.
type Server struct {
	// Answer returns the reply to a call; nil answers "ok".
	Answer func(Call) Reply
	// Delay is waited before each streamed piece, the first included: a provider that
	// takes Delay per token.
	Delay time.Duration
	// Before, when set, is called before each streamed piece (0-based) of a call; it may
	// block, and returning false hangs up at that point, as a connection that breaks.
	Before func(call, piece int) bool
	// FirstPiece, when set, is told when a call's first piece was written: the time the
	// request arrived and the time the piece went out.
	FirstPiece func(call int, received, sent time.Time)

	mu    sync.Mutex
	calls []Call
}

// Calls returns the calls answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	var f Format
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		f = OpenAI
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		f = Anthropic
	case r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, ":generateContent") || strings.HasSuffix(r.URL.Path, ":streamGenerateContent")):
		f = Gemini
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/model/") &&
		(strings.HasSuffix(r.URL.Path, "/converse") || strings.HasSuffix(r.URL.Path, "/converse-stream")):
		f = Bedrock
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, "request body is not JSON", http.StatusBadRequest)
		return
	}
	stream, _ := body["stream"].(bool)
	switch f {
	case Gemini:
		stream = strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
	case Bedrock:
		stream = strings.HasSuffix(r.URL.Path, "/converse-stream")
	}
	s.mu.Lock()
	call := Call{N: len(s.calls), Format: f, Stream: stream, Body: body, Path: r.URL.Path, Header: r.Header.Clone()}
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	reply := Reply{Text: "ok"}
	if s.Answer != nil {
		reply = s.Answer(call)
	}
	if fl := reply.Fail; fl != nil {
		for k, v := range fl.Header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(fl.Status)
		_, _ = io.WriteString(w, fl.Body)
		return
	}
	id := fmt.Sprintf("fake-%d", call.N)
	var whole []byte
	switch f {
	case OpenAI:
		whole = reply.OpenAICompletion("chatcmpl-" + id)
	case Anthropic:
		whole = reply.AnthropicMessage("msg_" + id)
	case Gemini:
		whole = reply.GeminiResponse()
	case Bedrock:
		whole = reply.BedrockConverse()
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(whole)
		return
	}
	var events []Event
	switch f {
	case OpenAI:
		events, _ = OpenAIChunks(whole)
		events = append(events, Event{Data: []byte("[DONE]")})
	case Anthropic:
		events, _ = AnthropicEvents(whole)
	case Gemini:
		events = reply.GeminiChunks()
	case Bedrock:
		s.writeEventStream(w, r, call.N, reply, received)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	piece := 0
	for _, ev := range events {
		if ev.Piece {
			if !s.pace(r.Context(), call.N, piece) {
				panic(http.ErrAbortHandler) // hang up mid-stream
			}
			piece++
		}
		if ev.Name != "" {
			fmt.Fprintf(w, "event: %s\n", ev.Name)
		}
		fmt.Fprintf(w, "data: %s\n\n", ev.Data)
		_ = rc.Flush()
		if piece == 1 && ev.Piece && s.FirstPiece != nil {
			s.FirstPiece(call.N, received, time.Now())
		}
	}
}

// writeEventStream answers a ConverseStream call in the AWS event-stream framing, paced
// like the server-sent streams; a reply with StreamException ends with that exception
// after its first event.
func (s *Server) writeEventStream(w http.ResponseWriter, r *http.Request, n int, reply Reply, received time.Time) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	piece := 0
	for i, ev := range reply.BedrockEvents() {
		if reply.StreamException != "" && i == 1 {
			_, _ = w.Write(EncodeEventStream(Event{Data: []byte(`{"message":"` + reply.StreamException + ` (scripted)"}`)}, reply.StreamException))
			_ = rc.Flush()
			return
		}
		if ev.Piece {
			if !s.pace(r.Context(), n, piece) {
				panic(http.ErrAbortHandler)
			}
			piece++
		}
		_, _ = w.Write(EncodeEventStream(ev, ""))
		_ = rc.Flush()
		if piece == 1 && ev.Piece && s.FirstPiece != nil {
			s.FirstPiece(n, received, time.Now())
		}
	}
}

// pace waits before piece i of call n; false hangs up.
func (s *Server) pace(ctx context.Context, n, i int) bool {
	if s.Before != nil && !s.Before(n, i) {
		return false
	}
	if s.Delay > 0 {
		t := time.NewTimer(s.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}
