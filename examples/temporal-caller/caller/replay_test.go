package caller

import (
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestReplayCallerHistories replays the caller histories the end-to-end tests recorded
// (tests/agents_e2e_test.go, WOP_RECORD_HISTORIES=1) against Converse: a change that
// makes the caller decide differently breaks callers in flight.
func TestReplayCallerHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded caller histories in testdata: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var hist historypb.History
		if err := protojson.Unmarshal(raw, &hist); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflowWithOptions(Converse, workflow.RegisterOptions{Name: WorkflowName})
		r.RegisterWorkflowWithOptions(ConverseNexus, workflow.RegisterOptions{Name: NexusWorkflowName})
		if err := r.ReplayWorkflowHistory(nil, &hist); err != nil {
			t.Errorf("replay of %s: %v", f, err)
		}
	}
}
