package api

import (
	"fmt"
	"strings"
	"time"
)

// GuardConfig holds the limits that protect the API from one client, a slow
// connection or a forged Host header. Zero values take the defaults below.
type GuardConfig struct {
	// ResolveWait bounds how long a resolve waits for the run's outcome (resolve.go).
	ResolveWait time.Duration
	// AuthFailuresPerSecond and AuthFailureBurst shape a token bucket per client
	// address that every failed authentication (401) drains; an empty bucket answers
	// 429 before any key is looked at.
	AuthFailuresPerSecond float64
	AuthFailureBurst      int
	// TokenRoutePerSecond and TokenRouteBurst limit GET and POST /v1/interrupts/{token}
	// per client address (the token is the only credential there).
	TokenRoutePerSecond float64
	TokenRouteBurst     int
	// ReadHeaderTimeout, BodyReadTimeout and IdleTimeout bound a connection's request
	// headers, a request body, and an idle keep-alive connection. WriteTimeout bounds
	// writing a response other than an event stream; a stream's writes are bounded one
	// frame at a time (StreamWriteTimeout), so a stream lasts as long as its reader.
	ReadHeaderTimeout  time.Duration
	BodyReadTimeout    time.Duration
	IdleTimeout        time.Duration
	WriteTimeout       time.Duration
	StreamWriteTimeout time.Duration
	// AllowedHosts are the Host header values (host or host:port) callback URLs may be
	// built from when Config.PublicURL is empty. A request from any other Host gets
	// interrupt tokens without callback URLs, and relative links.
	AllowedHosts []string
	// MaxTags, MaxTagBytes and MaxMetadataBytes bound a run's tags and metadata.
	MaxTags          int
	MaxTagBytes      int
	MaxMetadataBytes int
}

// Defaults of GuardConfig.
const (
	DefaultAuthFailuresPerSecond = 1
	DefaultAuthFailureBurst      = 20
	DefaultTokenRoutePerSecond   = 10
	DefaultTokenRouteBurst       = 50
	DefaultReadHeaderTimeout     = 10 * time.Second
	DefaultBodyReadTimeout       = 30 * time.Second
	DefaultIdleTimeout           = 120 * time.Second
	DefaultWriteTimeout          = 2 * time.Minute
	DefaultStreamWriteTimeout    = 30 * time.Second
	DefaultMaxTags               = 64
	DefaultMaxTagBytes           = 256
	DefaultMaxMetadataBytes      = 16 << 10
)

func (g GuardConfig) withDefaults() GuardConfig {
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setInt := func(n *int, def int) {
		if *n <= 0 {
			*n = def
		}
	}
	setDur(&g.ResolveWait, DefaultResolveWait)
	setDur(&g.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDur(&g.BodyReadTimeout, DefaultBodyReadTimeout)
	setDur(&g.IdleTimeout, DefaultIdleTimeout)
	setDur(&g.WriteTimeout, DefaultWriteTimeout)
	setDur(&g.StreamWriteTimeout, DefaultStreamWriteTimeout)
	if g.AuthFailuresPerSecond <= 0 {
		g.AuthFailuresPerSecond = DefaultAuthFailuresPerSecond
	}
	if g.TokenRoutePerSecond <= 0 {
		g.TokenRoutePerSecond = DefaultTokenRoutePerSecond
	}
	setInt(&g.AuthFailureBurst, DefaultAuthFailureBurst)
	setInt(&g.TokenRouteBurst, DefaultTokenRouteBurst)
	setInt(&g.MaxTags, DefaultMaxTags)
	setInt(&g.MaxTagBytes, DefaultMaxTagBytes)
	setInt(&g.MaxMetadataBytes, DefaultMaxMetadataBytes)
	return g
}

// guardsFromEnv reads WOP_ALLOWED_HOSTS (comma-separated) and WOP_RESOLVE_WAIT.
func guardsFromEnv(getenv func(string) string, g *GuardConfig) error {
	for _, h := range strings.Split(getenv("WOP_ALLOWED_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			g.AllowedHosts = append(g.AllowedHosts, strings.ToLower(h))
		}
	}
	if v := getenv("WOP_RESOLVE_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("WOP_RESOLVE_WAIT=%q: want a positive Go duration such as 30s", v)
		}
		g.ResolveWait = d
	}
	return nil
}
