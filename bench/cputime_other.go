//go:build !unix

package bench

import "time"

// cpuTime is not measured here; the CPU per turn is then not printed.
func cpuTime() time.Duration { return 0 }
