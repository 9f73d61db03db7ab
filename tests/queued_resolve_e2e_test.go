package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/convo"
)

// gatedProvider is a model whose rounds wait until open is closed, then answer as the
// mock does.
type gatedProvider struct {
	blockingProvider
	open chan struct{}
	mock activities.MockProvider
}

func (p *gatedProvider) Complete(ctx context.Context, req *activities.Request) (*convo.ModelRoundResult, error) {
	select {
	case p.entered <- struct{}{}:
	default:
	}
	select {
	case <-p.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.mock.Complete(ctx, req)
}

// callCounter counts a Temporal client's resolve updates and queries.
type callCounter struct {
	client.Client
	updates, queries atomic.Int64
}

func (c *callCounter) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.updates.Add(1)
	return c.Client.UpdateWorkflow(ctx, o)
}

func (c *callCounter) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	c.queries.Add(1)
	return c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
}

func (c *callCounter) QueryWorkflowWithOptions(ctx context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	c.queries.Add(1)
	return c.Client.QueryWorkflowWithOptions(ctx, req)
}

// TestQueuedTurnAnsweredAtTheWaitAndPolledOnce: a turn sent while the run's model round
// outlasts the API's resolve wait (2 s) is answered 202 queued at the wait — Temporal
// has accepted its update, which the server would otherwise hold for its long-poll
// interval (20 s) — by one update call; the poll that follows waits for that call and
// answers the turn from the events it carried, once, without querying the run.
func TestQueuedTurnAnsweredAtTheWaitAndPolledOnce(t *testing.T) {
	t.Parallel()
	const wait = 2 * time.Second
	c := startFaultStack(t, "")
	cc := &callCounter{Client: c.Stack.Client()}
	_, url, err := serveAPI(t, c, api.Config{
		Keys:        []api.Key{{ID: "test", Secret: c.Key, Tenant: "default", Scopes: api.AllScopes}},
		TokenSecret: []byte(randomHex(16)), Guards: api.GuardConfig{ResolveWait: wait},
	}, furtherAPI{Temporal: cc, OwnServer: true})
	require.NoError(t, err)
	b := clientAt(t, c, url, c.Key, 60*time.Second)
	fc := openFaultConv(t, b, "fault-echo")
	fc.say("first")

	model := &gatedProvider{blockingProvider: blockingProvider{entered: make(chan struct{}, 1)}, open: make(chan struct{})}
	swapInWorkerWith(t, c, model)
	fc.sendAccepted("second")
	model.waitEntered(t)
	cursor := teLast(t, b, fc.runID)

	updates := cc.updates.Load()
	start := time.Now()
	status, body := fc.send("third", "")
	took := time.Since(start)
	require.Equal(t, http.StatusAccepted, status, "queued behind the round: %v", body)
	assert.Equal(t, "queued", body["status"])
	assert.GreaterOrEqual(t, took, wait)
	assert.Less(t, took, wait+5*time.Second, "the 202 comes at the resolve wait, not at the server's long-poll interval")
	assert.Equal(t, updates+1, cc.updates.Load(), "one update call for the turn")

	queries := cc.queries.Load()
	polled := make(chan []byte, 1)
	go func() {
		_, raw := teRead(b, b.Key, fc.runID, cursor, true)
		polled <- raw
	}()
	close(model.open)
	var page tePage
	require.NoError(t, json.Unmarshal(<-polled, &page), "the poll's answer")
	require.NotEmpty(t, page.Events)
	assert.Equal(t, cursor+1, page.Events[0].Sequence, "the poll answers from its cursor")
	var users []string
	for _, tr := range turnsIn(t, page.Events) {
		if tr.Role == "user" {
			users = append(users, textOf(t, tr))
		}
	}
	assert.Equal(t, []string{"third"}, users, "the queued turn, once")
	assert.Equal(t, queries, cc.queries.Load(), "the poll is answered from the update's events, without a query")
	assert.Equal(t, updates+1, cc.updates.Load(), "still one update call for the turn")

	fc.waitAgentTurns(3, 60*time.Second)
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: []string{"first", "second", "third"}, Ordered: true, Replies: true, Terminal: "run.completed"})
}
