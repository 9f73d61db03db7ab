package chat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// client speaks to the OpenWOP API.
type client struct {
	base string // no trailing slash
	key  string
	http *http.Client
}

func (c *client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return req, nil
}

// do sends a JSON request and returns the status and body of the answer. Only a
// failure to reach the API is an error; HTTP errors are for the caller to read.
func (c *client) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach the wop API at %s (is `wop dev` or `wop api` running?): %w", c.base, unwrapURL(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read the answer to %s %s: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

func unwrapURL(err error) error {
	if u, ok := err.(*url.Error); ok {
		return u.Err
	}
	return err
}

// event is one server-sent event of the run's stream.
type event struct {
	id   string // the event's sequence
	typ  string // the run event type
	data []byte // the run event document
}

// stream reads the run's events (streamMode=debug, and messages for the replies as
// they stream), after lastID when set, calls
// opened once the API has accepted the stream, and calls fn for each event until fn
// returns true or the stream ends. It returns the HTTP status of the stream (0 when the
// API could not be reached) and why it ended early.
func (c *client) stream(ctx context.Context, runID, lastID string, opened func(), fn func(event) bool) (int, error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/events?streamMode=debug,messages", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the wop API at %s: %w", c.base, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, apiError("follow the run's events", resp.StatusCode, b)
	}
	opened()
	if err := readSSE(resp.Body, fn); err != nil {
		return resp.StatusCode, fmt.Errorf("event stream interrupted: %w", err)
	}
	return resp.StatusCode, nil
}

// readSSE parses a text/event-stream body, calling fn per dispatched event, until fn
// returns true (nil), the body ends (nil) or reading fails.
func readSSE(r io.Reader, fn func(event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				ev.data = []byte(strings.Join(data, "\n"))
				if fn(ev) {
					return nil
				}
			}
			ev, data = event{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // comment, e.g. keepalive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.typ = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}

// apiErrorBody is the OpenWOP error envelope.
type apiErrorBody struct {
	Error   string         `json:"error"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// apiError renders an API error answer readably: what failed, the HTTP status, the
// envelope's code and message, and its details.
func apiError(what string, status int, body []byte) error {
	var env apiErrorBody
	if err := json.Unmarshal(body, &env); err != nil || (env.Error == "" && env.Message == "") {
		text := strings.TrimSpace(string(body))
		if len(text) > 300 {
			text = text[:300] + "…"
		}
		if text == "" {
			text = http.StatusText(status)
		}
		return fmt.Errorf("could not %s: HTTP %d: %s", what, status, text)
	}
	msg := fmt.Sprintf("could not %s: %s (HTTP %d, %s)", what, env.Message, status, env.Error)
	if env.Message == "" {
		msg = fmt.Sprintf("could not %s: HTTP %d, %s", what, status, env.Error)
	}
	if len(env.Details) > 0 {
		if b, err := json.Marshal(env.Details); err == nil {
			msg += " details: " + string(b)
		}
	}
	switch status {
	case http.StatusUnauthorized:
		msg += "; set --key or " + EnvAPIKey
	case http.StatusForbidden:
		msg += "; the key lacks the scope this needs"
	}
	return fmt.Errorf("%s", msg)
}

// lineReader reads lines of any length.
type lineReader struct{ r *bufio.Reader }

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: bufio.NewReader(r)} }

// next returns the next line without its line ending; at end of input it returns the
// last partial line (possibly empty) with io.EOF.
func (l *lineReader) next() (string, error) {
	line, err := l.r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}
