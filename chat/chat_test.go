package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeAPI fakes the endpoints wop chat uses and records what it receives.
type fakeAPI struct {
	t         *testing.T
	mu        sync.Mutex
	workflows map[string]bool
	snapshot  map[string]any
	startErr  int // status to answer POST /v1/runs with, 0 for success
	// streams[i] is what the i-th events connection sends; a stream may wait for a
	// posted message before it starts.
	streams  []fakeStream
	conns    []http.Header
	posts    []map[string]any
	postPath []string
	posted   chan struct{}
	auth     []string
}

type fakeStream struct {
	waitForPost bool
	events      []map[string]any
}

func newFakeAPI(t *testing.T) (*fakeAPI, *httptest.Server) {
	f := &fakeAPI{t: t, workflows: map[string]bool{}, posted: make(chan struct{}, 10)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func envelope(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body := map[string]any{"error": code, "message": msg}
	if details != nil {
		body["details"] = details
	}
	_ = json.NewEncoder(w).Encode(body)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/v1/workflows/"):
		if f.workflows[strings.TrimPrefix(path, "/v1/workflows/")] {
			_ = json.NewEncoder(w).Encode(map[string]any{"workflowId": strings.TrimPrefix(path, "/v1/workflows/")})
			return
		}
		envelope(w, 404, "not_found", "no such workflow", nil)
	case r.Method == http.MethodPost && path == "/v1/runs":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.posts = append(f.posts, body)
		f.postPath = append(f.postPath, path)
		f.mu.Unlock()
		if f.startErr != 0 {
			envelope(w, f.startErr, "forbidden", "the key lacks runs:create", map[string]any{"scopeRequired": "runs:create"})
			return
		}
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(map[string]any{"runId": "r1", "status": "running", "eventsUrl": "/v1/runs/r1/events"})
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/events"):
		f.serveEvents(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/v1/runs/"):
		id := strings.TrimPrefix(path, "/v1/runs/")
		f.mu.Lock()
		snap := f.snapshot
		f.mu.Unlock()
		if snap == nil || snap["runId"] != id {
			envelope(w, 404, "not_found", "no such run", nil)
			return
		}
		_ = json.NewEncoder(w).Encode(snap)
	case r.Method == http.MethodPost && strings.Contains(path, "/interrupts/"):
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.posts = append(f.posts, body)
		f.postPath = append(f.postPath, path)
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"runId": "r1", "nodeId": "pack", "status": "waiting-approval"})
		f.posted <- struct{}{}
	default:
		envelope(w, 404, "not_found", "unexpected "+r.Method+" "+path, nil)
	}
}

func (f *fakeAPI) serveEvents(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.conns = append(f.conns, r.Header.Clone())
	n := len(f.conns) - 1
	var st fakeStream
	if n < len(f.streams) {
		st = f.streams[n]
	}
	f.mu.Unlock()
	assert.Equal(f.t, "debug,messages", r.URL.Query().Get("streamMode"))
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	if st.waitForPost {
		select {
		case <-f.posted:
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Second):
			return
		}
	}
	_, _ = io.WriteString(w, ":keepalive\n\n")
	for _, ev := range st.events {
		b, _ := json.Marshal(ev)
		if ev["type"] == "ai.message.chunk" { // ephemeral: no SSE id
			_, _ = fmt.Fprintf(w, "event: %v\ndata: %s\n\n", ev["type"], b)
			continue
		}
		_, _ = fmt.Fprintf(w, "id: %v\nevent: %v\ndata: %s\n\n", ev["sequence"], ev["type"], b)
	}
	w.(http.Flusher).Flush()
}

func ev(seq int, typ string, payload map[string]any) map[string]any {
	return map[string]any{"eventId": fmt.Sprintf("evt-r1-%d", seq), "runId": "r1", "sequence": seq, "type": typ,
		"timestamp": "2026-11-30T07:00:00Z", "nodeId": "pack", "payload": payload}
}

