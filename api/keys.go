package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A keys file (WOP_KEYS_FILE) lists the API keys of every tenant. It holds the SHA-256
// of each key, never the key itself:
//
//	keys:
//	  - name: acme-ops            # unique; the key's id in logs, events and approvals
//	    tenant: acme              # the runs the key sees and starts ("default" if absent)
//	    sha256: 3b1f…             # hex SHA-256 of the bearer key
//	    scopes: [runs:create, runs:read, runs:cancel, approvals:respond]
//	  - name: acme-dashboard
//	    tenant: acme
//	    sha256: 9c0e…
//	    scopes: [runs:read]
//	    expiresAt: 2026-12-31T00:00:00Z   # optional: answered 401 key_expired after it
//	  - name: acme-old
//	    tenant: acme
//	    sha256: 51aa…
//	    scopes: [runs:read]
//	    revoked: true             # answered 401 key_revoked
//
// `wop keys add` appends entries with a new random key. Every error names the file
// and line, e.g. "keys.yaml:7: key \"acme-ops\": sha256 must be 64 hex characters".

// keyFileFields are the fields of one entry.
var keyFileFields = []string{"name", "tenant", "sha256", "scopes", "revoked", "expiresAt"}

// knownScopes are the scopes this host checks; a keys file naming another one is an
// error, because a misspelt scope would silently deny.
var knownScopes = KnownScopes

// LoadKeysFile reads and checks a keys file.
func LoadKeysFile(path string) ([]Key, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keys file: %w", err)
	}
	return ParseKeys(path, raw)
}

// ParseKeys parses the keys file content raw; name is the file name used in errors.
func ParseKeys(name string, raw []byte) ([]Key, error) {
	at := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", name, n.Line, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file: no keys
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "the file must be a mapping with a keys list")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "keys" {
			return nil, at(k, "unknown field %q; the file has one field, keys", k.Value)
		}
		list = v
	}
	if list == nil || list.Tag == "!!null" {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, at(list, "keys must be a list")
	}
	var keys []Key
	names := map[string]int{}
	hashes := map[string]string{}
	for _, item := range list.Content {
		k, err := parseKeyEntry(item, at)
		if err != nil {
			return nil, err
		}
		if line, dup := names[k.ID]; dup {
			return nil, at(item, "key name %q is already used at line %d", k.ID, line)
		}
		names[k.ID] = item.Line
		if other, dup := hashes[k.SHA256]; dup {
			return nil, at(item, "key %q has the same sha256 as key %q; every key needs its own secret", k.ID, other)
		}
		hashes[k.SHA256] = k.ID
		keys = append(keys, k)
	}
	return keys, nil
}

func parseKeyEntry(item *yaml.Node, at func(*yaml.Node, string, ...any) error) (Key, error) {
	var k Key
	if item.Kind != yaml.MappingNode {
		return k, at(item, "each key is a mapping with name, tenant, sha256 and scopes")
	}
	fields := map[string]*yaml.Node{}
	for i := 0; i+1 < len(item.Content); i += 2 {
		f, v := item.Content[i], item.Content[i+1]
		if !slices.Contains(keyFileFields, f.Value) {
			return k, at(f, "unknown field %q; a key has %s", f.Value, strings.Join(keyFileFields, ", "))
		}
		if _, dup := fields[f.Value]; dup {
			return k, at(f, "field %q appears twice", f.Value)
		}
		fields[f.Value] = v
	}
	str := func(field string) (string, error) {
		v := fields[field]
		if v == nil {
			return "", nil
		}
		if v.Kind != yaml.ScalarNode {
			return "", at(v, "%s must be a string", field)
		}
		return strings.TrimSpace(v.Value), nil
	}
	var err error
	if k.ID, err = str("name"); err != nil {
		return k, err
	}
	if k.ID == "" {
		return k, at(item, "every key needs a name")
	}
	if err := validateID("name", k.ID); err != nil {
		return k, at(fields["name"], "key name %q: use letters, digits, '.', '_', ':' or '-'", k.ID)
	}
	label := fmt.Sprintf("key %q: ", k.ID)
	if k.Tenant, err = str("tenant"); err != nil {
		return k, err
	}
	if k.Tenant == "" {
		k.Tenant = "default"
	} else if validateID("tenant", k.Tenant) != nil {
		return k, at(fields["tenant"], "%stenant %q: use letters, digits, '.', '_', ':' or '-'", label, k.Tenant)
	}
	if k.SHA256, err = str("sha256"); err != nil {
		return k, err
	}
	k.SHA256 = strings.ToLower(k.SHA256)
	if b, herr := hex.DecodeString(k.SHA256); herr != nil || len(b) != sha256.Size {
		n := fields["sha256"]
		if n == nil {
			n = item
		}
		return k, at(n, "%ssha256 must be 64 hex characters (the SHA-256 of the key: `printf %%s KEY | sha256sum`)", label)
	}
	sc := fields["scopes"]
	if sc == nil {
		return k, at(item, "%sscopes are required: a list of %s", label, strings.Join(knownScopes, ", "))
	}
	if sc.Kind != yaml.SequenceNode {
		return k, at(sc, "%sscopes must be a list, e.g. [runs:read]", label)
	}
	for _, s := range sc.Content {
		if s.Kind != yaml.ScalarNode || !slices.Contains(knownScopes, s.Value) {
			return k, at(s, "%sunknown scope %q; this host knows %s", label, s.Value, strings.Join(knownScopes, ", "))
		}
		k.Scopes = append(k.Scopes, s.Value)
	}
	if v := fields["revoked"]; v != nil {
		if err := v.Decode(&k.Revoked); err != nil {
			return k, at(v, "%srevoked must be true or false", label)
		}
	}
	if v := fields["expiresAt"]; v != nil {
		t, perr := time.Parse(time.RFC3339, strings.TrimSpace(v.Value))
		if v.Kind != yaml.ScalarNode || perr != nil {
			return k, at(v, "%sexpiresAt must be an RFC 3339 time such as 2026-12-31T00:00:00Z", label)
		}
		k.ExpiresAt = t
	}
	return k, nil
}

