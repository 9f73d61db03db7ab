// Package chat is the body of `wop chat <workflowId|runId>`: a terminal client that
// holds a conversation with a run through the OpenWOP API.
//
// Given a workflow id it starts a run of that workflow; given a run id it attaches to
// the run and shows its whole conversation so far. It follows the run's events over SSE
// (GET /v1/runs/{id}/events with streamMode=debug, resuming with Last-Event-ID) and shows
// the user's and the agent's turns, tool calls and state changes as they arrive; when
// the API goes away (a restarted `wop dev`) it reconnects until it is back. Every line
// typed on stdin is sent as a conversation exchange to the run's open conversation
// (POST /v1/runs/{id}/interrupts/{nodeId}), except while the run waits for an external
// event or an approval: that wait is shown with the call that resolves it, and a line
// is sent only when it starts with /say. It ends when the run ends, on /quit, or at end
// of input once the last message sent has its reply (so `echo "hi" | wop chat pack`
// prints the answer), and says which run it leaves; leaving does not stop the run.
//
// On a terminal it shows a prompt and a thinking indicator, in colour unless NO_COLOR
// is set or TERM is dumb (render.go).
package chat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wop-dev/wop/protocol"
)

// Environment variables that give the flags their defaults.
const (
	EnvAPIURL = "WOP_API_URL"
	EnvAPIKey = "WOP_API_KEY"
)

// DefaultAPIURL is the API address of `wop dev`.
const DefaultAPIURL = "http://127.0.0.1:8080"

// Exit codes of Run.
const (
	ExitOK     = 0 // the run completed, or the user left (/quit, end of input)
	ExitFailed = 1 // the run failed or was cancelled, or the API could not be used
	ExitUsage  = 2 // bad arguments
)

// Run runs `wop chat` with args (the arguments after "chat"), reading the user's
// lines from stdin and printing the conversation to stdout and problems to stderr. It
// returns the process exit code. Flag defaults come from WOP_API_URL and WOP_API_KEY.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, args, os.Getenv, stdin, stdout, stderr)
}

