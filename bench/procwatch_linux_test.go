package bench

// procWatch reads /proc, which Linux has; this test runs where it does.

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The watch of this very process reads the CPU time the process's own counters show
// it spent (to the 10 ms tick of /proc).
func TestProcWatchReadsThisProcess(t *testing.T) {
	w := &procWatch{pids: map[string]int{"self": os.Getpid()}}
	before, c0 := w.sample(), cpuTime()
	for x := 0; cpuTime()-c0 < 80*time.Millisecond; x++ {
		_ = x * x
	}
	d := w.since(before)
	assert.GreaterOrEqual(t, d["self"], 50*time.Millisecond, "80 ms spent, read in 10 ms ticks")
}
