package agentclient

import (
	"slices"
	"strings"
	"testing"

	"github.com/wop-dev/wop/internal/golist"
)

// TestClientLinksNoHost checks the import graph: a caller's worker that imports this
// package links the Temporal SDK, the protocol's vocabulary and the payload codec, and
// nothing else of the host (its workflows, activities, engine, packs, API, worker), no
// provider SDK, no Echo and no Temporal server.
func TestClientLinksNoHost(t *testing.T) {
	deps, err := golist.Deps("github.com/wop-dev/wop/agentclient")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range deps {
		switch {
		case strings.HasPrefix(pkg, "github.com/wop-dev/wop/") && pkg != "github.com/wop-dev/wop/agentclient" && pkg != "github.com/wop-dev/wop/protocol" &&
			pkg != "github.com/wop-dev/wop/internal/payloadcodec":
			t.Errorf("agentclient depends on %s", pkg)
		case strings.HasPrefix(pkg, "go.temporal.io/server"), strings.HasPrefix(pkg, "github.com/labstack/echo"),
			strings.HasPrefix(pkg, "github.com/openai/"), strings.HasPrefix(pkg, "github.com/anthropics/"):
			t.Errorf("agentclient depends on %s", pkg)
		}
	}
	if !slices.Contains(deps, "go.temporal.io/sdk/workflow") || !slices.Contains(deps, "github.com/wop-dev/wop/protocol") {
		t.Errorf("the dependencies of agentclient do not read as expected (the checks above would pass vacuously): %v", deps)
	}
}
