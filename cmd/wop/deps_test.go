package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProductionPathDoesNotLinkTheServer checks the import graph: the packages the
// production worker and API are made of, and the binary built with -tags nodev, must
// not depend on the embedded Temporal server or its UI. Only dev.go reaches them.
func TestProductionPathDoesNotLinkTheServer(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not on PATH")
	}
	forbidden := []string{"go.temporal.io/server", "github.com/temporalio/ui-server", "github.com/wop-dev/wop/internal/devserver"}
	for _, args := range [][]string{
		{"list", "-deps", "github.com/wop-dev/wop/worker", "github.com/wop-dev/wop/api"},
		{"list", "-deps", "-tags", "nodev", "github.com/wop-dev/wop/cmd/wop"},
	} {
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if pkg == f || strings.HasPrefix(pkg, f+"/") {
					t.Errorf("go %s lists %s", strings.Join(args, " "), pkg)
				}
			}
		}
	}
	// The default build does reach the server, through dev.go: the test above would
	// pass vacuously if the package names were wrong.
	out, err := exec.Command("go", "list", "-deps", "github.com/wop-dev/wop/cmd/wop").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "go.temporal.io/server/temporal\n") {
		t.Error("the default build of cmd/wop no longer embeds the server; wop dev needs it")
	}
}
