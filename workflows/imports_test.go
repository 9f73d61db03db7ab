package workflows

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWorkflowCodeSpeaksNoHTTP checks the import graph: the workflow code refuses and
// fails with OpenWOP codes (package protocol) and leaves HTTP statuses to the API, so
// it does not import net/http; protocol itself imports nothing.
func TestWorkflowCodeSpeaksNoHTTP(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not on PATH")
	}
	imports := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		return strings.Fields(string(out))
	}
	workflows := imports("github.com/wop-dev/wop/workflows")
	if !strings.Contains(strings.Join(workflows, "\n"), "go.temporal.io/sdk/workflow") {
		t.Fatalf("the imports of workflows do not read as expected: %v", workflows)
	}
	for _, imp := range workflows {
		if imp == "net/http" {
			t.Errorf("workflows imports net/http; refuse with a protocol code and let api/errors.go pick the status")
		}
	}
	if p := imports("github.com/wop-dev/wop/protocol"); len(p) != 0 {
		t.Errorf("protocol imports %v; it imports nothing", p)
	}
}
