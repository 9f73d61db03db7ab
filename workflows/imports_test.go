package workflows

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWorkflowCodeSpeaksNoHTTP reads the imports of the workflow code (this package's
// non-test files, package webhooks and package packagent), of activities and of
// protocol: the workflow code refuses and fails with OpenWOP codes and leaves HTTP
// statuses to the API (api/errors.go), so it does not import net/http; protocol
// imports the standard library only. The run core imports neither the pack engine nor
// the packs nor the pack agent: the agent lives in package packagent, which imports
// the run core and reaches it through the conversation seam only.
func TestWorkflowCodeSpeaksNoHTTP(t *testing.T) {
	importsOf := func(dir string) map[string]bool {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		seen := map[string]bool{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value) // the parser accepted it: it unquotes
				seen[path] = true
			}
		}
		return seen
	}
	workflows := importsOf(".")
	if !workflows["go.temporal.io/sdk/workflow"] || !workflows["github.com/wop-dev/wop/protocol"] {
		t.Fatalf("the imports of workflows do not read as expected: %v", workflows)
	}
	if workflows["net/http"] {
		t.Errorf("workflows imports net/http; refuse with a protocol code and let api/errors.go pick the status")
	}
	// The webhook workflows (package webhooks) build on the run's package and know no
	// packs; the activities know neither workflow package, whose names the process that
	// assembles a worker hands them (worker.Register, ClientTranscripts.Query).
	hooks := importsOf("../webhooks")
	if !hooks["github.com/wop-dev/wop/workflows"] {
		t.Fatalf("the imports of webhooks do not read as expected: %v", hooks)
	}
	for _, p := range []string{"github.com/wop-dev/wop/engine", "github.com/wop-dev/wop/packs", "github.com/wop-dev/wop/api", "github.com/wop-dev/wop/worker", "net/http"} {
		if hooks[p] {
			t.Errorf("webhooks imports %s; the webhook workflows use the run's events and the DeliverWebhook activity only", p)
		}
	}
	// The run core knows no packs: the PromptPack agent (package packagent) serves its
	// conversation seam and imports it, never the other way, and the engine and the
	// packs it runs are that package's to import.
	for _, p := range []string{"github.com/wop-dev/wop/engine", "github.com/wop-dev/wop/packs", "github.com/wop-dev/wop/packagent"} {
		if workflows[p] {
			t.Errorf("workflows imports %s; the run core asks an agent through ConversationAgent and a pack through ServedPack (package packagent)", p)
		}
	}
	agent := importsOf("../packagent")
	if !agent["github.com/wop-dev/wop/workflows"] || !agent["github.com/wop-dev/wop/engine"] {
		t.Fatalf("the imports of packagent do not read as expected: %v", agent)
	}
	if agent["net/http"] {
		t.Errorf("packagent imports net/http; the pack agent's workflow code refuses with protocol codes too")
	}
	for p := range importsOf("../activities") {
		if p == "github.com/wop-dev/wop/workflows" || p == "github.com/wop-dev/wop/webhooks" {
			t.Errorf("activities imports %s; workflows import activities, never the other way", p)
		}
	}
	for p := range importsOf("../protocol") {
		if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
			t.Errorf("protocol imports %s; it imports the standard library only", p)
		}
	}
}
