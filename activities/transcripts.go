package activities

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/convo"
)

// The transcript budget of a model round: a round sees the newest messages of its
// context that fit in DefaultContextBytes and DefaultContextMessages (Config.Context
// overrides them), starting at a user message. 384 KiB is about 96,000 tokens of
// English at four characters a token: within the context windows of the models this
// host talks to (128,000 tokens and more) with room for the system prompt, the tools
// and the reply. A context that fits is sent whole.
const (
	DefaultContextBytes    = 384 << 10
	DefaultContextMessages = 2000
)

// ContextBudget bounds the messages a model round sees. Zero fields take the defaults.
type ContextBudget struct {
	MaxBytes    int
	MaxMessages int
}

func (b ContextBudget) withDefaults() ContextBudget {
	if b.MaxBytes <= 0 {
		b.MaxBytes = DefaultContextBytes
	}
	if b.MaxMessages <= 0 {
		b.MaxMessages = DefaultContextMessages
	}
	return b
}

// windowStart decides where a round's window starts. msgs are messages [base,
// base+len(msgs)) of a transcript, the newest ones of the round's range [from, end).
// The window is the newest messages of [from, end) within maxBytes and maxMessages
// (unbounded when <= 0), moved forward to the first user message after the cut (a
// provider rejects a conversation that opens with a tool result), or back to the last
// user message before it when the newest turn alone exceeds the budget. ok is false
// when msgs do not reach back far enough to decide: the caller reads earlier messages
// and asks again.
func windowStart(msgs []convo.Message, base, from, maxBytes, maxMessages int) (start int, ok bool) {
	end := base + len(msgs)
	lo := max(base, from)
	cut, size := -1, 0
	for i := end; i > lo; i-- {
		size += convo.MessageBytes(&msgs[i-1-base])
		if (maxBytes > 0 && size > maxBytes) || (maxMessages > 0 && end-(i-1) > maxMessages) {
			cut = i
			break
		}
	}
	if cut < 0 {
		// Everything from lo fits: the window is the whole range, if msgs reach it.
		return lo, base <= from
	}
	for j := cut; j < end; j++ {
		if msgs[j-base].Role == convo.RoleUser {
			return j, true
		}
	}
	for j := cut - 1; j >= lo; j-- {
		if msgs[j-base].Role == convo.RoleUser {
			return j, true
		}
	}
	if base <= from {
		return cut, true // no user message in the whole range: the budget decides
	}
	return 0, false
}

// ClientTranscripts reads transcripts by querying the run's workflow (its Query,
// workflows.TranscriptPageQuery), the only owner of a run's messages. A run that continued as
// new holds its earlier messages in its earlier executions: the reader walks back
// through them (each page names the execution before it) until it has the round's
// window.
//
// An earlier execution Temporal no longer keeps (the namespace's retention passed
// since it closed) ends the walk: the round sees the messages that remain, the newest
// ones, as it would past its budget, and Logger (when set) says which were lost.
type ClientTranscripts struct {
	Client client.Client
	// Query is the name of the run workflow's query that answers a TranscriptPageRequest
	// with a TranscriptPage (workflows.TranscriptPageQuery): the workflow declares its
	// queries, and the process that assembles a worker names it here.
	Query  string
	Logger *slog.Logger
}

// clientPageBytes bounds each page ClientTranscripts asks for: well within Temporal's
// payload limit, also where a test lowers it.
const clientPageBytes = 256 << 10

