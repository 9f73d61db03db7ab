package workflows

import (
	"encoding/json"
	"time"

	"github.com/wop-dev/wop/protocol"
)

// execNoop completes at once with no outputs.
func execNoop(_ *runner, _ *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	return map[string]json.RawMessage{}, nil
}

// execIdentity echoes input.payload to output.payload. Without a wired payload input
// it echoes the run variable "payload".
func execIdentity(r *runner, _ *Node, in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	v, ok := in["payload"]
	if !ok {
		v, ok = r.variables()["payload"]
	}
	if !ok {
		return nil, failNode(protocol.CodeValidation, "core.identity needs a payload input (inputs.payload)")
	}
	return map[string]json.RawMessage{"payload": v}, nil
}

// delayConfig is core.delay's config.
type delayConfig struct {
	DelayMs *int64 `json:"delayMs"`
}

// execDelay sleeps delayMs (config, then node input, then run variable) on a durable
// timer; a cancellation ends the sleep at once.
func execDelay(r *runner, n *Node, in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	var cfg delayConfig
	if len(n.Config) > 0 {
		// Lenient, as it always was: a config that does not decode sets no delay here
		// (the node input or the run variable may); failing on it would change runs in
		// flight.
		_ = json.Unmarshal(n.Config, &cfg)
	}
	var ms int64
	switch {
	case cfg.DelayMs != nil:
		ms = *cfg.DelayMs
	case in["delayMs"] != nil:
		if err := json.Unmarshal(in["delayMs"], &ms); err != nil {
			return nil, failNode(protocol.CodeValidation, "core.delay: delayMs must be an integer: %v", err)
		}
	default:
		if v, ok := r.variables()["delayMs"]; ok {
			if err := json.Unmarshal(v, &ms); err != nil {
				return nil, failNode(protocol.CodeValidation, "core.delay: delayMs must be an integer: %v", err)
			}
		}
	}
	if ms < 0 {
		return nil, failNode(protocol.CodeValidation, "core.delay: delayMs must be >= 0, got %d", ms)
	}
	if ms > 0 {
		r.setDetails("Sleeping " + (time.Duration(ms) * time.Millisecond).String() + " in node `" + n.ID + "`.")
		if _, err := r.await(time.Duration(ms)*time.Millisecond, r.cutPending); err != nil {
			return nil, err
		}
		if r.cutPending() {
			return nil, errCut
		}
		r.setDetails("")
	}
	return map[string]json.RawMessage{"delayedMs": mustJSON(ms)}, nil
}

// execFail fails with the conformance error.
func execFail(_ *runner, _ *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	return nil, failNode(protocol.CodeConformanceTestFailure, "Intentional conformance failure")
}
