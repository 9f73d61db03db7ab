// Package packagent is the PromptPack agent of the OpenWOP run: the conversation agent
// of node type vendor.wop.pack (workflows.PackNodeType), which serves a pack's
// conversation with the Level-2 engine of package engine, and the packs a catalog
// serves as workflows of their own (Serve).
//
// The run core (package workflows) knows no packs: it asks a conversation's agent
// through its seam (workflows.ConversationAgent and the optional TurnObserver and
// ReplayFolder) and hands it the host's services on workflows.Conversation. This
// package imports workflows, never the other way; Register makes the agent the one of
// its node type, where a worker is assembled (worker.Register), before the worker
// starts.
//
// # Files
//
// The agent and the engine's Runtime (pack.go): model rounds, local ones (localround.go)
// and waits on an outage (pack_outage.go); tool calls routed per batch (packtools.go),
// their durable approval (pack_approvals.go, the interrupt being the run's) and unknown
// outcomes (tooloutcome.go); member agents called as child runs (packagents.go);
// injected events (pack_events.go); cancels and pauses within a turn (pack_cancel.go);
// the fork replay's fold of a source run's recording (pack_replay.go); the node's
// search attributes (packattrs.go). A pack as a catalog serves it: pack_catalog.go.
package packagent
