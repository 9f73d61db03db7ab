package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// A fork runs on what its source was started with (the recorded definition, packs by
// hash and limits), not on what the catalog holds now.
func TestForkRunsOnTheSourceBasis(t *testing.T) {
	env := newTestEnv(t)
	def := env.cat.defs["conformance-noop"]
	src := env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_basis", WorkflowID: "gone-from-the-catalog", Status: "completed"}, events: noopEvents("r_basis")})
	recorded := *def
	recorded.ID = "gone-from-the-catalog"
	src.input = workflows.RunInput{RunID: "r_basis", Definition: &recorded,
		Packs:      map[string]json.RawMessage{"p": json.RawMessage(`{"id":"p","version":"1.0.0"}`)},
		PackHashes: map[string]string{"p": "sha256:recorded"},
		Limits:     &workflows.TurnLimits{MaxRounds: 3, MaxToolCalls: 4}}
	rec := env.do("POST", "/v1/runs/r_basis:fork", fullKey, `{"mode":"replay"}`)
	if rec.Code != 201 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	got := decode[map[string]any](t, rec.Body.Bytes())
	in := env.ft.get(got["runId"].(string)).input
	if in.Definition == nil || in.Definition.ID != "gone-from-the-catalog" || in.PackHashes["p"] != "sha256:recorded" ||
		string(in.Packs["p"]) != `{"id":"p","version":"1.0.0"}` || in.Limits == nil || in.Limits.MaxRounds != 3 || in.Fork == nil {
		t.Fatalf("fork input %+v", in)
	}
}

// Each way a fork point can be invalid, at both majors, against a completed source
// whose log is sequences 0-3 (run.completed at 3): a negative or non-integer fromSeq is
// a 400 at both; at v2 a fromSeq not in the log (past the terminal event) is 422
// fork_point_invalid, the terminal event itself a valid point; v1 keeps its answers (a
// fork at last+1 is accepted, one past it a 422 validation_error). A source the caller
// cannot see is a 404 at both. No refused fork starts a run.
func TestForkPointValidation(t *testing.T) {
	env := newTestEnv(t)
	env.ft.add(&fakeRun{snap: workflows.Snapshot{RunID: "r_fp", WorkflowID: "conformance-noop", Status: "completed"}, events: noopEvents("r_fp")})
	refused := []struct {
		name, path, key, body, version string
		status                         int
		code, inMsg                    string
	}{
		{"v1 negative", "/v1/runs/r_fp:fork", fullKey, `{"mode":"replay","fromSeq":-1}`, "", 400, CodeValidation, "fromSeq must be >= 0"},
		{"v2 negative", "/runs/r_fp:fork", fullKey, `{"mode":"replay","fromSeq":-1}`, "2", 400, CodeValidation, "fromSeq must be >= 0"},
		{"v1 fraction", "/v1/runs/r_fp:fork", fullKey, `{"mode":"replay","fromSeq":1.5}`, "", 400, CodeValidation, "fromSeq"},
		{"v2 string", "/runs/r_fp:fork", fullKey, `{"mode":"replay","fromSeq":"2"}`, "2", 400, CodeValidation, "fromSeq"},
		{"v1 past last+1", "/v1/runs/r_fp:fork", fullKey, `{"mode":"replay","fromSeq":5}`, "", 422, CodeValidation, "fromSeq 5 is beyond the source log (last sequence 3)"},
		{"v2 past the terminal event", "/runs/r_fp:fork", fullKey, `{"mode":"replay","fromSeq":4}`, "2", 422, protocol.CodeForkPointInvalid, "fromSeq 4 is not in the source's log (last sequence 3)"},
		{"v2 far past the end", "/runs/default%2Fr_fp:fork", fullKey, `{"mode":"replay","fromSeq":99999}`, "2", 422, protocol.CodeForkPointInvalid, "fromSeq 99999"},
		{"v1 unseen source", "/v1/runs/r_fp:fork", otherKey, `{"mode":"replay","fromSeq":0}`, "", 404, CodeNotFound, "r_fp"},
		{"v2 unseen source", "/runs/r_fp:fork", otherKey, `{"mode":"replay","fromSeq":0}`, "2", 404, CodeNotFound, "r_fp"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			var e envelope
			rec := env.do("POST", tc.path, tc.key, tc.body, "OpenWOP-Version", tc.version)
			if tc.version == "2" {
				e = expectV2Error(t, rec, tc.status, tc.code)
			} else {
				e = env.expectError(rec, tc.status, tc.code)
			}
			if !strings.Contains(e.Message, tc.inMsg) {
				t.Errorf("message %q does not mention %q", e.Message, tc.inMsg)
			}
			if tc.status != 404 && e.Details["field"] != "fromSeq" {
				t.Errorf("details %v do not name fromSeq", e.Details)
			}
		})
	}
	if env.ft.starts != 0 {
		t.Fatalf("%d runs started by refused forks", env.ft.starts)
	}
	for _, tc := range []struct {
		name, path, body, version string
		from                      float64
	}{
		{"v2 the terminal event", "/runs/r_fp:fork", `{"mode":"replay","fromSeq":3}`, "2", 3},
		{"v2 default", "/runs/r_fp:fork", `{"mode":"replay"}`, "2", 0},
		{"v1 last+1", "/v1/runs/r_fp:fork", `{"mode":"replay","fromSeq":4}`, "", 4},
	} {
		rec := env.do("POST", tc.path, fullKey, tc.body, "OpenWOP-Version", tc.version)
		if rec.Code != 201 {
			t.Fatalf("%s: %d %s", tc.name, rec.Code, rec.Body)
		}
		if got := decode[map[string]any](t, rec.Body.Bytes()); got["fromSeq"] != tc.from {
			t.Errorf("%s: fromSeq %v, want %v", tc.name, got["fromSeq"], tc.from)
		}
	}
}
