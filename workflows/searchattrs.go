package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Search attributes the run workflow keeps current, so operators can filter runs in the
// Temporal UI (for example `WopStatus = "waiting-approval" AND WopPackId = "support"`).
// All are Keyword attributes; the embedded dev server registers them at namespace
// creation, and docker-compose's namespace bootstrap registers them for production.
var (
	SAWorkflowID = temporal.NewSearchAttributeKeyKeyword("WopWorkflowId") // definition id
	SATenant     = temporal.NewSearchAttributeKeyKeyword("WopTenant")
	SAStatus     = temporal.NewSearchAttributeKeyKeyword("WopStatus")    // OpenWOP run status
	SAPackID     = temporal.NewSearchAttributeKeyKeyword("WopPackId")    // pack of the run's pack node
	SAPackState  = temporal.NewSearchAttributeKeyKeyword("WopPackState") // current PromptPack state
	SAWaitingOn  = temporal.NewSearchAttributeKeyKeyword("WopWaitingOn") // "<kind>:<nodeId>" or ""
)

// SearchAttributes lists every custom search attribute with its type, for registration.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	SAWorkflowID.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SATenant.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAStatus.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAPackID.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAPackState.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SAWaitingOn.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}
