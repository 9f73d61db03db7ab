package tests

// Where a turn leaves the run, over HTTP: the answer to a message is the run's status
// once its turn is over (completed for the message that ends the conversation, not the
// waiting-approval the check predicted), and a run that waits in the middle of a turn
// (a tool call's approval) shows the state the pack waits in.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// TestResolveAnswersWhereTheTurnLeftTheRunE2E: support's second message passes three
// states and completes the run: its answer says completed. A message that keeps the
// conversation going is answered waiting-approval, with the run waiting on its user.
func TestResolveAnswersWhereTheTurnLeftTheRunE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	status, body := postToPack(c, id, map[string]any{"resumeValue": map[string]any{"text": "I don't remember my account number, can you look me up by name?"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, protocol.StatusWaitingApproval, body["status"], "the conversation waits for its user again")

	status, body = postToPack(c, id, map[string]any{"resumeValue": map[string]any{"text": "Found it: ACC-12345. What's my balance?"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, protocol.StatusCompleted, body["status"], "the message that ends the conversation is answered with the run's end")
	require.Equal(t, protocol.StatusCompleted, snapshot(t, c, id).Status)
	require.Equal(t, "resolution", runTag(t, c.Stack.Client(), id, workflows.TagPackState))
	require.Equal(t, protocol.StatusCompleted, keyword(t, c, id, workflows.SAStatus.GetName()))
}

// TestPackStateWhileATurnWaitsE2E: the reviewer's Approved moves the refund pack to
// refunded, whose prompt calls issue_refund, which waits for its own approval in the
// middle of that turn: meanwhile WopPackState says refunded (it said awaiting_approval,
// the state before the turn) and the run waits on the approval.
func TestPackStateWhileATurnWaitsE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := createRun(t, c, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	waitRounds(t, c, id, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, id, "It's order ORD-1042.")
	waitSnapshot(t, c, id, 30*time.Second, "waiting for the reviewer", func(s workflows.Snapshot) bool {
		return s.Status == protocol.StatusWaitingExternal
	})
	require.Equal(t, "awaiting_approval", runTag(t, c.Stack.Client(), id, workflows.TagPackState))

	status, body := postToPack(c, id, map[string]any{"resumeValue": map[string]any{"event": "Approved", "context": "Approved 89.90 USD, ref APR-7731"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	s, _ := waitToolApproval(t, c, id)
	require.Equal(t, protocol.StatusWaitingApproval, s.Status)
	require.Equal(t, "refunded", s.Pack.State)
	require.Equal(t, "refunded", runTag(t, c.Stack.Client(), id, workflows.TagPackState), "the state the run waits in")
	require.Equal(t, "approval", runTag(t, c.Stack.Client(), id, workflows.TagWaitingKind))

	status, body = postToPack(c, id, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	require.Equal(t, protocol.StatusCompleted, body["status"], "the decision that ends the turn and the run is answered with the run's end")
	waitCompleted(t, c, id)
	replayHistory(t, c, id, "pack-refund-turn-status")
}

// TestSearchAttributesFollowTheSnapshotE2E walks the refund pack through each of its
// transitions (the first answer, the order given and the reviewer asked, the reviewer's
// Approved with issue_refund waiting on its approval, the accept that ends the run) and
// after each one compares what the Temporal UI shows, the search attributes, with the
// run's snapshot: status, pack state and what the run waits on.
func TestSearchAttributesFollowTheSnapshotE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := createRun(t, c, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	saMatchesSnapshot(t, c, id, "after the first answer", protocol.StatusWaitingApproval)

	sayTo(t, c, id, "It's order ORD-1042.")
	saMatchesSnapshot(t, c, id, "waiting for the reviewer", protocol.StatusWaitingExternal)

	status, body := postToPack(c, id, map[string]any{"resumeValue": map[string]any{"event": "Approved", "context": "Approved 89.90 USD, ref APR-7731"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	s := saMatchesSnapshot(t, c, id, "issue_refund waiting on its approval", protocol.StatusWaitingApproval)
	require.NotNil(t, s.Interrupt)
	require.Equal(t, "approval", s.Interrupt.Kind)

	status, body = postToPack(c, id, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	saMatchesSnapshot(t, c, id, "after the accept", protocol.StatusCompleted)
}

// saMatchesSnapshot waits until the run's snapshot has status want, then until its
// search attributes say what the snapshot says (the attributes are upserted by the
// workflow task that settles the turn, which a read may precede by moments), and
// returns the snapshot.
func saMatchesSnapshot(t *testing.T, c *apiClient, id, what, want string) workflows.Snapshot {
	t.Helper()
	type view struct{ Status, PackState, WaitingOn string }
	var s workflows.Snapshot
	var fromSA, fromSnap view
	deadline := time.Now().Add(30 * time.Second)
	for {
		s = waitSnapshot(t, c, id, 30*time.Second, what, func(s workflows.Snapshot) bool { return s.Status == want })
		fromSnap = view{Status: s.Status}
		if s.Pack != nil {
			fromSnap.PackState = s.Pack.State
		}
		if n := len(s.Interrupts); n > 0 && s.Status != protocol.StatusCompleted {
			fromSnap.WaitingOn = s.Interrupts[n-1].Kind + ":" + s.Interrupts[n-1].NodeID
		}
		fromSA = view{
			Status:    keyword(t, c, id, workflows.SAStatus.GetName()),
			PackState: runTag(t, c.Stack.Client(), id, workflows.TagPackState),
			WaitingOn: runTag(t, c.Stack.Client(), id, workflows.TagWaitingOn),
		}
		if fromSA == fromSnap || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, fromSnap, fromSA, "%s: the search attributes say what the snapshot says", what)
	t.Logf("%s: %+v", what, fromSA)
	return s
}
