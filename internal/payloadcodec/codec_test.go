package payloadcodec

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestSealsAndOpensUnderRotatedKeys(t *testing.T) {
	old, err := New([]Key{{ID: "k1", Key: key(1)}})
	require.NoError(t, err)
	dc := DataConverter(old)
	p, err := dc.ToPayload(map[string]string{"message": "refund order 1042"})
	require.NoError(t, err)
	require.Equal(t, Encoding, string(p.Metadata[converter.MetadataEncoding]))
	require.Equal(t, "k1", string(p.Metadata[MetadataKeyID]))
	require.NotContains(t, string(p.Data), "refund", "the message is readable in the sealed payload")

	// A rotated file: k2 encrypts, k1 still opens what was sealed before.
	rotated, err := New([]Key{{ID: "k2", Key: key(2)}, {ID: "k1", Key: key(1)}})
	require.NoError(t, err)
	var got map[string]string
	require.NoError(t, DataConverter(rotated).FromPayload(p, &got))
	require.Equal(t, "refund order 1042", got["message"])
	p2, err := DataConverter(rotated).ToPayload("x")
	require.NoError(t, err)
	require.Equal(t, "k2", string(p2.Metadata[MetadataKeyID]))

	// The old file cannot open what k2 sealed, and says which key is missing.
	var s string
	err = DataConverter(old).FromPayload(p2, &s)
	require.ErrorContains(t, err, `key "k2"`)
}

func TestEveryPayloadHasItsOwnNonce(t *testing.T) {
	c, err := New([]Key{{ID: "k1", Key: key(1)}})
	require.NoError(t, err)
	in := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"same"`)}
	out, err := c.Encode([]*commonpb.Payload{in, in})
	require.NoError(t, err)
	require.NotEqual(t, out[0].Data[:nonceSize], out[1].Data[:nonceSize])
	require.NotEqual(t, out[0].Data, out[1].Data)
}

func TestTamperedPayloadsDoNotOpen(t *testing.T) {
	c, err := New([]Key{{ID: "k1", Key: key(1)}})
	require.NoError(t, err)
	out, err := c.Encode([]*commonpb.Payload{{Data: []byte("hello")}})
	require.NoError(t, err)

	flipped := &commonpb.Payload{Metadata: out[0].Metadata, Data: bytes.Clone(out[0].Data)}
	flipped.Data[len(flipped.Data)-1] ^= 1
	_, err = c.Decode([]*commonpb.Payload{flipped})
	require.ErrorContains(t, err, "does not authenticate")

	// The key id is authenticated too: relabelling a payload under another key of the
	// same file fails.
	two, err := New([]Key{{ID: "k1", Key: key(1)}, {ID: "k9", Key: key(1)}})
	require.NoError(t, err)
	relabelled := &commonpb.Payload{Metadata: map[string][]byte{
		converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte("k9"),
	}, Data: out[0].Data}
	_, err = two.Decode([]*commonpb.Payload{relabelled})
	require.ErrorContains(t, err, "does not authenticate")

	_, err = c.Decode([]*commonpb.Payload{{Metadata: out[0].Metadata, Data: out[0].Data[:5]}})
	require.ErrorContains(t, err, "truncated")
}

func TestPlainPayloadsPassThrough(t *testing.T) {
	c, err := New([]Key{{ID: "k1", Key: key(1)}})
	require.NoError(t, err)
	plain, err := converter.GetDefaultDataConverter().ToPayload("written before encryption")
	require.NoError(t, err)
	var s string
	require.NoError(t, DataConverter(c).FromPayload(plain, &s))
	require.Equal(t, "written before encryption", s)
}

func TestKeysFileErrorsNameTheLine(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(key(7))
	c, err := Parse("keys.yaml", []byte("keys:\n  - id: a\n    key: "+good+"\n  - id: b\n    key: "+good+"\n"))
	require.NoError(t, err)
	require.Equal(t, "a", c.EncryptingKeyID())

	for _, tc := range []struct{ file, want string }{
		{"keys: []\n", "keys.yaml: no keys"},
		{"keys:\n  - id: a\n    key: " + good + "\n  - id: a\n    key: " + good + "\n", `keys.yaml:4: key id "a" is already used on line 2`},
		{"keys:\n  - id: a\n    key: c2hvcnQ=\n", `keys.yaml:2: key "a" is 5 bytes; AES-256 needs 32`},
		{"keys:\n  - id: a\n    key: '%%%'\n", `keys.yaml:2: key "a" is not base64`},
		{"keys:\n  - key: " + good + "\n", "keys.yaml:2: key 1 has no id"},
		{"keys: [\n", "keys.yaml: yaml:"},
	} {
		_, err := Parse("keys.yaml", []byte(tc.file))
		require.Error(t, err, tc.file)
		require.True(t, strings.Contains(err.Error(), tc.want), "%q: got %v", tc.file, err)
	}
}
