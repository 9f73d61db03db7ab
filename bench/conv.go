package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wop-dev/wop/protocol"
)

// apiClient talks to the host's HTTP API as a conversation client does.
type apiClient struct {
	base string
	key  string
	http *http.Client
	// pollRetries counts long polls that failed (5xx or transport) and were repeated,
	// as a client repeats a failed long poll.
	pollRetries atomic.Int64
	// queued and unavailable count the turns the API answered 202 (queued behind the
	// run's work) and 503 (Temporal did not say in time whether it took the turn).
	queued, unavailable atomic.Int64
}

// statusError is an answer with an unexpected status.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func newAPIClient(base, key string, conns int) *apiClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns * 2
	tr.MaxIdleConnsPerHost = conns * 2
	return &apiClient{base: base, key: key, http: &http.Client{Transport: tr, Timeout: 90 * time.Second}}
}

func (a *apiClient) close() { a.http.CloseIdleConnections() }

// call sends a JSON request and decodes a JSON answer into out (when non-nil). A status
// other than want is an error carrying the body.
func (a *apiClient) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("build %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return &statusError{status: resp.StatusCode, msg: fmt.Sprintf("%s %s: status %d, want %d: %.300s", method, path, resp.StatusCode, want, raw)}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// event is the part of an OpenWOP run event the bench reads.
type event struct {
	Type     string `json:"type"`
	Sequence int64  `json:"sequence"`
	Payload  struct {
		Turn struct {
			Role string `json:"role"`
		} `json:"turn"`
	} `json:"payload"`
}

type eventsPage struct {
	Events     []event `json:"events"`
	IsComplete bool    `json:"isComplete"`
}

// conv is one conversation with a bench-echo run, driven over HTTP.
type conv struct {
	api     *apiClient
	runID   string
	lastSeq int64
	turns   int
	// onPosted, when set, is called when an exchange's POST is answered.
	onPosted func()
	// textBytes, when set, pads each user message to this many bytes.
	textBytes int
}

// benchNode is the node id of a pack served as a workflow of its own.
const benchNode = "agent"

// openConv starts a run of pack and waits until its conversation is open.
func openConv(ctx context.Context, api *apiClient, pack string) (*conv, error) {
	var created struct {
		RunID string `json:"runId"`
	}
	if err := api.call(ctx, http.MethodPost, "/v1/runs", map[string]any{"workflowId": pack}, http.StatusCreated, &created); err != nil {
		return nil, fmt.Errorf("start a run of %s: %w", pack, err)
	}
	c := &conv{api: api, runID: created.RunID, lastSeq: -1}
	if _, err := c.waitFor(ctx, func(e event) bool { return e.Type == protocol.EvConversationOpened }); err != nil {
		return nil, fmt.Errorf("run %s: wait for conversation.opened: %w", c.runID, err)
	}
	return c, nil
}

// waitFor long-polls the run's events until one matches, and returns it. Every event
// read moves the cursor.
func (c *conv) waitFor(ctx context.Context, match func(event) bool) (event, error) {
	for {
		// lastSequence=0 means "from the start" to the API; the cursor is -1 only
		// before the first event, when that is what we want.
		path := "/v1/runs/" + c.runID + "/events/poll?timeout=30"
		if c.lastSeq >= 0 {
			path += "&lastSequence=" + strconv.FormatInt(c.lastSeq, 10)
		}
		var page eventsPage
		if err := c.api.call(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
			var se *statusError
			if ctx.Err() == nil && (!errors.As(err, &se) || se.status >= 500) {
				c.api.pollRetries.Add(1)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return event{}, err
		}
		for _, e := range page.Events {
			if e.Sequence <= c.lastSeq {
				continue
			}
			c.lastSeq = e.Sequence
			if match(e) {
				return e, nil
			}
		}
		if page.IsComplete {
			return event{}, fmt.Errorf("run %s ended (last sequence %d)%s", c.runID, c.lastSeq, c.failure(ctx))
		}
		if err := ctx.Err(); err != nil {
			return event{}, err
		}
	}
}

// failure describes the run's error, if it has one, for an error message.
func (c *conv) failure(ctx context.Context) string {
	var snap struct {
		Status string `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := c.api.call(ctx, http.MethodGet, "/v1/runs/"+c.runID, nil, http.StatusOK, &snap); err != nil || snap.Error == nil {
		return ""
	}
	return fmt.Sprintf(": %s: %s: %s", snap.Status, snap.Error.Code, snap.Error.Message)
}

// exchange posts one user message and waits until the agent's reply is readable. It
// returns the time from the start of the POST to the reply event read from the API.
func (c *conv) exchange(ctx context.Context) (time.Duration, error) {
	start, err := c.send(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := c.waitFor(ctx, isAgentReply); err != nil {
		return 0, fmt.Errorf("run %s turn %d: wait for the agent's reply: %w", c.runID, c.turns, err)
	}
	return time.Since(start), nil
}

// send posts the conversation's next user message and returns when it started.
func (c *conv) send(ctx context.Context) (time.Time, error) {
	c.turns++
	text := "message " + strconv.Itoa(c.turns)
	if pad := c.textBytes - len(text) - 1; pad > 0 {
		text += " " + strings.Repeat("m", pad)
	}
	body := map[string]any{"resumeValue": map[string]any{
		"operation": "exchange",
		"turn":      map[string]any{"role": "user", "from": "user", "content": map[string]any{"text": text}},
	}}
	start := time.Now()
	err := c.api.call(ctx, http.MethodPost, "/v1/runs/"+c.runID+"/interrupts/"+benchNode, body, http.StatusOK, nil)
	var se *statusError
	switch {
	case errors.As(err, &se) && se.status == http.StatusAccepted:
		err = nil // queued behind the run's work (a loaded host): the caller awaits the reply
		c.api.queued.Add(1)
	case errors.As(err, &se) && se.status == http.StatusServiceUnavailable && strings.Contains(se.msg, "did not answer in time"):
		// Temporal did not say in time whether it took the turn: whether the reply
		// comes tells (the caller's wait for it fails if the turn was not taken, and a
		// turn is never sent twice).
		err = nil
		c.api.unavailable.Add(1)
	}
	if err != nil {
		return start, fmt.Errorf("run %s turn %d: %w", c.runID, c.turns, err)
	}
	if c.onPosted != nil {
		c.onPosted()
	}
	return start, nil
}

// isAgentReply matches the event of the agent's reply.
func isAgentReply(e event) bool {
	return e.Type == protocol.EvConversationExchanged && e.Payload.Turn.Role == "agent"
}

// closeConv closes the conversation (the run then completes).
func (c *conv) closeConv(ctx context.Context) error {
	body := map[string]any{"resumeValue": map[string]any{"operation": "close"}}
	return c.api.call(ctx, http.MethodPost, "/v1/runs/"+c.runID+"/interrupts/"+benchNode, body, http.StatusOK, nil)
}
