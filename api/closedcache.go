package api

import (
	"container/list"
	"sync"

	"github.com/wop-dev/wop/activities"
)

// Bounds of what an API process keeps of closed executions (closedCache).
const (
	// closedCacheBytes bounds the events kept (EventBytes): a closed execution's
	// records, decoded, are at most the few MB of history Temporal lets an execution
	// grow to before it suggests continuing as new.
	closedCacheBytes = 32 << 20
	// closedCacheLinks bounds the start events' links kept, each at most
	// (1+2)*MaxSegmentLinks links.
	closedCacheLinks = 4096
)

// closedCache keeps what this API process has read of the closed executions of runs:
// their event records (segmentRecords, the least recently used dropped first once
// they hold more than closedCacheBytes) and the links their start events carry. A
// closed execution never changes, so nothing kept goes stale; a page read from it is
// still answered only after the run's current execution has answered for the run (its
// tenant, its last event).
type closedCache struct {
	mu    sync.Mutex
	bytes int
	order *list.List // of *cachedRecords, the most recently used first
	byKey map[string]*list.Element

	linkOrder []string // keys, oldest first
	linksOf   map[string][]activities.Segment
}

// cachedRecords is one execution's records and the bytes the cache counts for them.
type cachedRecords struct {
	sr   *segmentRecords
	size int
}

func newClosedCache() *closedCache {
	return &closedCache{order: list.New(), byKey: map[string]*list.Element{}, linksOf: map[string][]activities.Segment{}}
}

func closedKey(runID, execution string) string { return runID + "/" + execution }

// records returns the records of execution seg of run runID, new when none are kept.
func (c *closedCache) records(runID string, seg activities.Segment) *segmentRecords {
	key := closedKey(runID, seg.RunID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cachedRecords).sr
	}
	sr := &segmentRecords{key: key, seg: seg, turn: make(chan struct{}, 1)}
	c.byKey[key] = c.order.PushFront(&cachedRecords{sr: sr})
	return sr
}

// grew counts delta more bytes for sr and drops the least recently used records
// (never sr) while the cache holds more than closedCacheBytes.
func (c *closedCache) grew(sr *segmentRecords, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[sr.key]; ok && el.Value.(*cachedRecords).sr == sr {
		el.Value.(*cachedRecords).size += delta
		c.bytes += delta
	}
	for el := c.order.Back(); el != nil && c.bytes > closedCacheBytes; {
		prev := el.Prev()
		if cr := el.Value.(*cachedRecords); cr.sr != sr {
			c.order.Remove(el)
			delete(c.byKey, cr.sr.key)
			c.bytes -= cr.size
		}
		el = prev
	}
}

// drop forgets sr (its records proved incomplete).
func (c *closedCache) drop(sr *segmentRecords) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[sr.key]; ok && el.Value.(*cachedRecords).sr == sr {
		c.order.Remove(el)
		delete(c.byKey, sr.key)
		c.bytes -= el.Value.(*cachedRecords).size
	}
}

// links returns the links execution's start event carries, if kept.
func (c *closedCache) links(runID, execution string) ([]activities.Segment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.linksOf[closedKey(runID, execution)]
	return l, ok
}

// keepLinks keeps the links of an execution's start event, dropping the oldest kept
// beyond closedCacheLinks.
func (c *closedCache) keepLinks(runID, execution string, links []activities.Segment) {
	key := closedKey(runID, execution)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.linksOf[key]; ok {
		return
	}
	c.linksOf[key] = links
	c.linkOrder = append(c.linkOrder, key)
	if len(c.linkOrder) > closedCacheLinks {
		delete(c.linksOf, c.linkOrder[0])
		c.linkOrder = c.linkOrder[1:]
	}
}
