package workflows

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/wop-dev/wop/protocol"
)

// TestRunNotifiesWebhooks: a run signals its tenant's dispatcher with the events
// webhooks may receive, batched, and signals the terminal event before it closes:
// through the NotifyDispatcher local activity (RunInput.Notices), node events among
// them, or, for runs created before, without node events (NoticesLocal), and with
// SignalExternalWorkflow (0).
func TestRunNotifiesWebhooks(t *testing.T) {
	withoutNodes := [][]string{
		{protocol.EvRunStarted, protocol.EvInterruptRequested, protocol.EvApprovalRequested},
		{protocol.EvInterruptResolved, protocol.EvApprovalReceived, protocol.EvRunCompleted},
	}
	for _, c := range []struct {
		notices int
		want    [][]string
	}{
		{NoticesNodeEvents, [][]string{
			{protocol.EvRunStarted, protocol.EvNodeStarted, protocol.EvInterruptRequested, protocol.EvApprovalRequested},
			{protocol.EvInterruptResolved, protocol.EvApprovalReceived, protocol.EvNodeCompleted, protocol.EvRunCompleted},
		}},
		{NoticesLocal, withoutNodes},
		{0, withoutNodes},
	} {
		local := c.notices >= NoticesLocal
		t.Run(fmt.Sprintf("notices=%d", c.notices), func(t *testing.T) {
			in := fixtureInput(t, "conformance-approval", `{"payload":{"doc":"x"}}`)
			in.CallbackURL = "https://receiver.example/hook"
			in.Tags = []string{"prod"}
			in.Notices = c.notices
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartWorkflowOptions(startOpts(in.RunID))
			registerRun(env)
			var mu sync.Mutex
			var notices []WebhookNotice
			take := func(n WebhookNotice) {
				mu.Lock()
				defer mu.Unlock()
				notices = append(notices, n)
			}
			if local {
				onNotices(env, "t1", func(n WebhookNotice) bool { take(n); return true })
			} else {
				env.OnSignalExternalWorkflow(mock.Anything, protocol.WebhookDispatcherID("t1"), mock.Anything, WebhookEventsSignal, mock.Anything).
					Return(func(_, _, _, _ string, arg any) error { take(arg.(WebhookNotice)); return nil })
			}
			runAcceptingGate(t, env, in)

			var types [][]string
			for _, n := range notices {
				require.Equal(t, in.RunID, n.RunID)
				require.Equal(t, in.CallbackURL, n.CallbackURL)
				require.Equal(t, []string{"prod"}, n.Tags)
				var ts []string
				for _, e := range n.Events {
					ts = append(ts, e.Type)
				}
				types = append(types, ts)
			}
			require.Equal(t, c.want, types, "one signal per batch of events, the terminal one before the run closed")
		})
	}
}

// TestReplayForkNotifiesNobody: a replay fork re-emits its source's history, which was
// delivered once: it tells no dispatcher.
func TestReplayForkNotifiesNobody(t *testing.T) {
	in := fixtureInput(t, "conformance-noop", `{}`)
	in.Fork = &ForkSource{SourceRunID: "src"}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(startOpts(in.RunID))
	registerRun(env)
	told := 0
	onNotices(env, "t1", func(WebhookNotice) bool { told++; return true })
	env.ExecuteWorkflow(RunWorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Zero(t, told)
}

// TestRunReadsEndedWhileClosing: while Temporal takes the notice of the terminal
// event, the run already reads as ended: the snapshot says completed with nothing
// pending, the events page is terminal, and a resolve is refused.
func TestRunReadsEndedWhileClosing(t *testing.T) {
	in := fixtureInput(t, "conformance-approval", `{"payload":{"doc":"x"}}`)
	in.Notices = 0 // the signal's mock runs inside the workflow's task, where queries answer
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(startOpts(in.RunID))
	registerRun(env)
	var (
		checked bool
		snap    Snapshot
		page    EventsPage
		check   ResolveCheck
		qerr    error
	)
	env.OnSignalExternalWorkflow(mock.Anything, protocol.WebhookDispatcherID("t1"), mock.Anything, WebhookEventsSignal, mock.Anything).
		Return(func(_, _, _, _ string, arg any) error {
			evs := arg.(WebhookNotice).Events
			if evs[len(evs)-1].Type != protocol.EvRunCompleted {
				return nil
			}
			// Every coroutine of the run waits for this signal's result.
			checked = true
			v, err := env.QueryWorkflow(SnapshotQuery)
			if qerr = err; err != nil {
				return nil
			}
			if qerr = v.Get(&snap); qerr != nil {
				return nil
			}
			if v, qerr = env.QueryWorkflow(EventsQuery, EventsRequest{After: -1}); qerr != nil {
				return nil
			}
			if qerr = v.Get(&page); qerr != nil {
				return nil
			}
			if v, qerr = env.QueryWorkflow(ValidateResolveQuery, ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`)}); qerr != nil {
				return nil
			}
			qerr = v.Get(&check)
			return nil
		})
	runAcceptingGate(t, env, in)

	require.True(t, checked, "the terminal event was signalled")
	require.NoError(t, qerr)
	require.Equal(t, protocol.StatusCompleted, snap.Status)
	require.NotEmpty(t, snap.CompletedAt)
	require.Empty(t, snap.Interrupts)
	require.Nil(t, snap.Interrupt)
	require.True(t, page.Terminal)
	require.Equal(t, protocol.EvRunCompleted, page.Events[len(page.Events)-1].Type)
	require.False(t, check.OK, "a resolve is refused: %+v", check)
	require.Equal(t, protocol.StatusCompleted, check.CurrentStatus)
}

// runAcceptingGate runs a conformance-approval run whose gate is accepted a minute in,
// and requires that it completed.
func runAcceptingGate(t *testing.T, env *testsuite.TestWorkflowEnvironment, in RunInput) {
	t.Helper()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(ResolveSignal, ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`), ResolvedBy: "key_test"})
	}, time.Minute)
	env.ExecuteWorkflow(RunWorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}
