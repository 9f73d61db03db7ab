package workflows

import "go.temporal.io/sdk/workflow"

// packAttributesVersion is the workflow.GetVersion change id of the WopPackId and
// WopPackState search attributes set only when the pack's state changes. Runs recorded
// before it set them at every turn and replay that way.
const packAttributesVersion = "pack-attributes-on-change"

// setPackAttributes sets the node's search attributes when its state differs from the
// one it last set. Setting an unchanged value is not free: it is a command, an event in
// the history (a sixth of a turn's bytes) and a visibility write.
func (a *packAgent) setPackAttributes(c *conversation, state string) {
	if state == a.publishedState &&
		workflow.GetVersion(c.r.ctx, packAttributesVersion, workflow.DefaultVersion, 1) != workflow.DefaultVersion {
		return
	}
	c.SetPackAttributes(a.pack.ID, state)
	a.publishedState = state
}
