package tests

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func TestDiscoveryIsPublicAndAdvertisesTheCore(t *testing.T) {
	c := startStack(t)
	status, hdr, raw := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, nil)
	require.Equal(t, http.StatusOK, status, "discovery body: %s", raw)
	assert.Contains(t, hdr.Get("Content-Type"), "application/json")
	assert.NotEmpty(t, hdr.Get("Cache-Control"), "discovery must send Cache-Control")

	_, _, doc := c.do(http.MethodGet, "/.well-known/openwop", nil)
	require.NotNil(t, doc)
	pv, _ := doc["protocolVersion"].(string)
	assert.True(t, strings.HasPrefix(pv, "1."), "protocolVersion %q", pv)
	assert.Contains(t, doc["supportedEnvelopes"], "clarification.request")
	assert.Contains(t, doc, "schemaVersions")
	assert.Equal(t, true, doc["conversationPrimitive"], "conversationPrimitive at the root")
	limits, _ := doc["limits"].(map[string]any)
	for _, k := range []string{"clarificationRounds", "schemaRounds", "envelopesPerTurn"} {
		assert.Contains(t, limits, k)
	}
	assert.Contains(t, doc["fixtures"], "conformance-noop")
}

func TestMissingOrUnknownKeyIs401WithTheErrorEnvelope(t *testing.T) {
	c := startStack(t)
	for name, headers := range map[string]map[string]string{
		"no key":      nil,
		"unknown key": {"Authorization": "Bearer not-a-key"},
	} {
		t.Run(name, func(t *testing.T) {
			status, _, raw := c.doRaw(http.MethodGet, "/v1/runs/does-not-matter", nil, headers)
			require.Equal(t, http.StatusUnauthorized, status, "body: %s", raw)
			var env map[string]any
			require.NoError(t, jsonUnmarshal(raw, &env), "body: %s", raw)
			assert.Equal(t, "unauthenticated", env["error"])
			assert.NotEmpty(t, env["message"])
			for k := range env {
				assert.Contains(t, []string{"error", "message", "details"}, k, "closed envelope")
			}
		})
	}
}

func TestOpenAPIDocumentDescribesTheRoutes(t *testing.T) {
	c := startStack(t)
	status, _, raw := c.doRaw(http.MethodGet, "/v1/openapi.json", nil, nil)
	require.Equal(t, http.StatusOK, status, "body: %.300s", raw)
	var doc map[string]any
	require.NoError(t, jsonUnmarshal(raw, &doc))
	assert.Regexp(t, regexp.MustCompile(`^3\.[1-9]`), doc["openapi"])
	paths, _ := doc["paths"].(map[string]any)
	for _, p := range []string{"/v1/runs", "/v1/runs/{runId}"} {
		assert.Contains(t, paths, p)
	}
}

func TestHealthz(t *testing.T) {
	c := startStack(t)
	status, _, raw := c.doRaw(http.MethodGet, "/healthz", nil, nil)
	assert.Equal(t, http.StatusOK, status, "body: %s", raw)
}

// TestRunRoundTripThroughTemporal starts the conformance-noop fixture over HTTP and waits
// for the run to complete: API → Temporal → worker → Temporal → API.
func TestRunRoundTripThroughTemporal(t *testing.T) {
	c := startStack(t)
	status, _, run := c.do(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "conformance-noop"})
	require.Equal(t, http.StatusCreated, status, "create run: %v", run)
	runID, _ := run["runId"].(string)
	require.NotEmpty(t, runID)

	var snap map[string]any
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		st, _, body := c.do(http.MethodGet, "/v1/runs/"+runID, nil)
		require.Equal(ct, http.StatusOK, st)
		snap = body
		assert.Equal(ct, "completed", body["status"])
	}, 20*time.Second, 50*time.Millisecond)
	assert.Equal(t, runID, snap["runId"])
	assert.Equal(t, "conformance-noop", snap["workflowId"])

	// The run is a Temporal workflow execution with WorkflowID = runId.
	desc, err := c.Stack.Client().DescribeWorkflowExecution(context.Background(), runID, "")
	require.NoError(t, err)
	assert.Equal(t, "OpenWOPRun", desc.GetWorkflowExecutionInfo().GetType().GetName())
}

