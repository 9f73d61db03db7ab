package activities

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// TranscriptDigest is the digest a TranscriptRef carries of its transcript's messages
// [0, To): sha256 over their JSON encodings, one after another. The workflow computes it
// when it schedules a round and a TranscriptCache recomputes it over what it holds, so a
// cached transcript is used only when it is exactly the run's.
func TranscriptDigest(msgs []Message) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for i := range msgs {
		_ = enc.Encode(&msgs[i]) // a Message always encodes; the hash never fails
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// DefaultTranscriptCacheBytes bounds the transcripts a worker's TranscriptCache keeps.
const DefaultTranscriptCacheBytes = 16 << 20

// TranscriptCache is a TranscriptSource that keeps the transcripts of recent model rounds
// in this worker's memory. A round's TranscriptRef carries the messages added since the
// run's previous round (Tail) and a digest of the whole transcript: when the cache holds
// the earlier messages, it appends the tail, checks the digest, and answers without
// asking the workflow. Otherwise — the first round this worker sees of a run, a restart,
// a round that ran on another worker, a run reset in Temporal — it asks the source (the
// transcript query) and keeps the answer. Least recently used transcripts go first once
// the cache holds more than its byte bound.
type TranscriptCache struct {
	src      TranscriptSource
	maxBytes int

	mu    sync.Mutex
	order *list.List               // of *cachedTranscript, most recently used first
	items map[string]*list.Element // by cacheKey
	bytes int

	hits, misses atomic.Int64
}

type cachedTranscript struct {
	key    string
	msgs   []Message // messages [0, len) of the transcript
	digest string
	size   int
}

// NewTranscriptCache wraps src; maxBytes <= 0 means DefaultTranscriptCacheBytes.
func NewTranscriptCache(src TranscriptSource, maxBytes int) *TranscriptCache {
	if maxBytes <= 0 {
		maxBytes = DefaultTranscriptCacheBytes
	}
	return &TranscriptCache{src: src, maxBytes: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

// Stats returns how many rounds the cache answered and how many went to the source.
func (c *TranscriptCache) Stats() (hits, misses int64) { return c.hits.Load(), c.misses.Load() }

// Transcript implements TranscriptSource.
func (c *TranscriptCache) Transcript(ctx context.Context, ref TranscriptRef) ([]Message, error) {
	if ref.Digest == "" || ref.From < 0 || ref.From > ref.To {
		// A round scheduled without a digest (or a range the workflow will reject).
		c.misses.Add(1)
		return c.src.Transcript(ctx, ref)
	}
	key := ref.RunID + "\x00" + ref.Key
	if msgs, ok := c.lookup(key, ref); ok {
		c.hits.Add(1)
		return slices.Clone(msgs[ref.From:ref.To]), nil
	}
	c.misses.Add(1)
	full, err := c.src.Transcript(ctx, TranscriptRef{RunID: ref.RunID, Key: ref.Key, From: 0, To: ref.To})
	if err != nil {
		return nil, err
	}
	if len(full) != ref.To {
		return nil, fmt.Errorf("transcript %q of run %s: the workflow returned %d messages for [0, %d)", ref.Key, ref.RunID, len(full), ref.To)
	}
	if TranscriptDigest(full) == ref.Digest {
		c.store(key, full, ref.Digest)
	}
	return slices.Clone(full[ref.From:]), nil
}

// lookup returns messages [0, ref.To) when the cache holds them, or holds all but the
// ref's tail, and the digest matches.
func (c *TranscriptCache) lookup(key string, ref TranscriptRef) ([]Message, bool) {
	c.mu.Lock()
	el, ok := c.items[key]
	var e *cachedTranscript
	if ok {
		e = el.Value.(*cachedTranscript)
		c.order.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	switch {
	case len(e.msgs) == ref.To && e.digest == ref.Digest:
		return e.msgs, true // the same round again (a retry)
	case len(ref.Tail) > 0 && len(e.msgs)+len(ref.Tail) == ref.To:
		msgs := append(slices.Clip(e.msgs), ref.Tail...)
		if TranscriptDigest(msgs) != ref.Digest {
			return nil, false
		}
		c.store(key, msgs, ref.Digest)
		return msgs, true
	}
	return nil, false
}

func (c *TranscriptCache) store(key string, msgs []Message, digest string) {
	e := &cachedTranscript{key: key, msgs: msgs, digest: digest, size: messagesSize(msgs)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.bytes -= el.Value.(*cachedTranscript).size
		c.order.Remove(el)
		delete(c.items, key)
	}
	if e.size > c.maxBytes {
		return
	}
	c.items[key] = c.order.PushFront(e)
	c.bytes += e.size
	for c.bytes > c.maxBytes {
		last := c.order.Back()
		old := last.Value.(*cachedTranscript)
		c.order.Remove(last)
		delete(c.items, old.key)
		c.bytes -= old.size
	}
}

// messagesSize estimates the memory messages hold.
func messagesSize(msgs []Message) int {
	n := 0
	for i := range msgs {
		m := &msgs[i]
		n += 128 + len(m.Text) + len(m.ToolCallID) + len(m.Name) + len(m.State)
		for _, tc := range m.ToolCalls {
			n += 64 + len(tc.ID) + len(tc.Name) + len(tc.Args)
		}
	}
	return n
}

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
	if len(tail) > maxTailMessages || messagesSize(tail) > maxTailBytes {
		return nil
	}
	return slices.Clone(tail)
}

// Bounds of TranscriptTail.
const (
	maxTailMessages = 32
	maxTailBytes    = 16 << 10
)
