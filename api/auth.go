package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
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
	// hash is the SHA-256 of the key's secret: which of the keys ever named KeyID
	// authenticated the request.
	hash [sha256.Size]byte
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
		ks.keys = append(ks.keys, keyEntry{hash: hash, p: principal{KeyID: id, Tenant: tenant, Scopes: scopes, hash: hash},
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

// refusal is the 401 a key gets at now, or nil while it authenticates: revoked, or
// past its expiry.
func (k *keyEntry) refusal(now time.Time) *Error {
	if k.revoked {
		return codeErr(CodeKeyRevoked, "this API key (%s) was revoked", k.p.KeyID)
	}
	if !k.expiresAt.IsZero() && !now.Before(k.expiresAt) {
		return codeErr(CodeKeyExpired, "this API key (%s) expired at %s", k.p.KeyID, k.expiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// byID returns the key named id, or nil.
func (ks *keyStore) byID(id string) *keyEntry {
	for i := range ks.keys {
		if ks.keys[i].p.KeyID == id {
			return &ks.keys[i]
		}
	}
	return nil
}

// still reports whether the key that authenticated p still does at now: nil, or the
// 401 it would get now (revoked, expired, or no longer configured with that secret).
func (ks *keyStore) still(p *principal, now time.Time) *Error {
	k := ks.byID(p.KeyID)
	if k == nil || k.hash != p.hash {
		return codeErr(CodeUnauthenticated, "the API key %s is no longer configured", p.KeyID)
	}
	return k.refusal(now)
}

// keySessions are the requests in flight, each with the key that authenticated it.
// When a reload of the keys revokes a key, removes it or gives its name another
// secret, the requests it authenticated are cancelled with the 401 it would now get:
// an open event stream or inbox stream ends, a long poll returns. A key's expiry ends
// them when it comes, also an expiry a reload set or moved.
type keySessions struct {
	mu  sync.Mutex
	set map[*keySession]struct{}
}

type keySession struct {
	p       *principal
	cancel  context.CancelCauseFunc
	expires time.Time   // the expiry its timer is set for (zero: none)
	timer   *time.Timer // ends the session at expires
}

// expireAt (re)sets the session's end at the key's expiry at (zero: none), now being
// the API's clock.
func (ks *keySession) expireAt(at, now time.Time) {
	if at.Equal(ks.expires) {
		return
	}
	if ks.timer != nil {
		ks.timer.Stop()
		ks.timer = nil
	}
	ks.expires = at
	if at.IsZero() {
		return
	}
	refusal := (&keyEntry{p: *ks.p, expiresAt: at}).refusal(at)
	ks.timer = time.AfterFunc(at.Sub(now), func() { ks.cancel(refusal) })
}

// add adds s, ending at its key's expiry expires (zero: none).
func (ks *keySessions) add(s *keySession, expires, now time.Time) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.set == nil {
		ks.set = map[*keySession]struct{}{}
	}
	ks.set[s] = struct{}{}
	s.expireAt(expires, now)
}

func (ks *keySessions) remove(s *keySession) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	delete(ks.set, s)
	if s.timer != nil {
		s.timer.Stop()
	}
}

// reload applies the key store next to the sessions at now: those whose key it no
// longer accepts are cancelled (their number is returned), the others follow their
// key's expiry as next has it.
func (ks *keySessions) reload(next *keyStore, now time.Time) int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	n := 0
	for s := range ks.set {
		if e := next.still(s.p, now); e != nil {
			s.cancel(e)
			delete(ks.set, s)
			if s.timer != nil {
				s.timer.Stop()
			}
			n++
			continue
		}
		s.expireAt(next.byID(s.p.KeyID).expiresAt, now)
	}
	return n
}

// session runs next with a request context that ends when the key k stops
// authenticating (keySessions), and answers a request ended that way with the key's
// 401 when nothing was written yet.
func (s *Server) session(c echo.Context, k *keyEntry, next echo.HandlerFunc) error {
	ctx, cancel := context.WithCancelCause(c.Request().Context())
	defer cancel(nil)
	ses := &keySession{p: &k.p, cancel: cancel}
	s.sessions.add(ses, k.expiresAt, s.cfg.Now())
	defer s.sessions.remove(ses)
	// A reload between the lookup and add did not see this session; it stored its
	// keys before it looked at the sessions, so asking the keys now misses nothing.
	if e := s.keys.Load().still(&k.p, s.cfg.Now()); e != nil {
		cancel(e)
	}
	c.SetRequest(c.Request().WithContext(ctx))
	err := next(c)
	var ended *Error
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &ended) && ended.Status == http.StatusUnauthorized {
		if !c.Response().Committed {
			return ended
		}
		s.log.Info("Request ended: its API key no longer authenticates", "keyId", k.p.KeyID, "reason", ended.Code)
		return nil
	}
	return err
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
			if e := k.refusal(s.cfg.Now()); e != nil {
				c.Set(failedKeyKey, k.p.KeyID)
				return e
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
			return s.session(c, k, next)
		}
	}
}