// Transcript implements TranscriptSource.
func (c ClientTranscripts) Transcript(ctx context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
	if c.Client == nil {
		return nil, errors.New("transcript source has no Temporal client")
	}
	if c.Query == "" {
		return nil, errors.New("transcript source names no query of the run workflow (ClientTranscripts.Query)")
	}
	if ref.From < 0 || ref.From > ref.To {
		return nil, fmt.Errorf("transcript %q of run %s: range [%d, %d) is empty or negative", ref.Key, ref.RunID, ref.From, ref.To)
	}
	var (
		msgs     []convo.Message // messages [lo, ref.To)
		lo       = ref.To
		exec     string // the execution asked: "" is the run's current one
		hops     int
		budgeted = ref.MaxBytes > 0 || ref.MaxMessages > 0
	)
	for lo > ref.From {
		if budgeted {
			if start, ok := windowStart(msgs, lo, ref.From, ref.MaxBytes, ref.MaxMessages); ok {
				return msgs[start-lo:], nil
			}
		}
		page, err := c.page(ctx, ref, exec, lo)
		var gone *serviceerror.NotFound
		if exec != "" && errors.As(err, &gone) {
			if c.Logger != nil {
				c.Logger.Warn("Transcript messages are past the namespace's retention", "runId", ref.RunID, "transcript", ref.Key,
					"execution", exec, "lost", fmt.Sprintf("[%d, %d)", ref.From, lo))
			}
			break
		}
		if err != nil {
			return nil, err
		}
		if len(page.Messages) > 0 && page.Start+len(page.Messages) == lo {
			msgs = append(page.Messages, msgs...)
			lo = page.Start
			continue
		}
		if lo > page.Base || len(page.Earlier) == 0 {
			return nil, fmt.Errorf("transcript %q of run %s: execution %q holds messages [%d, %d) and names no earlier one; message %d is missing", ref.Key, ref.RunID, exec, page.Base, page.Len, lo-1)
		}
		if hops++; hops > maxExecutionHops {
			return nil, fmt.Errorf("transcript %q of run %s: message %d is more than %d executions back", ref.Key, ref.RunID, lo-1, maxExecutionHops)
		}
		exec = page.Earlier[0].RunID
	}
	if start, ok := windowStart(msgs, lo, ref.From, ref.MaxBytes, ref.MaxMessages); ok {
		return msgs[start-lo:], nil
	}
	return msgs, nil
}

// maxExecutionHops bounds the walk back through a run's executions (each is one
// query on a closed execution, which replays its history).
const maxExecutionHops = 1000

// page asks one execution for the newest messages before index to.
func (c ClientTranscripts) page(ctx context.Context, ref convo.TranscriptRef, exec string, to int) (*TranscriptPage, error) {
	req := TranscriptPageRequest{Key: ref.Key, From: ref.From, To: to, MaxBytes: clientPageBytes}
	if ref.MaxBytes > 0 {
		req.MaxBytes = min(clientPageBytes, ref.MaxBytes)
	}
	v, err := c.Client.QueryWorkflow(ctx, ref.RunID, exec, c.Query, req)
	if err != nil {
		return nil, fmt.Errorf("query %s on run %s (execution %q, transcript %q [%d,%d)): %w", c.Query, ref.RunID, exec, ref.Key, ref.From, to, err)
	}
	var page TranscriptPage
	if err := v.Get(&page); err != nil {
		return nil, fmt.Errorf("decode transcript page of run %s: %w", ref.RunID, err)
	}
	return &page, nil
}

// DefaultTranscriptCacheBytes bounds the transcripts a worker's TranscriptCache keeps.
const DefaultTranscriptCacheBytes = 16 << 20

// TranscriptCache is a TranscriptSource that keeps, per run and transcript, the window
// of messages its latest model round saw, with a margin of half the round's budget
// (so a round whose new messages are short, and whose window therefore reaches further
// back, still finds it in the cache). A round's convo.TranscriptRef carries the messages
// added since the run's previous round (Tail) and the digest of the whole transcript:
// when the cache holds the window up to where the tail starts (or a few messages short
// of it, which it reads from the source), it appends, checks the digest, cuts the
// window to the round's budget and answers without walking the run's executions.
// Otherwise — the first round this worker sees of a run, a restart, rounds that ran
// on another worker, a run reset in Temporal — it asks the source and keeps the
// answer. Least recently used windows go first once the cache holds more than its byte
// bound.
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
	start  int             // index of msgs[0] in the transcript
	msgs   []convo.Message // messages [start, start+len)
	digest string          // digest of messages [0, start+len)
	size   int
}