// TestTemporalRoundTripOnTheStacksServer proves the stack's Temporal server, client and
// task routing with a workflow of this test only: a signal, an activity and a query,
// on a task queue of its own next to the host's worker.
func TestTemporalRoundTripOnTheStacksServer(t *testing.T) {
	c := startStack(t)
	tc := c.Stack.Client()
	queue := "harness-" + randomHex(4)
	w := sdkworker.New(tc, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(greetWorkflow, workflow.RegisterOptions{Name: "HarnessGreet"})
	w.RegisterActivityWithOptions(greetActivity, activity.RegisterOptions{Name: "HarnessGreetActivity"})
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := "harness-greet-" + randomHex(4)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "HarnessGreet")
	require.NoError(t, err)
	require.NoError(t, tc.SignalWorkflow(ctx, id, "", "name", "wop"))
	var got string
	require.NoError(t, run.Get(ctx, &got))
	assert.Equal(t, "hello, wop", got)

	resp, err := tc.QueryWorkflow(ctx, id, "", "greeted")
	require.NoError(t, err)
	var greeted string
	require.NoError(t, resp.Get(&greeted))
	assert.Equal(t, "wop", greeted)
}

// TestRestartKeepsEarlierRuns stops a stack on a SQLite file and starts a new one on the
// same data folder: a workflow started before the restart is still there, and a
// workflow waiting on a signal continues where it was.
func TestRestartKeepsEarlierRuns(t *testing.T) {
	c := startPrivateStack(t, stackOptions{DataDir: t.TempDir()})
	queue := "harness-restart"
	id := "harness-restart-" + randomHex(4)
	startWorker := func(tc client.Client) sdkworker.Worker {
		w := sdkworker.New(tc, queue, sdkworker.Options{})
		w.RegisterWorkflowWithOptions(greetWorkflow, workflow.RegisterOptions{Name: "HarnessGreet"})
		w.RegisterActivityWithOptions(greetActivity, activity.RegisterOptions{Name: "HarnessGreetActivity"})
		require.NoError(t, w.Start())
		return w
	}

	w := startWorker(c.Stack.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.Stack.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "HarnessGreet")
	require.NoError(t, err)
	// The first workflow task has run once the query handler answers.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, err := c.Stack.Client().QueryWorkflow(ctx, id, "", "greeted")
		assert.NoError(ct, err)
	}, 10*time.Second, 20*time.Millisecond)
	w.Stop()

	c2 := restartStack(t, c)
	desc, err := c2.Stack.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err, "workflow started before the restart")
	assert.Equal(t, "HarnessGreet", desc.GetWorkflowExecutionInfo().GetType().GetName())

	w2 := startWorker(c2.Stack.Client())
	defer w2.Stop()
	require.NoError(t, c2.Stack.Client().SignalWorkflow(ctx, id, "", "name", "again"))
	var got string
	require.NoError(t, c2.Stack.Client().GetWorkflow(ctx, id, "").Get(ctx, &got))
	assert.Equal(t, "hello, again", got)
}

func greetWorkflow(ctx workflow.Context) (string, error) {
	greeted := ""
	if err := workflow.SetQueryHandler(ctx, "greeted", func() (string, error) { return greeted, nil }); err != nil {
		return "", err
	}
	workflow.GetSignalChannel(ctx, "name").Receive(ctx, &greeted)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, "HarnessGreetActivity", greeted).Get(ctx, &out)
	return out, err
}

func greetActivity(_ context.Context, name string) (string, error) {
	return "hello, " + name, nil
}