func turnPayload(idx int, role, from string, content any) map[string]any {
	t := map[string]any{"messageId": fmt.Sprintf("r1:pack:0:%d:%s", idx, role), "from": from, "role": role,
		"turnIndex": idx, "ts": 1, "content": content}
	if role == "agent" {
		t["speakerId"] = from
	}
	return map[string]any{"conversationId": "r1:pack:0", "turnIndex": idx, "turn": t}
}

func init() { reconnectDelay = 10 * time.Millisecond }

func TestChatStartsRunAndConverses(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workflows["support"] = true
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "support", "status": "waiting-approval", "currentNodeId": "pack",
		"interrupts": []any{map[string]any{"nodeId": "pack", "kind": "conversation.exchange", "key": "r1:pack:0"}}}
	f.streams = []fakeStream{
		{events: []map[string]any{ // the first connection drops after the opening
			ev(0, "run.started", map[string]any{"workflowId": "support"}),
			ev(1, "node.suspended", map[string]any{"nodeId": "pack", "interruptId": "i1"}),
			ev(2, "conversation.opened", map[string]any{"conversationId": "r1:pack:0", "initialTurn": map[string]any{
				"messageId": "m0", "from": "system", "role": "system", "turnIndex": 0, "ts": 1,
				"content": map[string]any{"text": "Conversation with pack support, state verifying."}}}),
		}},
		{waitForPost: true, events: []map[string]any{
			ev(3, "conversation.exchanged", turnPayload(1, "user", "user", map[string]any{"text": "what is my balance?"})),
			ev(4, "conversation.exchanged", turnPayload(2, "agent", "support:verifying", map[string]any{"text": "Let me check that account."})),
			ev(5, "agent.handoff", map[string]any{"fromState": "verifying", "toState": "triage", "event": "AccountVerified", "origin": "agent"}),
			ev(6, "conversation.exchanged", turnPayload(3, "agent", "support:resolution", "Your balance is $42.00.")),
			ev(7, "conversation.closed", map[string]any{"conversationId": "r1:pack:0", "turnIndex": 4,
				"finalTurn": map[string]any{"role": "system", "from": "system", "content": nil}}),
			ev(8, "run.completed", map[string]any{"outputs": map[string]any{}}),
		}},
	}

	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"--api", srv.URL, "support"},
			envOf(map[string]string{EnvAPIKey: "wop-key-1"}), stdinR, &out, &errOut)
	}()
	_, err := io.WriteString(stdinW, "what is my balance?\n")
	require.NoError(t, err)

	select {
	case code := <-done:
		assert.Equal(t, ExitOK, code, "stderr: %s", errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("chat did not end; stdout so far: %q", out.String())
	}

	assert.Equal(t, strings.Join([]string{
		"Started run r1 of support. Type a message and press Enter; /quit leaves, /help helps.",
		"· Conversation with pack support, state verifying.",
		"support:verifying: Let me check that account.",
		"── state verifying → triage (AccountVerified)",
		"support:resolution: Your balance is $42.00.",
		"· The conversation is closed.",
		"· Run r1 completed.",
		"",
	}, "\n"), out.String())
	assert.Empty(t, errOut.String())

	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.posts, 2)
	assert.Equal(t, map[string]any{"workflowId": "support"}, f.posts[0])
	assert.Equal(t, "/v1/runs/r1/interrupts/pack", f.postPath[1])
	assert.Equal(t, map[string]any{"resumeValue": map[string]any{"operation": "exchange",
		"turn": map[string]any{"role": "user", "from": "user", "content": map[string]any{"text": "what is my balance?"}}}}, f.posts[1])
	require.Len(t, f.conns, 2)
	assert.Empty(t, f.conns[0].Get("Last-Event-ID"))
	assert.Equal(t, "2", f.conns[1].Get("Last-Event-ID"), "the reconnect resumes after the last event seen")
	assert.Equal(t, "text/event-stream", f.conns[0].Get("Accept"))
	for _, a := range f.auth {
		assert.Equal(t, "Bearer wop-key-1", a)
	}
}

