package api

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys of the keys-file tests: two tenants, one read-only key.
const (
	acmeOps       = "wop_acme_ops_secret"
	acmeDashboard = "wop_acme_dashboard_secret"
	globexOps     = "wop_globex_ops_secret"
)

func twoTenantKeys() string {
	return `# two tenants; acme-dashboard may only read
keys:
  - name: acme-ops
    tenant: acme
    sha256: ` + HashKey(acmeOps) + `
    scopes: [manifest:read, runs:create, runs:read, runs:cancel, approvals:respond]
  - name: acme-dashboard
    tenant: acme
    sha256: ` + HashKey(acmeDashboard) + `
    scopes: [runs:read]
  - name: globex-ops
    tenant: globex
    sha256: ` + HashKey(globexOps) + `
    scopes: [runs:create, runs:read]
`
}

func writeKeys(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

// keysEnv is a test API whose keys come from a keys file (besides the fixed test keys).
func keysEnv(t *testing.T, content string, mut ...func(*Config)) (*testEnv, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.yaml")
	writeKeys(t, path, content)
	env := newTestEnv(t, append([]func(*Config){func(c *Config) { c.KeysFile = path; c.KeysFilePoll = time.Hour }}, mut...)...)
	t.Cleanup(func() { _ = env.srv.Shutdown(context.Background()) })
	return env, path
}

func TestParseKeysFileTwoTenants(t *testing.T) {
	keys, err := ParseKeys("keys.yaml", []byte(twoTenantKeys()))
	require.NoError(t, err)
	require.Len(t, keys, 3)
	assert.Equal(t, "acme-ops", keys[0].ID)
	assert.Equal(t, "acme", keys[0].Tenant)
	assert.Equal(t, HashKey(acmeOps), keys[0].SHA256)
	assert.Equal(t, []string{ScopeRunsRead}, keys[1].Scopes)
	assert.Equal(t, "globex", keys[2].Tenant)
}

func TestParseKeysFileErrorsNameTheLine(t *testing.T) {
	h := HashKey("x")
	cases := []struct{ name, content, want string }{
		{"bad hash", "keys:\n  - name: a\n    sha256: abc\n    scopes: [runs:read]\n", "keys.yaml:3: key \"a\": sha256 must be 64 hex characters"},
		{"unknown scope", "keys:\n  - name: a\n    sha256: " + h + "\n    scopes: [runs:read, runs:write]\n", "keys.yaml:4: key \"a\": unknown scope \"runs:write\""},
		{"unknown field", "keys:\n  - name: a\n    sha256: " + h + "\n    scopes: [runs:read]\n    secret: hunter2\n", "keys.yaml:5: unknown field \"secret\""},
		{"no name", "keys:\n  - sha256: " + h + "\n    scopes: [runs:read]\n", "keys.yaml:2: every key needs a name"},
		{"duplicate name", "keys:\n  - name: a\n    sha256: " + h + "\n    scopes: [runs:read]\n  - name: a\n    sha256: " + HashKey("y") + "\n    scopes: [runs:read]\n", "keys.yaml:5: key name \"a\" is already used at line 2"},
		{"same secret", "keys:\n  - name: a\n    sha256: " + h + "\n    scopes: [runs:read]\n  - name: b\n    sha256: " + h + "\n    scopes: [runs:read]\n", "keys.yaml:5: key \"b\" has the same sha256 as key \"a\""},
		{"no scopes", "keys:\n  - name: a\n    sha256: " + h + "\n", "keys.yaml:2: key \"a\": scopes are required"},
		{"bad expiry", "keys:\n  - name: a\n    sha256: " + h + "\n    scopes: [runs:read]\n    expiresAt: soon\n", "keys.yaml:5: key \"a\": expiresAt must be an RFC 3339 time"},
		{"not a list", "keys: {a: 1}\n", "keys.yaml:1: keys must be a list"},
		{"top level", "tokens: []\n", "keys.yaml:1: unknown field \"tokens\""},
		{"yaml", "keys:\n  - name: [\n", "keys.yaml: yaml: line 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeys("keys.yaml", []byte(tc.content))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestKeysFileTenantsAndReadOnlyKey(t *testing.T) {
	env, _ := keysEnv(t, twoTenantKeys())

	rec := env.do("POST", "/v1/runs", acmeOps, `{"workflowId":"conformance-noop"}`)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	runID := decode[CreateRunResponse](t, rec.Body.Bytes()).RunID
	require.Equal(t, "acme", env.ft.runs[runID].input.Owner.Tenant)
	require.Equal(t, "acme-ops", env.ft.runs[runID].input.Owner.Principal, "the key's name is its principal")

	// The read-only key of the same tenant reads the run but cannot start or cancel.
	require.Equal(t, http.StatusOK, env.do("GET", "/v1/runs/"+runID, acmeDashboard, "").Code)
	e := env.expectError(env.do("POST", "/v1/runs", acmeDashboard, `{"workflowId":"conformance-noop"}`), 403, CodeForbidden)
	assert.Contains(t, e.Message, ScopeRunsCreate)
	env.expectError(env.do("POST", "/v1/runs/"+runID+"/cancel", acmeDashboard, `{}`), 403, CodeForbidden)

	// Another tenant's key does not see it, and nor does the configured default key.
	env.expectError(env.do("GET", "/v1/runs/"+runID, globexOps, ""), 404, CodeNotFound)
	env.expectError(env.do("GET", "/v1/runs/"+runID, fullKey, ""), 404, CodeNotFound)
	// The configured keys keep working next to the file's.
	require.Equal(t, http.StatusCreated, env.do("POST", "/v1/runs", fullKey, `{"workflowId":"conformance-noop"}`).Code)
}

func TestKeysFileRotationAndRevocation(t *testing.T) {
	env, path := keysEnv(t, twoTenantKeys())
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", acmeOps, "").Code)

	// Rotation, step 1: a second key for the same tenant; both work.
	const newOps = "wop_acme_ops_rotated"
	require.NoError(t, AppendKey(path, KeyFileEntry{Name: "acme-ops-2", Tenant: "acme", SHA256: HashKey(newOps), Scopes: AllScopes}))
	require.NoError(t, env.srv.ReloadKeys())
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", newOps, "").Code)
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", acmeOps, "").Code)

	// Step 2: the old key is revoked: 401 key_revoked, the new one still works.
	require.NoError(t, RevokeKey(path, "acme-ops"))
	require.NoError(t, env.srv.ReloadKeys())
	e := env.expectError(env.do("GET", "/v1/workflows/conformance-noop", acmeOps, ""), 401, CodeKeyRevoked)
	assert.Contains(t, e.Message, "acme-ops")
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", newOps, "").Code)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "# two tenants", "revoking keeps the file's comments")

	// Step 3: deleting the entry makes the key unknown.
	writeKeys(t, path, "keys:\n  - name: acme-ops-2\n    tenant: acme\n    sha256: "+HashKey(newOps)+"\n    scopes: [runs:read, manifest:read]\n")
	require.NoError(t, env.srv.ReloadKeys())
	env.expectError(env.do("GET", "/v1/workflows/conformance-noop", acmeOps, ""), 401, CodeUnauthenticated)
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", newOps, "").Code)
	env.expectError(env.do("POST", "/v1/runs", newOps, `{"workflowId":"conformance-noop"}`), 403, CodeForbidden)
}

func TestKeysFileBadReloadKeepsTheKeys(t *testing.T) {
	env, path := keysEnv(t, twoTenantKeys())
	writeKeys(t, path, twoTenantKeys()+"  - name: broken\n    sha256: nothex\n    scopes: [runs:read]\n")
	err := env.srv.ReloadKeys()
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+":16:", "the error names the file and line")
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", acmeOps, "").Code, "the keys read before stay in use")

	// A missing file keeps them too.
	require.NoError(t, os.Remove(path))
	require.Error(t, env.srv.ReloadKeys())
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", acmeOps, "").Code)
}

func TestKeysFileReloadsWhenItChanges(t *testing.T) {
	env, path := keysEnv(t, twoTenantKeys(), func(c *Config) { c.KeysFilePoll = 10 * time.Millisecond })
	const late = "wop_late_key"
	env.expectError(env.do("GET", "/v1/workflows/conformance-noop", late, ""), 401, CodeUnauthenticated)
	require.NoError(t, AppendKey(path, KeyFileEntry{Name: "late", Tenant: "acme", SHA256: HashKey(late), Scopes: []string{ScopeManifestRead}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 200, env.do("GET", "/v1/workflows/conformance-noop", late, "").Code)
	}, 10*time.Second, 10*time.Millisecond)
}

func TestKeysFileExpiry(t *testing.T) {
	env, _ := keysEnv(t, "keys:\n  - name: temp\n    sha256: "+HashKey("wop_temp")+"\n    scopes: [manifest:read]\n    expiresAt: 2026-01-01T00:00:10Z\n")
	require.Equal(t, 200, env.do("GET", "/v1/workflows/conformance-noop", "wop_temp", "").Code)
	env.now = env.now.Add(10 * time.Second)
	env.expectError(env.do("GET", "/v1/workflows/conformance-noop", "wop_temp", ""), 401, CodeKeyExpired)
}

func TestKeysFileMustParseAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	writeKeys(t, path, "keys:\n  - name: env\n    sha256: "+HashKey("k")+"\n    scopes: [runs:read]\n")
	_, mc := newFakeTemporal(t)
	_, err := newServer(Config{Keys: []Key{{ID: "env", Secret: "s", Scopes: AllScopes}}, KeysFile: path, TokenSecret: []byte("x")}, mc, testCatalog(t), nil)
	require.ErrorContains(t, err, `key name "env" is also the id of a configured key`)
	_, err = newServer(Config{KeysFile: filepath.Join(t.TempDir(), "missing.yaml"), TokenSecret: []byte("x")}, mc, testCatalog(t), nil)
	require.ErrorContains(t, err, "missing.yaml")
}

func TestAppendKeyCreatesAndExtendsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, AppendKey(path, KeyFileEntry{Name: "first", Tenant: "acme", SHA256: HashKey("a"), Scopes: []string{ScopeRunsRead}}))
	require.NoError(t, AppendKey(path, KeyFileEntry{Name: "second", Tenant: "globex", SHA256: HashKey("b"), Scopes: AllScopes}))
	err := AppendKey(path, KeyFileEntry{Name: "first", Tenant: "acme", SHA256: HashKey("c"), Scopes: []string{ScopeRunsRead}})
	require.ErrorContains(t, err, `key name "first" is already used`)
	keys, err := LoadKeysFile(path)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	assert.Equal(t, "globex", keys[1].Tenant)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	raw, _ := os.ReadFile(path)
	assert.NotContains(t, string(raw), `"a"`, "only hashes are written")
}

