package workflows

import (
	"maps"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wop-dev/wop/protocol"
)

// Search attributes the run workflow keeps current, so operators can filter runs in the
// Temporal UI and the API can list them from Temporal's visibility store. They take four
// Keyword slots (a namespace on SQL visibility has ten): WopWorkflowId, WopTenant,
// WopStatus and WopPackId, set when a run starts; what changes within a run is one
// KeywordList, WopTags, of prefixed values (Tag), beside WopApprovers (KeywordList) and
// WopCreatedAt (Datetime). For example
//
//	WopStatus = "waiting-approval" AND WopPackId = "support"
//	WopTags = "waitingKind:approval"            (a person must approve something)
//	WopTags = "waitingKind:conversation"        (a chat waits for its user's reply)
//	WopTags = "packState:resolution"            (a pack run in state resolution)
//	WopTags = "waitingTool:refund"              (a call of tool refund waits for approval)
//	WopTags = "stalledOn:model:openai"          (an outage of the provider holds the run)
//	WopCreatedAt > "2026-05-01T00:00:00Z"
//
// Runs created before GateSearchAttributeSlots (RunInput.Attributes 0) keep the Keyword
// attributes of LegacySearchAttributes instead of WopTags; those stay registered until the gate
// retires (docs/DECISIONS.md, "Upgrades").
//
// The embedded dev server registers them at namespace creation (and adds missing ones
// to an existing database), `wop setup`, `wop worker --ensure-search-attributes` and
// deploy/temporal-namespace.sh register them elsewhere; a worker refuses to start when
// one is missing, because a run that sets an unregistered attribute fails every
// workflow task.
var (
	SAWorkflowID = temporal.NewSearchAttributeKeyKeyword("WopWorkflowId") // definition id
	SATenant     = temporal.NewSearchAttributeKeyKeyword("WopTenant")
	SAStatus     = temporal.NewSearchAttributeKeyKeyword("WopStatus") // OpenWOP run status
	SAPackID     = temporal.NewSearchAttributeKeyKeyword("WopPackId") // pack of the run's pack node
	// SATags holds what changes within a run, one "<prefix>:<value>" per concern
	// (Tag): TagPackState, TagWaitingOn, TagWaitingKind, TagWaitingTool, TagStalledOn.
	// A concern that holds nothing has no value, and a closed run waits on nothing.
	SATags = temporal.NewSearchAttributeKeyKeywordList("WopTags")
	// SACreatedAt is when the API accepted the run. Unlike Temporal's StartTime it does
	// not move when the run continues as new.
	SACreatedAt = temporal.NewSearchAttributeKeyTime("WopCreatedAt")
)

// Tag prefixes of SATags.
const (
	// TagPackState is the current PromptPack state of the run's pack node.
	TagPackState = "packState"
	// TagWaitingOn is "<interrupt kind>:<nodeId>" of the newest interrupt the run waits on.
	TagWaitingOn = "waitingOn"
	// TagWaitingKind is WaitingKind of that interrupt: approval, clarification,
	// conversation, external-event or custom.
	TagWaitingKind = "waitingKind"
	// TagWaitingTool is the tool of the call that waits for approval.
	TagWaitingTool = "waitingTool"
	// TagStalledOn is what a stalled run waits for: "model:<provider>" or "tool:<name>".
	TagStalledOn = "stalledOn"
)

// tagPrefixes are the prefixes of SATags, in the order its values are listed.
var tagPrefixes = []string{TagPackState, TagWaitingOn, TagWaitingKind, TagWaitingTool, TagStalledOn}

// Tag is the SATags value of prefix and value, as a query compares it:
// Tag(TagWaitingKind, "approval") is "waitingKind:approval".
func Tag(prefix, value string) string { return prefix + ":" + value }

// TagValue is the value of prefix in tags (SATags of a run), "" when it has none.
func TagValue(tags []string, prefix string) string {
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix+":"); ok {
			return v
		}
	}
	return ""
}

// The Keyword attributes of runs recorded before GateSearchAttributeSlots, one per tag
// prefix (legacyTagKeys). Runs in flight keep setting them on replay, so they stay
// registered, and the API's queries keep reading them, until the gate retires.
var (
	SAPackState = temporal.NewSearchAttributeKeyKeyword("WopPackState")
	// SAWaitingOn was unset while the run waited on nothing; runs recorded before it
	// was cleared keep "" instead.
	SAWaitingOn   = temporal.NewSearchAttributeKeyKeyword("WopWaitingOn")
	SAWaitingKind = temporal.NewSearchAttributeKeyKeyword("WopWaitingKind")
	SAWaitingTool = temporal.NewSearchAttributeKeyKeyword("WopWaitingTool")
	SAStalledOn   = temporal.NewSearchAttributeKeyKeyword("WopStalledOn")
)

// legacyTagKeys maps each tag prefix to the Keyword attribute that held it before
// GateSearchAttributeSlots.
var legacyTagKeys = map[string]temporal.SearchAttributeKeyKeyword{
	TagPackState: SAPackState, TagWaitingOn: SAWaitingOn, TagWaitingKind: SAWaitingKind,
	TagWaitingTool: SAWaitingTool, TagStalledOn: SAStalledOn,
}

