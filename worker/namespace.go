package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// DefaultNamespaceRetention is how long a namespace EnsureNamespace creates keeps a
// closed run's history (and so its events and transcript): 30 days, as
// deploy/temporal-namespace.sh creates it.
const DefaultNamespaceRetention = 30 * 24 * time.Hour

// namespaceVisibleWithin bounds the wait for a namespace just created to be usable: a
// Temporal frontend reads namespaces through a cache it refreshes every 10 s by default
// (frontend.namespaceCacheRefreshInterval), and answers "Namespace ... is not found"
// until then.
const namespaceVisibleWithin = 30 * time.Second

// EnsureNamespace creates namespace ns with the given retention when Temporal does not
// know it, then waits until the frontend serves it; it reports whether it created it.
// An existing namespace is left as it is (its retention too). Creating needs the rights
// of a namespace admin; a hosted Temporal (Temporal Cloud) creates namespaces only in
// its own console, and answers this with PermissionDenied, returned as is.
func EnsureNamespace(ctx context.Context, c client.Client, ns string, retention time.Duration) (bool, error) {
	if retention <= 0 {
		retention = DefaultNamespaceRetention
	}
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case err == nil:
		return false, nil
	case !errors.As(err, &notFound):
		return false, fmt.Errorf("describe namespace %q: %w", ns, err)
	}
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        ns,
		Description:                      "wop: OpenWOP runs as Temporal workflows",
		WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return false, fmt.Errorf("create namespace %q: %w", ns, err)
	}
	created := err == nil
	return created, waitNamespaceServed(ctx, c, ns)
}

// waitNamespaceServed polls the operator service, which reads namespaces through the
// frontend's cache, until it knows ns.
func waitNamespaceServed(ctx context.Context, c client.Client, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, namespaceVisibleWithin)
	defer cancel()
	for {
		_, err := missingSearchAttributes(ctx, c, ns, nil)
		var notFound *serviceerror.NamespaceNotFound
		if err == nil || !errors.As(err, &notFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %q was created but the frontend did not serve it within %s: %w", ns, namespaceVisibleWithin, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Setup prepares namespace ns for the host: it creates the namespace when missing (with
// retention) and registers the search attributes the runs keep current, with the legacy
// ones runs created before the tags set (workflows.SearchAttributesFor). It is what
// `wop setup` and `wop worker --ensure-search-attributes` do, and what
// deploy/temporal-namespace.sh does with the temporal CLI.
func Setup(ctx context.Context, c client.Client, ns string, retention time.Duration, legacy bool) (created bool, err error) {
	if created, err = EnsureNamespace(ctx, c, ns, retention); err != nil {
		return created, err
	}
	return created, EnsureSearchAttributes(ctx, c, ns, legacy)
}
