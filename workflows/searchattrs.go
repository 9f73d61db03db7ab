package workflows

import (
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/protocol"
)

// Search attributes the run workflow keeps current, so operators can filter runs in the
// Temporal UI and the API can list them from Temporal's visibility store, for example
//
//	WopStatus = "waiting-approval" AND WopPackId = "support"
//	WopWaitingKind = "approval"                 (a person must approve something)
//	WopWaitingKind = "conversation"             (a chat waits for its user's reply)
//	WopWaitingOn IS NOT NULL                    (waits on anyone; closed runs clear it)
//	WopCreatedAt > "2026-05-01T00:00:00Z"
//
// The embedded dev server registers them at namespace creation (and adds missing ones
// to an existing database), `wop worker --ensure-search-attributes` and
// deploy/temporal-namespace.sh register them elsewhere; a worker refuses to start when
// one is missing, because a run that sets an unregistered attribute fails every
// workflow task.
var (
	SAWorkflowID = temporal.NewSearchAttributeKeyKeyword("WopWorkflowId") // definition id
	SATenant     = temporal.NewSearchAttributeKeyKeyword("WopTenant")
	SAStatus     = temporal.NewSearchAttributeKeyKeyword("WopStatus")    // OpenWOP run status
	SAPackID     = temporal.NewSearchAttributeKeyKeyword("WopPackId")    // pack of the run's pack node
	SAPackState  = temporal.NewSearchAttributeKeyKeyword("WopPackState") // current PromptPack state
	// SAWaitingOn is "<interrupt kind>:<nodeId>" of the interrupt the run waits on, and
	// unset while it waits on nothing and once it has closed. Runs recorded before the
	// attribute was cleared keep "" instead.
	SAWaitingOn = temporal.NewSearchAttributeKeyKeyword("WopWaitingOn")
	// SAWaitingKind is WaitingKind of that interrupt: approval, clarification,
	// conversation, external-event or custom; unset like SAWaitingOn.
	SAWaitingKind = temporal.NewSearchAttributeKeyKeyword("WopWaitingKind")
	// SACreatedAt is when the API accepted the run. Unlike Temporal's StartTime it does
	// not move when the run continues as new.
	SACreatedAt = temporal.NewSearchAttributeKeyTime("WopCreatedAt")
)

// SearchAttributes lists every custom search attribute with its type, for registration.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	SAWorkflowID.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SATenant.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAStatus.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAPackID.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAPackState.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAWaitingOn.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAWaitingKind.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SACreatedAt.GetName():   enumspb.INDEXED_VALUE_TYPE_DATETIME,
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

// statusAttributes is the search attribute update of a status change: WopStatus, and
// WopWaitingOn / WopWaitingKind naming the newest pending interrupt, both unset while
// nothing is pending and once the run is terminal (so `WopWaitingOn IS NOT NULL` finds
// exactly the runs that wait). The update is one command whatever it holds, so runs
// recorded when it wrote "" instead replay unchanged.
func statusAttributes(status string, pending []*interrupt, terminal bool) []temporal.SearchAttributeUpdate {
	upd := []temporal.SearchAttributeUpdate{SAStatus.ValueSet(status)}
	if len(pending) == 0 || terminal {
		return append(upd, SAWaitingOn.ValueUnset(), SAWaitingKind.ValueUnset())
	}
	it := pending[len(pending)-1]
	return append(upd, SAWaitingOn.ValueSet(it.Kind+":"+it.NodeID), SAWaitingKind.ValueSet(WaitingKind(it.Kind)))
}
