package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/wop-dev/wop/internal/certify"
)

const certifyUsage = `Usage:
  wop certify sign BUNDLE [--key FILE] [--key-id ID]
      complete a certification bundle v3 (results.totals, assertionCount and
      witnessSha256 from its requirement rows) and sign it with the host's Ed25519 key
      (WOP_SIGNING_KEY_FILE, a PKCS#8 PEM file; wop dev keeps one in its data folder)
  wop certify verify BUNDLE --base-url URL
      check a bundle against the host at URL: its signature under the key the host's
      discovery publishes in signingKeys[], its witness digest, totals and assertion
      count, and that every row but an executed pass says why and every pass asserted
`

// runCertify is `wop certify`: it signs and verifies certification bundles.
func runCertify(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if code, asked := usageAsked(args, certifyUsage, stderr); asked {
		return code
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet("certify "+sub, "certify "+sub+" BUNDLE [flags]", stderr)
	keyFile := fs.String("key", strings.TrimSpace(env("WOP_SIGNING_KEY_FILE")), "the host's signing key `file` (PKCS#8 PEM; env WOP_SIGNING_KEY_FILE)")
	keyID := fs.String("key-id", envOr(env, "WOP_SIGNING_KEY_ID", certify.DefaultKeyID), "the key's `id` in signingKeys[] (env WOP_SIGNING_KEY_ID)")
	baseURL := fs.String("base-url", "", "the host's API base `URL`, whose discovery publishes the key")
	path, code := parseNameAndFlags(fs, rest, true)
	if code >= 0 {
		return code
	}
	bundle, err := readBundle(path)
	if err != nil {
		return fail(stderr, "certify", err)
	}
	switch sub {
	case "sign":
		if *keyFile == "" {
			return fail(stderr, "certify", errors.New("no signing key: set WOP_SIGNING_KEY_FILE or pass --key"))
		}
		key, err := certify.LoadKey(*keyFile, *keyID)
		if err != nil {
			return fail(stderr, "certify", err)
		}
		if err := certify.Complete(bundle); err != nil {
			return fail(stderr, "certify", err)
		}
		if err := key.Sign(bundle); err != nil {
			return fail(stderr, "certify", err)
		}
		raw, err := json.MarshalIndent(bundle, "", "  ")
		if err != nil {
			return fail(stderr, "certify", err)
		}
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
			return fail(stderr, "certify", err)
		}
		fmt.Fprintf(stdout, "signed %s under %s (witness %s)\n", path, key.ID, bundle["witnessSha256"])
		return 0
	case "verify":
		if *baseURL == "" {
			return fail(stderr, "certify", errors.New("verify needs --base-url: the host whose discovery publishes the signing key"))
		}
		keys, err := publishedKeys(ctx, strings.TrimRight(*baseURL, "/"))
		if err != nil {
			return fail(stderr, "certify", err)
		}
		problems := certify.Check(bundle, keys)
		for _, p := range problems {
			fmt.Fprintln(stdout, "rejected:", p)
		}
		if len(problems) > 0 {
			return 1
		}
		sig, _ := bundle["signature"].(map[string]any)
		fmt.Fprintf(stdout, "%s verifies under %v, published by %s\n", path, sig["keyId"], *baseURL)
		return 0
	}
	fmt.Fprint(stderr, certifyUsage)
	return 2
}

// readBundle reads a bundle document, numbers as they are written.
func readBundle(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b map[string]any
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// publishedKeys reads the signing keys the host's discovery publishes, by key id.
func publishedKeys(ctx context.Context, base string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/.well-known/openwop", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("OpenWOP-Version", "2.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("discovery at %s answered %s", base, resp.Status)
	}
	var doc struct {
		SigningKeys []struct {
			KeyID     string `json:"keyId"`
			PublicKey string `json:"publicKey"`
		} `json:"signingKeys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("discovery at %s: %w", base, err)
	}
	keys := map[string]string{}
	for _, k := range doc.SigningKeys {
		keys[k.KeyID] = k.PublicKey
	}
	return keys, nil
}
