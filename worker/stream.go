package worker

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/wop-dev/wop/chunks"
)

// StreamServer is a worker's running chunk endpoint (package chunks): the replies of
// the worker's model rounds, while they stream, for the API processes.
type StreamServer struct {
	hub *chunks.Hub
	url string
	ln  net.Listener
	srv *http.Server
}

// StartStream serves the chunk endpoint on cfg.StreamAddr when it is set, and points
// cfg at it: cfg.Chunks becomes the endpoint's hub (cfg.Chunks, if already set, is
// served as is) and cfg.Identity advertises its URL. It returns nil, nil when
// cfg.StreamAddr is empty.
func StartStream(cfg *Config) (*StreamServer, error) {
	if cfg.StreamAddr == "" {
		if len(cfg.StreamSecret) > 0 {
			return nil, errors.New("WOP_STREAM_SECRET is set but WOP_WORKER_STREAM_ADDR is not: set the address the worker serves streamed replies on (--stream-addr), e.g. :7244")
		}
		return nil, nil
	}
	key, err := chunks.NewKey(cfg.StreamSecret)
	if err != nil {
		return nil, fmt.Errorf("chunk endpoint on %s: WOP_STREAM_SECRET: %w", cfg.StreamAddr, err)
	}
	ln, err := net.Listen("tcp", cfg.StreamAddr)
	if err != nil {
		return nil, fmt.Errorf("chunk endpoint address %s: %w", cfg.StreamAddr, err)
	}
	url := cfg.StreamURL
	if url == "" {
		url = defaultStreamURL(ln.Addr().(*net.TCPAddr))
	}
	url = strings.TrimRight(url, "/")
	hub := cfg.Chunks
	if hub == nil {
		hub = chunks.NewHub()
	}
	s := &StreamServer{hub: hub, url: url, ln: ln}
	s.srv = &http.Server{Handler: chunks.Handler(hub, key, url, cfg.Logger), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	cfg.Chunks = hub
	cfg.Identity = chunks.Identity(url)
	return s, nil
}

// defaultStreamURL is http://<addr>, naming the host when the address binds every
// interface.
func defaultStreamURL(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP == nil || a.IP.IsUnspecified() {
		host, _ = os.Hostname()
		if host == "" {
			host = "localhost"
		}
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(a.Port))
}

// URL is the endpoint's advertised URL.
func (s *StreamServer) URL() string { return s.url }

// Addr is the address the endpoint listens on.
func (s *StreamServer) Addr() string { return s.ln.Addr().String() }

// Hub is the hub the endpoint serves.
func (s *StreamServer) Hub() *chunks.Hub { return s.hub }

// Close stops the endpoint and ends its open streams.
func (s *StreamServer) Close() error { return s.srv.Close() }
