package workflows_test

import (
	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/workflows"
)

// The run's tests run pack runs, and the replay tests replay them, with the pack agent
// the worker runs (package packagent, which imports this package and so is registered
// from this external test, as worker.Register does in a worker).
func init() {
	packagent.Register()
	workflows.ServePack = func(p *packs.Pack) workflows.ServedPack { return packagent.Serve(p) }
}
