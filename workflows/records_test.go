package workflows

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// TestSparseIndexReachesEveryExecution builds the links of a chain of 3,000
// executions as carry writes them (the newest MaxSegmentLinks and the sparse index)
// and walks back from the last one to every earlier execution the way a reader does:
// take the execution holding the event if a link names it, else read the start event
// of the nearest execution after it. Every execution is found within two reads of a
// start event, and what an execution carries stays bounded.
func TestSparseIndexReachesEveryExecution(t *testing.T) {
	const n = 3000
	const perExec = 10
	starts := make([][]activities.Segment, n+1) // the links execution i started with
	var carried *carriedState
	for i := 0; i <= n; i++ {
		r := &runner{carried: carried}
		if carried != nil {
			r.segments, r.anchors = carried.Segments, carried.Anchors
		}
		starts[i] = append(append([]activities.Segment(nil), r.segments...), indexLinks(r.anchors)...)
		require.LessOrEqual(t, len(starts[i]), (1+anchorLevels)*MaxSegmentLinks, "execution %d carries %d links", i, len(starts[i]))
		if i == n {
			break
		}
		this := activities.Segment{RunID: fmt.Sprintf("e%d", i), FirstSequence: int64(i * perExec), LastSequence: int64(i*perExec + perExec - 1), Recorded: true}
		next := &carriedState{Segments: r.segmentsWithThis(this), Anchors: r.anchorsWithThis(this), Generation: r.execNumber()}
		// What travels is JSON: the index survives its encoding.
		b, err := json.Marshal(next)
		require.NoError(t, err)
		carried = &carriedState{}
		require.NoError(t, json.Unmarshal(b, carried))
	}
	index := map[string]int{}
	for i := 0; i < n; i++ {
		index[fmt.Sprintf("e%d", i)] = i
	}
	worst := 0
	for target := 0; target < n; target++ {
		want := int64(target*perExec + perExec/2)
		links, reads := starts[n], 0
		for {
			held, after := -1, -1
			for _, l := range links {
				if l.FirstSequence <= want && want <= l.LastSequence {
					held = index[l.RunID]
				}
				if l.FirstSequence > want && (after < 0 || l.FirstSequence < int64(after*perExec)) {
					after = index[l.RunID]
				}
			}
			if held >= 0 {
				require.Equal(t, target, held)
				break
			}
			require.GreaterOrEqual(t, after, 0, "no link leads back to execution %d", target)
			links, reads = starts[after], reads+1
		}
		worst = max(worst, reads)
	}
	require.LessOrEqual(t, worst, 2, "reads of start events to reach the oldest executions")
}

// TestRecordedAll: an execution's link says Recorded only when its records cover every
// event from its base on.
func TestRecordedAll(t *testing.T) {
	r := &runner{eventLog: eventLog{base: 10}}
	require.True(t, r.recordedAll(), "an execution that emitted nothing holds nothing unrecorded")
	r.events = make([]Event, 3)
	require.False(t, r.recordedAll(), "events but no records")
	r.records = eventRecorder{asked: true, on: true, from: 10, next: 12}
	require.False(t, r.recordedAll(), "the newest event is not recorded")
	r.records.next = 13
	require.True(t, r.recordedAll())
	r.records.on = false
	require.False(t, r.recordedAll(), "an execution of the earlier code records nothing")
	r.records = eventRecorder{asked: true, on: true, from: 11, next: 13}
	require.False(t, r.recordedAll(), "records from after the base (a state of the earlier shape) do not cover the execution")
}

// TestCarriedLinks reads the links back from a carried state, and none from a run
// that did not continue.
func TestCarriedLinks(t *testing.T) {
	earlier, index, err := CarriedLinks(nil)
	require.NoError(t, err)
	require.Empty(t, earlier)
	require.Empty(t, index)
	st := carriedState{Shape: carriedShape, Segments: []activities.Segment{{RunID: "b", FirstSequence: 5, LastSequence: 9, Recorded: true}},
		Anchors: [][]activities.Segment{{{RunID: "a", FirstSequence: 0, LastSequence: 4}}, {{RunID: "a", FirstSequence: 0, LastSequence: 4}}}}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	earlier, index, err = CarriedLinks(b)
	require.NoError(t, err)
	require.Equal(t, st.Segments, earlier)
	require.Equal(t, []activities.Segment{st.Anchors[0][0], st.Anchors[1][0]}, index)
	_, _, err = CarriedLinks(json.RawMessage(`[`))
	require.Error(t, err)
}

// TestEventsRecordFrom reads a record back from a marker's value, compressed (as the
// run writes it) or as JSON, and tells another side effect's value from a record.
func TestEventsRecordFrom(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	rec := EventsRecord{Kind: EventsRecordKind, Events: []Event{{EventID: "evt-r-7", RunID: "r", Type: protocol.EvNodeStarted, Payload: json.RawMessage(`{"a":1}`), Sequence: 7}}}
	b, err := rec.Compressed()
	require.NoError(t, err)
	plain, err := json.Marshal(rec)
	require.NoError(t, err)
	require.Less(t, len(b), len(plain)+64)
	for _, v := range []any{b, rec} {
		p, err := dc.ToPayloads(v)
		require.NoError(t, err)
		got, ok, err := EventsRecordFrom(p)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, rec, got)
	}
	for _, other := range []any{"text", 42, map[string]string{"kind": "other"}, []byte("binary of another kind")} {
		p, err := dc.ToPayloads(other)
		require.NoError(t, err)
		_, ok, err := EventsRecordFrom(p)
		require.NoError(t, err)
		require.False(t, ok, "%v", other)
	}
	broken, err := dc.ToPayloads(append([]byte(eventsRecordMagic), 1, 2, 3))
	require.NoError(t, err)
	_, _, err = EventsRecordFrom(broken)
	require.Error(t, err, "a damaged record")
}
