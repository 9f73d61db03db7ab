package convo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// ExtendTranscriptDigest returns the digest of a transcript's messages [0, n+len(msgs))
// from the digest of its messages [0, n): each message folds its JSON encoding into the
// previous digest with SHA-256. The digest of no messages is "". The workflow extends
// it as it appends messages and a TranscriptRef carries it, so a TranscriptCache can
// check that the messages it holds plus a round's tail are exactly the run's, without
// either side keeping the whole transcript.
func ExtendTranscriptDigest(digest string, msgs ...Message) string {
	for i := range msgs {
		h := sha256.New()
		h.Write([]byte(digest))
		_ = json.NewEncoder(h).Encode(&msgs[i]) // a Message always encodes; the hash never fails
		digest = hex.EncodeToString(h.Sum(nil)[:16])
	}
	return digest
}

// TranscriptDigest is the digest of a whole transcript (ExtendTranscriptDigest from "").
func TranscriptDigest(msgs []Message) string { return ExtendTranscriptDigest("", msgs...) }

// TranscriptTail returns the messages a round's TranscriptRef carries inline: those
// added since the previous assistant message, that message included (what the run added
// since its previous round), or none when they exceed maxTailMessages or maxTailBytes
// (the worker then asks the workflow, and history stays small).
func TranscriptTail(msgs []Message) []Message {
	start := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			start = i
			break
		}
	}
	tail := msgs[start:]
	if len(tail) > maxTailMessages || MessagesSize(tail) > maxTailBytes {
		return nil
	}
	return slices.Clone(tail)
}

// Bounds of TranscriptTail.
const (
	maxTailMessages = 32
	maxTailBytes    = 16 << 10
)

// TranscriptRef points at the messages a model round must see, without carrying them
// all: the activity reads them from the run (a query on the run's workflow), so the
// history of a run grows by a constant amount per round instead of by the whole
// transcript. Only the messages added since the run's previous round travel (Tail), so a
// worker that keeps the transcript from earlier rounds (TranscriptCache) needs no query.
type TranscriptRef struct {
	RunID string `json:"runId"` // workflow id
	// Key identifies one transcript of the run (a conversation, or one state's context
	// when a transient state resets it).
	Key string `json:"key"`
	// The round sees messages [From, To) of that transcript. From moves forward when a
	// transient state resets its context; messages are never rewritten.
	From int `json:"from"`
	To   int `json:"to"`
	// Tail is messages [To-len(Tail), To) of the transcript (TranscriptTail), and Digest
	// the TranscriptDigest of messages [0, To). Rounds scheduled before they existed, and
	// queries, carry neither.
	Tail   []Message `json:"tail,omitempty"`
	Digest string    `json:"digest,omitempty"`
	// MaxBytes and MaxMessages, when > 0, bound what a TranscriptSource returns: the
	// newest messages of [From, To) within the bounds, starting at a user message
	// (TranscriptBudget). The ModelRound activity sets them; the workflow does not.
	MaxBytes    int `json:"maxBytes,omitempty"`
	MaxMessages int `json:"maxMessages,omitempty"`
}
