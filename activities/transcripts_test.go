package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wop-dev/wop/convo"
)

// runTranscripts is a TranscriptSource serving one run's transcript, as the workflow's
// query does, and recording what it was asked.
type runTranscripts struct {
	msgs  []convo.Message
	asked []convo.TranscriptRef
}

func (s *runTranscripts) Transcript(_ context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
	s.asked = append(s.asked, ref)
	if ref.From < 0 || ref.To > len(s.msgs) || ref.From > ref.To {
		return nil, errors.New("range out of bounds")
	}
	return append([]convo.Message(nil), s.msgs[ref.From:ref.To]...), nil
}

// roundRef is the convo.TranscriptRef the workflow schedules a round with.
func roundRef(msgs []convo.Message, from int) convo.TranscriptRef {
	return convo.TranscriptRef{RunID: "r1", Key: "agent", From: from, To: len(msgs), Tail: convo.TranscriptTail(msgs), Digest: convo.TranscriptDigest(msgs)}
}

func texts(msgs []convo.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s:%s|", m.Role, m.Text)
	}
	return b.String()
}

func TestTranscriptCacheAnswersLaterRoundsFromTheTail(t *testing.T) {
	src := &runTranscripts{msgs: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}}
	c := NewTranscriptCache(src, 0)
	ctx := context.Background()

	got, err := c.Transcript(ctx, roundRef(src.msgs, 0))
	if err != nil || texts(got) != texts(src.msgs) {
		t.Fatalf("round 1: %q, %v", texts(got), err)
	}
	if len(src.asked) != 1 || src.asked[0].From != 0 || src.asked[0].To != 1 {
		t.Fatalf("round 1 asks the workflow for [0, 1): %+v", src.asked)
	}

	// The run adds the reply and the next user message; round 2 carries them as tail.
	src.msgs = append(src.msgs, convo.Message{Role: convo.RoleAssistant, Text: "hello"}, convo.Message{Role: convo.RoleUser, Text: "order 42?"})
	ref := roundRef(src.msgs, 0)
	if len(ref.Tail) != 2 {
		t.Fatalf("tail = %q, want the reply and the new message", texts(ref.Tail))
	}
	got, err = c.Transcript(ctx, ref)
	if err != nil || texts(got) != texts(src.msgs) {
		t.Fatalf("round 2: %q, %v; want %q", texts(got), err, texts(src.msgs))
	}
	if len(src.asked) != 1 {
		t.Fatalf("round 2 asked the workflow: %+v", src.asked)
	}
	// A retry of round 2 and a round whose context starts later are answered too.
	got, err = c.Transcript(ctx, convo.TranscriptRef{RunID: "r1", Key: "agent", From: 1, To: 3, Tail: ref.Tail, Digest: ref.Digest})
	if err != nil || texts(got) != texts(src.msgs[1:]) {
		t.Fatalf("retry from 1: %q, %v", texts(got), err)
	}
	if hits, misses := c.Stats(); hits != 2 || misses != 1 || len(src.asked) != 1 {
		t.Fatalf("hits %d misses %d asked %d, want 2, 1, 1", hits, misses, len(src.asked))
	}
}

