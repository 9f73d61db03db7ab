package api

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/workflows"
)

// seamEnv is a test server with the durability seams on; held and killed count the
// seam's calls of HoldDispatch and Kill.
func seamEnv(t *testing.T) (env *testEnv, held *int, killed chan struct{}) {
	held, killed = new(int), make(chan struct{}, 4)
	env = newTestEnv(t, func(c *Config) {
		c.ConformanceSeams = &ConformanceSeams{
			Recovery: []RecoveryClass{NewRecoveryClass("accepted", Term("dispatch", 500*time.Millisecond)),
				NewRecoveryClass("in-held-activity", Term("heldActivityHeartbeat", 2*time.Second), Term("dispatch", 500*time.Millisecond))},
			KillClass:    "accepted",
			HeldClass:    "in-held-activity",
			HoldDispatch: func() { *held++ },
			Kill:         func() { killed <- struct{}{} },
		}
	})
	return env, held, killed
}

// The kill seam stages after-accept, during-execution and duplicate-delivery:
// anything else, a workflow it does not know, and an effect destination it may not
// reach (the webhook egress guard: this server admits no private address) or that is
// missing, is refused 400 before the worker is held, a run started or the process
// killed.
func TestKillSeamRefusesWhatItDoesNotStage(t *testing.T) {
	env, held, killed := seamEnv(t)
	for _, tc := range []struct{ body, field string }{
		{`{"mode":"duplicate-delivery","effectUrl":"http://127.0.0.1:1/x"}`, "effectUrl"},
		{`{"mode":"duplicate-delivery"}`, "effectUrl"},
		{`{"mode":"duplicate-delivery","effectUrl":"ftp://example.com/x"}`, "effectUrl"},
		{`{"mode":"duplicate-delivery","effectUrl":"https://example.com/x","workflowId":"no-such-workflow"}`, "workflowId"},
		{`{"mode":"during-execution","workflowId":"conformance-noop","effectUrl":"https://example.com/x"}`, "effectUrl"},
		{`{"mode":"during-execution-soon","workflowId":"conformance-noop"}`, "mode"},
		{`{"mode":"after-accept","workflowId":"no-such-workflow"}`, "workflowId"},
		{`{"mode":"during-execution","workflowId":"no-such-workflow"}`, "workflowId"},
		{`{"mode":"during-execution"}`, "workflowId"},
		{`{"mode":"after-accept","workflowId":"conformance-noop","extra":1}`, "extra"},
	} {
		rec := env.do("POST", DurabilityKillPath, fullKey, tc.body)
		require.Equal(t, 400, rec.Code, "%s: %s", tc.body, rec.Body)
		var e struct { // the v1 envelope (the seam has no major of its own)
			Error   string         `json:"error"`
			Details map[string]any `json:"details"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s", rec.Body)
		assert.Equal(t, "validation_error", e.Error, tc.body)
		assert.Equal(t, tc.field, e.Details["field"], tc.body)
	}
	assert.Zero(t, *held, "nothing held")
	assert.Empty(t, killed, "nothing killed")
	assert.Zero(t, env.ft.starts)
}

// after-accept holds dispatch, starts the run, answers its id and bound, then kills;
// a start that fails after the hold still kills, so the process never goes on serving
// with its worker stopped.
func TestKillSeamStagesAfterAccept(t *testing.T) {
	env, held, killed := seamEnv(t)
	rec := env.do("POST", DurabilityKillPath, fullKey, `{"mode":"after-accept","workflowId":"conformance-noop"}`)
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	var got struct {
		RunID           string `json:"runId"`
		RecoveryClass   string `json:"recoveryClass"`
		RecoveryBoundMs int64  `json:"recoveryBoundMs"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.NotEmpty(t, got.RunID)
	assert.Equal(t, "accepted", got.RecoveryClass)
	assert.EqualValues(t, 500, got.RecoveryBoundMs)
	assert.NotNil(t, env.ft.get(got.RunID), "the run was started")
	assert.Equal(t, 1, *held)
	waitKilled(t, killed)

	env.ft.startErr = errors.New("temporal is unreachable")
	rec = env.do("POST", DurabilityKillPath, fullKey, `{"mode":"after-accept","workflowId":"conformance-noop"}`)
	assert.GreaterOrEqual(t, rec.Code, 500, "%s", rec.Body)
	assert.Equal(t, 2, *held)
	waitKilled(t, killed)
}

func waitKilled(t *testing.T, killed chan struct{}) {
	t.Helper()
	select {
	case <-killed:
	case <-time.After(5 * time.Second):
		t.Fatal("the seam did not kill the process")
	}
}

// during-execution starts the run with the seam's mark and answers its id and the held
// work's bound; it neither holds the worker nor kills: the run's hold does, through
// KillHeld. The probe lists both modes.
func TestKillSeamStagesDuringExecution(t *testing.T) {
	env, held, killed := seamEnv(t)
	rec := env.do("GET", DurabilityKillPath, fullKey, "")
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	assert.JSONEq(t, `{"modes":["after-accept","during-execution","duplicate-delivery"],"boundPath":"/host/durability/bound"}`, rec.Body.String())

	rec = env.do("POST", DurabilityKillPath, fullKey, `{"mode":"during-execution","workflowId":"conformance-noop"}`)
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	var got struct {
		RunID           string `json:"runId"`
		Mode            string `json:"mode"`
		RecoveryClass   string `json:"recoveryClass"`
		RecoveryBoundMs int64  `json:"recoveryBoundMs"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.Equal(t, "during-execution", got.Mode)
	assert.Equal(t, "in-held-activity", got.RecoveryClass)
	assert.EqualValues(t, 2500, got.RecoveryBoundMs)
	run := env.ft.get(got.RunID)
	require.NotNil(t, run, "the run was started")
	assert.Equal(t, workflows.SeamDuringExecution, run.input.Seam)
	assert.Equal(t, "conformance-noop", run.input.Definition.ID)
	assert.Zero(t, *held, "the worker goes on polling")
	select {
	case <-killed:
		t.Fatal("the seam killed the process itself")
	case <-time.After(2 * killDelay):
	}

	// A plain run carries no mark.
	rec = env.do("POST", "/v1/runs", fullKey, `{"workflowId":"conformance-noop"}`)
	require.Equal(t, 201, rec.Code, "%s", rec.Body)
	var plain struct {
		RunID string `json:"runId"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &plain))
	assert.Empty(t, env.ft.get(plain.RunID).input.Seam)
}

// duplicate-delivery starts the conformance-noop fixture with the seam's mark and the
// effect's destination (loopback, on a server that admits private destinations), and
// answers the held work's class; it neither holds the worker nor kills: the effect's
// first attempt does.
func TestKillSeamStagesDuplicateDelivery(t *testing.T) {
	env, held, killed := seamEnv(t)
	env.srv.cfg.WebhookAllowPrivate = true
	rec := env.do("POST", DurabilityKillPath, fullKey, `{"mode":"duplicate-delivery","effectUrl":"http://127.0.0.1:9/effect/abc"}`)
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	var got struct {
		RunID         string `json:"runId"`
		Mode          string `json:"mode"`
		RecoveryClass string `json:"recoveryClass"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.Equal(t, "duplicate-delivery", got.Mode)
	assert.Equal(t, "in-held-activity", got.RecoveryClass)
	run := env.ft.get(got.RunID)
	require.NotNil(t, run, "the run was started")
	assert.Equal(t, workflows.SeamDuplicateDelivery, run.input.Seam)
	assert.Equal(t, "http://127.0.0.1:9/effect/abc", run.input.SeamEffectURL)
	assert.Equal(t, "conformance-noop", run.input.Definition.ID)
	assert.Zero(t, *held, "the worker goes on polling")
	select {
	case <-killed:
		t.Fatal("the seam killed the process itself")
	case <-time.After(2 * killDelay):
	}
}

// KillHeld waits until no seam answer is being written, then kills.
func TestKillHeldWaitsForTheAnswer(t *testing.T) {
	killed := make(chan struct{}, 1)
	seams := &ConformanceSeams{Kill: func() { killed <- struct{}{} }}
	seams.answering.Add(1)
	go seams.KillHeld()
	select {
	case <-killed:
		t.Fatal("killed while the answer was being written")
	case <-time.After(200 * time.Millisecond):
	}
	seams.answering.Add(-1)
	waitKilled(t, killed)
}
