package tests

// The poll that follows a resolve, answered from the events the resolve update carried
// (api/turnevents.go): byte for byte the page the query path answers, without a query;
// every cursor those events cannot answer is read from the run as before.

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// eventsQueryCounter counts the events queries an API process sends to Temporal.
type eventsQueryCounter struct {
	client.Client
	n atomic.Int64
}

func (c *eventsQueryCounter) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	if queryType == workflows.EventsQuery {
		c.n.Add(1)
	}
	return c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
}

func (c *eventsQueryCounter) QueryWorkflowWithOptions(ctx context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	if req.QueryType == workflows.EventsQuery {
		c.n.Add(1)
	}
	return c.Client.QueryWorkflowWithOptions(ctx, req)
}

// newAPIPaged serves a further API process over tc, with pages of pageBytes and a
// second key, otherKey, of another tenant.
func newAPIPaged(t *testing.T, c *apiClient, tc client.Client, pageBytes int, otherKey string) *apiClient {
	t.Helper()
	cfg := api.Config{
		Keys: []api.Key{
			{ID: "test", Secret: c.Key, Tenant: "default", Scopes: api.AllScopes},
			{ID: "other", Secret: otherKey, Tenant: "other", Scopes: api.AllScopes},
		},
		TokenSecret: []byte(randomHex(16)), EventsPageBytes: pageBytes,
	}
	_, url, err := serveAPI(t, c, cfg, furtherAPI{Temporal: tc, OwnServer: true})
	require.NoError(t, err)
	return clientAt(t, c, url, c.Key, 60*time.Second)
}

// teRead reads the run's events after cursor with key: by the long poll (poll set) or
// by the JSON read, which always queries the run. The cursor is v1's lastSequence,
// except where v1 reads lastSequence=0 as "from 0": after -1 and 0 it is afterSequence.
func teRead(c *apiClient, key, id string, cursor int64, poll bool) (int, []byte) {
	q := "lastSequence=" + strconv.FormatInt(cursor, 10)
	if cursor <= 0 {
		q = "afterSequence=" + strconv.FormatInt(cursor, 10)
	}
	hdr := map[string]string{"Authorization": "Bearer " + key}
	path := "/v1/runs/" + id + "/events?" + q
	if poll {
		path = "/v1/runs/" + id + "/events/poll?timeout=1&" + q
	} else {
		hdr["Accept"] = "application/json"
	}
	status, _, raw := c.doRaw(http.MethodGet, path, nil, hdr)
	return status, raw
}

// teLast reads the run's log page by page and returns its newest event's sequence.
func teLast(t *testing.T, c *apiClient, id string) int64 {
	t.Helper()
	cursor := int64(-1)
	for range 1000 {
		status, raw := teRead(c, c.Key, id, cursor, false)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var p tePage
		require.NoError(t, json.Unmarshal(raw, &p))
		if len(p.Events) > 0 {
			cursor = p.Events[len(p.Events)-1].Sequence
		}
		if !p.HasMore {
			return cursor
		}
	}
	t.Fatal("the log's pages do not end")
	return 0
}

type tePage struct {
	Events     []workflows.Event `json:"events"`
	IsComplete bool              `json:"isComplete"`
	HasMore    bool              `json:"hasMore"`
}

// TestPollAfterResolveFromUpdateEvents: a pack conversation whose turn the scripted mock
// answers within the workflow task that takes it. The polls after the resolve read the
// turn — in pages cut by a small page bound — from the events the update carried,
// without one events query, each page byte for byte what the JSON read (a query) answers
// for the same cursor; another tenant gets the same 404 from both; a cursor before or
// after the carried events is read from the run. Its history is the corpus's turn whose
// update carried events.
func TestPollAfterResolveFromUpdateEvents(t *testing.T) {
	t.Parallel()
	a := startStack(t)
	qc := &eventsQueryCounter{Client: a.Stack.Client()}
	otherKey := randomHex(16)
	b := newAPIPaged(t, a, qc, 700, otherKey)
	id := createRun(t, b, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, b, id, 1, protocol.StatusWaitingApproval)
	start := teLast(t, b, id)

	sayTo(t, b, id, "I don't remember my account number, can you look me up by name?")
	var read []workflows.Event
	pages := 0
	for cursor := start; ; pages++ {
		require.Less(t, pages, 100, "the turn's pages end")
		queries := qc.n.Load()
		status, polled := teRead(b, b.Key, id, cursor, true)
		require.Equal(t, http.StatusOK, status, "%s", polled)
		assert.Equal(t, queries, qc.n.Load(), "the poll after %d is answered without an events query", cursor)
		status, queried := teRead(b, b.Key, id, cursor, false)
		require.Equal(t, http.StatusOK, status, "%s", queried)
		require.Greater(t, qc.n.Load(), queries, "the JSON read queries the run")
		require.JSONEq(t, string(queried), string(polled))
		require.Equal(t, string(queried), string(polled), "the poll after %d answers what the query answers", cursor)
		var p tePage
		require.NoError(t, json.Unmarshal(polled, &p))
		require.NotEmpty(t, p.Events)
		for i, e := range p.Events {
			require.Equal(t, cursor+1+int64(i), e.Sequence)
		}
		read = append(read, p.Events...)
		cursor = p.Events[len(p.Events)-1].Sequence
		if !p.HasMore {
			break
		}
	}
	assert.Greater(t, pages, 0, "the turn's events take more than one page of 700 bytes")
	turns := turnsIn(t, read)
	require.Len(t, turns, 2, "the user's turn and the agent's reply: %+v", turns)
	assert.Contains(t, textOf(t, turns[1]), "can't look accounts up by name")

	// Another tenant: the same 404 from the carried events as from the query.
	sp, polled := teRead(b, otherKey, id, start, true)
	sq, queried := teRead(b, otherKey, id, start, false)
	assert.Equal(t, http.StatusNotFound, sp)
	assert.Equal(t, sq, sp)
	assert.Equal(t, string(queried), string(polled))

	// A cursor before the carried events: read from the run, the same page.
	queries := qc.n.Load()
	_, polled = teRead(b, b.Key, id, start-1, true)
	assert.Greater(t, qc.n.Load(), queries, "a cursor before the carried events is read from the run")
	_, queried = teRead(b, b.Key, id, start-1, false)
	assert.Equal(t, string(queried), string(polled))

	// A cursor at the run's newest event: the poll reads the run and waits, as before.
	last := read[len(read)-1].Sequence
	queries = qc.n.Load()
	status, polled := teRead(b, b.Key, id, last, true)
	require.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"events":[],"isComplete":false}`, string(polled))
	assert.Greater(t, qc.n.Load(), queries, "a cursor after the carried events is read from the run")

	replayHistory(t, b, id, "support-update-events")
}
