package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
	// Sub is the key id the token was issued to (the reader of the snapshot that
	// carried it): a token resume acts for it, e.g. votes as it. Iss fingerprints that
	// key's secret (keyFingerprint): the token resolves only while that very key
	// authenticates (tokenIssuer), so revoking, expiring or removing it voids its
	// tokens, and a later key of the same name does not revive them.
	Sub string `json:"sub,omitempty"`
	Iss string `json:"iss,omitempty"`
	// Turn binds a conversation token to the exchange it was issued for: once the
	// conversation moves past that turn the token is spent.
	Turn *int `json:"turn,omitempty"`
}

// tokenSigner mints and verifies interrupt tokens in OpenWOP v2's grammar (identity.md
// §4), on both majors:
//
//	ow2.hs256.<kid>.<base64url(JSON claims)>.<base64url(HMAC-SHA256(secret[kid], "ow2.hs256.<kid>.<payload>"))>
//
// The MAC covers the prefix, so neither the algorithm nor the key id can be swapped.
// A token without the ow2. prefix is one minted before (v1's grammar: payload "." MAC
// over the payload, the kid inside the claims): it is verified as it was, the
// "legacy" kid of identity.md, until it expires.
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

// Token grammar (identity.md §4).
const (
	tokenPrefix = "ow2."
	tokenAlg    = "hs256"
)

// TokenAlgs are the resume-token algorithms this host signs and verifies
// (interrupt.tokenAlgs).
var TokenAlgs = []string{tokenAlg}

func (ts *tokenSigner) sign(c tokenClaims) string {
	c.Kid = ts.kid
	b, _ := json.Marshal(c)
	signed := tokenPrefix + tokenAlg + "." + ts.kid + "." + b64.EncodeToString(b)
	sum, _ := ts.mac(ts.kid, signed)
	return signed + "." + b64.EncodeToString(sum)
}

var tokenCharsRe = regexp.MustCompile(`^[A-Za-z0-9_.~-]+$`)

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
	if strings.HasPrefix(tok, tokenPrefix) {
		return ts.verifyOW2(tok, now)
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

// verifyOW2 verifies a token of the ow2 grammar: an algorithm this host signs with, a
// kid it holds, the MAC over everything before it, the claims naming that kid.
func (ts *tokenSigner) verifyOW2(tok string, now time.Time) (*tokenClaims, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 5 || parts[1] != tokenAlg || parts[2] == "" {
		return nil, errTokenUnknown
	}
	kid, payload, sig := parts[2], parts[3], parts[4]
	gotSig, err := b64.DecodeString(sig)
	if err != nil {
		return nil, errTokenUnknown
	}
	want, ok := ts.mac(kid, tok[:len(tok)-len(sig)-1])
	if !ok || !hmac.Equal(want, gotSig) {
		return nil, errTokenUnknown
	}
	raw, err := b64.DecodeString(payload)
	if err != nil {
		return nil, errTokenUnknown
	}
	var c tokenClaims
	if err := json.Unmarshal(raw, &c); err != nil || c.Kid != kid {
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
		return codeErr(CodeInterruptExpired, "the interrupt token has expired")
	}
	return codeErr(CodeInterruptNotFound, "unknown interrupt token")
}

// tokenExpiry is when a token issued now for the interrupt expires: Config.TokenTTL
// from now, never past the interrupt's own deadline. ok is false when the deadline has
// passed (the interrupt is about to time out): no token is issued then.
func (s *Server) tokenExpiry(pi *workflows.PendingInterrupt) (exp time.Time, ok bool) {
	now := s.cfg.Now()
	exp = now.Add(s.cfg.TokenTTL)
	if pi.ExpiresAt != "" {
		if t, err := time.Parse(time.RFC3339Nano, pi.ExpiresAt); err == nil && t.Before(exp) {
			exp = t
		}
	}
	return exp, now.Unix() < exp.Unix()
}

// tokenTurn is the conversation turn a token for pi carries (nil for other kinds): the
// exchange's next turn index.
func tokenTurn(pi *workflows.PendingInterrupt) *int {
	if !strings.HasPrefix(pi.Kind, "conversation") {
		return nil
	}
	var d struct {
		TurnIndex *int `json:"turnIndex"`
	}
	if json.Unmarshal(pi.Data, &d) != nil {
		return nil
	}
	return d.TurnIndex
}

// keyFingerprint names a key's secret inside tokens without revealing its hash.
func keyFingerprint(hash [sha256.Size]byte) string {
	sum := sha256.Sum256(append([]byte("openwop-token-issuer\x00"), hash[:]...))
	return b64.EncodeToString(sum[:12])
}

// tokenIssuer is the key a token was issued to, if it still authenticates: a token
// grants at most what its issuer could do now. A token whose issuer was revoked or
// has expired is answered with that key's 401; one whose issuer is gone (or whose name
// now holds another secret) 401 unauthenticated. Tokens minted before tokens named
// their issuer's secret are checked by the key's name.
func (s *Server) tokenIssuer(cl *tokenClaims) (*principal, error) {
	if cl.Sub == "" {
		return nil, unauthenticated("this interrupt token names no API key it was issued to; read the interrupt again for a token")
	}
	k := s.keys.Load().byID(cl.Sub)
	if k == nil || (cl.Iss != "" && cl.Iss != keyFingerprint(k.hash)) {
		return nil, unauthenticated("the API key this interrupt token was issued to (%s) is no longer configured; its tokens no longer resolve", cl.Sub)
	}
	if e := k.refusal(s.cfg.Now()); e != nil {
		e.Message = fmt.Sprintf("the API key this interrupt token was issued to no longer authenticates, so neither does the token: %s", e.Message)
		return nil, e
	}
	return &k.p, nil
}

// addToken sets interruptToken and callbackUrl on a pending interrupt for the reader
// p. Tokens are issued per read: each carries a fresh expiry, and a conversation's
// token one exchange (its turn), so a token is spent once it has been used. intent is
// IntentResolve for a reader that may resolve (approvals:respond), else IntentInspect:
// a token never grants more than its reader's key, and resolves only while that key
// authenticates (tokenIssuer). Bearer-only interrupts get none; callbackUrl needs a
// trusted base URL (see baseURL).
func (s *Server) addToken(base, runID string, p *principal, intent string, pi *workflows.PendingInterrupt) {
	pi.InterruptToken, pi.CallbackURL = "", ""
	if pi.BearerOnly || p == nil {
		return
	}
	exp, ok := s.tokenExpiry(pi)
	if !ok {
		return
	}
	tok := s.tokens.sign(tokenClaims{
		RunID: runID, NodeID: pi.NodeID, InterruptID: pi.InterruptID,
		Exp: exp.Unix(), Intent: intent, Sub: p.KeyID, Iss: keyFingerprint(p.hash), Turn: tokenTurn(pi),
	})
	pi.InterruptToken = tok
	if base != "" {
		pi.CallbackURL = base + "/v1/interrupts/" + tok
	}
}
