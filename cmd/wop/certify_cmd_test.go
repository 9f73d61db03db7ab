//go:build !nodev

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDevPublishesItsSigningKeyAndCertifySignsWithIt: wop dev makes its Ed25519 key
// once in its data folder and publishes the public half in signingKeys[] of both
// discovery representations; a bundle signed with `wop certify sign` verifies against
// that host with `wop certify verify`, and no longer does once a row is edited.
func TestDevPublishesItsSigningKeyAndCertifySignsWithIt(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	d := startDev(t, data, nil, nil)
	apiURL := d.banner(t, "API")
	keyFile := filepath.Join(data, devSigningKeyFile)
	st, err := os.Stat(keyFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	published := map[string]string{}
	for _, version := range []string{"1.0", "2.0"} {
		req, err := http.NewRequest(http.MethodGet, apiURL+"/.well-known/openwop", nil)
		require.NoError(t, err)
		req.Header.Set("OpenWOP-Version", version)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var doc struct {
			SigningKeys []map[string]string `json:"signingKeys"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
		resp.Body.Close()
		require.Len(t, doc.SigningKeys, 1, version)
		k := doc.SigningKeys[0]
		assert.Equal(t, "wop-bundle-1", k["keyId"])
		assert.Equal(t, "ed25519", k["alg"])
		assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, k["publicKey"])
		published[version] = k["publicKey"]
	}
	assert.Equal(t, published["1.0"], published["2.0"], "the same key on both roots")

	bundle := filepath.Join(dir, "bundle.json")
	require.NoError(t, os.WriteFile(bundle, []byte(`{"bundleVersion":"3","host":{"name":"wop","version":"dev","build":{"kind":"commit","id":"0123abc"}},
"suite":{"name":"@openwop/openwop-conformance","version":"2.45.30","targetMajor":2},"discovery":{"url":"`+apiURL+`/.well-known/openwop","sha256":"`+strings.Repeat("a", 64)+`"},
"results":{"requirements":[{"id":"openwop.floor.v2-run-cancel","scenario":"v2-run-cancel.test.ts","result":"executed-pass","assertions":4}]}}`), 0o644))
	var sout, serr strings.Builder
	require.Equal(t, 0, run([]string{"certify", "sign", bundle, "--key", keyFile}, envMap(nil), &sout, &serr), serr.String())
	assert.Contains(t, sout.String(), "signed "+bundle+" under wop-bundle-1")
	sout.Reset()
	require.Equal(t, 0, run([]string{"certify", "verify", bundle, "--base-url", apiURL}, envMap(nil), &sout, &serr), sout.String()+serr.String())
	assert.Contains(t, sout.String(), "verifies under wop-bundle-1")

	raw, err := os.ReadFile(bundle)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bundle, []byte(strings.Replace(string(raw), `"assertions": 4`, `"assertions": 40`, 1)), 0o644))
	sout.Reset()
	assert.Equal(t, 1, run([]string{"certify", "verify", bundle, "--base-url", apiURL}, envMap(nil), &sout, &serr))
	assert.Contains(t, sout.String(), "rejected: assertionCount is 4 but the rows sum to 40")
	assert.Contains(t, sout.String(), "is not the digest of the rows")

	key, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	body := strings.Split(strings.TrimSpace(string(key)), "\n")[1]
	assert.NotContains(t, d.out.String()+d.errb.String(), body, "the private key is never logged")
	d.stop(t)
}
