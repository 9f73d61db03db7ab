package chunks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of the chunk endpoint's wait query parameter.
const (
	DefaultWait = 2 * time.Second
	MaxWait     = 10 * time.Second
)

// KeepAliveEvery is how often an open chunk stream that has nothing to send sends a
// comment line; a reader that hears nothing for three times as long drops the stream.
var KeepAliveEvery = 10 * time.Second

// Path is the chunk endpoint's path pattern on a worker.
const Path = "/v1/runs/{runId}/chunks"

// Handler serves a worker's chunk endpoint:
//
//	GET /v1/runs/{runId}/chunks?wait=<ms>
//	Authorization: Bearer <token signed by Key for the run and this endpoint>
//
// 200 text/event-stream: one `data:` frame per chunk (Chunk as JSON) of the run's
// rounds in flight on this worker, or ended within the hub's Retain, each from its
// first chunk, then live; the response ends when no round of the run is in flight.
// 204 when no round of the run is in flight and none begins within wait (default 2 s,
// at most 10 s). 401 for a missing, malformed, expired or foreign token. The handler
// serves only the run the token names: nothing of another run ever reaches the caller.
//
// endpoint is the worker's advertised URL, which every token must name.
func Handler(hub *Hub, key Key, endpoint string, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		runID := r.PathValue("runId")
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || runID == "" {
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		if err := key.Verify(strings.TrimSpace(token), runID, endpoint, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		wait := DefaultWait
		if v := r.URL.Query().Get("wait"); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms < 0 {
				http.Error(w, fmt.Sprintf("wait=%q: want milliseconds", v), http.StatusBadRequest)
				return
			}
			wait = min(time.Duration(ms)*time.Millisecond, MaxWait)
		}
		serveRun(w, r, hub, runID, wait, logger)
	})
	return mux
}

// serveRun streams one run's chunks. While the stream is open and quiet (a model that
// thinks before its first token), a comment line every KeepAliveEvery tells the reader
// the worker is still there.
func serveRun(w http.ResponseWriter, r *http.Request, hub *Hub, runID string, wait time.Duration, logger *slog.Logger) {
	rc := http.NewResponseController(w)
	var mu sync.Mutex // one writer at a time: the chunks and the keepalives
	opened := false
	open := func() error { // mu held
		if opened {
			return nil
		}
		opened = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		return rc.Flush()
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(KeepAliveEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				mu.Lock()
				if opened {
					if _, err := fmt.Fprint(w, ":keepalive\n\n"); err == nil {
						_ = rc.Flush()
					}
				}
				mu.Unlock()
			}
		}
	}()
	err := hub.Follow(ctx, runID, wait, func(c Chunk) error {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if err := open(); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}, func() {
		mu.Lock()
		defer mu.Unlock()
		_ = open()
	})
	cancel()
	<-done
	switch {
	case errors.Is(err, ErrNoRound) && !opened:
		w.WriteHeader(http.StatusNoContent)
	case err != nil && r.Context().Err() == nil:
		logger.Debug("Chunk stream ended early", "runId", runID, "error", err)
	case !opened:
		_ = open() // every stream of the run ended with nothing to send: an empty stream
	}
}
