package api

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// GuardConfig holds the limits that protect the API from one client, a slow
// connection or a forged Host header. Zero values take the defaults below.
type GuardConfig struct {
	// ResolveWait bounds how long a resolve waits for the run's outcome (resolve.go).
	ResolveWait time.Duration
	// AcceptWait bounds how long, past ResolveWait, a resolve waits for Temporal to
	// take a request it has not accepted yet before it answers 503 (and how long a
	// resolve keeps asking a run that does not answer its validation query).
	AcceptWait time.Duration
	// AuthFailuresPerSecond and AuthFailureBurst shape a token bucket per failing
	// client (the known key it presented, else its address) that every failed
	// authentication (401) drains; once it is empty, failures are answered 429. A key
	// that authenticates is never refused for failures (authguard.go).
	AuthFailuresPerSecond float64
	AuthFailureBurst      int
	// TrustedProxies are the proxies (addresses and prefixes) whose X-Forwarded-For
	// names the client: the limits per client address count the address they
	// forwarded, not theirs. Without them forwarding headers are ignored.
	TrustedProxies []netip.Prefix
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
	DefaultAcceptWait            = 30 * time.Second
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
	setDur(&g.AcceptWait, DefaultAcceptWait)
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

// guardsFromEnv reads WOP_ALLOWED_HOSTS (comma-separated), WOP_RESOLVE_WAIT and
// WOP_TRUSTED_PROXIES (comma-separated addresses and CIDR prefixes).
func guardsFromEnv(getenv func(string) string, g *GuardConfig) error {
	if v := getenv("WOP_TRUSTED_PROXIES"); strings.TrimSpace(v) != "" {
		p, err := ParseTrustedProxies(v)
		if err != nil {
			return fmt.Errorf("WOP_TRUSTED_PROXIES: %w", err)
		}
		g.TrustedProxies = p
	}
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
