package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

// testRun drives one run in the SDK test environment.
type testRun struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	in  RunInput
	// prev is the execution this one continued (its environment still answers
	// queries), so events reads the whole log as a reader of the run would.
	prev *testRun
}

func newTestRun(t *testing.T, in RunInput) *testRun {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(startOpts(in.RunID))
	registerRun(env)
	// A run signals its tenant's webhook dispatcher; here, as for a tenant without
	// webhooks, there is none (notify_test.go records the notices instead).
	env.OnSignalExternalWorkflow(mock.Anything, protocol.WebhookDispatcherID(in.Owner.Tenant), mock.Anything, WebhookEventsSignal, mock.Anything).
		Return(errors.New("no webhook dispatcher")).Maybe()
	onNotices(env, in.Owner.Tenant, func(WebhookNotice) bool { return false })
	return &testRun{t: t, env: env, in: in}
}

func fixtureInput(t *testing.T, id, inputs string) RunInput {
	t.Helper()
	cat, err := NewCatalog(CatalogOptions{SeedFixtures: true})
	require.NoError(t, err)
	var raw json.RawMessage
	if inputs != "" {
		raw = json.RawMessage(inputs)
	}
	in, err := cat.NewRunInput(RunRequest{RunID: "run-" + id, WorkflowID: id, Inputs: raw, Owner: Owner{Tenant: "t1", Principal: "key_test"}})
	require.NoError(t, err)
	return *in
}

// at schedules f after d of workflow time.
func (tr *testRun) at(d time.Duration, f func()) { tr.env.RegisterDelayedCallback(f, d) }

func (tr *testRun) resolve(nodeID string, value string) {
	tr.env.SignalWorkflow(ResolveSignal, ResolveRequest{NodeID: nodeID, ResumeValue: json.RawMessage(value), ResolvedBy: "key_test"})
}

func (tr *testRun) resolveReq(req ResolveRequest) { tr.env.SignalWorkflow(ResolveSignal, req) }

func (tr *testRun) check(req ResolveRequest) ResolveCheck {
	tr.t.Helper()
	v, err := tr.env.QueryWorkflow(ValidateResolveQuery, req)
	require.NoError(tr.t, err)
	var c ResolveCheck
	require.NoError(tr.t, v.Get(&c))
	return c
}

func (tr *testRun) snapshot() Snapshot {
	tr.t.Helper()
	v, err := tr.env.QueryWorkflow(SnapshotQuery)
	require.NoError(tr.t, err)
	var s Snapshot
	require.NoError(tr.t, v.Get(&s))
	return s
}

// page asks this execution for one page of events.
func (tr *testRun) page(req EventsRequest) EventsPage {
	tr.t.Helper()
	v, err := tr.env.QueryWorkflow(EventsQuery, req)
	require.NoError(tr.t, err)
	var p EventsPage
	require.NoError(tr.t, v.Get(&p))
	return p
}

// events reads the run's whole log: from the first execution of the chain to this
// one, each answering for the events it holds, page by page.
func (tr *testRun) events() []Event {
	tr.t.Helper()
	var chain []*testRun
	for x := tr; x != nil; x = x.prev {
		chain = append([]*testRun{x}, chain...)
	}
	out := []Event{}
	after := int64(-1)
	for i, x := range chain {
		if i > 0 {
			// A cursor before this execution's events: it names the execution before it.
			p := x.page(EventsRequest{After: after - 1})
			require.Empty(tr.t, p.Events)
			require.Equal(tr.t, after+1, p.FirstSequence, "execution %d starts where the one before it ended", i)
			require.NotEmpty(tr.t, p.Earlier, "execution %d names the executions before it", i)
			require.Equal(tr.t, after, p.Earlier[0].LastSequence)
		}
		for {
			p := x.page(EventsRequest{After: after})
			out = append(out, p.Events...)
			if len(p.Events) > 0 {
				after = p.Events[len(p.Events)-1].Sequence
			}
			if !p.More {
				break
			}
		}
	}
	return out
}

