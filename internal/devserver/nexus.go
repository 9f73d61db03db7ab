package devserver

import (
	"context"
	"fmt"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
)

// NexusEndpoint is a Nexus endpoint the server creates once its namespace is ready: a
// worker target, Name routing to TaskQueue of the server's namespace (wop dev routes
// agentclient.DefaultNexusEndpoint to the host's queue).
type NexusEndpoint struct {
	Name, TaskQueue string
}

// ensureNexusEndpoint creates the endpoint, or points an existing one of that name (a
// database from an earlier start) at the task queue.
func (s *Server) ensureNexusEndpoint(ctx context.Context, ops operatorservice.OperatorServiceClient, e NexusEndpoint) error {
	spec := &nexuspb.EndpointSpec{
		Name: e.Name,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{
			Worker: &nexuspb.EndpointTarget_Worker{Namespace: s.opts.Namespace, TaskQueue: e.TaskQueue},
		}},
	}
	list, err := ops.ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: e.Name})
	if err != nil {
		return fmt.Errorf("list Nexus endpoint %q: %w", e.Name, err)
	}
	if have := list.GetEndpoints(); len(have) > 0 {
		w := have[0].GetSpec().GetTarget().GetWorker()
		if w.GetNamespace() == s.opts.Namespace && w.GetTaskQueue() == e.TaskQueue {
			return nil
		}
		if _, err := ops.UpdateNexusEndpoint(ctx, &operatorservice.UpdateNexusEndpointRequest{Id: have[0].GetId(), Version: have[0].GetVersion(), Spec: spec}); err != nil {
			return fmt.Errorf("update Nexus endpoint %q: %w", e.Name, err)
		}
		return nil
	}
	if _, err := ops.CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: spec}); err != nil {
		return fmt.Errorf("create Nexus endpoint %q: %w", e.Name, err)
	}
	return nil
}
