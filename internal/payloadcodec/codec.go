// Package payloadcodec encrypts what the host writes to Temporal: a payload codec
// (go.temporal.io/sdk/converter.PayloadCodec) that seals every payload with AES-256-GCM
// under the first key of a keys file, with a fresh nonce per payload, and opens payloads
// sealed under any key of the file, so keys rotate without breaking runs in flight.
//
// A sealed payload carries, in its metadata, encoding "binary/encrypted" and the id of
// its key; its data is the 12-byte nonce followed by the sealed bytes of the original
// payload (protobuf), authenticated together with the key id. Payloads that are not
// sealed pass through Decode untouched: runs started before encryption was turned on
// stay readable.
//
// The keys file (WOP_PAYLOAD_KEYS_FILE) is YAML:
//
//	keys:
//	  - id: k2
//	    key: <base64 of 32 random bytes>   # encrypts
//	  - id: k1
//	    key: <base64 of 32 random bytes>   # still decrypts
//
// Search attributes are not payloads of the codec: they stay readable (Temporal indexes
// them), which is why the host keeps message text out of them.
package payloadcodec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"
)

const (
	// Encoding is the metadata encoding of a sealed payload.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key a payload is sealed under.
	MetadataKeyID = "encryption-key-id"
	// MetadataCipher names the cipher, for readers of the history.
	MetadataCipher = "encryption-cipher"
	cipherName     = "AES-256-GCM"
	// KeysFileEnv names the keys file in the environment of every wop process.
	KeysFileEnv = "WOP_PAYLOAD_KEYS_FILE"
	nonceSize   = 12
)

// Key is one key of a keys file.
type Key struct {
	ID  string
	Key []byte // 32 bytes
}

// Codec seals with its first key and opens with all of them.
type Codec struct {
	first string
	aeads map[string]cipher.AEAD
}

// New builds a codec from keys; the first key encrypts. Key ids must be unique and
// non-empty, keys 32 bytes.
func New(keys []Key) (*Codec, error) {
	if len(keys) == 0 {
		return nil, errors.New("payload keys: no keys")
	}
	c := &Codec{first: keys[0].ID, aeads: map[string]cipher.AEAD{}}
	for i, k := range keys {
		if strings.TrimSpace(k.ID) == "" {
			return nil, fmt.Errorf("payload keys: key %d has no id", i+1)
		}
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("payload keys: key id %q appears twice", k.ID)
		}
		if len(k.Key) != 32 {
			return nil, fmt.Errorf("payload keys: key %q is %d bytes; AES-256 needs 32", k.ID, len(k.Key))
		}
		block, err := aes.NewCipher(k.Key)
		if err != nil {
			return nil, fmt.Errorf("payload keys: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("payload keys: key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

// EncryptingKeyID is the id of the key new payloads are sealed under.
func (c *Codec) EncryptingKeyID() string { return c.first }

// Encode seals each payload under the first key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.first]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("payload codec: %w", err)
		}
		sealed := make([]byte, nonceSize, nonceSize+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return nil, fmt.Errorf("payload codec: nonce: %w", err)
		}
		sealed = aead.Seal(sealed, sealed[:nonceSize], plain, []byte(c.first))
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetadataKeyID:              []byte(c.first),
				MetadataCipher:             []byte(cipherName),
			},
			Data: sealed,
		}
	}
	return out, nil
}

// Decode opens sealed payloads and passes the others through.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("payload codec: a payload is sealed under key %q, which the payload keys file does not hold", id)
		}
		data := p.GetData()
		if len(data) < nonceSize+aead.Overhead() {
			return nil, fmt.Errorf("payload codec: a payload sealed under key %q is truncated", id)
		}
		plain, err := aead.Open(nil, data[:nonceSize], data[nonceSize:], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("payload codec: a payload sealed under key %q does not authenticate: %w", id, err)
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(plain, &orig); err != nil {
			return nil, fmt.Errorf("payload codec: %w", err)
		}
		out[i] = &orig
	}
	return out, nil
}

// DataConverter is Temporal's default data converter with c applied to every payload;
// the default converter when c is nil.
func DataConverter(c *Codec) converter.DataConverter {
	if c == nil {
		return converter.GetDefaultDataConverter()
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// keysFile is the YAML of a keys file.
type keysFile struct {
	Keys []yaml.Node `yaml:"keys"`
}

// Load reads a keys file. Errors name the file and the line.
func Load(path string) (*Codec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("payload keys file: %w", err)
	}
	return Parse(path, data)
}

// Parse reads the content of a keys file named path (for messages).
func Parse(path string, data []byte) (*Codec, error) {
	var f keysFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Keys) == 0 {
		return nil, fmt.Errorf("%s: no keys: want keys: [{id, key: <base64 of 32 bytes>}]", path)
	}
	keys := make([]Key, 0, len(f.Keys))
	seen := map[string]int{}
	for _, n := range f.Keys {
		var k struct {
			ID  string `yaml:"id"`
			Key string `yaml:"key"`
		}
		if err := n.Decode(&k); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n.Line, err)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k.Key))
		if err != nil {
			if raw, err = base64.RawURLEncoding.DecodeString(strings.TrimSpace(k.Key)); err != nil {
				return nil, fmt.Errorf("%s:%d: key %q is not base64", path, n.Line, k.ID)
			}
		}
		if line, dup := seen[k.ID]; dup {
			return nil, fmt.Errorf("%s:%d: key id %q is already used on line %d", path, n.Line, k.ID, line)
		}
		seen[k.ID] = n.Line
		key := Key{ID: k.ID, Key: raw}
		if _, err := New([]Key{key}); err != nil {
			return nil, fmt.Errorf("%s:%d: %s", path, n.Line, strings.TrimPrefix(err.Error(), "payload keys: "))
		}
		keys = append(keys, key)
	}
	c, err := New(keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "payload keys: "))
	}
	return c, nil
}
