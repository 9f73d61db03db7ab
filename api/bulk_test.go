package api

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// v1's bulk cancel: per-id results in request order, 200 whatever the ids, the cap in
// details.maxRunIds.
func TestBulkCancelV1(t *testing.T) {
	env := newTestEnv(t)
	for id, st := range map[string]string{"r_live": protocol.StatusRunning, "r_over": protocol.StatusCompleted, "r_gone": protocol.StatusCancelled} {
		env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: id, WorkflowID: "conformance-noop", Status: st, Owner: workflows.Owner{Tenant: "default"}}})
	}
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_theirs", WorkflowID: "conformance-noop", Status: protocol.StatusRunning, Owner: workflows.Owner{Tenant: "tenant-b"}}})
	rec := env.do("POST", "/v1/runs:bulk-cancel", fullKey, `{"runIds":["r_live","run-does-not-exist-xxxxxxxx","r_over","r_gone","r_theirs","../x"],"reason":"ops"}`)
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	assert.Equal(t, "1.0", rec.Header().Get("OpenWOP-Version"))
	var body struct {
		Results []struct {
			RunID  string `json:"runId"`
			OK     bool   `json:"ok"`
			Status string `json:"status"`
			Error  *struct {
				Code, Message string
			} `json:"error"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Len(t, body.Results, 6)
	got := []string{}
	for _, r := range body.Results {
		if r.OK {
			got = append(got, r.RunID+":ok:"+r.Status)
		} else {
			got = append(got, r.RunID+":"+r.Error.Code)
			assert.NotEmpty(t, r.Error.Message)
		}
	}
	assert.Equal(t, []string{"r_live:ok:cancelling", "run-does-not-exist-xxxxxxxx:not_found", "r_over:run_terminal", "r_gone:ok:cancelled",
		"r_theirs:not_found", "../x:validation_error"}, got)
	require.Len(t, env.ft.get("r_live").signals, 1, "the live run got its cancel")
	assert.Empty(t, env.ft.get("r_theirs").signals, "another tenant's run is not touched")

	ids := make([]string, 101)
	for i := range ids {
		ids[i] = fmt.Sprintf("r_%d", i)
	}
	many, _ := json.Marshal(map[string]any{"runIds": ids})
	e := codeOf(t, env.do("POST", "/v1/runs:bulk-cancel", fullKey, string(many)), 400, CodeValidation)
	assert.Equal(t, float64(MaxBulkCancelRunIDs), e.Details["maxRunIds"])
	codeOf(t, env.do("POST", "/v1/runs:bulk-cancel", fullKey, `{"runIds":[]}`), 400, CodeValidation)
	codeOf(t, env.do("POST", "/v1/runs:bulk-cancel", lowKey, `{"runIds":["r_live"]}`), 403, CodeForbidden)
}

// codeOf checks an error answer's status and code (v1's envelope; expectError also
// validates it against the v1 schemas where they are reachable).
func codeOf(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) envelope {
	t.Helper()
	require.Equal(t, status, rec.Code, "%s", rec.Body)
	var e envelope
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s", rec.Body)
	require.Equal(t, code, e.Error, "%s", rec.Body)
	return e
}

// v2's bulk cancel: tenant-bound ids, each authorised on its own (another tenant's id
// is id_tenant_mismatch, a key without runs:cancel gets run_forbidden entries, never a
// top-level 403), each failure the error envelope with v2's code, 200 whatever the ids.
func TestBulkCancelV2(t *testing.T) {
	env := newTestEnv(t)
	for id, st := range map[string]string{"r_live": protocol.StatusRunning, "r_bare": protocol.StatusRunning, "r_over": protocol.StatusCompleted} {
		env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: id, WorkflowID: "conformance-noop", Status: st, Owner: workflows.Owner{Tenant: "default"}}})
	}
	v2 := []string{"OpenWOP-Version", "2"}
	rec := env.do("POST", "/runs:bulk-cancel", fullKey, `{"runIds":["default/r_live","tenant-b/r_live","r_bare","default/r_over","default/run-does-not-exist-xxxxxxxx"]}`, v2...)
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	type entry struct {
		RunID  string `json:"runId"`
		OK     bool   `json:"ok"`
		Status string `json:"status"`
		Error  *struct {
			Error, Message string
		} `json:"error"`
	}
	var body struct{ Results []entry }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	got := []string{}
	for _, r := range body.Results {
		if r.OK {
			got = append(got, r.RunID+":ok:"+r.Status)
		} else {
			got = append(got, r.RunID+":"+r.Error.Error)
			assert.NotEmpty(t, r.Error.Message)
		}
	}
	assert.Equal(t, []string{"default/r_live:ok:cancelling", "tenant-b/r_live:id_tenant_mismatch", "r_bare:ok:cancelling",
		"default/r_over:run_terminal", "default/run-does-not-exist-xxxxxxxx:not_found"}, got)
	require.Len(t, env.ft.get("r_live").signals, 1, "the caller's run got one cancel, the foreign id none")

	rec = env.do("POST", "/runs:bulk-cancel", lowKey, `{"runIds":["default/r_live","default/r_bare"]}`, v2...)
	require.Equal(t, 200, rec.Code, "no top-level 403 at major 2: %s", rec.Body)
	body.Results = nil
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Len(t, body.Results, 2)
	for _, r := range body.Results {
		require.False(t, r.OK)
		assert.Equal(t, "run_forbidden", r.Error.Error)
	}
	require.Len(t, env.ft.get("r_bare").signals, 1, "nothing cancelled for a key that may not")

	ids := make([]string, 101)
	for i := range ids {
		ids[i] = fmt.Sprintf("default/r_%d", i)
	}
	many, _ := json.Marshal(map[string]any{"runIds": ids})
	rec = env.do("POST", "/runs:bulk-cancel", fullKey, string(many), v2...)
	require.Equal(t, 400, rec.Code, "%s", rec.Body)
	assert.Contains(t, rec.Body.String(), `"maxRunIds":100`)
	assert.Contains(t, rec.Body.String(), `"error":"validation_error"`)
}
