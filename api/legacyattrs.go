package api

import (
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/wop-dev/wop/workflows"
)

// Runs created before workflows.GateSearchAttributeSlots keep what changes within them
// in the legacy Keyword attributes (workflows.LegacySearchAttributes), not in WopTags,
// for their whole life. The API's queries match them by those attributes beside the
// tags, and read them where a run has no tags; the legacy clauses go with the gate,
// once `wop gates` counts no open run created before it (docs/DECISIONS.md,
// "Upgrades").

// tagsIn matches runs whose WopTags hold prefix:v for one of values.
func tagsIn(prefix string, values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = quote(workflows.Tag(prefix, v))
	}
	return "WopTags IN (" + strings.Join(q, ", ") + ")"
}

// legacyWaitingAny matches the legacy runs that wait on anyone.
const legacyWaitingAny = "(WopWaitingOn IS NOT NULL AND WopWaitingOn != '')"

// runTags reads the visibility record's WopTags, or, for a run created before them,
// its legacy attributes as tags.
func runTags(sa map[string]*commonpb.Payload) []string {
	if p := sa[workflows.SATags.GetName()]; p != nil {
		var tags []string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &tags); err == nil {
			return tags
		}
	}
	var tags []string
	for _, l := range []struct{ prefix, name string }{
		{workflows.TagPackState, workflows.SAPackState.GetName()}, {workflows.TagWaitingOn, workflows.SAWaitingOn.GetName()},
	} {
		if v := payloadString(sa[l.name]); v != "" {
			tags = append(tags, workflows.Tag(l.prefix, v))
		}
	}
	return tags
}
