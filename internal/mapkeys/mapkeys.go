// Package mapkeys lists a map's keys in a fixed order, the way workflow code and
// everything that encodes, validates or reports over a map must visit it.
package mapkeys

import (
	"cmp"
	"slices"
)

// Sorted returns the keys of m in ascending order; never nil, so a list of no keys
// encodes as [] in JSON, not null (slices.Sorted(maps.Keys(m)) returns nil then).
func Sorted[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
