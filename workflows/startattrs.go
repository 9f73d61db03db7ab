package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/wop-dev/wop/protocol"
)

// What a run starts with besides its input: the search attributes and the memo every
// starter of a run sets (the API's create, and a caller workflow's child start through
// the agents worker, worker/agents.go), so a run reads the same in listings however it
// was started.

// Memo fields of a run: what a v2 listing needs of a run it cannot query (api/list_v2.go).
const (
	MemoEra     = "openwop.eventLogSchemaVersion"
	MemoSubject = "openwop.subject"
)

// StartMemo is the Temporal memo a run starts with (carried across continue-as-new).
func StartMemo(in RunInput) map[string]any {
	m := map[string]any{}
	if in.Era != 0 {
		m[MemoEra] = in.Era
	}
	if in.Owner.Subject != nil {
		m[MemoSubject] = in.Owner.Subject
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// StartSearchAttributes are the search attributes a run starts with, created at now:
// its definition, tenant, pending status, creation time and (the first of) its packs.
func StartSearchAttributes(in RunInput, now time.Time) temporal.SearchAttributes {
	updates := []temporal.SearchAttributeUpdate{
		SAWorkflowID.ValueSet(in.Definition.ID),
		SATenant.ValueSet(in.Owner.Tenant),
		SAStatus.ValueSet(protocol.StatusPending),
		SACreatedAt.ValueSet(now.UTC()),
	}
	if len(in.Packs) > 0 {
		ids := make([]string, 0, len(in.Packs))
		for id := range in.Packs {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		updates = append(updates, SAPackID.ValueSet(ids[0]))
	}
	return temporal.NewSearchAttributes(updates...)
}

// PackNodeID is the id of the definition's first pack node (the conversation a pack
// workflow holds), "" when it has none.
func (d *Definition) PackNodeID() string {
	for _, n := range d.Nodes {
		if n.TypeID == PackNodeType {
			return n.ID
		}
	}
	return ""
}
