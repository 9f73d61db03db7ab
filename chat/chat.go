// Package chat is the body of `wop chat <workflowId|runId>`: a terminal client that
// holds a conversation with a run through the OpenWOP API.
//
// Given a workflow id it starts a run of that workflow; given a run id it attaches to
// the run. It follows the run's events over SSE (GET /v1/runs/{id}/events with
// streamMode=debug, reconnecting with Last-Event-ID), prints the agent's replies
// (conversation turns with role "agent") and state changes (agent.handoff) as they
// arrive, and sends every line typed on stdin as a conversation exchange to the node
// the run is suspended on (POST /v1/runs/{id}/interrupts/{nodeId}). It ends when the
// run ends, on /quit, or at end of input once the last message sent has its reply
// (so `echo "hi" | wop chat pack` prints the answer). Leaving does not stop the run.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
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

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wop chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	apiURL := getenv(EnvAPIURL)
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	fs.StringVar(&apiURL, "api", apiURL, "base URL of the wop API (env "+EnvAPIURL+")")
	key := fs.String("key", getenv(EnvAPIKey), "API key, sent as a Bearer token (env "+EnvAPIKey+")")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wop chat [--api URL] [--key KEY] <workflowId|runId>\n\n"+
			"Starts a run of the workflow (or attaches to the run), prints the agent's replies and\n"+
			"state changes, and sends each line you type. /quit or end of input leaves; the run goes on.\n\n")
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
	s := &session{c: c, out: stdout, errOut: stderr, replied: make(chan struct{}, 1)}
	return s.run(ctx, fs.Arg(0), stdin)
}

// session is one chat: the run it talks to and the terminal it prints on.
type session struct {
	c     *client
	runID string
	// replied receives a value when a reply (an agent or system turn) is shown.
	replied chan struct{}
	mu      sync.Mutex // serialises writes to out and errOut
	out     io.Writer
	errOut  io.Writer
}

func (s *session) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format, args...)
}

func (s *session) errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.errOut, format, args...)
}

func (s *session) run(ctx context.Context, target string, stdin io.Reader) int {
	runID, started, err := s.resolve(ctx, target)
	if err != nil {
		s.errorf("wop chat: %v\n", err)
		return ExitFailed
	}
	s.runID = runID
	if started {
		s.printf("Started run %s of %s. Type a message and press Enter; /quit leaves.\n", runID, target)
	} else {
		s.printf("Attached to run %s. Type a message and press Enter; /quit leaves.\n", runID)
	}

	events := make(chan result, 1)
	go func() {
		code, err := s.follow(ctx)
		events <- result{code: code, err: err}
	}()
	lines := make(chan string)
	go readLines(ctx, stdin, lines)
	pending := false // a message was sent and its reply has not been shown

	for {
		select {
		case r := <-events:
			if r.err != nil {
				s.errorf("wop chat: %v\n", r.err)
			}
			return r.code
		case line, ok := <-lines:
			if !ok {
				// End of input. With input piped in (echo hi | wop chat pack), wait for
				// the answer to the last message before leaving.
				if !pending {
					return ExitOK
				}
				select {
				case <-s.replied:
					return ExitOK
				case r := <-events:
					if r.err != nil {
						s.errorf("wop chat: %v\n", r.err)
					}
					return r.code
				case <-ctx.Done():
					return ExitOK
				}
			}
			line = strings.TrimSpace(line)
			switch {
			case line == "":
				continue
			case line == "/quit" || line == "/exit":
				return ExitOK
			}
			// Forget replies to earlier messages before sending this one.
			select {
			case <-s.replied:
			default:
			}
			if err := s.send(ctx, line); err != nil {
				s.errorf("wop chat: %v\n", err)
				pending = false
			} else {
				pending = true
			}
		case <-ctx.Done():
			return ExitOK
		}
	}
}

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
		status, body, err := s.c.do(ctx, http.MethodPost, "/v1/runs", map[string]any{"workflowId": target})
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
	RunID         string `json:"runId"`
	Status        string `json:"status"`
	CurrentNodeID string `json:"currentNodeId"`
}

// send posts one user line as a conversation exchange to the node the run waits on.
func (s *session) send(ctx context.Context, text string) error {
	status, body, err := s.c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(s.runID), nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return apiError("read the run", status, body)
	}
	var snap snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return fmt.Errorf("read the run: malformed snapshot: %w", err)
	}
	if snap.CurrentNodeID == "" {
		return fmt.Errorf("the run is not waiting for a message (status %s); your message was not sent", orUnknown(snap.Status))
	}
	resume := map[string]any{"resumeValue": map[string]any{
		"operation": "exchange",
		"turn": map[string]any{
			"role": "user", "from": "user",
			"content": map[string]any{"text": text},
		},
	}}
	path := "/v1/runs/" + url.PathEscape(s.runID) + "/interrupts/" + url.PathEscape(snap.CurrentNodeID)
	status, body, err = s.c.do(ctx, http.MethodPost, path, resume)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return apiError("send your message", status, body)
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Reconnect policy of the event stream.
var (
	reconnectDelay    = 500 * time.Millisecond
	reconnectAttempts = 20
)

// follow reads the run's events until its terminal event and prints them, and
// returns the exit code for the run's outcome. A dropped stream is resumed after the
// last event seen (Last-Event-ID); a stream the API refuses ends the chat.
func (s *session) follow(ctx context.Context) (int, error) {
	lastID := ""
	failures := 0
	for {
		progressed, terminal, exit := false, false, ExitOK
		status, err := s.c.stream(ctx, s.runID, lastID, func(ev event) bool {
			if ev.id != "" {
				lastID = ev.id
			}
			progressed = true
			exit, terminal = s.show(ev)
			return terminal
		})
		switch {
		case terminal:
			return exit, nil
		case ctx.Err() != nil:
			return ExitOK, nil
		case status != 0 && status != http.StatusOK:
			return ExitFailed, err
		}
		if progressed {
			failures = 0
		}
		failures++
		if failures > reconnectAttempts {
			if err == nil {
				err = errors.New("the stream kept closing before the run ended")
			}
			return ExitFailed, fmt.Errorf("lost the event stream of run %s: %w", s.runID, err)
		}
		select {
		case <-time.After(reconnectDelay):
		case <-ctx.Done():
			return ExitOK, nil
		}
	}
}
