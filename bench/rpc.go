package bench

import (
	"context"
	"maps"
	"path"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// rpcCounter counts the Temporal calls this process makes (the worker's, the API's and
// the floor's: they share one client), by method, so a workload's calls per turn can
// be compared with the floor's.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int64
	// failed counts the calls that failed, by "method code" (a retried call shows
	// here with each failed attempt).
	failed map[string]int64
}

func newRPCCounter() *rpcCounter {
	return &rpcCounter{n: map[string]int64{}, failed: map[string]int64{}}
}

// dialOption installs the counter on a client connection.
func (r *rpcCounter) dialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		r.mu.Lock()
		r.n[path.Base(method)]++
		if err != nil {
			msg := status.Convert(err).Message()
			if len(msg) > 70 {
				msg = msg[:70]
			}
			r.failed[path.Base(method)+" "+status.Code(err).String()+" "+msg]++
		}
		r.mu.Unlock()
		return err
	})
}

func (r *rpcCounter) snapshot() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

// failures is a copy of the failed calls by "method code".
func (r *rpcCounter) failures() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.failed)
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
