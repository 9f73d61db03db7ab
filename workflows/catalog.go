package workflows

import (
	"sort"

	"github.com/wop-dev/wop/packs"
)

// Catalog is the set of workflow definitions a host serves: the packs of the packs
// folder (each as a workflow of its own, id = pack id) and, when seeded, the OpenWOP
// conformance fixtures.
type Catalog struct {
	defs     map[string]*Definition
	packs    map[string]*packs.Pack
	fixtures []string
}

// CatalogOptions configures NewCatalog.
type CatalogOptions struct {
	Packs        []*packs.Pack
	SeedFixtures bool
}

// NewCatalog builds the catalog.
func NewCatalog(opts CatalogOptions) (*Catalog, error) {
	c := &Catalog{defs: map[string]*Definition{}, packs: map[string]*packs.Pack{}}
	for _, p := range opts.Packs {
		c.packs[p.ID] = p
	}
	return c, nil
}

// Definition returns the definition with the given id.
func (c *Catalog) Definition(id string) (*Definition, bool) {
	d, ok := c.defs[id]
	return d, ok
}

// Pack returns the pack with the given id.
func (c *Catalog) Pack(id string) (*packs.Pack, bool) {
	p, ok := c.packs[id]
	return p, ok
}

// IDs lists every definition id, sorted.
func (c *Catalog) IDs() []string {
	ids := make([]string, 0, len(c.defs))
	for id := range c.defs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Fixtures lists the seeded conformance fixture ids, sorted.
func (c *Catalog) Fixtures() []string { return append([]string(nil), c.fixtures...) }
