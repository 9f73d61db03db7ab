package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// legacyToken mints a token of the grammar tokens had before ow2 (payload "." MAC over
// the payload, the kid in the claims), as outstanding tokens of an earlier build are.
func legacyToken(secret []byte, c tokenClaims) string {
	b, _ := json.Marshal(c)
	payload := b64.EncodeToString(b)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(payload))
	return payload + "." + b64.EncodeToString(m.Sum(nil))
}

// Tokens minted before the ow2 grammar keep verifying until they expire (the "legacy"
// kid of identity.md §4), under any kid the signer holds; new ones are ow2 and bind
// their kid and algorithm.
func TestTokensOfTheOW2GrammarAndLegacyOnes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ts := newTokenSigner("k2", []byte("current secret"), map[string][]byte{"k1": []byte("old secret")})
	claims := tokenClaims{RunID: "r_1", NodeID: "wait", InterruptID: "int_7", Exp: now.Add(time.Hour).Unix(), Intent: IntentResolve}

	tok := ts.sign(claims)
	require.Regexp(t, `^ow2\.hs256\.k2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$`, tok)
	cl, err := ts.verify(tok, now)
	require.NoError(t, err)
	assert.Equal(t, "r_1", cl.RunID)

	legacy := claims
	legacy.Kid = "k1"
	cl, err = ts.verify(legacyToken([]byte("old secret"), legacy), now)
	require.NoError(t, err, "a legacy token under a held kid")
	assert.Equal(t, "int_7", cl.InterruptID)
	_, err = ts.verify(legacyToken([]byte("old secret"), legacy), now.Add(2*time.Hour))
	assert.ErrorIs(t, err, errTokenExpired, "legacy tokens drain at their expiry")
	_, err = ts.verify(legacyToken([]byte("a secret nobody holds"), legacy), now)
	assert.ErrorIs(t, err, errTokenUnknown)

	// An ow2 token under a kid the host no longer holds, or claiming another kid inside.
	gone := newTokenSigner("k0", []byte("retired"), nil).sign(claims)
	_, err = ts.verify(gone, now)
	assert.ErrorIs(t, err, errTokenUnknown)
	_, err = ts.verify(tok+"x", now)
	assert.ErrorIs(t, err, errTokenUnknown)
}

// At major 2 an ow2 token whose kid the host does not hold (the suite's probe) is 401
// interrupt_token_invalid, never 404; at v1 an unknown token stays 404.
func TestUnknownKidIsInvalidAtMajor2(t *testing.T) {
	env := newTestEnv(t)
	probe := "ow2.hs256.nokid.b3BlbndvcC1jb25mb3JtYW5jZQ.0123456789abcdef0123456789abcdef0123456789a"
	rec := env.do("GET", "/interrupts/"+probe, "", "", "OpenWOP-Version", "2")
	require.Equal(t, 401, rec.Code, "%s", rec.Body)
	assert.Contains(t, rec.Body.String(), `"error":"interrupt_token_invalid"`)
	env.expectError(env.do("GET", "/v1/interrupts/"+probe, "", ""), 404, CodeInterruptNotFound)
}
