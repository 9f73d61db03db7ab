package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wop-dev/wop/api"
)

func TestKeysAddPrintsTheKeyOnceAndStoresItsHash(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys.yaml")
	env := envMap(map[string]string{"WOP_KEYS_FILE": file})
	var out, errb bytes.Buffer
	if code := run([]string{"keys", "add", "acme-ops", "--tenant", "acme", "--scopes", "runs:read,runs:create"}, env, &out, &errb); code != 0 {
		t.Fatalf("keys add exit %d: %s", code, errb.String())
	}
	key := strings.TrimSpace(out.String())
	if !strings.HasPrefix(key, "wop_") || len(key) != len("wop_")+64 {
		t.Fatalf("stdout %q is not one new key", out.String())
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), key) || !strings.Contains(string(raw), api.HashKey(key)) {
		t.Fatalf("the file must hold the key's hash, not the key:\n%s", raw)
	}
	keys, err := api.LoadKeysFile(file)
	if err != nil || len(keys) != 1 || keys[0].Tenant != "acme" || strings.Join(keys[0].Scopes, ",") != "runs:read,runs:create" {
		t.Fatalf("keys file reads back as %+v, %v", keys, err)
	}

	// Flags first works too; a second key with another name is appended.
	out.Reset()
	if code := run([]string{"keys", "add", "--file", file, "--tenant", "globex", "--scopes", "all", "globex-ops"}, envMap(nil), &out, &errb); code != 0 {
		t.Fatalf("second keys add exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"keys", "list"}, env, &out, &errb); code != 0 {
		t.Fatalf("keys list exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"acme-ops", "globex-ops", "active", "approvals:respond"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("keys list does not show %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), key) {
		t.Error("keys list shows a key")
	}

	errb.Reset()
	if code := run([]string{"keys", "revoke", "acme-ops"}, env, &out, &errb); code != 0 {
		t.Fatalf("keys revoke exit %d: %s", code, errb.String())
	}
	keys, err = api.LoadKeysFile(file)
	if err != nil || !keys[0].Revoked || keys[1].Revoked {
		t.Fatalf("after revoke: %+v, %v", keys, err)
	}
}

func TestKeysAddRefusesBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys.yaml")
	if err := api.AppendKey(file, api.KeyFileEntry{Name: "someone", Tenant: "acme", SHA256: api.HashKey("k"), Scopes: api.AllScopes}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"keys", "add", "x", "--tenant", "acme"}, "--scopes is required"},
		{[]string{"keys", "add", "x", "--scopes", "all"}, "--tenant is required"},
		{[]string{"keys", "add", "x", "--tenant", "acme", "--scopes", "runs:write"}, `unknown scope "runs:write"`},
		{[]string{"keys", "add", "--tenant", "acme", "--scopes", "all"}, "NAME is required"},
		{[]string{"keys", "revoke", "nobody"}, "no key named"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		if code := run(tc.args, envMap(map[string]string{"WOP_KEYS_FILE": file}), &out, &errb); code == 0 {
			t.Errorf("%v succeeded", tc.args)
		}
		if !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: stderr %q does not say %q", tc.args, errb.String(), tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%v printed %q", tc.args, out.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"keys", "add", "x", "--tenant", "a", "--scopes", "all"}, envMap(nil), &out, &errb); code == 0 || !strings.Contains(errb.String(), "WOP_KEYS_FILE") {
		t.Errorf("without a file: exit %d, %q", code, errb.String())
	}
}