func TestChatAttachesToFailedRun(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "support", "status": "failed"}
	f.streams = []fakeStream{{events: []map[string]any{
		ev(0, "run.started", map[string]any{"workflowId": "support"}),
		ev(1, "run.failed", map[string]any{"error": map[string]any{"code": "budget_exhausted", "message": "the run used its 10 tool calls"}}),
	}}}
	var out, errOut bytes.Buffer
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	code := run(context.Background(), []string{"--api", srv.URL + "/", "r1"}, envOf(nil), stdinR, &out, &errOut)
	assert.Equal(t, ExitFailed, code)
	assert.Equal(t, "Attached to run r1. Type a message and press Enter; /quit leaves, /help helps.\n"+
		"· Run r1 failed: the run used its 10 tool calls (budget_exhausted).\n", out.String())
	assert.Empty(t, f.posts, "attaching starts nothing")
}

func TestChatPrintsAPIErrorsReadably(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workflows["support"] = true
	f.startErr = 403
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"support"}, envOf(map[string]string{EnvAPIURL: srv.URL}), strings.NewReader(""), &out, &errOut)
	assert.Equal(t, ExitFailed, code)
	assert.Equal(t, `wop chat: could not start a run of support: the key lacks runs:create (HTTP 403, forbidden) details: {"scopeRequired":"runs:create"}; the key lacks the scope this needs`+"\n", errOut.String())
	assert.Empty(t, out.String())
}

func TestChatUnknownTarget(t *testing.T) {
	_, srv := newFakeAPI(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "nope"}, envOf(nil), strings.NewReader(""), &out, &errOut)
	assert.Equal(t, ExitFailed, code)
	assert.Contains(t, errOut.String(), `"nope" is neither a workflow nor a run`)
}

func TestChatMessageWhenRunIsNotWaitingAndQuit(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "support", "status": "running"}
	f.streams = []fakeStream{{waitForPost: true}} // never sends: the chat must leave on /quit
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "r1"}, envOf(nil),
		strings.NewReader("hello\n\n/quit\nnot sent\n"), &out, &errOut)
	assert.Equal(t, ExitOK, code)
	assert.Equal(t, "wop chat: the run is not waiting for a message (status running); your message was not sent\n", errOut.String())
	assert.Equal(t, "Attached to run r1. Type a message and press Enter; /quit leaves, /help helps.\n"+
		"· Left run r1; it goes on. Attach again with: wop chat r1\n", out.String(), "the chat says which run it leaves")
	assert.Empty(t, f.posts)
}

func TestChatUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitUsage, run(context.Background(), nil, envOf(nil), strings.NewReader(""), &out, &errOut))
	assert.Contains(t, errOut.String(), "Usage: wop chat")
	errOut.Reset()
	assert.Equal(t, ExitUsage, run(context.Background(), []string{"--api", "localhost:8080", "x"}, envOf(nil), strings.NewReader(""), &out, &errOut))
	assert.Contains(t, errOut.String(), "not an http(s) URL")
}