func TestConfigFromEnvReadsTheKeysFile(t *testing.T) {
	env := map[string]string{"WOP_KEYS_FILE": "/etc/wop/keys.yaml"}
	_, err := ConfigFromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "WOP_TOKEN_SECRET is required")
	env["WOP_TOKEN_SECRET"] = "s"
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, "/etc/wop/keys.yaml", cfg.KeysFile)
}

// approvals:delegate and payloads:codec are granted by name: "all" and WOP_API_KEY
// leave them out, a keys file and WOP_API_KEY_SCOPES name them.
func TestDelegateIsGrantedByName(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := ConfigFromEnv(env(map[string]string{"WOP_API_KEY": "k", "WOP_TOKEN_SECRET": "s"}))
	require.NoError(t, err)
	assert.Equal(t, AllScopes, cfg.Keys[0].Scopes)
	assert.NotContains(t, cfg.Keys[0].Scopes, ScopeApprovalsDelegate)

	assert.NotContains(t, cfg.Keys[0].Scopes, ScopePayloadsCodec)

	cfg, err = ConfigFromEnv(env(map[string]string{"WOP_API_KEY": "k", "WOP_TOKEN_SECRET": "s", "WOP_API_KEY_SCOPES": "all, approvals:delegate, payloads:codec"}))
	require.NoError(t, err)
	assert.Equal(t, KnownScopes, cfg.Keys[0].Scopes)
	_, err = ConfigFromEnv(env(map[string]string{"WOP_API_KEY": "k", "WOP_TOKEN_SECRET": "s", "WOP_API_KEY_SCOPES": "all,approvals:delegates"}))
	assert.ErrorContains(t, err, `WOP_API_KEY_SCOPES: unknown scope "approvals:delegates"`)

	scopes, err := ParseScopes("all")
	require.NoError(t, err)
	assert.NotContains(t, scopes, ScopeApprovalsDelegate)
	keys, err := ParseKeys("keys.yaml", []byte("keys:\n  - name: relay\n    sha256: "+HashKey("r")+"\n    scopes: [approvals:respond, approvals:delegate]\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{ScopeApprovalsRespond, ScopeApprovalsDelegate}, keys[0].Scopes)
}

// A reload ends the requests of the keys it revokes, removes or re-keys with that key's
// 401; the others follow the expiry the reload gives their key.
func TestKeySessionsEndWithTheirKey(t *testing.T) {
	now := time.Now()
	scopes := []string{ScopeRunsRead}
	before, err := newKeyStore([]Key{{ID: "a", Secret: "sa", Scopes: scopes}, {ID: "b", Secret: "sb", Scopes: scopes}, {ID: "c", Secret: "sc", Scopes: scopes}, {ID: "d", Secret: "sd", Scopes: scopes}})
	require.NoError(t, err)
	var sessions keySessions
	ctxs := map[string]context.Context{}
	for i := range before.keys {
		k := &before.keys[i]
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		ctxs[k.p.KeyID] = ctx
		sessions.add(&keySession{p: &k.p, cancel: cancel}, k.expiresAt, now)
	}
	after, err := newKeyStore([]Key{{ID: "a", Secret: "sa", Scopes: scopes, Revoked: true}, {ID: "b", Secret: "another", Scopes: scopes},
		{ID: "c", Secret: "sc", Scopes: scopes, ExpiresAt: now.Add(100 * time.Millisecond)}, {ID: "d", Secret: "sd", Scopes: scopes}})
	require.NoError(t, err)
	require.Equal(t, 2, sessions.reload(after, now))
	code := func(id string) string {
		var e *Error
		if !errors.As(context.Cause(ctxs[id]), &e) {
			return ""
		}
		return e.Code
	}
	assert.Equal(t, CodeKeyRevoked, code("a"))
	assert.Equal(t, CodeUnauthenticated, code("b"), "the name now holds another secret")
	assert.NoError(t, ctxs["c"].Err(), "c is valid until its new expiry")
	require.Eventually(t, func() bool { return code("c") == CodeKeyExpired }, 5*time.Second, 10*time.Millisecond)
	assert.NoError(t, ctxs["d"].Err(), "d is unchanged")
}
