// Package engine executes a PromptPack workflow at RFC 0014 Level 2: the state machine
// (visits, max_visits, budgets, transitions, artifacts) and the turn algorithm of
// promptpack-workflow.md §8.9. It is deterministic plain Go: all effects (model rounds,
// tool calls, the clock) go through the Runtime interface, which the run workflow
// implements with Temporal activities and workflow.Now. It never ranges over a map
// without sorting its keys.
package engine
