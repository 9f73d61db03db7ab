package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/workflows"
)

// LoadPacks loads every pack of dir with its mock script. Warnings are logged; any error
// fails the load with every diagnostic in the message, because serving a partial
// packs folder would make runs depend on which file happened to be broken. A missing
// folder yields no packs.
func LoadPacks(dir string, logger *slog.Logger) ([]*packs.Loaded, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	loaded, diags, err := packs.LoadDir(dir)
	for _, d := range diags {
		if !d.IsError() {
			logger.Warn("Pack warning", "diagnostic", d.String())
		}
	}
	if err != nil {
		var b strings.Builder
		for _, d := range diags.Errors() {
			b.WriteString("\n  ")
			b.WriteString(d.String())
		}
		return nil, fmt.Errorf("load packs from %s: %w%s", dir, err, b.String())
	}
	return loaded, nil
}

// LoadCatalog builds the catalog of workflow definitions: each loaded pack as a
// workflow of its own, plus the OpenWOP conformance fixtures when seedFixtures is set.
// Every run it starts carries limits (Config.TurnLimits).
func LoadCatalog(loaded []*packs.Loaded, seedFixtures bool, limits workflows.TurnLimits) (*workflows.Catalog, error) {
	ps := make([]*packs.Pack, 0, len(loaded))
	for _, l := range loaded {
		ps = append(ps, l.Pack)
	}
	cat, err := workflows.NewCatalog(workflows.CatalogOptions{Packs: ps, SeedFixtures: seedFixtures, Limits: limits})
	if err != nil {
		return nil, fmt.Errorf("build workflow catalog: %w", err)
	}
	return cat, nil
}

// EnsureSearchAttributes registers on namespace ns every search attribute of
// workflows.SearchAttributes it lacks. A run whose workflow sets an unregistered search
// attribute fails every workflow task, so a worker can check this before it polls.
func EnsureSearchAttributes(ctx context.Context, c client.Client, ns string) error {
	ops := c.OperatorService()
	have, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %q: %w", ns, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributes {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: ns, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("register search attributes on namespace %q: %w", ns, err)
	}
	return nil
}
