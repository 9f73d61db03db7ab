package devserver

import (
	"testing"

	"go.temporal.io/api/operatorservice/v1"
)

// endpointQueue is the task queue the server's endpoint name routes to ("" for none).
func endpointQueue(t *testing.T, s *Server, name string) string {
	t.Helper()
	c, ctx := dialServer(t, s)
	resp, err := c.OperatorService().ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: name})
	if err != nil {
		t.Fatalf("ListNexusEndpoints: %v", err)
	}
	if len(resp.GetEndpoints()) == 0 {
		return ""
	}
	w := resp.GetEndpoints()[0].GetSpec().GetTarget().GetWorker()
	if w.GetNamespace() != s.Namespace() {
		t.Errorf("endpoint %s targets namespace %q", name, w.GetNamespace())
	}
	return w.GetTaskQueue()
}

// TestNexusEndpointIsCreatedAndRepointed: the endpoint exists once the server is
// ready; a restart on the same database with another task queue points it there.
func TestNexusEndpointIsCreatedAndRepointed(t *testing.T) {
	dir := t.TempDir()
	s1 := start(t, Options{DataDir: dir, NexusEndpoints: []NexusEndpoint{{Name: "agents", TaskQueue: "wop"}}})
	if got := endpointQueue(t, s1, "agents"); got != "wop" {
		t.Fatalf("new database: endpoint routes to %q", got)
	}
	s1.Stop()
	s2 := start(t, Options{DataDir: dir, NexusEndpoints: []NexusEndpoint{{Name: "agents", TaskQueue: "wop-2"}}})
	if got := endpointQueue(t, s2, "agents"); got != "wop-2" {
		t.Errorf("restarted with another queue: endpoint routes to %q", got)
	}
}
