package api

import (
	"testing"

	"github.com/wop-dev/wop/packs"
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
		Packs:      map[string]*packs.Pack{"p": {ID: "p", Version: "1.0.0"}},
		PackHashes: map[string]string{"p": "sha256:recorded"},
		Limits:     &workflows.TurnLimits{MaxRounds: 3, MaxToolCalls: 4}}
	rec := env.do("POST", "/v1/runs/r_basis:fork", fullKey, `{"mode":"replay"}`)
	if rec.Code != 201 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	got := decode[map[string]any](t, rec.Body.Bytes())
	in := env.ft.get(got["runId"].(string)).input
	if in.Definition == nil || in.Definition.ID != "gone-from-the-catalog" || in.PackHashes["p"] != "sha256:recorded" ||
		in.Packs["p"] == nil || in.Packs["p"].Hash != "sha256:recorded" || in.Limits == nil || in.Limits.MaxRounds != 3 || in.Fork == nil {
		t.Fatalf("fork input %+v", in)
	}
}
