package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// principal is the authenticated caller of a request.
type principal struct {
	KeyID  string
	Tenant string
	Scopes map[string]bool
}

const principalKey = "wop.principal"

func principalOf(c echo.Context) *principal {
	p, _ := c.Get(principalKey).(*principal)
	return p
}

// keyEntry is a configured key as kept at rest: only the SHA-256 of its secret.
type keyEntry struct {
	hash      [sha256.Size]byte
	p         principal
	revoked   bool
	expiresAt time.Time // zero: never
}

// keyStore resolves bearer secrets to principals. A store is never changed once built:
// reloading the keys file builds a new one and swaps it in (Server.keys).
type keyStore struct{ keys []keyEntry }

func newKeyStore(keys []Key) (*keyStore, error) {
	ks := &keyStore{}
	seen := map[string]bool{}
	for i, k := range keys {
		id := k.ID
		if id == "" {
			id = fmt.Sprintf("key%d", i)
		}
		var hash [sha256.Size]byte
		switch {
		case k.Secret != "":
			hash = sha256.Sum256([]byte(k.Secret))
		case k.SHA256 != "":
			b, err := hex.DecodeString(k.SHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("api key %q: sha256 must be 64 hex characters", id)
			}
			copy(hash[:], b)
		default:
			return nil, fmt.Errorf("api key #%d (%q) has an empty secret", i, k.ID)
		}
		if seen[id] {
			return nil, fmt.Errorf("api key id %q is configured twice", id)
		}
		seen[id] = true
		tenant := k.Tenant
		if tenant == "" {
			tenant = "default"
		}
		scopes := map[string]bool{}
		for _, s := range k.Scopes {
			scopes[s] = true
		}
		ks.keys = append(ks.keys, keyEntry{hash: hash, p: principal{KeyID: id, Tenant: tenant, Scopes: scopes},
			revoked: k.Revoked, expiresAt: k.ExpiresAt})
	}
	return ks, nil
}

// lookup compares the secret's hash against every key in constant time (the loop does
// not stop at a match, so timing does not reveal which key matched).
func (ks *keyStore) lookup(secret string) (*keyEntry, bool) {
	h := sha256.Sum256([]byte(secret))
	var found *keyEntry
	for i := range ks.keys {
		if subtle.ConstantTimeCompare(h[:], ks.keys[i].hash[:]) == 1 {
			found = &ks.keys[i]
		}
	}
	return found, found != nil
}

// rateLimiter is a token bucket per key id.
type rateLimiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64, burst int, now func() time.Time) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), now: now, buckets: map[string]*bucket{}}
}

// allow takes one token for id, or reports how long until one is available.
func (rl *rateLimiter) allow(id string) (bool, time.Duration) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	now := rl.now()
	b, ok := rl.buckets[id]
	if !ok {
		b = &bucket{tokens: rl.burst, last: now}
		rl.buckets[id] = b
	}
	b.tokens = math.Min(rl.burst, b.tokens+now.Sub(b.last).Seconds()*rl.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / rl.rate * float64(time.Second))
	return false, wait
}

// requireAuth authenticates the bearer key (401), applies the key's rate limit (429)
// and only then checks the scopes (403), in the order OpenWOP auth requires.
func (s *Server) requireAuth(scopes ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			scheme, secret, ok := strings.Cut(h, " ")
			if h == "" {
				return codeErr(CodeUnauthenticated, "missing Authorization header; send Authorization: Bearer <api-key>")
			}
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
				return codeErr(CodeUnauthenticated, "malformed Authorization header; send Authorization: Bearer <api-key>")
			}
			k, ok := s.keys.Load().lookup(strings.TrimSpace(secret))
			if !ok {
				return codeErr(CodeUnauthenticated, "unknown API key")
			}
			if k.revoked {
				return codeErr(CodeKeyRevoked, "this API key (%s) was revoked", k.p.KeyID)
			}
			if !k.expiresAt.IsZero() && !s.cfg.Now().Before(k.expiresAt) {
				return codeErr(CodeKeyExpired, "this API key (%s) expired at %s", k.p.KeyID, k.expiresAt.UTC().Format(time.RFC3339))
			}
			p := &k.p
			c.Set(principalKey, p)
			if allowed, wait := s.limiter.allow(p.KeyID); !allowed {
				secs := int(math.Ceil(wait.Seconds()))
				if secs < 1 {
					secs = 1
				}
				e := codeErr(CodeRateLimited, "rate limit exceeded for this API key; retry after %d s", secs).
					with("retryAfterMs", wait.Milliseconds()).with("scope", "key")
				e.Header = http.Header{"Retry-After": []string{strconv.Itoa(secs)}}
				return e
			}
			for _, sc := range scopes {
				if !p.Scopes[sc] {
					return codeErr(CodeForbidden, "this API key lacks the %q scope", sc).with("scopeRequired", sc)
				}
			}
			return next(c)
		}
	}
}