// LegacySearchAttributes are the attributes GateSearchAttributeSlots retires: registered
// while a run that began before it may be open, removable with the gate.
var LegacySearchAttributes = []string{
	SAPackState.GetName(), SAWaitingOn.GetName(), SAWaitingKind.GetName(), SAWaitingTool.GetName(), SAStalledOn.GetName(),
}

// SearchAttributesFor lists the custom search attributes to register: all of
// SearchAttributes, or, without legacy, all but LegacySearchAttributes (a namespace no
// release before the tags ran on: four Keyword attributes).
func SearchAttributesFor(legacy bool) map[string]enumspb.IndexedValueType {
	out := maps.Clone(SearchAttributes)
	if !legacy {
		for _, name := range LegacySearchAttributes {
			delete(out, name)
		}
	}
	return out
}

// GateAttributes are, by gate id, the search attributes that retire with a gate.
var GateAttributes = map[string][]string{GateSearchAttributeSlots: LegacySearchAttributes}

// SearchAttributes lists every custom search attribute with its type, for
// registration: the current ones and LegacySearchAttributes.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	SAWorkflowID.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SATenant.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAStatus.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAPackID.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SATags.GetName():        enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	SACreatedAt.GetName():   enumspb.INDEXED_VALUE_TYPE_DATETIME,
	SAPackState.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAWaitingOn.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAWaitingKind.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAWaitingTool.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAStalledOn.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// Waiting kinds: what a waiting run waits for, as SAWaitingKind and the API's listing
// name it. Every conversation interrupt (conversation.start, conversation.exchange) is
// WaitingConversation, so a chat waiting for its user is told apart from an approval
// although both make the run waiting-approval.
const (
	WaitingApproval      = "approval"
	WaitingClarification = "clarification"
	WaitingConversation  = "conversation"
	WaitingExternal      = "external-event"
	WaitingCustom        = "custom"
)

// WaitingKinds are the waiting kinds, in the order the API documents them.
var WaitingKinds = []string{WaitingApproval, WaitingClarification, WaitingConversation, WaitingExternal, WaitingCustom}

// WaitingKind maps an interrupt kind to its waiting kind. low-confidence interrupts ask
// a person to approve, so they count as approvals.
func WaitingKind(interruptKind string) string {
	switch {
	case interruptKind == protocol.KindApproval, interruptKind == protocol.KindLowConfidence:
		return WaitingApproval
	case interruptKind == protocol.KindClarification:
		return WaitingClarification
	case strings.HasPrefix(interruptKind, "conversation"):
		return WaitingConversation
	case interruptKind == protocol.KindExternalEvent:
		return WaitingExternal
	default:
		return WaitingCustom
	}
}

// tagSet is one concern of SATags set to value ("" clears it).
type tagSet struct{ prefix, value string }

// statusTags are the tags of a status change: TagWaitingOn and TagWaitingKind naming
// the newest pending interrupt, both cleared while nothing is pending and once the run
// is terminal.
func statusTags(pending []*interrupt, terminal bool) []tagSet {
	if len(pending) == 0 || terminal {
		return []tagSet{{TagWaitingOn, ""}, {TagWaitingKind, ""}}
	}
	it := pending[len(pending)-1]
	return []tagSet{{TagWaitingOn, it.Kind + ":" + it.NodeID}, {TagWaitingKind, WaitingKind(it.Kind)}}
}

// upsertAttributes sets the run's search attributes: keep as they are and the tags of
// set. A run created with RunInput.Attributes AttributesTags asks
// GateSearchAttributeSlots at its first such update (runs created before never record
// the marker, so the gate's earlier path is theirs for their whole life): since, the
// tags are SATags, written whole, and the first update clears the legacy attributes the
// execution holds (continue-as-new copies them from an execution a worker of the
// earlier code ran; only those it holds, since a namespace set up without them refuses
// even their unset); before, each tag is its legacy Keyword attribute, set or unset
// (cleared) as those runs recorded it. The update is one command whatever it holds.
func (r *runner) upsertAttributes(ctx workflow.Context, keep []temporal.SearchAttributeUpdate, set ...tagSet) {
	if r.tags == nil {
		r.tags = map[string]string{}
	}
	for _, t := range set {
		r.tags[t.prefix] = t.value
	}
	upd := slices.Clone(keep)
	if r.in.Attributes < AttributesTags || !r.changed(GateSearchAttributeSlots) {
		for _, t := range set {
			if k := legacyTagKeys[t.prefix]; t.value == "" {
				upd = append(upd, k.ValueUnset())
			} else {
				upd = append(upd, k.ValueSet(t.value))
			}
		}
		_ = workflow.UpsertTypedSearchAttributes(ctx, upd...)
		return
	}
	var tags []string
	for _, p := range tagPrefixes {
		if v := r.tags[p]; v != "" {
			tags = append(tags, Tag(p, v))
		}
	}
	if len(tags) == 0 {
		upd = append(upd, SATags.ValueUnset())
	} else {
		upd = append(upd, SATags.ValueSet(tags))
	}
	if !r.legacyCleared {
		r.legacyCleared = true
		have := workflow.GetTypedSearchAttributes(r.ctx)
		for _, p := range tagPrefixes {
			if k := legacyTagKeys[p]; have.ContainsKey(k) {
				upd = append(upd, k.ValueUnset())
			}
		}
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, upd...)
}