func TestReadSSE(t *testing.T) {
	body := ": keepalive\n\nid: 5\nevent: a\ndata: {\"x\":\ndata: 1}\n\nid: 6\ndata: two\r\n\r\nevent: ignored-without-data\n\n"
	var got []event
	require.NoError(t, readSSE(strings.NewReader(body), func(e event) bool {
		got = append(got, e)
		return false
	}))
	require.Len(t, got, 2)
	assert.Equal(t, event{id: "5", typ: "a", data: []byte("{\"x\":\n1}")}, got[0])
	assert.Equal(t, "6", got[1].id)
	assert.Equal(t, "two", string(got[1].data))
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestChatPipedInputWaitsForTheReply(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workflows["support"] = true
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "support", "status": "waiting-approval", "currentNodeId": "pack",
		"interrupts": []any{map[string]any{"nodeId": "pack", "kind": "conversation.exchange", "key": "r1:pack:0"}}}
	f.streams = []fakeStream{{waitForPost: true, events: []map[string]any{
		ev(0, "conversation.exchanged", turnPayload(1, "user", "user", map[string]any{"text": "hi"})),
		ev(1, "conversation.exchanged", turnPayload(2, "agent", "support", map[string]any{"text": "Hello!"})),
	}}}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "support"}, envOf(nil), strings.NewReader("hi"), &out, &errOut)
	assert.Equal(t, ExitOK, code, errOut.String())
	assert.Equal(t, "Started run r1 of support. Type a message and press Enter; /quit leaves, /help helps.\nsupport: Hello!\n"+
		"· Left run r1; it goes on. Attach again with: wop chat r1\n", out.String())
	require.Len(t, f.posts, 2)
}

// chunkEv is an ai.message.chunk event of round 0 of node pack, after durable event seq.
func chunkEv(seq, attempt, n int, text string, last bool, extra map[string]any) map[string]any {
	p := map[string]any{"nodeId": "pack", "runId": "r1", "chunk": text, "isLast": last, "round": 0, "state": "chat",
		"attempt": attempt, "seq": n, "messageId": "r1:pack:0:2:agent", "speakerId": "support"}
	for k, v := range extra {
		p[k] = v
	}
	e := ev(seq, "ai.message.chunk", p)
	e["eventId"] = fmt.Sprintf("chunk-r1-a%d-%d", attempt, n)
	return e
}

// TestChatPrintsAStreamingReplyOnce: the chat asks for the messages mode, writes a reply
// as its chunks come, and does not print the turn that repeats it; an attempt that
// fails mid-reply ends its line with a note, and its retry streams on a new line.
func TestChatPrintsAStreamingReplyOnce(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workflows["support"] = true
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "support", "status": "waiting-approval", "currentNodeId": "pack",
		"interrupts": []any{map[string]any{"nodeId": "pack", "kind": "conversation.exchange", "key": "r1:pack:0"}}}
	f.streams = []fakeStream{{waitForPost: true, events: []map[string]any{
		ev(0, "conversation.exchanged", turnPayload(1, "user", "user", map[string]any{"text": "balance?"})),
		chunkEv(0, 1, 0, "Your bal", false, nil),
		chunkEv(0, 1, 1, "", true, map[string]any{"aborted": true, "error": "ModelUnavailable"}),
		chunkEv(0, 2, 0, "\nYour balance", false, nil),
		chunkEv(0, 2, 1, " is $42.\nAnything else?", false, nil),
		chunkEv(0, 2, 2, "", true, map[string]any{"meta": map[string]any{"finishReason": "stop"}}),
		ev(1, "conversation.exchanged", turnPayload(2, "agent", "support", map[string]any{"text": "Your balance is $42.\nAnything else?"})),
		ev(2, "conversation.exchanged", turnPayload(3, "agent", "support", map[string]any{"text": "A reply that did not stream."})),
		// A turn of two rounds, the first with a tool call: its reply joins their texts.
		chunkEv(2, 1, 0, "Checking.", false, map[string]any{"round": 1, "messageId": "r1:pack:0:4:agent"}),
		chunkEv(2, 1, 1, "", true, map[string]any{"round": 1, "messageId": "r1:pack:0:4:agent",
			"meta": map[string]any{"toolCalls": []any{map[string]any{"name": "lookup"}}}}),
		chunkEv(2, 1, 0, "Done.", false, map[string]any{"round": 2, "messageId": "r1:pack:0:4:agent"}),
		chunkEv(2, 1, 1, "", true, map[string]any{"round": 2, "messageId": "r1:pack:0:4:agent"}),
		ev(3, "conversation.exchanged", map[string]any{"turnIndex": 4, "turn": map[string]any{"messageId": "r1:pack:0:4:agent",
			"from": "support", "speakerId": "support", "role": "agent", "turnIndex": 4, "content": map[string]any{"text": "Checking.\n\nDone."}}}),
	}}}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "support"}, envOf(nil), strings.NewReader("balance?"), &out, &errOut)
	assert.Equal(t, ExitOK, code, errOut.String())
	assert.Equal(t, strings.Join([]string{
		"Started run r1 of support. Type a message and press Enter; /quit leaves, /help helps.",
		"support: Your bal (interrupted; the model is asked again)",
		"support: Your balance is $42.",
		"         Anything else?",
		"support: A reply that did not stream.",
		"support: Checking.",
		"support: Done.",
		"· Left run r1; it goes on. Attach again with: wop chat r1",
		"",
	}, "\n"), out.String())
}

