package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/wop-dev/wop/internal/golist"
)

// TestProductionPathDoesNotLinkTheServer checks the import graph: the packages the
// production worker and API are made of, and the binary built with -tags nodev, must
// not depend on the embedded Temporal server or its UI. Only dev.go reaches them.
func TestProductionPathDoesNotLinkTheServer(t *testing.T) {
	forbidden := []string{"go.temporal.io/server", "github.com/temporalio/ui-server", "github.com/wop-dev/wop/internal/devserver"}
	for _, args := range [][]string{
		{"github.com/wop-dev/wop/worker", "github.com/wop-dev/wop/api"},
		{"-tags", "nodev", "github.com/wop-dev/wop/cmd/wop"},
	} {
		deps, err := golist.Deps(args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range deps {
			for _, f := range forbidden {
				if pkg == f || strings.HasPrefix(pkg, f+"/") {
					t.Errorf("go list -deps %s lists %s", strings.Join(args, " "), pkg)
				}
			}
		}
	}
	// The default build does reach the server, through dev.go: the test above would
	// pass vacuously if the package names were wrong.
	deps, err := golist.Deps("github.com/wop-dev/wop/cmd/wop")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(deps, "go.temporal.io/server/temporal") {
		t.Error("the default build of cmd/wop no longer embeds the server; wop dev needs it")
	}
}
