package devserver

import (
	"sync/atomic"
	"time"

	"go.temporal.io/server/common/dynamicconfig"
)

// searchAttributesCacheTTL is how long the server's services keep their search
// attributes cache (the server's cacheRefreshInterval is 60 s), plus a margin.
const searchAttributesCacheTTL = 61 * time.Second

// dynamicConfig is the server's dynamic config: fixed values, except that
// system.forceSearchAttributesCacheRefreshOnRead is on only for a while after this
// process added search attributes to an existing database.
//
// With it on, every read of the search attributes (each workflow task that upserts
// them, each visibility write) reads the cluster metadata from SQLite again: seven
// reads per conversation turn, on the single connection every other call waits for.
// A new database has its search attributes before the server starts, so no cache can
// be stale; after AddSearchAttributes, the services' caches (loaded at startup) would
// lack the new ones until they expire, so reads are forced until then.
type dynamicConfig struct {
	values dynamicconfig.StaticClient
	// forceRefreshUntil is the UnixNano until which search attribute reads are forced.
	forceRefreshUntil atomic.Int64
}

var (
	forceRefreshKey = dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key()
	forceRefreshOn  = []dynamicconfig.ConstrainedValue{{Value: true}}
)

// GetValue implements dynamicconfig.Client.
func (d *dynamicConfig) GetValue(key dynamicconfig.Key) []dynamicconfig.ConstrainedValue {
	if key == forceRefreshKey {
		if _, set := d.values[key]; !set && time.Now().UnixNano() < d.forceRefreshUntil.Load() {
			return forceRefreshOn
		}
	}
	return d.values.GetValue(key)
}

// forceSearchAttributeReads forces search attribute reads from now until every cache
// loaded before now has expired. Call it before adding search attributes.
func (d *dynamicConfig) forceSearchAttributeReads() {
	d.forceRefreshUntil.Store(time.Now().Add(searchAttributesCacheTTL).UnixNano())
}