func TestTranscriptCacheAsksWhenItsCopyIsNotTheRuns(t *testing.T) {
	src := &runTranscripts{msgs: []convo.Message{{Role: convo.RoleUser, Text: "hi"}, {Role: convo.RoleAssistant, Text: "hello"}}}
	c := NewTranscriptCache(src, 0)
	ctx := context.Background()
	if _, err := c.Transcript(ctx, roundRef(src.msgs, 0)); err != nil {
		t.Fatal(err)
	}
	// The run was reset in Temporal and went another way: same length before the tail,
	// different messages. The digest catches it and the workflow answers.
	src.msgs = []convo.Message{{Role: convo.RoleUser, Text: "hi"}, {Role: convo.RoleAssistant, Text: "something else"}, {Role: convo.RoleUser, Text: "next"}}
	ref := roundRef(src.msgs, 0)
	ref.Tail = ref.Tail[1:] // only "next": the cached two messages would precede it
	got, err := c.Transcript(ctx, ref)
	if err != nil || texts(got) != texts(src.msgs) {
		t.Fatalf("after a reset: %q, %v; want %q", texts(got), err, texts(src.msgs))
	}
	if len(src.asked) != 2 {
		t.Fatalf("asked %d times, want 2 (the digest did not match the cached copy)", len(src.asked))
	}
	// A round that carries no digest (scheduled before digests) goes to the workflow as is.
	plain := convo.TranscriptRef{RunID: "r1", Key: "agent", From: 1, To: 2}
	if got, err := c.Transcript(ctx, plain); err != nil || len(got) != 1 {
		t.Fatalf("plain ref: %v, %v", got, err)
	}
	if last := src.asked[len(src.asked)-1]; last.From != 1 || last.To != 2 || last.Digest != "" {
		t.Fatalf("plain ref asked as %+v", last)
	}
	// A workflow error reaches the caller.
	if _, err := c.Transcript(ctx, convo.TranscriptRef{RunID: "r1", Key: "agent", To: 9, Digest: "x"}); err == nil {
		t.Fatal("want the workflow's error for an out-of-range transcript")
	}
}

func TestTranscriptCacheEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("x", 1000)
	srcs := map[string]*runTranscripts{}
	multi := sourceFunc(func(ctx context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
		return srcs[ref.RunID].Transcript(ctx, ref)
	})
	c := NewTranscriptCache(multi, 2500) // room for two transcripts of about 1.1 KB
	for _, run := range []string{"a", "b", "c"} {
		srcs[run] = &runTranscripts{msgs: []convo.Message{{Role: convo.RoleUser, Text: big}}}
		ref := roundRef(srcs[run].msgs, 0)
		ref.RunID = run
		if _, err := c.Transcript(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	again := func(run string) int {
		ref := roundRef(srcs[run].msgs, 0)
		ref.RunID = run
		n := len(srcs[run].asked)
		if _, err := c.Transcript(ctx, ref); err != nil {
			t.Fatal(err)
		}
		return len(srcs[run].asked) - n
	}
	if again("c") != 0 || again("b") != 0 {
		t.Error("the two most recent transcripts should be cached")
	}
	if again("a") != 1 {
		t.Error("the oldest transcript should have been evicted")
	}
}

type sourceFunc func(context.Context, convo.TranscriptRef) ([]convo.Message, error)

func (f sourceFunc) Transcript(ctx context.Context, ref convo.TranscriptRef) ([]convo.Message, error) {
	return f(ctx, ref)
}

// conversation builds n turns of a user message and an assistant reply, each text
// size bytes long.
func conversation(n, size int) []convo.Message {
	var msgs []convo.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs,
			convo.Message{Role: convo.RoleUser, Text: fmt.Sprintf("u%d %s", i, strings.Repeat("u", size))},
			convo.Message{Role: convo.RoleAssistant, Text: fmt.Sprintf("a%d %s", i, strings.Repeat("a", size))})
	}
	return msgs
}

