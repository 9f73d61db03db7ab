package chunks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MinSecretBytes is the shortest shared secret a Key accepts.
const MinSecretBytes = 16

// TokenTTL is how long a token an API process signs stays valid. A token only opens
// one run's chunks on one worker, and the API signs a new one for every request.
const TokenTTL = time.Minute

// maxClockSkew is how far in the future a token's expiry may lie beyond TokenTTL.
const maxClockSkew = 30 * time.Second

// Key signs and checks the tokens an API process presents to a worker's chunk
// endpoint. Both sides derive it from the same shared secret (WOP_STREAM_SECRET); the
// secret itself never travels. A token names one run and one worker endpoint and
// expires after TokenTTL, so a token that leaks opens nothing else.
type Key struct {
	k []byte
}

// NewKey derives the signing key from the shared secret.
func NewKey(secret []byte) (Key, error) {
	if len(secret) < MinSecretBytes {
		return Key{}, fmt.Errorf("the stream secret must be at least %d bytes (got %d)", MinSecretBytes, len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("wop chunk endpoint tokens v1"))
	return Key{k: m.Sum(nil)}, nil
}

// Valid reports whether the key was derived from a secret.
func (k Key) Valid() bool { return len(k.k) > 0 }

func (k Key) mac(runID, endpoint string, exp int64) []byte {
	m := hmac.New(sha256.New, k.k)
	fmt.Fprintf(m, "%s\n%s\n%d", runID, endpoint, exp)
	return m.Sum(nil)
}

// Token signs a token for reading runID's chunks at endpoint (the worker's advertised
// URL), valid until exp.
func (k Key) Token(runID, endpoint string, exp time.Time) string {
	e := exp.Unix()
	return "v1." + strconv.FormatInt(e, 10) + "." + base64.RawURLEncoding.EncodeToString(k.mac(runID, endpoint, e))
}

// Errors of Verify.
var (
	ErrBadToken     = errors.New("the chunk token is malformed or its signature does not match")
	ErrExpiredToken = errors.New("the chunk token has expired")
)

// Verify checks a token for runID at endpoint at time now.
func (k Key) Verify(token, runID, endpoint string, now time.Time) error {
	if !k.Valid() {
		return ErrBadToken
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return ErrBadToken
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return ErrBadToken
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, k.mac(runID, endpoint, exp)) {
		return ErrBadToken
	}
	switch t := time.Unix(exp, 0); {
	case now.After(t):
		return ErrExpiredToken
	case t.Sub(now) > TokenTTL+maxClockSkew:
		return ErrBadToken // a token nobody here would sign
	}
	return nil
}
