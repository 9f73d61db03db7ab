//go:build !nodev

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/worker"
)

// wop api refuses the seams without the allowance, serves the bound alone with it, and
// the classes sum to the worker's recovery bounds (dev adds its restart terms).
func TestAPISeamsNeedTheAllowance(t *testing.T) {
	env := func(string) string { return "" }
	var stderr bytes.Buffer
	seams, err := apiSeams(env, false, false, &stderr)
	require.NoError(t, err)
	assert.Nil(t, seams, "off by default")
	_, err = apiSeams(env, true, false, &stderr)
	assert.ErrorIs(t, err, errSeamsRefused)
	seams, err = apiSeams(env, true, true, &stderr)
	require.NoError(t, err)
	assert.Nil(t, seams.Kill, "wop api runs no worker to kill")
	r := worker.RecoveryOf(worker.DefaultConfig())
	for i, c := range seams.Recovery {
		assert.Equal(t, r.Classes()[i].Bound().Milliseconds(), c.Bound, c.Class)
	}
	dev := recoveryClasses(worker.DefaultConfig(), true)
	assert.Equal(t, (r.Dispatch + supervisorRestartDelay + devBootAllowance).Milliseconds(), dev[0].Bound, dev[0].Class)
}

// The supervisor starts its child again after a SIGKILL and returns the exit code of a
// child that exits on its own.
func TestSupervisorRestartsAKilledChild(t *testing.T) {
	count := filepath.Join(t.TempDir(), "starts")
	script := `echo x >> "$0"; [ "$(wc -l < "$0")" -ge 3 ] && exit 7; kill -9 $$`
	var stdout, stderr bytes.Buffer
	code := superviseDev(context.Background(), []string{"sh", "-c", script, count}, os.Environ(), &stdout, &stderr)
	assert.Equal(t, 7, code, stderr.String())
	raw, err := os.ReadFile(count)
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(raw), "x"), "two kills, two restarts")
	assert.Equal(t, 2, strings.Count(stderr.String(), "starting it again"))
}

// wop dev's seams stage both kills: each mode's class is one the bound seam declares,
// and the worker's kill hook is the seams' KillHeld, which kills through Kill.
func TestDevSeamsWireTheHeldKill(t *testing.T) {
	wcfg := worker.DefaultConfig()
	held, killed := 0, make(chan struct{}, 1)
	seams := devSeams(&wcfg, func() { held++ }, func() { killed <- struct{}{} })
	classes := map[string]bool{}
	for _, c := range seams.Recovery {
		classes[c.Class] = true
	}
	assert.True(t, classes[seams.KillClass], "after-accept's class %q is declared", seams.KillClass)
	assert.Equal(t, worker.ClassInHeldActivity, seams.HeldClass)
	assert.True(t, classes[seams.HeldClass], "during-execution's class %q is declared", seams.HeldClass)
	require.NotNil(t, wcfg.DurabilityKill, "the worker carries the kill hook")
	wcfg.DurabilityKill()
	select {
	case <-killed:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker's kill hook did not kill")
	}
	assert.Zero(t, held, "the held kill leaves dispatch alone")
}