// finalSnapshot returns the snapshot a finished run returned, or closed with when it
// failed or was cancelled; the Temporal close status must match the run's status.
func finalSnapshot(t *testing.T, env *testsuite.TestWorkflowEnvironment) Snapshot {
	t.Helper()
	if err := env.GetWorkflowError(); err != nil {
		snap, ok := SnapshotFromError(err)
		require.True(t, ok, "the workflow failed without a final snapshot: %v", err)
		var ce *temporal.CanceledError
		require.Equal(t, snap.Status == protocol.StatusCancelled, errors.As(err, &ce), "a cancelled run closes as Canceled, a failed one as Failed: %v", err)
		return *snap
	}
	var s Snapshot
	require.NoError(t, env.GetWorkflowResult(&s))
	require.Equal(t, protocol.StatusCompleted, s.Status, "a run that returns normally completed")
	return s
}

// execute runs the workflow to its end and returns the final snapshot.
func (tr *testRun) execute() Snapshot {
	tr.t.Helper()
	tr.env.ExecuteWorkflow(RunWorkflowName, tr.in)
	require.True(tr.t, tr.env.IsWorkflowCompleted(), "workflow did not complete")
	s := finalSnapshot(tr.t, tr.env)
	evs := tr.events()
	checkEventLog(tr.t, tr.in.RunID, evs)
	recordForSchemaCheck(tr.t, evs)
	return s
}

func types(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func ofType(evs []Event, typ string) []Event {
	var out []Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func payload(t *testing.T, e Event) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Payload, &m))
	return m
}

// checkEventLog asserts the log invariants: sequence from 0 without gaps, ids, one
// terminal event and it is last, causation ids name earlier events.
func checkEventLog(t *testing.T, runID string, evs []Event) {
	t.Helper()
	require.NotEmpty(t, evs)
	ids := map[string]bool{}
	terminals := 0
	for i, e := range evs {
		require.Equal(t, int64(i), e.Sequence, "sequence gap at %d", i)
		require.Equal(t, EventID(runID, int64(i)), e.EventID)
		require.Equal(t, runID, e.RunID)
		_, err := time.Parse(time.RFC3339, e.Timestamp)
		require.NoError(t, err)
		if e.CausationID != "" {
			require.True(t, ids[e.CausationID], "event %d (%s) names a causation %s that is not earlier", i, e.Type, e.CausationID)
		}
		ids[e.EventID] = true
		switch e.Type {
		case protocol.EvRunCompleted, protocol.EvRunFailed, protocol.EvRunCancelled:
			terminals++
			require.Equal(t, len(evs)-1, i, "terminal event %s is not last", e.Type)
		}
	}
	require.Equal(t, 1, terminals)
}

// refusal is how the tests compare a refused check or outcome: its OpenWOP code, and
// for a validation_error whether the API answers it with 422 (unprocessable) rather
// than 400. The run names codes only; api/errors.go maps them to HTTP.
func refusal(code string, unprocessable bool) string {
	if unprocessable {
		return code + " (unprocessable)"
	}
	return code
}

// registerRun registers the run workflow on a test environment (the worker's assembly,
// worker.Register, also registers the webhook workflows and the activities).
func registerRun(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(Run, workflow.RegisterOptions{Name: RunWorkflowName})
}

// onNotices answers the NotifyDispatcher local activity of runs created with
// RunInput.Notices (for tenant): take sees each notice and says whether a dispatcher
// took it.
func onNotices(env *testsuite.TestWorkflowEnvironment, tenant string, take func(WebhookNotice) bool) {
	env.RegisterActivityWithOptions(func(_ context.Context, n activities.DispatcherNotice) (*activities.DispatcherNoticeResult, error) {
		var notice WebhookNotice
		if err := json.Unmarshal(n.Notice, &notice); err != nil {
			return nil, err
		}
		if n.Signal != WebhookEventsSignal || n.WorkflowID != protocol.WebhookDispatcherID(tenant) {
			return nil, fmt.Errorf("notice to %s (%s)", n.WorkflowID, n.Signal)
		}
		return &activities.DispatcherNoticeResult{Signalled: take(notice)}, nil
	}, activity.RegisterOptions{Name: "NotifyDispatcher"})
}
