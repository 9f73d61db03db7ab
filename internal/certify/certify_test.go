package certify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vector was computed with Node's crypto and the suite's canonical JSON (keys sorted,
// JSON.stringify strings): the same rows, build, suite version and discovery digest give
// the same witness digest, attestation bytes and signature (Ed25519 is deterministic).
const (
	vectorKey     = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcH\n-----END PRIVATE KEY-----\n"
	vectorWitness = "886951849261dca2ecff075cd1788c5021f15921ed6000471828e23f6ef925b4"
	vectorPayload = `{"discovery.sha256":"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff","host.build":{"id":"abc123","kind":"commit"},"suite.version":"2.45.30","witnessSha256":"886951849261dca2ecff075cd1788c5021f15921ed6000471828e23f6ef925b4"}`
	vectorSig     = "seeSjSC3VobRybwvid6HQ04n-K-Ei7AhuARg0ujCw84seZZ97VL1sNz4nYZefcShM6_-y-GwGevUMPDKd8SYAQ"
)

func vectorBundle(t *testing.T) map[string]any {
	t.Helper()
	rows := []map[string]any{
		{"id": "openwop.floor.v2-run-cancel", "scenario": "v2-run-cancel.test.ts", "result": "executed-pass", "assertions": 3},
		{"id": "openwop.floor.v2-era-key", "scenario": "v2-era-key.test.ts", "result": "blocked", "detail": "needs <a> \"quoted\" é & tab\t"},
	}
	witness, err := WitnessDigest(rows, nil)
	require.NoError(t, err)
	require.Equal(t, vectorWitness, witness)
	return map[string]any{
		"witnessSha256": witness,
		"host":          map[string]any{"name": "wop", "build": map[string]any{"kind": "commit", "id": "abc123"}},
		"suite":         map[string]any{"version": "2.45.30"},
		"discovery":     map[string]any{"sha256": "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"},
	}
}

func TestSignsAsTheSuiteDoes(t *testing.T) {
	key, err := ParseKey("vector.pem", []byte(vectorKey), "")
	require.NoError(t, err)
	require.Equal(t, DefaultKeyID, key.ID)
	require.Len(t, key.PublicBase64(), 43)

	b := vectorBundle(t)
	msg, err := attestation(b)
	require.NoError(t, err)
	require.Equal(t, vectorPayload, string(msg))
	require.NoError(t, key.Sign(b))
	sig := b["signature"].(map[string]any)
	require.Equal(t, vectorSig, sig["sig"])
	require.Equal(t, "ed25519", sig["alg"])
	require.NoError(t, Verify(b, DefaultKeyID, key.Public()))

	// Any change to what the attestation covers breaks it; a change elsewhere does not.
	b["host"].(map[string]any)["name"] = "renamed"
	require.NoError(t, Verify(b, DefaultKeyID, key.Public()))
	b["host"].(map[string]any)["build"] = map[string]any{"kind": "commit", "id": "abc124"}
	require.ErrorContains(t, Verify(b, DefaultKeyID, key.Public()), "does not verify")
	require.ErrorContains(t, Verify(vectorBundle(t), DefaultKeyID, key.Public()), "no signature")

	other, err := ParseKey("vector.pem", []byte(vectorKey), "another")
	require.NoError(t, err)
	b = vectorBundle(t)
	require.NoError(t, other.Sign(b))
	require.ErrorContains(t, Verify(b, DefaultKeyID, key.Public()), `not "wop-bundle-1"`)
}

func TestEnsureKeyMakesOneKeyAndKeepsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signing-key.pem")
	k1, made, err := EnsureKey(path, "")
	require.NoError(t, err)
	require.True(t, made)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	k2, made, err := EnsureKey(path, "")
	require.NoError(t, err)
	require.False(t, made)
	require.Equal(t, k1.Public(), k2.Public())

	bad := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), 0o600))
	_, err = LoadKey(bad, "")
	require.ErrorContains(t, err, "not a PKCS#8 PEM private key")
}

func TestCanonicalJSONIsTheSuitesForm(t *testing.T) {
	raw, err := Canonical(map[string]any{"b": []any{1, 2.5, "x<y>&", nil, true}, "a": map[string]any{"z": 1, "y": "é"}})
	require.NoError(t, err)
	require.Equal(t, `{"a":{"y":"é","z":1},"b":[1,2.5,"x<y>&",null,true]}`, string(raw))
}

func TestCompleteAndCheck(t *testing.T) {
	key, err := ParseKey("vector.pem", []byte(vectorKey), "")
	require.NoError(t, err)
	bundle := func() map[string]any {
		return map[string]any{
			"bundleVersion": "3",
			"host":          map[string]any{"name": "wop", "build": map[string]any{"kind": "commit", "id": "abc123"}},
			"suite":         map[string]any{"version": "2.45.30"},
			"discovery":     map[string]any{"sha256": "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"},
			"results": map[string]any{"requirements": []any{
				map[string]any{"id": "openwop.floor.v2-run-cancel", "scenario": "v2-run-cancel.test.ts", "result": "executed-pass", "assertions": 3},
				map[string]any{"id": "openwop.floor.v2-era-key", "scenario": "v2-era-key.test.ts", "result": "blocked", "detail": "needs <a> \"quoted\" é & tab\t"},
			}},
		}
	}
	b := bundle()
	require.NoError(t, Complete(b))
	require.Equal(t, vectorWitness, b["witnessSha256"])
	require.Equal(t, int64(3), b["assertionCount"])
	require.Equal(t, 1, b["results"].(map[string]any)["totals"].(map[string]any)["blocked"])
	require.NotNil(t, b["detail"])
	require.NoError(t, key.Sign(b))
	published := map[string]string{DefaultKeyID: key.PublicBase64()}
	require.Empty(t, Check(b, published))

	// A row edited after signing: the digest no longer matches and the signature fails.
	b["results"].(map[string]any)["requirements"].([]any)[1].(map[string]any)["result"] = "executed-pass"
	problems := Check(b, published)
	require.Contains(t, problems, "openwop.floor.v2-era-key: an executed pass with no assertions witnesses nothing")
	require.Contains(t, strings.Join(problems, "\n"), "is not the digest of the rows")
	require.Contains(t, strings.Join(problems, "\n"), "results.totals.blocked is 1 but the rows count 0")

	// A key the host does not publish.
	b = bundle()
	require.NoError(t, Complete(b))
	require.NoError(t, key.Sign(b))
	require.Contains(t, strings.Join(Check(b, map[string]string{}), "\n"), "attests integrity only")

	// A non-pass row without a reason.
	b = bundle()
	delete(b["results"].(map[string]any)["requirements"].([]any)[1].(map[string]any), "detail")
	require.NoError(t, Complete(b))
	require.NoError(t, key.Sign(b))
	require.Contains(t, Check(b, published), "openwop.floor.v2-era-key: blocked recorded without a reason")
}
