package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/worker"
)

// The conformance seams' boot flag (api.ConformanceSeams): off by default; `wop dev`
// may enable it, `wop api` only with the second flag as well.
const (
	envConformanceSeams      = "WOP_CONFORMANCE_SEAMS"
	envAllowConformanceSeams = "WOP_ALLOW_CONFORMANCE_SEAMS"
)

// The dev supervisor's share of a recovery after a kill (dev_supervise.go): it starts
// the process again after supervisorRestartDelay, and the process boots (Temporal on
// its SQLite file, the worker, the API) within devBootAllowance. The allowance is a
// budget, not a timeout: a restart measured 0.5 to 1.1 s on 2 shared cores.
const (
	supervisorRestartDelay = 250 * time.Millisecond
	devBootAllowance       = 3 * time.Second
)

// errSeamsRefused is wop api's answer to --conformance-seams without the allowance.
var errSeamsRefused = errors.New("--conformance-seams (" + envConformanceSeams + ") mounts test seams that production must not serve; " +
	"wop api serves them only with --allow-conformance-seams (" + envAllowConformanceSeams + "=true) as well")

// recoveryClasses are the recovery bounds of a worker configured as cfg, per class, as
// the bound seam serves them; restarted adds the dev supervisor's terms, paid when the
// killed process is the only worker and must come back.
func recoveryClasses(cfg worker.Config, restarted bool) []api.RecoveryClass {
	var out []api.RecoveryClass
	for _, c := range worker.RecoveryOf(cfg).Classes() {
		var terms []api.RecoveryTerm
		if restarted {
			terms = append(terms, api.Term("supervisorRestart", supervisorRestartDelay), api.Term("hostBoot", devBootAllowance))
		}
		for _, t := range c.Terms {
			terms = append(terms, api.Term(t.Name, t.D))
		}
		out = append(out, api.NewRecoveryClass(c.Name, terms...))
	}
	return out
}

// devSeams are the seams `wop dev --conformance-seams` serves: the bound, and the kill
// of both modes. after-accept holds dispatch (holdDispatch) and kills; during-execution
// starts a run whose held work, in the worker's first attempt, calls the kill through
// KillHeld, which wcfg's worker carries as its DurabilityKill hook.
func devSeams(wcfg *worker.Config, holdDispatch, kill func()) *api.ConformanceSeams {
	seams := &api.ConformanceSeams{
		Recovery: recoveryClasses(*wcfg, true), KillClass: worker.ClassAccepted, HeldClass: worker.ClassInHeldActivity,
		HoldDispatch: holdDispatch, Kill: kill,
	}
	wcfg.DurabilityKill = seams.KillHeld
	return seams
}

// apiSeams is what `wop api` serves under the flags: the bound seam only (it runs no
// worker, so it has none to kill), from the worker tuning of its environment.
func apiSeams(env func(string) string, on, allowed bool, stderr io.Writer) (*api.ConformanceSeams, error) {
	if !on {
		return nil, nil
	}
	if !allowed {
		return nil, errSeamsRefused
	}
	cfg, err := worker.ConfigFromEnv(env)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(stderr, "wop api: conformance seams are on (--conformance-seams): "+api.DurabilityBoundPath+" is served; never in production")
	return &api.ConformanceSeams{Recovery: recoveryClasses(cfg, false)}, nil
}