// maxCacheGap is how many messages the cache reads from the source to close the gap
// between its window and a round's tail; a larger gap is a miss.
const maxCacheGap = 64

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
func (c *TranscriptCache) Transcript(ctx context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
	if ref.Digest == "" || ref.From < 0 || ref.From > ref.To {
		// A round scheduled without a digest (or a range the workflow will reject).
		c.misses.Add(1)
		return c.src.Transcript(ctx, ref)
	}
	key := ref.RunID + "\x00" + ref.Key
	window, ok, err := c.extend(ctx, key, ref)
	if err != nil {
		return nil, err
	}
	if ok {
		c.hits.Add(1)
		return window, nil
	}
	c.misses.Add(1)
	msgs, err := c.src.Transcript(ctx, widened(ref))
	if err != nil {
		return nil, err
	}
	base := ref.To - len(msgs)
	c.store(key, base, msgs, ref.Digest)
	if start, ok := windowStart(msgs, base, ref.From, ref.MaxBytes, ref.MaxMessages); ok {
		msgs = msgs[start-base:]
	}
	return slices.Clone(msgs), nil
}

// widened is ref with half as much budget again: what the cache keeps.
func widened(ref convo.TranscriptRef) convo.TranscriptRef {
	ref.MaxBytes += ref.MaxBytes / 2
	ref.MaxMessages += ref.MaxMessages / 2
	return ref
}

// extend answers ref from the cached window of key when it can: the window, the
// messages between it and the tail (read from the source when there are few), and the
// tail together must have ref's digest and reach back as far as ref's budget needs.
func (c *TranscriptCache) extend(ctx context.Context, key string, ref convo.TranscriptRef) ([]convo.Message, bool, error) {
	c.mu.Lock()
	el, ok := c.items[key]
	var e *cachedTranscript
	if ok {
		e = el.Value.(*cachedTranscript)
		c.order.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	end := e.start + len(e.msgs)
	tailStart := ref.To - len(ref.Tail)
	var msgs []convo.Message
	switch {
	case end == ref.To:
		if e.digest != ref.Digest {
			return nil, false, nil
		}
		msgs = e.msgs // the same round again (a retry)
	case end < ref.To && tailStart <= end:
		added := ref.Tail[end-tailStart:]
		if convo.ExtendTranscriptDigest(e.digest, added...) != ref.Digest {
			return nil, false, nil
		}
		msgs = append(slices.Clip(e.msgs), added...)
	case end < tailStart && tailStart-end <= maxCacheGap:
		gap, err := c.src.Transcript(ctx, convo.TranscriptRef{RunID: ref.RunID, Key: ref.Key, From: end, To: tailStart})
		if err != nil {
			return nil, false, err
		}
		added := append(gap, ref.Tail...)
		if len(gap) != tailStart-end || convo.ExtendTranscriptDigest(e.digest, added...) != ref.Digest {
			return nil, false, nil
		}
		msgs = append(slices.Clip(e.msgs), added...)
	default:
		return nil, false, nil
	}
	start, ok := windowStart(msgs, e.start, ref.From, ref.MaxBytes, ref.MaxMessages)
	if !ok {
		return nil, false, nil // the round needs earlier messages than the window holds
	}
	w := widened(ref)
	keep, ok := windowStart(msgs, e.start, w.From, w.MaxBytes, w.MaxMessages)
	if !ok {
		keep = e.start
	}
	c.store(key, keep, msgs[keep-e.start:], ref.Digest)
	return slices.Clone(msgs[start-e.start:]), true, nil
}

func (c *TranscriptCache) store(key string, start int, msgs []convo.Message, digest string) {
	e := &cachedTranscript{key: key, start: start, msgs: msgs, digest: digest, size: convo.MessagesSize(msgs)}
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
