package workflows

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/wop-dev/wop/protocol"
)

// control sends the pause or resume update name with arg and records its error.
func (tr *testRun) control(name string, arg any, errs *[]error) {
	tr.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnAccept: func() {}, OnReject: func(err error) { *errs = append(*errs, err) },
		OnComplete: func(_ interface{}, err error) { *errs = append(*errs, err) },
	}, arg)
}

// TestPauseHoldsADeadline: an approval gate's deadline that passes while the run is
// paused is acted on when it resumes (the gate then rejects by its timeout), and a
// resolve while paused is refused run_state_conflict with runStatus paused.
func TestPauseHoldsADeadline(t *testing.T) {
	in := fixtureInput(t, "conformance-approval", "")
	def := *in.Definition
	def.Nodes = []Node{def.Nodes[0]}
	def.Nodes[0].Config = json.RawMessage(`{"actions":["accept","reject"],"timeoutMs":600000}`)
	in.Definition = &def
	tr := newTestRun(t, in)
	var errs []error
	var during Snapshot
	var refused ResolveCheck
	tr.at(time.Minute, func() { tr.control(PauseUpdate, PauseRequest{Reason: "hold"}, &errs) })
	tr.at(20*time.Minute, func() {
		during = tr.snapshot()
		refused = tr.check(ResolveRequest{NodeID: "gate", ResumeValue: json.RawMessage(`{"action":"accept"}`)})
		tr.control(ResumeUpdate, ResumeRequest{}, &errs)
	})
	s := tr.execute()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, protocol.StatusPaused, during.Status, "past the deadline, still paused")
	require.NotNil(t, during.Interrupt, "the gate still waits")
	require.Equal(t, protocol.CodeRunStateConflict, refused.Code)
	require.JSONEq(t, `{"runStatus":"paused"}`, string(refused.Details))
	require.Equal(t, protocol.StatusFailed, s.Status)
	require.Equal(t, protocol.CodeApprovalRejected, s.Error.Code, "the deadline, acted on at resume, rejects")
	ty := types(tr.events())
	p := slices.Index(ty, protocol.EvRunPaused)
	require.GreaterOrEqual(t, p, 0, "%v", ty)
	require.Equal(t, []string{protocol.EvRunPaused, protocol.EvRunResumed, protocol.EvInterruptResolved}, ty[p:p+3], "the timeout resolves only after the resume: %v", ty)
}