// RunEnv is Run with the environment read through getenv (WOP_API_URL, WOP_API_KEY,
// NO_COLOR, TERM).
func RunEnv(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, args, getenv, stdin, stdout, stderr)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wop chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := getenv(EnvAPIURL)
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	fs.StringVar(&apiURL, "api", apiURL, "base URL of the wop API (env "+EnvAPIURL+")")
	key := fs.String("key", getenv(EnvAPIKey), "API key, sent as a Bearer token (env "+EnvAPIKey+")")
	inputs := inputFlags{}
	fs.Var(inputs, "input", "name=value: an input of the run it starts, repeatable (e.g. --input prompt=translator --input user_name=Ada)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wop chat [--api URL] [--key KEY] [--input name=value]... <workflowId|runId>\n\n"+
			"Starts a run of the workflow with the inputs given (or attaches to the run and shows its conversation), and\n"+
			"sends each line you type. While the run waits for an external event, start a line with\n"+
			"/say to send it. A tool call waiting for approval is shown with the call that decides it;\n"+
			"nothing is sent until it is decided. /quit or end of input leaves; the run goes on.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return ExitUsage
	}
	base, err := url.Parse(strings.TrimRight(apiURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintf(stderr, "wop chat: --api %q is not an http(s) URL\n", apiURL)
		return ExitUsage
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &client{base: base.String(), key: *key, http: &http.Client{}}
	s := &session{c: c, v: newView(stdout, stderr, getenv), inputs: inputs}
	return s.run(ctx, fs.Arg(0), stdin)
}

// session is one chat: the run it talks to and the view it draws on.
type session struct {
	c     *client
	v     *view
	runID string
	// inputs are the inputs of a run the chat starts (--input).
	inputs inputFlags

	mu sync.Mutex
	// sent are the texts of messages this chat sent whose user turn has not come back
	// yet: the terminal already shows them, so their turns are not printed again.
	sent []string
	// sends counts the messages sent; answered is the value sends had when a reply
	// (an agent or system turn) was last shown after all their turns: the chat waits for
	// answered == sends at the end of piped input.
	sends, answered int
	// lastSystem is the text of the last system turn shown (a failure's words are not
	// repeated by the run's failure line).
	lastSystem string
	// ended and endCode: the run's terminal event was shown, with the exit code of the
	// run's outcome.
	ended   bool
	endCode int
	// shown is the sequence of the last event shown (-1 before the first).
	shown int64
	// streaming is the reply streaming now (streamMode=messages); streamed is the last
	// one that ended, whose agent turn is then not printed again.
	streaming, streamed streamedReply
	// tails are the rounds whose durable events the chat is still to show, and held the
	// chunks of later rounds waiting for them (stream.go).
	tails map[nodeRound]*roundTail
	held  []heldChunk
}

func (s *session) run(ctx context.Context, target string, stdin io.Reader) int {
	runID, started, err := s.resolve(ctx, target)
	if err != nil {
		s.v.emit(kindError, "", "wop chat: "+err.Error())
		return ExitFailed
	}
	s.runID = runID
	s.shown = -1
	if started {
		s.v.emit(kindSystem, "", fmt.Sprintf("Started run %s of %s. Type a message and press Enter; /quit leaves, /help helps.", runID, target))
	} else {
		s.v.emit(kindSystem, "", fmt.Sprintf("Attached to run %s. Type a message and press Enter; /quit leaves, /help helps.", runID))
	}
	code := s.converse(ctx, stdin)
	s.v.close()
	s.mu.Lock()
	ended, endCode := s.ended, s.endCode
	s.mu.Unlock()
	if ended {
		return endCode // the run's outcome, even when the input ended first
	}
	s.v.emit(kindSystem, "", fmt.Sprintf("· Left run %s; it goes on. Attach again with: wop chat %s", s.runID, s.runID))
	return code
}

// converse runs the chat until the run ends or the user leaves, and returns the exit
// code.
func (s *session) converse(ctx context.Context, stdin io.Reader) int {
	events := make(chan result, 1)
	go func() {
		r, err := s.follow(ctx)
		r.err = err
		events <- r
	}()
	lines := make(chan string)
	go readLines(ctx, stdin, lines)
	s.v.expectInput(true)

	finish := func(r result) int {
		if r.err != nil {
			s.v.emit(kindError, "", "wop chat: "+r.err.Error())
		}
		return r.code
	}
	for {
		select {
		case r := <-events:
			return finish(r)
		case line, ok := <-lines:
			s.v.lineEntered()
			if !ok {
				// End of input. With input piped in (echo hi | wop chat pack), wait for
				// the answer to the last message sent, then for what the run did by
				// then (a wait it raised, its end), and leave.
				if r, ok := s.awaitReply(ctx, events); ok {
					return finish(r)
				}
				if r, ok := s.catchUp(ctx, events); ok {
					return finish(r)
				}
				return ExitOK
			}
			line = strings.TrimSpace(line)
			say := false
			switch {
			case line == "":
				s.v.expectInput(true)
				continue
			case line == "/quit" || line == "/exit":
				return ExitOK
			case line == "/help":
				s.v.emit(kindSystem, "", "· Each line you type is a message to the agent. /say TEXT sends TEXT while the run waits for an external event or an approval; /quit leaves (the run goes on).")
				s.v.expectInput(true)
				continue
			case strings.HasPrefix(line, "/say "):
				line, say = strings.TrimSpace(strings.TrimPrefix(line, "/say ")), true
			}
			s.expectReply(line)
			if err := s.send(ctx, line, say); err != nil {
				s.v.emit(kindError, "", "wop chat: "+err.Error())
				s.v.expectInput(true)
			}
		case <-ctx.Done():
			return ExitOK
		}
	}
}

// result is how following the run's events ended: the exit code, and why when the
// chat could not follow the run.
type result struct {
	code int
	err  error
}

// readLines sends each line of r on lines and closes lines at end of input.
func readLines(ctx context.Context, r io.Reader, lines chan<- string) {
	defer close(lines)
	br := newLineReader(r)
	for {
		line, err := br.next()
		if line != "" || err == nil {
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// resolve turns the argument into a run id: a known workflow id starts a new run,
// anything else must be an existing run.
func (s *session) resolve(ctx context.Context, target string) (runID string, started bool, err error) {
	status, body, err := s.c.do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(target), nil)
	if err != nil {
		return "", false, err
	}
	switch {
	case status == http.StatusOK:
		var created struct {
			RunID  string `json:"runId"`
			Status string `json:"status"`
		}
		req := map[string]any{"workflowId": target}
		if len(s.inputs) > 0 {
			req["inputs"] = map[string]string(s.inputs)
		}
		status, body, err := s.c.do(ctx, http.MethodPost, "/v1/runs", req)
		if err != nil {
			return "", false, err
		}
		if status/100 != 2 {
			return "", false, apiError("start a run of "+target, status, body)
		}
		if err := json.Unmarshal(body, &created); err != nil || created.RunID == "" {
			return "", false, fmt.Errorf("start a run of %s: the API answered %d without a runId", target, status)
		}
		return created.RunID, true, nil
	case status != http.StatusNotFound:
		return "", false, apiError("look up workflow "+target, status, body)
	}
	status, body, err = s.c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(target), nil)
	if err != nil {
		return "", false, err
	}
	if status == http.StatusNotFound {
		return "", false, fmt.Errorf("%q is neither a workflow nor a run known to %s", target, s.c.base)
	}
	if status != http.StatusOK {
		return "", false, apiError("look up run "+target, status, body)
	}
	return target, false, nil
}

// snapshot is the part of a RunSnapshot the chat needs.
type snapshot struct {
	RunID         string      `json:"runId"`
	Status        string      `json:"status"`
	CurrentNodeID string      `json:"currentNodeId"`
	Interrupts    []interrupt `json:"interrupts"`
	LastSequence  int64       `json:"lastSequence"`
}

// interrupt is a pending interrupt of a snapshot.
type interrupt struct {
	NodeID       string          `json:"nodeId"`
	Kind         string          `json:"kind"`
	Key          string          `json:"key"`
	ResumeSchema json.RawMessage `json:"resumeSchema"`
	Data         json.RawMessage `json:"data"`
	ExpiresAt    string          `json:"expiresAt"`
}

// toolCall is what an approval interrupt of a tool call (artifactType tool-call) says
// of the call: the tool, its arguments, who may decide; ok is false for any other
// interrupt.
func (i interrupt) toolCall() (tool string, args json.RawMessage, approvers []string, ok bool) {
	if i.Kind != protocol.KindApproval {
		return "", nil, nil, false
	}
	var d struct {
		ArtifactType  string   `json:"artifactType"`
		ApproversList []string `json:"approversList"`
		ArtifactData  struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"artifactData"`
	}
	if json.Unmarshal(i.Data, &d) != nil || d.ArtifactType != protocol.ArtifactTypeToolCall {
		return "", nil, nil, false
	}
	return d.ArtifactData.Tool, d.ArtifactData.Arguments, d.ApproversList, true
}

// isConversation reports whether the interrupt takes conversation messages.
func (i interrupt) isConversation() bool { return strings.HasPrefix(i.Kind, "conversation") }

// events are the event names an external-event interrupt accepts (its resume
// schema's event enum), or nil.
func (i interrupt) events() []string {
	var schema struct {
		Properties struct {
			Event struct {
				Enum []string `json:"enum"`
			} `json:"event"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(i.ResumeSchema, &schema)
	return schema.Properties.Event.Enum
}

// readSnapshot reads the run's snapshot.
func (s *session) readSnapshot(ctx context.Context) (*snapshot, error) {
	status, body, err := s.c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(s.runID), nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, apiError("read the run", status, body)
	}
	var snap snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return nil, fmt.Errorf("read the run: malformed snapshot: %w", err)
	}
	return &snap, nil
}

// send posts one user line as a conversation exchange to the run's open conversation.
// While the run also waits for something else (an external event, an approval) a line
// is sent only when say is set (/say): the wait is not the user's to answer, and a line
// typed there (a shell command, say) would otherwise reach the agent as a message.
func (s *session) send(ctx context.Context, text string, say bool) error {
	snap, err := s.readSnapshot(ctx)
	if err != nil {
		s.notSent(text)
		return fmt.Errorf("%w; your message was not sent", err)
	}
	var conv, other *interrupt
	for i := range snap.Interrupts {
		it := &snap.Interrupts[i]
		switch {
		case it.isConversation() && conv == nil:
			conv = it
		case !it.isConversation() && other == nil:
			other = it
		}
	}
	if conv == nil || (other != nil && !say) {
		s.notSent(text)
	}
	if conv == nil {
		if other != nil {
			return fmt.Errorf("the run waits for %s at node %s, which is resolved through the API; your message was not sent", describeWait(*other), other.NodeID)
		}
		return fmt.Errorf("the run is not waiting for a message (status %s); your message was not sent", cmp.Or(snap.Status, "unknown"))
	}
	if other != nil {
		if tool, _, _, ok := other.toolCall(); ok {
			// The conversation itself waits for the decision: even /say is refused (409).
			if say {
				s.notSent(text)
			}
			return fmt.Errorf("not sent: the agent's %s call waits for approval; messages are accepted again once it is decided", tool)
		}
	}
	if other != nil && !say {
		return fmt.Errorf("not sent: the run waits for %s at node %s, resolved through the API. To message the agent meanwhile, start the line with /say", describeWait(*other), other.NodeID)
	}
	resume := map[string]any{"resumeValue": map[string]any{
		"operation": "exchange",
		"turn": map[string]any{
			"role": "user", "from": "user",
			"content": map[string]any{"text": text},
		},
	}}
	// The indicator starts before the message leaves: the reply may be shown before
	// the API has answered the post.
	s.v.startThinking()
	path := "/v1/runs/" + url.PathEscape(s.runID) + "/interrupts/" + url.PathEscape(conv.NodeID)
	status, body, err := s.c.do(ctx, http.MethodPost, path, resume)
	if err == nil && status/100 != 2 {
		err = apiError("send your message", status, body)
	}
	if err != nil {
		s.v.stopThinking()
		s.notSent(text)
		return err
	}
	return nil
}

// describeWait names what an interrupt waits for, e.g. `an external event (Approved or
// Rejected)`.
func describeWait(it interrupt) string {
	what := "an interrupt of kind " + it.Kind
	switch it.Kind {
	case protocol.KindExternalEvent:
		what = "an external event"
	case protocol.KindApproval:
		what = "an approval"
		if tool, args, _, ok := it.toolCall(); ok {
			what = "approval of the tool call " + tool + "(" + compactArgs(args, 70) + ")"
		}
	}
	if evs := it.events(); len(evs) > 0 {
		what += " (" + strings.Join(evs, " or ") + ")"
	}
	return what
}

// ownEcho reports whether a user turn is a message this chat sent (and forgets it).
func (s *session) ownEcho(text string) bool {
	return s.forgetSent(text)
}

// notSent takes back a message that did not leave.
func (s *session) notSent(text string) {
	s.forgetSent(text)
	s.mu.Lock()
	s.sends--
	s.mu.Unlock()
}

func (s *session) forgetSent(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.sent {
		if t == text {
			s.sent = append(s.sent[:i], s.sent[i+1:]...)
			return true
		}
	}
	return false
}

// expectReply records a message about to be sent (before it leaves: its reply may be
// shown before the API answers the post).
func (s *session) expectReply(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, text)
	s.sends++
}

