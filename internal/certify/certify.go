// Package certify holds the host's certification key and the OpenWOP certification
// bundle v3 it signs (RFC 0168 §E; spec/v2/schemas/certification-bundle.schema.json):
// the Ed25519 key (a PKCS#8 PEM file, never in history or logs) whose public half
// discovery publishes in signingKeys[], the canonical JSON and the witness digest the
// bundle's attestation covers, and Sign and Verify.
//
// The attestation is an Ed25519 signature over the canonical JSON (keys sorted at every
// level, no whitespace) of exactly {witnessSha256, host.build, suite.version,
// discovery.sha256}; witnessSha256 is the SHA-256 of the canonical JSON of the
// requirement rows sorted by id (with the declared relaxations when there are any).
package certify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultKeyID names the host's key in signingKeys[] when no other id is given.
const DefaultKeyID = "wop-bundle-1"

// b64 is base64url without padding: a public key is 43 characters, a signature 86.
var b64 = base64.RawURLEncoding

// Key is the host's signing key.
type Key struct {
	ID      string
	private ed25519.PrivateKey
}

// Public is the raw 32-byte public key.
func (k *Key) Public() []byte { return []byte(k.private.Public().(ed25519.PublicKey)) }

// PublicBase64 is the public key as signingKeys[] publishes it (43 characters).
func (k *Key) PublicBase64() string { return b64.EncodeToString(k.Public()) }

// LoadKey reads a PKCS#8 PEM Ed25519 private key.
func LoadKey(path, id string) (*Key, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return ParseKey(path, raw, id)
}

// ParseKey reads the PEM content of a key file named path (for messages).
func ParseKey(path string, raw []byte, id string) (*Key, error) {
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PKCS#8 PEM private key (want a \"PRIVATE KEY\" block, as `openssl genpkey -algorithm ed25519` writes)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: the key is %T; certification bundles are signed with Ed25519", path, k)
	}
	if id == "" {
		id = DefaultKeyID
	}
	return &Key{ID: id, private: priv}, nil
}

// EnsureKey loads the key at path, or makes one there (mode 0600) when the file does
// not exist. made reports whether it was made.
func EnsureKey(path, id string) (key *Key, made bool, err error) {
	if _, err := os.Stat(path); err == nil {
		key, err := LoadKey(path, id)
		return key, false, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	key, err = LoadKey(path, id)
	return key, true, err
}

// Canonical is value's canonical JSON: object keys sorted at every level, no
// whitespace, strings and numbers as JSON.stringify writes them. value is any JSON
// document (decoded with UseNumber, or built of maps, slices, strings, bools, nil and
// json.Number or float64).
func Canonical(value any) ([]byte, error) {
	var buf bytes.Buffer
	if err := canonical(&buf, value); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func canonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		writeString(buf, x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("canonical JSON: number %s: %w", x, err)
		}
		buf.WriteString(formatNumber(f))
	case float64:
		buf.WriteString(formatNumber(x))
	case int:
		buf.WriteString(strconv.Itoa(x))
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := canonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // UTF-16 order equals byte order for the ASCII keys bundles hold
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := canonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		// A typed value: through its JSON form.
		raw, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("canonical JSON: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var generic any
		if err := dec.Decode(&generic); err != nil {
			return fmt.Errorf("canonical JSON: %w", err)
		}
		return canonical(buf, generic)
	}
	return nil
}

// formatNumber writes a number as JSON.stringify does for the values bundles hold
// (integers and short decimals).
func formatNumber(f float64) string {
	if f == float64(int64(f)) && f < 1e21 && f > -1e21 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// writeString writes s as JSON.stringify does: only ", \ and control characters are
// escaped (HTML characters and non-ASCII stay as they are, unlike encoding/json).
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			buf.WriteString(`\"`)
		case r == '\\':
			buf.WriteString(`\\`)
		case r == '\n':
			buf.WriteString(`\n`)
		case r == '\r':
			buf.WriteString(`\r`)
		case r == '\t':
			buf.WriteString(`\t`)
		case r == '\b':
			buf.WriteString(`\b`)
		case r == '\f':
			buf.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(buf, `\u%04x`, r)
		case r == utf8.RuneError:
			buf.WriteString(`\ufffd`)
		default:
			buf.WriteRune(r)
		}
	}
	buf.WriteByte('"')
}

// SignatureOver is what the attestation covers, in the bundle's signature.over.
var SignatureOver = []string{"witnessSha256", "host.build", "suite.version", "discovery.sha256"}

// Signature is a bundle's signature block.
type Signature struct {
	Alg   string   `json:"alg"`
	KeyID string   `json:"keyId"`
	Sig   string   `json:"sig"`
	Over  []string `json:"over"`
}

