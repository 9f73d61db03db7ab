package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/packagent"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/workflows"
)

// LoadPacks loads every pack of dir with its mock script (packs.LoadDir). Warnings are
// logged; a pack file with errors (in itself or in its mock script) is left out and
// logged once, as one error naming the file and listing its diagnostics, and the other
// packs serve. Only a folder that cannot be read is an error. A missing folder yields
// no packs.
func LoadPacks(dir string, logger *slog.Logger) ([]*packs.Loaded, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	loaded, diags, err := packs.LoadDir(dir)
	for _, d := range diags.Warnings() {
		logger.Warn("Pack warning", "diagnostic", d.String())
	}
	var de *packs.DirError
	if errors.As(err, &de) {
		for _, f := range de.Failed {
			logger.Error("Pack not served", "file", f, "errors", de.FileDiagnostics(f).String())
		}
		return loaded, nil
	}
	return loaded, err
}

// LoadCatalog builds the catalog of workflow definitions: each loaded pack as a
// workflow of its own, plus the OpenWOP conformance fixtures when seedFixtures is set.
// Every run it starts carries limits (Config.TurnLimits).
func LoadCatalog(loaded []*packs.Loaded, seedFixtures bool, limits workflows.TurnLimits) (*workflows.Catalog, error) {
	ps := make([]workflows.ServedPack, 0, len(loaded))
	for _, l := range loaded {
		ps = append(ps, packagent.Serve(l.Pack))
	}
	cat, err := workflows.NewCatalog(workflows.CatalogOptions{Packs: ps, SeedFixtures: seedFixtures, Limits: limits})
	if err != nil {
		return nil, fmt.Errorf("build workflow catalog: %w", err)
	}
	return cat, nil
}

// EnsureSearchAttributes registers on namespace ns every search attribute of
// workflows.SearchAttributesFor(legacy) it lacks. A run whose workflow sets an
// unregistered search attribute fails every workflow task, so a worker can check this
// before it polls.
func EnsureSearchAttributes(ctx context.Context, c client.Client, ns string, legacy bool) error {
	missing, err := missingSearchAttributes(ctx, c, ns, workflows.SearchAttributesFor(legacy))
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: ns, SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("register search attributes on namespace %q: %w", ns, err)
	}
	return nil
}

// CheckSearchAttributes fails when namespace ns lacks one of workflows.SearchAttributes,
// naming them and how to register them: a worker that polled anyway would fail every
// workflow task of every run that sets one. A namespace that lacks every one of
// workflows.LegacySearchAttributes passes with legacy false: it was set up without
// them (`wop setup --legacy-attributes=false`), for no run created before the tags.
// When the namespace's attributes cannot be listed (no operator rights, as on some
// hosted namespaces), it reports that as unknown and returns nil; the caller may warn.
func CheckSearchAttributes(ctx context.Context, c client.Client, ns string) (checked, legacy bool, err error) {
	missing, err := missingSearchAttributes(ctx, c, ns, workflows.SearchAttributes)
	if err != nil {
		return false, true, nil
	}
	legacy = slices.ContainsFunc(workflows.LegacySearchAttributes, func(name string) bool {
		_, lacks := missing[name]
		return !lacks
	})
	if !legacy {
		for _, name := range workflows.LegacySearchAttributes {
			delete(missing, name)
		}
	}
	if len(missing) == 0 {
		return true, legacy, nil
	}
	names := make([]string, 0, len(missing))
	for name := range missing {
		names = append(names, name)
	}
	slices.Sort(names)
	return true, legacy, fmt.Errorf("namespace %q lacks the search attributes %s; register them with `wop worker --ensure-search-attributes` or deploy/temporal-namespace.sh before the worker polls",
		ns, strings.Join(names, ", "))
}

// missingSearchAttributes lists the search attributes of want that namespace ns has not
// registered, with their types.
func missingSearchAttributes(ctx context.Context, c client.Client, ns string, want map[string]enumspb.IndexedValueType) (map[string]enumspb.IndexedValueType, error) {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %q: %w", ns, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range want {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	return missing, nil
}