// awaitReply waits until the reply to the last message sent is shown, polling; ok
// reports that following the run ended first (r).
func (s *session) awaitReply(ctx context.Context, events <-chan result) (r result, ok bool) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		done := s.answered == s.sends
		s.mu.Unlock()
		if done {
			return result{}, false
		}
		select {
		case r := <-events:
			return r, true
		case <-ctx.Done():
			return result{}, false
		case <-tick.C:
		}
	}
}

// catchUp waits until the chat has shown the events the run has now (at most 10 s), or
// the run's end when it has ended; ok reports that following the run ended (r).
func (s *session) catchUp(ctx context.Context, events <-chan result) (r result, ok bool) {
	snap, err := s.readSnapshot(ctx)
	if err != nil {
		return result{}, false
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r := <-events:
			return r, true
		case <-ctx.Done():
			return result{}, false
		case <-deadline:
			return result{}, false
		case <-tick.C:
			s.mu.Lock()
			shown := s.shown
			s.mu.Unlock()
			if !isTerminalStatus(snap.Status) && shown >= snap.LastSequence {
				return result{}, false
			}
		}
	}
}

// isTerminalStatus reports whether a run status is final.
func isTerminalStatus(status string) bool {
	switch status {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

// Reconnect policy of the event stream: the delay grows from reconnectDelay to
// maxReconnectDelay while the API cannot be reached, and the chat keeps trying until
// the user leaves; an answer that will not change by retrying (401, 403, 404) ends it.
var (
	reconnectDelay    = 500 * time.Millisecond
	maxReconnectDelay = 5 * time.Second
)

// follow reads the run's events until its terminal event and shows them, and returns
// the exit code for the run's outcome. A dropped stream is resumed after the last
// event seen (Last-Event-ID).
func (s *session) follow(ctx context.Context) (result, error) {
	lastID := ""
	delay := reconnectDelay
	lost := false
	for {
		terminal, exit := false, ExitOK
		status, err := s.c.stream(ctx, s.runID, lastID, func() {
			delay = reconnectDelay
			if lost {
				lost = false
				s.v.emit(kindSystem, "", "· Reconnected.")
			}
		}, func(ev event) bool {
			if ev.id != "" {
				lastID = ev.id
			}
			exit, terminal = s.show(ctx, ev)
			if seq, err := strconv.ParseInt(ev.id, 10, 64); err == nil {
				s.mu.Lock()
				s.shown = seq
				s.mu.Unlock()
			}
			return terminal
		})
		switch {
		case terminal:
			return result{code: exit}, nil
		case ctx.Err() != nil:
			return result{code: ExitOK}, nil
		case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound:
			return result{code: ExitFailed}, err
		}
		if status != http.StatusOK && !lost {
			lost = true
			s.v.emit(kindSystem, "", fmt.Sprintf("· Lost the connection to %s; reconnecting…", s.c.base))
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return result{code: ExitOK}, nil
		}
		if status != http.StatusOK {
			delay = min(2*delay, maxReconnectDelay)
		}
	}
}

// inputFlags are --input name=value flags: string inputs of the run the chat starts.
type inputFlags map[string]string

func (f inputFlags) String() string { return "" }

func (f inputFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	f[strings.TrimSpace(name)] = value
	return nil
}