// TestChatReattachShowsTheWholeTranscript: attaching replays the run's conversation,
// the user's turns as well as the agent's, with tool calls; the failure's words are
// said once.
func TestChatReattachShowsTheWholeTranscript(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "support", "status": "failed", "lastSequence": 7}
	f.streams = []fakeStream{{events: []map[string]any{
		ev(0, "conversation.exchanged", turnPayload(1, "user", "user", map[string]any{"text": "hi"})),
		ev(1, "conversation.exchanged", turnPayload(2, "agent", "support", map[string]any{"text": "Hello!\nWhat is your account number?"})),
		ev(2, "conversation.exchanged", turnPayload(3, "user", "user", map[string]any{"text": "ACC-12345"})),
		ev(3, "agent.toolCalled", map[string]any{"toolName": "verify_account", "inputs": map[string]any{"account_id": "ACC-12345"}}),
		ev(4, "agent.toolReturned", map[string]any{"toolName": "verify_account", "status": "error", "outcome": map[string]any{"text": "no such account"}}),
		ev(5, "agent.toolCalled", map[string]any{"toolName": "workflow__transition", "inputs": map[string]any{"event": "AccountVerified"}}),
		ev(6, "conversation.closed", map[string]any{"finalTurn": map[string]any{"role": "system", "content": map[string]any{"text": "Conversation closed: the model failed (model_error)."}}}),
		ev(7, "run.failed", map[string]any{"error": map[string]any{"code": "model_error", "message": "the model failed"}}),
	}}}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "r1"}, envOf(nil), strings.NewReader(""), &out, &errOut)
	assert.Equal(t, ExitFailed, code)
	assert.Equal(t, strings.Join([]string{
		"Attached to run r1. Type a message and press Enter; /quit leaves, /help helps.",
		"you: hi",
		"support: Hello!",
		"         What is your account number?",
		"you: ACC-12345",
		"  ⚙ verify_account(account_id: ACC-12345)",
		"  ⚙ verify_account failed: no such account",
		"· Conversation closed: the model failed (model_error).",
		"· Run r1 failed (model_error).",
		"",
	}, "\n"), out.String())
}

