package workflows

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/wop-dev/wop/protocol"
)

type externalData struct {
	EventType   string                     `json:"eventType"`
	Correlation map[string]json.RawMessage `json:"correlation"`
}

func (r *runner) checkExternal(it *interrupt, req ResolveRequest) (json.RawMessage, ResolveCheck) {
	var d externalData
	_ = json.Unmarshal(it.Data, &d) // the run encoded it.Data from an externalData: it decodes
	var got map[string]json.RawMessage
	if err := json.Unmarshal(req.ResumeValue, &got); err != nil {
		return nil, ResolveCheck{Code: protocol.CodeValidation, Unprocessable: true, Message: "the external event must be a JSON object"}
	}
	keys := make([]string, 0, len(d.Correlation))
	for k := range d.Correlation {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := got[k]
		if !ok {
			return nil, ResolveCheck{Code: protocol.CodeValidation, Unprocessable: true, Message: fmt.Sprintf("correlation key %q is missing from the event", k),
				Details: mustJSON(map[string]string{"field": k})}
		}
		if !jsonEqual(v, d.Correlation[k]) {
			return nil, ResolveCheck{Code: protocol.CodeValidation, Unprocessable: true, Message: fmt.Sprintf("correlation key %q does not match: want %s, got %s", k, canonical(d.Correlation[k]), canonical(v)),
				Details: mustJSON(map[string]string{"field": k})}
		}
	}
	return req.ResumeValue, ResolveCheck{OK: true}
}

// interruptConfig is core.interrupt's config.
type interruptConfig struct {
	Kind         string          `json:"kind"`
	Data         json.RawMessage `json:"data"`
	TimeoutMs    int64           `json:"timeoutMs,omitempty"`
	ResumeSchema json.RawMessage `json:"resumeSchema,omitempty"`
	BearerOnly   bool            `json:"bearerOnly,omitempty"`
}

// execInterrupt raises the interrupt its config describes.
func execInterrupt(r *runner, n *Node, _ map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	var cfg interruptConfig
	if err := json.Unmarshal(orJSON(n.Config, "{}"), &cfg); err != nil {
		return nil, failNode(protocol.CodeValidation, "core.interrupt config: %v", err)
	}
	// The kind's data decodes leniently, as it always has: a field of the wrong type is
	// read as absent. Failing the node on it instead would change what runs in flight
	// with such a definition do (a workflow.GetVersion branch, when it is wanted).
	switch cfg.Kind {
	case protocol.KindApproval:
		var d approvalData
		_ = json.Unmarshal(orJSON(cfg.Data, "{}"), &d)
		return runApproval(r, n, d, cfg.TimeoutMs, cfg.ResumeSchema, cfg.BearerOnly)
	case protocol.KindClarification:
		var d clarificationData
		_ = json.Unmarshal(orJSON(cfg.Data, "{}"), &d)
		return runClarification(r, n, d, cfg.TimeoutMs)
	case protocol.KindExternalEvent, protocol.KindCustom, protocol.KindLowConfidence:
	case "":
		cfg.Kind = protocol.KindCustom
	default:
		return nil, failNode(protocol.CodeValidation, "core.interrupt at node %q: unsupported kind %q", n.ID, cfg.Kind)
	}
	data := orJSON(cfg.Data, "{}")
	words := "Waiting for a resume value."
	switch cfg.Kind {
	case protocol.KindExternalEvent:
		var d externalData
		if err := json.Unmarshal(data, &d); err != nil || d.EventType == "" {
			return nil, failNode(protocol.CodeValidation, "core.interrupt at node %q: external-event data needs eventType and correlation", n.ID)
		}
		if d.Correlation == nil {
			data = mustJSON(protocol.ExternalEventData{EventType: d.EventType, Correlation: json.RawMessage(`{}`)})
		}
		words = fmt.Sprintf("Waiting for external event %q with correlation %s.", d.EventType, canonical(mustJSON(d.Correlation)))
	case protocol.KindCustom:
		var d struct {
			CustomKind string `json:"customKind"`
		}
		if _ = json.Unmarshal(data, &d); d.CustomKind == "" { // data that does not decode has no customKind
			return nil, failNode(protocol.CodeValidation, "core.interrupt at node %q: custom data needs customKind", n.ID)
		}
		words = fmt.Sprintf("Waiting for a %q resume value.", d.CustomKind)
	}
	it := r.raise(n.ID, interruptSpec{Kind: cfg.Kind, Data: data, TimeoutMs: cfg.TimeoutMs, ResumeSchema: cfg.ResumeSchema, Describe: words, BearerOnly: cfg.BearerOnly})
	req, _, value, timedOut, err := r.nextResolve(n.ID)
	if err != nil {
		return nil, err
	}
	if timedOut != nil {
		r.settle(it)
		return nil, failNode(protocol.CodeInterruptTimeout, "%s interrupt at node %q timed out after %d ms", cfg.Kind, n.ID, cfg.TimeoutMs)
	}
	r.settle(it)
	resolved := r.emitResolved(it, req, value)
	r.emitResumed(it, value, resolved)
	return map[string]json.RawMessage{"resumeValue": value}, nil
}
