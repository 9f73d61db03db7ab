package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// goListDeps returns the packages pkg depends on, itself included.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// TestEngineStaysPure checks the import graph: the deterministic engine speaks of
// conversations through convo, which imports the standard library only, and links
// neither the worker's activities, nor a provider SDK, nor Temporal.
func TestEngineStaysPure(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not on PATH")
	}
	forbidden := []string{
		"github.com/wop-dev/wop/activities",
		"github.com/openai/openai-go",
		"github.com/anthropics/anthropic-sdk-go",
		"go.temporal.io",
	}
	for _, dep := range goListDeps(t, "github.com/wop-dev/wop/engine") {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("engine depends on %s", dep)
			}
		}
	}
	for _, dep := range goListDeps(t, "github.com/wop-dev/wop/convo") {
		if dep != "github.com/wop-dev/wop/convo" && strings.Contains(strings.SplitN(dep, "/", 2)[0], ".") {
			t.Errorf("convo depends on %s; it imports the standard library only", dep)
		}
	}
	// The activities do link the SDKs: the checks above would pass vacuously if the
	// package paths were wrong.
	deps := strings.Join(goListDeps(t, "github.com/wop-dev/wop/activities"), "\n") + "\n"
	for _, f := range forbidden[1:3] {
		if !strings.Contains(deps, "\n"+f+"/") {
			t.Errorf("activities no longer depend on %s; update the forbidden list", f)
		}
	}
}
