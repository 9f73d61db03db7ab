package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// rpcCounter counts the Temporal calls this process makes (the worker's, the API's and
// the floor's: they share one client), by method, so a workload's calls per turn can
// be compared with the floor's.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func newRPCCounter() *rpcCounter { return &rpcCounter{n: map[string]int64{}} }

// dialOption installs the counter on a client connection.
func (r *rpcCounter) dialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		r.mu.Lock()
		r.n[path.Base(method)]++
		r.mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

func (r *rpcCounter) snapshot() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

// rpcDelta is the calls made between two snapshots.
func rpcDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// printRPCs prints the calls per turn of the floor and the host side by side.
func printRPCs(w io.Writer, floor, host map[string]int64, floorTurns, hostTurns int) {
	if floorTurns == 0 || hostTurns == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(host))
	for k := range floor {
		if _, ok := host[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var ft, ht float64
	var b strings.Builder
	for _, k := range names {
		f, h := float64(floor[k])/float64(floorTurns), float64(host[k])/float64(hostTurns)
		ft, ht = ft+f, ht+h
		if f < 0.05 && h < 0.05 {
			continue
		}
		fmt.Fprintf(&b, "  %-40s %6.2f %6.2f\n", k, f, h)
	}
	fmt.Fprintf(w, "Temporal calls per turn during the throughput workloads (all callers in this process):\n")
	fmt.Fprintf(w, "  %-40s %6s %6s\n", "method", "floor", "host")
	fmt.Fprint(w, b.String())
	fmt.Fprintf(w, "  %-40s %6.2f %6.2f\n\n", "total", ft, ht)
}

// printCPU prints the CPU time per turn of both throughput workloads: what a turn costs
// the whole process (server, worker, API and the bench's clients), which bounds the
// turns per second of a machine whatever else it runs.
func printCPU(w io.Writer, floor, host time.Duration, floorTurns, hostTurns int) {
	if floorTurns == 0 || hostTurns == 0 || floor <= 0 || host <= 0 {
		return
	}
	f, h := ms(floor)/float64(floorTurns), ms(host)/float64(hostTurns)
	fmt.Fprintf(w, "CPU per turn during the throughput workloads (this whole process): floor %.1f ms, host %.1f ms; %d cores give at most %.0f and %.0f turns/s\n\n",
		f, h, runtime.NumCPU(), float64(runtime.NumCPU())*1000/f, float64(runtime.NumCPU())*1000/h)
}
