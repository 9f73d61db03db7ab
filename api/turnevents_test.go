package api

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/workflows"
)

// teEvents are the events from..to.
func teEvents(from, to int64) []workflows.Event {
	var evs []workflows.Event
	for s := from; s <= to; s++ {
		evs = append(evs, workflows.Event{Sequence: s, EventID: "e" + strconv.FormatInt(s, 10), Type: "conversation.exchanged", Payload: json.RawMessage(`{"text":"hi"}`)})
	}
	return evs
}

// TestTurnEventsAnswersOnlyWhatTheyHold: the kept events answer a cursor from their
// start up to before their last event, cut into pages as the query cuts them; any other
// cursor, an expired entry or an older update's result arriving late does not.
func TestTurnEventsAnswersOnlyWhatTheyHold(t *testing.T) {
	var te turnEvents
	now := time.Unix(1000, 0)
	te.put("run", "t1", &workflows.ResolveEvents{After: 9, Events: teEvents(10, 14), LastSequence: 14, Terminal: true}, now)

	for _, after := range []int64{-1, 0, 8, 14, 20} {
		_, ok := te.page("run", after, 0, now)
		assert.False(t, ok, "cursor %d is outside the kept events", after)
	}
	_, ok := te.page("other-run", 9, 0, now)
	assert.False(t, ok)

	res, ok := te.page("run", 9, 0, now)
	require.True(t, ok)
	assert.Equal(t, "t1", res.Tenant)
	assert.Len(t, res.Events, 5)
	assert.False(t, res.More)
	assert.True(t, res.Terminal, "the page reaches the run's terminal event")

	// Pages as the query cuts them: each event counts EventBytes; the first always fits.
	one := workflows.EventBytes(&res.Events[0])
	res, ok = te.page("run", 9, 2*one, now)
	require.True(t, ok)
	assert.Equal(t, []int64{10, 11}, seqs(res.Events))
	assert.True(t, res.More)
	assert.False(t, res.Terminal, "a cut page is not the end")
	res, ok = te.page("run", 13, 1, now)
	require.True(t, ok)
	assert.Equal(t, []int64{14}, seqs(res.Events))
	assert.True(t, res.Terminal)

	// An older update's result arriving late keeps the newer events.
	te.put("run", "t1", &workflows.ResolveEvents{After: 5, Events: teEvents(6, 8), LastSequence: 8}, now)
	_, ok = te.page("run", 9, 0, now)
	assert.True(t, ok, "the newer events stay")

	// Expired: the run is read again.
	_, ok = te.page("run", 9, 0, now.Add(turnEventsTTL))
	assert.False(t, ok)
	_, ok = te.page("run", 9, 0, now)
	assert.False(t, ok, "an expired entry is dropped")

	// Nothing carried, nothing kept; the bound on runs holds.
	te.put("empty", "t1", &workflows.ResolveEvents{After: 3, LastSequence: 3}, now)
	te.put("none", "t1", nil, now)
	assert.Empty(t, te.runs)
	for i := range turnEventsMaxRuns + 10 {
		te.put("r"+strconv.Itoa(i), "t1", &workflows.ResolveEvents{After: 0, Events: teEvents(1, 1), LastSequence: 1}, now.Add(time.Duration(i)))
	}
	assert.Len(t, te.runs, turnEventsMaxRuns)
	_, ok = te.page("r0", 0, 0, now)
	assert.False(t, ok, "the oldest entry made room")
	_, ok = te.page("r"+strconv.Itoa(turnEventsMaxRuns+9), 0, 0, now.Add(time.Second))
	assert.True(t, ok)
}

func seqs(evs []workflows.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}