// attestation is the bytes a bundle's signature covers, read from the bundle document.
func attestation(bundle map[string]any) ([]byte, error) {
	host, _ := bundle["host"].(map[string]any)
	suite, _ := bundle["suite"].(map[string]any)
	disc, _ := bundle["discovery"].(map[string]any)
	witness, _ := bundle["witnessSha256"].(string)
	build := host["build"]
	version := suite["version"]
	sum := disc["sha256"]
	if witness == "" || build == nil || version == nil || sum == nil {
		return nil, errors.New("bundle: witnessSha256, host.build, suite.version and discovery.sha256 are required")
	}
	return Canonical(map[string]any{"witnessSha256": witness, "host.build": build, "suite.version": version, "discovery.sha256": sum})
}

// WitnessDigest is the SHA-256 (hex) of the requirement rows, sorted by id, and of the
// declared relaxations when there are any.
func WitnessDigest(rows []map[string]any, relaxations []any) (string, error) {
	sorted := make([]map[string]any, len(rows))
	copy(sorted, rows)
	sort.SliceStable(sorted, func(i, j int) bool { return fmt.Sprint(sorted[i]["id"]) < fmt.Sprint(sorted[j]["id"]) })
	canon := make([]any, len(sorted))
	for i, r := range sorted {
		row := map[string]any{"id": r["id"], "scenario": r["scenario"], "result": r["result"]}
		for _, k := range []string{"assertions", "detail", "evidence"} {
			if v, ok := r[k]; ok {
				row[k] = v
			}
		}
		canon[i] = row
	}
	var preimage any = canon
	if len(relaxations) > 0 {
		preimage = map[string]any{"rows": canon, "relaxations": relaxations}
	}
	raw, err := Canonical(preimage)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// Sign sets the bundle's signature under k.
func (k *Key) Sign(bundle map[string]any) error {
	msg, err := attestation(bundle)
	if err != nil {
		return err
	}
	bundle["signature"] = map[string]any{"alg": "ed25519", "keyId": k.ID, "sig": b64.EncodeToString(ed25519.Sign(k.private, msg)), "over": stringsAny(SignatureOver)}
	return nil
}

// Verify checks the bundle's signature under the raw public key published as keyID.
func Verify(bundle map[string]any, keyID string, public []byte) error {
	sig, _ := bundle["signature"].(map[string]any)
	if sig == nil {
		return errors.New("bundle: no signature")
	}
	if sig["alg"] != "ed25519" {
		return fmt.Errorf("bundle: signature alg %v, want ed25519", sig["alg"])
	}
	if sig["keyId"] != keyID {
		return fmt.Errorf("bundle: signed under key %v, not %q", sig["keyId"], keyID)
	}
	over, _ := json.Marshal(sig["over"])
	want, _ := json.Marshal(SignatureOver)
	if !bytes.Equal(over, want) {
		return fmt.Errorf("bundle: signature.over is %s, want %s", over, want)
	}
	raw, err := b64.DecodeString(fmt.Sprint(sig["sig"]))
	if err != nil || len(raw) != ed25519.SignatureSize {
		return errors.New("bundle: signature.sig is not 86 base64url characters")
	}
	if len(public) != ed25519.PublicKeySize {
		return fmt.Errorf("bundle: a public key of %d bytes; Ed25519 keys are 32", len(public))
	}
	msg, err := attestation(bundle)
	if err != nil {
		return err
	}
	if !ed25519.Verify(ed25519.PublicKey(public), msg, raw) {
		return errors.New("bundle: the attestation does not verify under the host key")
	}
	return nil
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// resultKeys are the bundle's results.totals keys, by row result.
var resultKeys = map[string]string{"executed-pass": "executedPass", "executed-fail": "executedFail", "skipped": "skipped", "inapplicable": "inapplicable", "blocked": "blocked"}

// rowsOf reads results.requirements.
func rowsOf(bundle map[string]any) ([]map[string]any, error) {
	results, _ := bundle["results"].(map[string]any)
	list, ok := results["requirements"].([]any)
	if !ok {
		return nil, errors.New("bundle: results.requirements is not a list")
	}
	rows := make([]map[string]any, 0, len(list))
	for i, e := range list {
		r, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("bundle: results.requirements[%d] is not an object", i)
		}
		if _, known := resultKeys[fmt.Sprint(r["result"])]; !known {
			return nil, fmt.Errorf("bundle: results.requirements[%d] (%v): unknown result %v", i, r["id"], r["result"])
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// assertionsOf is a row's assertion count (0 when absent).
func assertionsOf(r map[string]any) int64 {
	switch n := r["assertions"].(type) {
	case json.Number:
		v, _ := n.Int64()
		return v
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

// derived is what a bundle's rows determine: totals, assertion count, witness digest
// and the non-pass detail.
func derived(bundle map[string]any) (totals map[string]any, assertions int64, witness string, nonPass []any, err error) {
	rows, err := rowsOf(bundle)
	if err != nil {
		return nil, 0, "", nil, err
	}
	counts := map[string]int{}
	for _, k := range resultKeys {
		counts[k] = 0
	}
	for _, r := range rows {
		counts[resultKeys[fmt.Sprint(r["result"])]]++
		assertions += assertionsOf(r)
		if r["result"] != "executed-pass" {
			nonPass = append(nonPass, map[string]any{"id": r["id"], "result": r["result"], "reason": r["detail"]})
		}
	}
	totals = map[string]any{}
	for k, n := range counts {
		totals[k] = n
	}
	host, _ := bundle["host"].(map[string]any)
	relaxations, _ := host["relaxations"].([]any)
	witness, err = WitnessDigest(rows, relaxations)
	return totals, assertions, witness, nonPass, err
}

// Complete sets what the rows determine: results.totals, assertionCount,
// witnessSha256 and, when a row is not an executed pass, detail.nonPass.
func Complete(bundle map[string]any) error {
	totals, assertions, witness, nonPass, err := derived(bundle)
	if err != nil {
		return err
	}
	bundle["results"].(map[string]any)["totals"] = totals
	bundle["assertionCount"] = assertions
	bundle["witnessSha256"] = witness
	if len(nonPass) > 0 {
		bundle["detail"] = map[string]any{"nonPass": nonPass}
	}
	return nil
}

// Check verifies a bundle as a reader does, against the public keys (base64url, by id)
// the host publishes: the signature, the witness digest, totals and assertion count,
// a reason on every row that is not an executed pass, assertions in every pass, a
// build. It returns what is wrong (nothing: the bundle verifies).
func Check(bundle map[string]any, published map[string]string) []string {
	var problems []string
	if bundle["bundleVersion"] != "3" {
		problems = append(problems, fmt.Sprintf("bundleVersion is %v, want \"3\"", bundle["bundleVersion"]))
	}
	totals, assertions, witness, nonPass, err := derived(bundle)
	if err != nil {
		return append(problems, err.Error())
	}
	rows, _ := rowsOf(bundle)
	for _, r := range rows {
		if detail, _ := r["detail"].(string); r["result"] != "executed-pass" && strings.TrimSpace(detail) == "" {
			problems = append(problems, fmt.Sprintf("%v: %v recorded without a reason", r["id"], r["result"]))
		}
		if r["result"] == "executed-pass" && assertionsOf(r) <= 0 {
			problems = append(problems, fmt.Sprintf("%v: an executed pass with no assertions witnesses nothing", r["id"]))
		}
	}
	got, _ := bundle["results"].(map[string]any)["totals"].(map[string]any)
	for k, want := range totals {
		if fmt.Sprint(got[k]) != fmt.Sprint(want) {
			problems = append(problems, fmt.Sprintf("results.totals.%s is %v but the rows count %v", k, got[k], want))
		}
	}
	if fmt.Sprint(bundle["assertionCount"]) != fmt.Sprint(assertions) {
		problems = append(problems, fmt.Sprintf("assertionCount is %v but the rows sum to %d", bundle["assertionCount"], assertions))
	}
	if bundle["witnessSha256"] != witness {
		problems = append(problems, fmt.Sprintf("witnessSha256 %v is not the digest of the rows (%s)", bundle["witnessSha256"], witness))
	}
	if len(nonPass) > 0 && bundle["detail"] == nil {
		problems = append(problems, fmt.Sprintf("%d rows are not executed passes and there is no detail block", len(nonPass)))
	}
	host, _ := bundle["host"].(map[string]any)
	if build, _ := host["build"].(map[string]any); build["kind"] == nil || build["id"] == nil {
		problems = append(problems, "host.build.{kind,id} is missing: a bundle names the build it measured")
	}
	sig, _ := bundle["signature"].(map[string]any)
	keyID := fmt.Sprint(sig["keyId"])
	pub, ok := published[keyID]
	if !ok {
		return append(problems, fmt.Sprintf("the bundle is signed under %q, which the host's signingKeys[] does not publish: it attests integrity only", keyID))
	}
	raw, err := b64.DecodeString(pub)
	if err != nil {
		return append(problems, fmt.Sprintf("signingKeys[%s].publicKey is not base64url", keyID))
	}
	if err := Verify(bundle, keyID, raw); err != nil {
		problems = append(problems, err.Error())
	}
	return problems
}