func TestWindowStartKeepsTheNewestMessagesFromAUserMessage(t *testing.T) {
	msgs := conversation(10, 1000) // 20 messages of about 1.1 KB
	one := convo.MessageBytes(&msgs[0])
	// Everything fits: the whole range.
	if start, ok := windowStart(msgs, 0, 0, 0, 0); !ok || start != 0 {
		t.Fatalf("unbounded: %d %v", start, ok)
	}
	if start, ok := windowStart(msgs, 0, 4, 100*one, 0); !ok || start != 4 {
		t.Fatalf("a range that fits: %d %v", start, ok)
	}
	// Five messages fit: the cut falls on an assistant message, the window starts at
	// the user message after it.
	start, ok := windowStart(msgs, 0, 0, 5*one+one/2, 0)
	if !ok || start != 16 || msgs[start].Role != convo.RoleUser {
		t.Fatalf("byte budget: start %d %v, want 16 (a user message)", start, ok)
	}
	if start, ok := windowStart(msgs, 0, 0, 0, 3); !ok || start != 18 {
		t.Fatalf("message budget: %d %v, want 18", start, ok)
	}
	// The newest turn alone is larger than the budget: it is sent whole.
	big := append(conversation(2, 10), convo.Message{Role: convo.RoleUser, Text: strings.Repeat("x", 5000)}, convo.Message{Role: convo.RoleAssistant, Text: "ok"})
	if start, ok := windowStart(big, 0, 0, 1000, 0); !ok || start != 4 {
		t.Fatalf("oversized turn: %d %v, want 4", start, ok)
	}
	// Messages that start after `from` and fit the budget cannot decide: read more.
	if _, ok := windowStart(msgs[10:], 10, 0, 100*one, 0); ok {
		t.Fatal("a window that may reach further back must ask for earlier messages")
	}
	if start, ok := windowStart(msgs[10:], 10, 0, 5*one+one/2, 0); !ok || start != 16 {
		t.Fatalf("the budget is used up within the messages read: %d %v", start, ok)
	}
}

func TestTranscriptCacheKeepsTheBudgetWindow(t *testing.T) {
	src := &runTranscripts{msgs: conversation(50, 1000)}
	c := NewTranscriptCache(src, 0)
	ctx := context.Background()
	budget := 10 * convo.MessageBytes(&src.msgs[0])
	ref := roundRef(src.msgs, 0)
	ref.MaxBytes = budget
	// The source answers the first round, asked for half the budget again (what the
	// cache keeps); the round gets the budget's window.
	got, err := c.Transcript(ctx, ref)
	if err != nil || len(got) > 10 || got[0].Role != convo.RoleUser || got[len(got)-1].Text != src.msgs[99].Text {
		t.Fatalf("first round: %d messages, %v", len(got), err)
	}
	if src.asked[0].MaxBytes != budget*3/2 {
		t.Fatalf("the source was asked for %d bytes, want %d", src.asked[0].MaxBytes, budget*3/2)
	}
	// The next round: the reply and the next message travel as tail.
	src.msgs = append(src.msgs, convo.Message{Role: convo.RoleAssistant, Text: "reply"}, convo.Message{Role: convo.RoleUser, Text: "next"})
	ref = roundRef(src.msgs, 0)
	ref.MaxBytes = budget
	got, err = c.Transcript(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.asked) != 1 {
		t.Fatalf("round 2 asked the source: %+v", src.asked[1:])
	}
	if got[0].Role != convo.RoleUser || got[len(got)-1].Text != "next" || len(got) > 11 {
		t.Fatalf("round 2 window: %d messages from %q to %q", len(got), got[0].Text, got[len(got)-1].Text)
	}
	// Rounds that ran elsewhere added a few messages: the cache reads just those.
	src.msgs = append(src.msgs, conversation(3, 10)...)
	src.msgs = append(src.msgs, convo.Message{Role: convo.RoleAssistant, Text: "r2"}, convo.Message{Role: convo.RoleUser, Text: "again"})
	ref = roundRef(src.msgs, 0)
	ref.MaxBytes = budget
	got, err = c.Transcript(ctx, ref)
	if err != nil || got[len(got)-1].Text != "again" {
		t.Fatalf("round 3: %v", err)
	}
	last := src.asked[len(src.asked)-1]
	if len(src.asked) != 2 || last.From != 102 || last.To != len(src.msgs)-2 {
		t.Fatalf("round 3 should read only the gap [102, %d): %+v", len(src.msgs)-2, src.asked)
	}
	if hits, misses := c.Stats(); hits != 2 || misses != 1 {
		t.Fatalf("hits %d misses %d, want 2 and 1", hits, misses)
	}
}
