package activities

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSignStandardWebhookVector: the signature matches the published Standard
// Webhooks test vector, keyed by the secret's decoded bytes.
func TestSignStandardWebhookVector(t *testing.T) {
	key, err := DecodeWhsec("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		SignStandardWebhook(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
	for _, bad := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_@@@@", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 23)),
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65))} {
		_, err := DecodeWhsec(bad)
		require.Error(t, err, bad)
	}
	for _, n := range []int{24, 64} {
		_, err := DecodeWhsec("whsec_" + base64.StdEncoding.EncodeToString(make([]byte, n)))
		require.NoError(t, err, n)
	}
}

// TestSealWebhookSecret: a sealed secret opens under the host's key for its own
// subscription only, never shows the secret, and two seals of one secret differ.
func TestSealWebhookSecret(t *testing.T) {
	key := []byte("host-webhook-key")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 64))
	sealed, err := SealWebhookSecret(key, "acme", "wh_1", secret)
	require.NoError(t, err)
	require.NotContains(t, sealed, strings.TrimPrefix(secret, "whsec_")[:16])
	require.LessOrEqual(t, len(sealed), 192, "the dispatcher's bound on a sealed secret")
	again, err := SealWebhookSecret(key, "acme", "wh_1", secret)
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a fresh nonce per seal")
	got, err := OpenWebhookSecret(key, "acme", "wh_1", sealed)
	require.NoError(t, err)
	require.Equal(t, secret, got)
	for _, c := range [][3]string{{"host-webhook-key", "acme", "wh_2"}, {"host-webhook-key", "globex", "wh_1"}, {"another-key", "acme", "wh_1"}} {
		_, err := OpenWebhookSecret([]byte(c[0]), c[1], c[2], sealed)
		require.Error(t, err, "%v", c)
	}
	_, err = OpenWebhookSecret(key, "acme", "wh_1", "not-sealed")
	require.Error(t, err)
}

// TestStandardWebhookMessageID: the id of a delivery is its grammar's, stable for one
// (subscription, run, sequence) and distinct across each of them.
func TestStandardWebhookMessageID(t *testing.T) {
	grammar := regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)
	id := StandardWebhookMessageID("acme", "wh_1", "r_1", 3)
	require.Regexp(t, grammar, id)
	require.Equal(t, id, StandardWebhookMessageID("acme", "wh_1", "r_1", 3))
	seen := map[string]bool{id: true}
	for _, other := range []string{StandardWebhookMessageID("acme", "wh_2", "r_1", 3), StandardWebhookMessageID("acme", "wh_1", "r_2", 3),
		StandardWebhookMessageID("acme", "wh_1", "r_1", 4), StandardWebhookMessageID("globex", "wh_1", "r_1", 3)} {
		require.Regexp(t, grammar, other)
		require.False(t, seen[other], other)
		seen[other] = true
	}
}

// TestVerifyWebhookEndpointEgress: the verification POST obeys the egress rules of
// deliveries: a refused destination is a *WebhookURLError, before any connection.
func TestVerifyWebhookEndpointEgress(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, u := range []string{"http://127.0.0.1:9/hook", "https://169.254.169.254/x", "https://[64:ff9b::7f00:1]/x", "https://localhost/x"} {
		err := VerifyWebhookEndpoint(context.Background(), u, false, "acme/wh_1", secret)
		var ue *WebhookURLError
		require.True(t, errors.As(err, &ue), "%s: %v", u, err)
	}
	err := VerifyWebhookEndpoint(context.Background(), "http://127.0.0.1:9/hook", true, "acme/wh_1", secret)
	require.ErrorIs(t, err, ErrWebhookEndpointUnverified, "nothing listens: unverified, not refused")
}

// A secret's digest depends on the host's webhook key: whoever reads it without the
// key cannot test guesses of the secret, as with a plain hash.
func TestSecretDigestIsKeyed(t *testing.T) {
	secret := "a-subscriber-chosen-secret-1234"
	plain := sha256.Sum256([]byte(secret))
	d1, d2 := SecretDigest([]byte("key-one"), secret), SecretDigest([]byte("key-two"), secret)
	assert.Equal(t, d1, SecretDigest([]byte("key-one"), secret), "the same secret under one key compares equal")
	assert.NotEqual(t, d1, d2, "another host key gives another digest")
	assert.NotEqual(t, hex.EncodeToString(plain[:]), d1, "not the plain hash of the secret")
	assert.NotEqual(t, d1, SecretDigest([]byte("key-one"), secret+"x"))
}