// TestChatDoesNotSendLinesToAnExternalWait: while the run waits for an external event, a
// typed line is not sent; /say sends it to the conversation.
func TestChatDoesNotSendLinesToAnExternalWait(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "refund", "status": "waiting-external", "currentNodeId": "pack", "lastSequence": 0,
		"interrupts": []any{
			map[string]any{"nodeId": "pack", "kind": "conversation.exchange", "key": "r1:pack:0"},
			map[string]any{"nodeId": "pack", "kind": "external-event", "key": "r1:pack:1",
				"resumeSchema": map[string]any{"properties": map[string]any{"event": map[string]any{"enum": []string{"Approved", "Rejected"}}}}},
		}}
	f.streams = []fakeStream{{events: []map[string]any{
		ev(0, "interrupt.requested", map[string]any{"kind": "external-event", "key": "r1:pack:1"}),
	}}, {waitForPost: true, events: []map[string]any{
		ev(1, "conversation.exchanged", turnPayload(1, "user", "user", map[string]any{"text": "Any news?"})),
		ev(2, "conversation.exchanged", turnPayload(2, "agent", "refund", map[string]any{"text": "Not yet."})),
	}}}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "r1"}, envOf(nil),
		strings.NewReader("curl -X POST approve\n/say Any news?\n"), &out, &errOut)
	assert.Equal(t, ExitOK, code, errOut.String())
	assert.Contains(t, out.String(), "⏸ The run waits for an external event (Approved or Rejected) at node pack.")
	assert.Contains(t, out.String(), `/v1/runs/r1/interrupts/pack`)
	assert.Contains(t, out.String(), `"event":"Approved"`)
	assert.Contains(t, out.String(), "refund: Not yet.")
	assert.Contains(t, errOut.String(), "not sent: the run waits for an external event (Approved or Rejected) at node pack")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.posts, 1, "only the /say line was sent")
	assert.Equal(t, map[string]any{"resumeValue": map[string]any{"operation": "exchange",
		"turn": map[string]any{"role": "user", "from": "user", "content": map[string]any{"text": "Any news?"}}}}, f.posts[0])
}

// TestChatShowsAToolApproval: while a tool call of the agent waits for approval, the
// chat shows the call and how to decide it, and sends no line, not even with /say (the
// conversation takes messages again once the call is decided).
func TestChatShowsAToolApproval(t *testing.T) {
	f, srv := newFakeAPI(t)
	data := map[string]any{"artifactType": "tool-call", "title": "Approve issue_refund", "approversList": []string{"finance"},
		"artifactData": map[string]any{"tool": "issue_refund", "arguments": map[string]any{"order_id": "ORD-1042", "amount": "89.90"}}}
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "refund", "status": "waiting-approval", "currentNodeId": "pack", "lastSequence": 0,
		"interrupts": []any{
			map[string]any{"nodeId": "pack", "kind": "conversation.exchange", "key": "r1:pack:0"},
			map[string]any{"nodeId": "pack", "kind": "approval", "key": "r1:pack:3", "data": data, "expiresAt": "2026-12-03T10:00:00.000Z"},
		}}
	f.streams = []fakeStream{{events: []map[string]any{
		ev(0, "interrupt.requested", map[string]any{"kind": "approval", "key": "r1:pack:3"}),
	}}}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "r1"}, envOf(nil),
		strings.NewReader("is it done?\n/say hello?\n"), &out, &errOut)
	assert.Equal(t, ExitOK, code, errOut.String())
	assert.Contains(t, out.String(), "⏸ issue_refund(amount: 89.90, order_id: ORD-1042) waits for approval by finance, until 2026-12-03T10:00:00.000Z.")
	assert.Contains(t, out.String(), `{"resumeValue":{"action":"accept"}}`)
	assert.Contains(t, out.String(), `/v1/runs/r1/interrupts/pack`)
	assert.Contains(t, errOut.String(), "not sent: the agent's issue_refund call waits for approval")
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Empty(t, f.posts, "no line was sent")
}

