package packagent

import (
	"sync"

	"github.com/wop-dev/wop/workflows"
)

var registerOnce sync.Once

// Register makes the pack agent the agent of node type workflows.PackNodeType
// (vendor.wop.pack). The process that assembles a worker calls it (worker.Register)
// before the worker starts, as do tests that run or replay pack runs: it is code, not
// configuration, so every replay of a run finds the same agent. Calling it again does
// nothing.
func Register() {
	registerOnce.Do(func() { workflows.RegisterAgent(workflows.PackNodeType, newPackAgent) })
}
