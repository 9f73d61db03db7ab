package protocol

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Run ids: "r_" + 26 Crockford base32 characters. The API mints them on create, and the
// agents worker for the runs a caller workflow starts (worker/agents.go), so every run
// id reads the same whoever started the run.

// Crockford base32 alphabet for ULID-like ids.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewRunID returns "r_" + 26 Crockford base32 characters: 48 bits of milliseconds then
// 80 random bits, so ids sort by creation time.
func NewRunID(now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := rand.Read(b[6:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return "r_" + encode128(b)
}

// IDDigest is the hex SHA-256 of parts, each ended by a NUL byte: the stable part of
// the ids a caller's workflow and the agents worker derive from recorded values (update
// ids, helper workflow ids), the same on every replay.
func IDDigest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DerivedRunID maps a digest to a run id of the same shape as NewRunID.
func DerivedRunID(digest [32]byte) string {
	var b [16]byte
	copy(b[:], digest[:16])
	return "r_" + encode128(b)
}

func encode128(b [16]byte) string {
	// 128 bits -> 26 base32 chars (130 bits, top 2 bits zero).
	out := make([]byte, 26)
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}