// TestChatShowsATurnsEventsInTheirOrder: the replies of a turn's later rounds stream
// before the run has recorded the tool calls and state changes of the rounds before
// them (the scripted mock runs a whole turn in one workflow task); the chat shows
// them in the turn's order: a reply never before the tool call and the state change
// behind it.
func TestChatShowsATurnsEventsInTheirOrder(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workflows["support"] = true
	f.snapshot = map[string]any{"runId": "r1", "workflowId": "support", "status": "waiting-approval", "currentNodeId": "pack",
		"interrupts": []any{map[string]any{"nodeId": "pack", "kind": "conversation.exchange", "key": "r1:pack:0"}}}
	msg := map[string]any{"messageId": "r1:pack:0:2:agent"}
	round := func(r int, kv ...any) map[string]any {
		m := map[string]any{"round": r}
		for k, v := range msg {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	calls := func(names ...string) map[string]any {
		var tc []any
		for _, n := range names {
			tc = append(tc, map[string]any{"id": "c-" + n, "name": n})
		}
		return map[string]any{"toolCalls": tc}
	}
	f.streams = []fakeStream{{waitForPost: true, events: []map[string]any{
		ev(0, "conversation.exchanged", turnPayload(1, "user", "user", map[string]any{"text": "balance?"})),
		// Round 0 streams and asks for a tool; round 1 changes state; round 2 answers,
		// all before the log records any of it.
		chunkEv(0, 1, 0, "Let me check.", false, round(0)),
		chunkEv(0, 1, 1, "", true, round(0, "meta", calls("get_balance"))),
		chunkEv(0, 1, 0, "", true, round(1, "meta", calls("workflow__transition"))),
		chunkEv(0, 1, 0, "Your balance", false, round(2)),
		ev(1, "agent.decided", map[string]any{"decision": map[string]any{"round": 0, "toolCalls": []any{map[string]any{"name": "get_balance"}}}}),
		ev(2, "agent.toolCalled", map[string]any{"toolName": "get_balance", "inputs": map[string]any{"account": "ACC-1"}, "round": 0}),
		ev(3, "agent.toolReturned", map[string]any{"toolName": "get_balance", "status": "ok", "round": 0}),
		ev(4, "agent.decided", map[string]any{"decision": map[string]any{"round": 1, "toolCalls": []any{map[string]any{"name": "workflow__transition"}}}}),
		ev(5, "agent.toolCalled", map[string]any{"toolName": "workflow__transition", "inputs": map[string]any{"event": "Verified"}, "round": 1}),
		ev(6, "agent.toolReturned", map[string]any{"toolName": "workflow__transition", "status": "ok", "round": 1}),
		// More of round 2 arrives between the transition's result and its state change.
		chunkEv(6, 1, 1, " is $42.", false, round(2)),
		ev(7, "agent.handoff", map[string]any{"fromState": "verifying", "toState": "resolution", "event": "Verified", "origin": "agent"}),
		chunkEv(7, 1, 2, "", true, round(2)),
		ev(8, "agent.decided", map[string]any{"decision": map[string]any{"round": 2}}),
		ev(9, "conversation.exchanged", map[string]any{"turnIndex": 2, "turn": map[string]any{"messageId": "r1:pack:0:2:agent",
			"from": "support", "speakerId": "support", "role": "agent", "turnIndex": 2, "content": map[string]any{"text": "Let me check.\n\nYour balance is $42."}}}),
	}}}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "support"}, envOf(nil), strings.NewReader("balance?"), &out, &errOut)
	assert.Equal(t, ExitOK, code, errOut.String())
	assert.Equal(t, strings.Join([]string{
		"Started run r1 of support. Type a message and press Enter; /quit leaves, /help helps.",
		"support: Let me check.",
		"  ⚙ get_balance(account: ACC-1)",
		"── state verifying → resolution (Verified)",
		"support: Your balance is $42.",
		"· Left run r1; it goes on. Attach again with: wop chat r1",
		"",
	}, "\n"), out.String())
}

func TestChatStartsARunWithInputs(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.workflows["openai-realtime-example"] = true
	f.startErr = 400 // the run itself is not the point: what the create carried is
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "--input", "prompt=translator", "--input", "target_language=French", "openai-realtime-example"},
		envOf(nil), strings.NewReader(""), &out, &errOut)
	assert.Equal(t, ExitFailed, code)
	require.Len(t, f.posts, 1)
	assert.Equal(t, map[string]any{"prompt": "translator", "target_language": "French"}, f.posts[0]["inputs"])

	code = run(context.Background(), []string{"--api", srv.URL, "--input", "novalue", "openai-realtime-example"}, envOf(nil), strings.NewReader(""), &out, &errOut)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut.String(), `want name=value, got "novalue"`)
}