// HashKey returns the hex SHA-256 of a bearer key, as a keys file stores it.
func HashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// KeyFileEntry is a key to append to a keys file.
type KeyFileEntry struct {
	Name   string
	Tenant string
	SHA256 string
	Scopes []string
}

// AppendKey adds entry to the keys file at path (creating it with mode 0600 when
// missing) and checks the result: the name must be new and the file must still parse.
// The text is appended, so the file's comments and layout stay as they were; a file
// whose keys list is not its last block is rewritten from its parsed form instead.
func AppendKey(path string, e KeyFileEntry) error {
	if validateID("name", e.Name) != nil {
		return fmt.Errorf("key name %q: use letters, digits, '.', '_', ':' or '-'", e.Name)
	}
	if validateID("tenant", e.Tenant) != nil {
		return fmt.Errorf("tenant %q: use letters, digits, '.', '_', ':' or '-'", e.Tenant)
	}
	if len(e.Scopes) == 0 {
		return fmt.Errorf("key %q needs at least one scope", e.Name)
	}
	for _, sc := range e.Scopes {
		if !slices.Contains(knownScopes, sc) {
			return fmt.Errorf("unknown scope %q; this host knows %s", sc, strings.Join(knownScopes, ", "))
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("keys file: %w", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("# API keys of this host (WOP_KEYS_FILE): hex SHA-256 of each key, never the key.\nkeys:\n")
	}
	if _, err := ParseKeys(path, raw); err != nil {
		return err
	}
	entry := fmt.Sprintf("  - name: %s\n    tenant: %s\n    sha256: %s\n    scopes: [%s]\n",
		e.Name, e.Tenant, e.SHA256, strings.Join(e.Scopes, ", "))
	out := append(bytes.TrimRight(raw, "\n"), '\n')
	if bytes.HasSuffix(bytes.TrimSpace(out), []byte("keys: []")) {
		out = append(bytes.TrimSuffix(bytes.TrimSpace(out), []byte(" []")), '\n')
	}
	out = append(out, entry...)
	if _, err := ParseKeys(path, out); err != nil {
		// The keys list is not where appending puts an item: keep the file as it is.
		return fmt.Errorf("cannot append to %s (is `keys:` the last block of the file?): %w", path, err)
	}
	return writeFileAtomic(path, out)
}

// RevokeKey marks the key called name as revoked in the keys file at path.
func RevokeKey(path, name string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("keys file: %w", err)
	}
	if _, err := ParseKeys(path, raw); err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	list := doc.Content[0].Content[1]
	for _, item := range list.Content {
		var entryName string
		var revoked *yaml.Node
		for i := 0; i+1 < len(item.Content); i += 2 {
			switch item.Content[i].Value {
			case "name":
				entryName = item.Content[i+1].Value
			case "revoked":
				revoked = item.Content[i+1]
			}
		}
		if entryName != name {
			continue
		}
		if revoked != nil {
			revoked.Value, revoked.Tag = "true", "!!bool"
		} else {
			item.Content = append(item.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: "revoked"},
				&yaml.Node{Kind: yaml.ScalarNode, Value: "true", Tag: "!!bool"})
		}
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(&doc); err != nil {
			return err
		}
		return writeFileAtomic(path, b.Bytes())
	}
	return fmt.Errorf("%s has no key named %q", path, name)
}

// writeFileAtomic replaces path's content: a temporary file renamed over it, so a
// reader never sees half a file. Where the rename is refused (a file bind-mounted
// into a container), it writes in place.
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return os.WriteFile(path, data, mode)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return os.WriteFile(path, data, mode)
	}
	return nil
}
