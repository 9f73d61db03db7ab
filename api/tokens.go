package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/wop-dev/wop/workflows"
)

// Token intents.
const (
	IntentResolve = "resolve"
	IntentInspect = "inspect"
)

// tokenClaims is the signed payload of an interrupt token.
type tokenClaims struct {
	RunID       string `json:"runId"`
	NodeID      string `json:"nodeId"`
	InterruptID string `json:"interruptId"`
	Exp         int64  `json:"exp"` // unix seconds
	Intent      string `json:"intent"`
	Kid         string `json:"kid"`
}

// tokenSigner mints and verifies interrupt tokens:
// base64url(JSON claims) "." base64url(HMAC-SHA256(secret[kid], first part)).
type tokenSigner struct {
	kid     string
	secrets map[string][]byte
}

func newTokenSigner(kid string, secret []byte, old map[string][]byte) *tokenSigner {
	ts := &tokenSigner{kid: kid, secrets: map[string][]byte{}}
	for k, v := range old {
		ts.secrets[k] = v
	}
	ts.secrets[kid] = secret
	return ts
}

var b64 = base64.RawURLEncoding

func (ts *tokenSigner) mac(kid, payload string) ([]byte, bool) {
	sec, ok := ts.secrets[kid]
	if !ok {
		return nil, false
	}
	m := hmac.New(sha256.New, sec)
	m.Write([]byte(payload))
	return m.Sum(nil), true
}

func (ts *tokenSigner) sign(c tokenClaims) string {
	c.Kid = ts.kid
	b, _ := json.Marshal(c)
	payload := b64.EncodeToString(b)
	sum, _ := ts.mac(ts.kid, payload)
	return payload + "." + b64.EncodeToString(sum)
}

var tokenCharsRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Token verification failures.
var (
	errTokenMalformed = errors.New("malformed token")
	errTokenUnknown   = errors.New("unknown token")
	errTokenExpired   = errors.New("expired token")
)

// verify checks the token's MAC in constant time, then its expiry.
func (ts *tokenSigner) verify(tok string, now time.Time) (*tokenClaims, error) {
	if len(tok) > 2048 || !tokenCharsRe.MatchString(tok) {
		return nil, errTokenMalformed
	}
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok || strings.Contains(sig, ".") {
		return nil, errTokenUnknown
	}
	raw, err := b64.DecodeString(payload)
	if err != nil {
		return nil, errTokenUnknown
	}
	gotSig, err := b64.DecodeString(sig)
	if err != nil {
		return nil, errTokenUnknown
	}
	var c tokenClaims
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, errTokenUnknown
	}
	want, ok := ts.mac(c.Kid, payload)
	if !ok || !hmac.Equal(want, gotSig) {
		return nil, errTokenUnknown
	}
	if now.Unix() >= c.Exp {
		return &c, errTokenExpired
	}
	return &c, nil
}

func tokenError(err error) *Error {
	switch {
	case errors.Is(err, errTokenMalformed):
		return badRequest("malformed interrupt token")
	case errors.Is(err, errTokenExpired):
		return apiErr(http.StatusGone, CodeInterruptExpired, "the interrupt token has expired")
	}
	return apiErr(http.StatusNotFound, CodeInterruptNotFound, "unknown interrupt token")
}

// tokenExpiry is when a token for the interrupt expires: the interrupt's own deadline,
// else its request time plus the configured TTL. Deriving it from the interrupt keeps
// the token stable across snapshot reads.
func (s *Server) tokenExpiry(pi *workflows.PendingInterrupt) time.Time {
	if pi.ExpiresAt != "" {
		if t, err := time.Parse(time.RFC3339Nano, pi.ExpiresAt); err == nil {
			return t
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, pi.RequestedAt); err == nil {
		return t.Add(s.cfg.TokenTTL)
	}
	return s.cfg.Now().Add(s.cfg.TokenTTL)
}

// addToken sets interruptToken and callbackUrl on a pending interrupt.
func (s *Server) addToken(base, runID string, pi *workflows.PendingInterrupt) {
	tok := s.tokens.sign(tokenClaims{
		RunID: runID, NodeID: pi.NodeID, InterruptID: pi.InterruptID,
		Exp: s.tokenExpiry(pi).Unix(), Intent: IntentResolve,
	})
	pi.InterruptToken = tok
	pi.CallbackURL = base + "/v1/interrupts/" + tok
}
