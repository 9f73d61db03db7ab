package engine

import (
	"strings"
	"testing"

	"github.com/wop-dev/wop/internal/golist"
)

// goListDeps returns the packages pkg depends on, itself included.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	deps, err := golist.Deps(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return deps
}

// TestEngineStaysPure checks the import graph: the deterministic engine speaks of
// conversations through convo, which imports the standard library only, and links
// neither the worker's activities, nor a provider SDK, nor Temporal.
func TestEngineStaysPure(t *testing.T) {
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
