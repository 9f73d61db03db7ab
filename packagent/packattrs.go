package packagent

import "github.com/wop-dev/wop/workflows"

// setPackAttributes sets the node's search attributes when its state differs from the
// one it last set. Setting an unchanged value is not free: it is a command, an event in
// the history (a sixth of a turn's bytes) and a visibility write.
func (a *packAgent) setPackAttributes(c *workflows.Conversation, state string) {
	if state == a.publishedState && c.Changed(workflows.GatePackAttributes) {
		return
	}
	c.SetPackAttributes(a.pack.ID, state)
	a.publishedState = state
}
