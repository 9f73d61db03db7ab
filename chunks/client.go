package chunks

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Client reads the chunk endpoints of workers (the API side).
type Client struct {
	Key Key
	// HTTP sends the requests; nil uses a client without an overall timeout (a stream
	// lasts as long as its round), idle streams are dropped by Follow itself.
	HTTP *http.Client
}

// Follow reads the run's chunks from the worker whose chunk endpoint is endpoint,
// calling fn for each, until the worker ends the stream, ctx ends, or the worker has
// been silent for three keepalive intervals. found reports whether the worker had (or
// began within wait) a round of the run; it is false on 204.
func (c *Client) Follow(ctx context.Context, endpoint, runID string, wait time.Duration, fn func(Chunk)) (found bool, err error) {
	u := strings.TrimRight(endpoint, "/") + "/v1/runs/" + url.PathEscape(runID) + "/chunks?wait=" + strconv.FormatInt(wait.Milliseconds(), 10)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key.Token(runID, endpoint, time.Now().Add(TokenTTL)))
	req.Header.Set("Accept", "text/event-stream")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNoContent:
		return false, nil
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, fmt.Errorf("chunk endpoint %s answered %d: %s", endpoint, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	// Drop a stream the worker stopped feeding (a vanished host sends no reset).
	idle := 3 * KeepAliveEvery
	var silent atomic.Bool
	watchdog := time.AfterFunc(idle, func() { silent.Store(true); cancel() })
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 2*DefaultMaxStreamBytes)
	for sc.Scan() {
		watchdog.Reset(idle)
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue // blank separators and keepalive comments
		}
		var ch Chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return true, fmt.Errorf("chunk endpoint %s sent a malformed chunk: %w", endpoint, err)
		}
		if ch.RunID != runID {
			return true, fmt.Errorf("chunk endpoint %s sent a chunk of run %q for run %q", endpoint, ch.RunID, runID)
		}
		fn(ch)
	}
	if silent.Load() {
		return true, fmt.Errorf("chunk endpoint %s went silent for %s", endpoint, idle)
	}
	return true, sc.Err()
}
