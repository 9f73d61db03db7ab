package api

// The create body and the Idempotency-Key at major 2 (runs.md §Create, §Run options;
// idempotency.md §Layer 1). The v2 body is closed like v1's, with v2's fields:
// configurable is the nested, versioned object of configurable.schema.json; tags are at
// most 100 of at most 256 characters and never refused on their format; metadata is a
// free-form object. Fields this host cannot honour are refused by name (400), never
// accepted and ignored.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/wop-dev/wop/protocol"
)

// CreateRunRequestV2 is the closed body of POST /runs.
type CreateRunRequestV2 struct {
	WorkflowID   string          `json:"workflowId"`
	Inputs       json.RawMessage `json:"inputs,omitempty"`
	Residency    json.RawMessage `json:"residency,omitempty"`
	TenantID     string          `json:"tenantId,omitempty"`
	ScopeID      string          `json:"scopeId,omitempty"`
	CallbackURL  string          `json:"callbackUrl,omitempty"`
	Mode         string          `json:"mode,omitempty"`
	EvalSuiteRef json.RawMessage `json:"evalSuiteRef,omitempty"`
	AgentID      string          `json:"agentId,omitempty"`
	Configurable json.RawMessage `json:"configurable,omitempty"`
	Tags         []string        `json:"tags,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
}

// Bounds of v2's run options (run-options.schema.json).
const (
	maxTagsV2     = 100
	maxTagCharsV2 = 256
)

// decodeCreateRunV2 decodes and validates a POST /runs body into the request the
// create path shares with v1. g bounds the metadata as it does at v1.
func decodeCreateRunV2(body []byte, g GuardConfig) (*CreateRunRequest, error) {
	var req CreateRunRequestV2
	if err := decodeCreateBody(body, &req, &req.WorkflowID); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"residency", isSet(req.Residency)}, {"evalSuiteRef", isSet(req.EvalSuiteRef)}, {"agentId", req.AgentID != ""}} {
		if f.set {
			return nil, badRequest("%s is not supported by this host (it advertises neither dataResidency, eval runs nor agents)", f.name).with("field", f.name)
		}
	}
	if req.Mode != "" {
		return nil, badRequest("mode %q is not supported by this host: it runs workflows only (omit mode)", req.Mode).with("field", "mode")
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"inputs", req.Inputs}, {"metadata", req.Metadata}} {
		if isSet(f.raw) && !isJSONObject(f.raw) {
			return nil, badRequest("%s must be a JSON object", f.name).with("field", f.name)
		}
	}
	if len(req.Tags) > maxTagsV2 {
		return nil, badRequest("%d tags are more than the %d a run may carry", len(req.Tags), maxTagsV2).with("field", "tags").with("limit", maxTagsV2)
	}
	for i, t := range req.Tags {
		if n := utf8.RuneCountInString(t); n > maxTagCharsV2 || !utf8.ValidString(t) {
			return nil, badRequest("tags[%d] is %d characters; a tag holds at most %d", i, n, maxTagCharsV2).with("field", fmt.Sprintf("tags[%d]", i))
		}
	}
	if n := len(compactJSON(req.Metadata)); n > g.MaxMetadataBytes {
		return nil, badRequest("metadata is %d bytes; a run's metadata may hold at most %d", n, g.MaxMetadataBytes).with("field", "metadata").with("limit", g.MaxMetadataBytes)
	}
	if isSet(req.Configurable) {
		if err := checkConfigurableV2(req.Configurable); err != nil {
			return nil, err
		}
	}
	if req.CallbackURL != "" && !bytes.HasPrefix([]byte(req.CallbackURL), []byte("https://")) && !bytes.HasPrefix([]byte(req.CallbackURL), []byte("http://")) {
		return nil, badRequest("callbackUrl must be an http(s) URL").with("field", "callbackUrl")
	}
	if len(req.CallbackURL) > 2048 {
		return nil, badRequest("callbackUrl is longer than 2048 characters").with("field", "callbackUrl")
	}
	return &CreateRunRequest{
		WorkflowID: req.WorkflowID, Inputs: req.Inputs, TenantID: req.TenantID, ScopeID: req.ScopeID,
		CallbackURL: req.CallbackURL, Configurable: req.Configurable, Tags: req.Tags, Metadata: req.Metadata,
	}, nil
}

// isSet reports whether raw holds a value other than null.
func isSet(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// configurableKeys are the members of configurable.schema.json and, per reserved
// sub-object, its members; this host honours none of the reserved settings yet, so a
// reserved member that is set is refused by name (see checkConfigurableV2).
var configurableKeys = map[string][]string{
	"run":          {"recursionLimit", "runTimeoutMs", "maxLoopIterations", "escalationThreshold"},
	"ai":           {"provider", "model", "temperature", "maxTokens", "credentialRef", "promptOverrides", "mockProvider", "reasoningVerbosity", "maxRefusals"},
	"distillation": {"tokenBudget"},
	"budget":       nil, // budget-policy.schema.json
}

// checkConfigurableV2 checks v2's configurable (closed, nested, versioned): version 1;
// no unknown or dotted key at any level (400 naming it); a reserved setting this host
// does not honour refused by name rather than stored and ignored; extensions.<org>
// objects, of which only this host's org is read, and refused while the workflow
// declares no configurableSchema (the create handler checks that, as at v1).
func checkConfigurableV2(raw json.RawMessage) error {
	var top map[string]json.RawMessage
	if err := decodeStrict(raw, &top); err != nil || top == nil {
		return badRequest("configurable must be a JSON object {\"version\": 1, ...}").with("field", "configurable")
	}
	if v, ok := top["version"]; !ok || string(bytes.TrimSpace(v)) != "1" {
		return badRequest("configurable.version must be 1").with("field", "configurable.version")
	}
	for _, k := range sortedKeys(top) {
		field := "configurable." + k
		switch k {
		case "version":
		case "extensions":
			var ext map[string]json.RawMessage
			if json.Unmarshal(top[k], &ext) != nil || ext == nil {
				return badRequest("%s must be an object of <org> objects", field).with("field", field)
			}
			for _, org := range sortedKeys(ext) {
				if !kebabOrg(org) || !isJSONObject(ext[org]) {
					return badRequest("%s.%s must be an object under an org name", field, org).with("field", field+"."+org)
				}
				if org != protocol.Org {
					return badRequest("%s.%s: this host reads only its own org's extension (%s)", field, org, protocol.Org).with("field", field+"."+org)
				}
			}
		default:
			members, reserved := configurableKeys[k]
			if !reserved {
				return badRequest("unknown field %q: configurable is a closed object (version, run, ai, distillation, budget, extensions)", field).with("field", field)
			}
			var sub map[string]json.RawMessage
			if json.Unmarshal(top[k], &sub) != nil || sub == nil {
				return badRequest("%s must be an object", field).with("field", field)
			}
			for _, m := range sortedKeys(sub) {
				known := k == "budget"
				for _, want := range members {
					known = known || want == m
				}
				if !known {
					return badRequest("unknown field %q: %s is a closed object", field+"."+m, field).with("field", field+"."+m)
				}
				return badRequest("%s.%s is not supported by this host: it would be stored and not honoured", field, m).with("field", field+"."+m)
			}
		}
	}
	return nil
}

// hostConfigurable is what a v2 configurable says to the workflow: its extension of
// this host's org ({} when absent), which stands where v1's flat configurable does.
func hostConfigurable(raw json.RawMessage) json.RawMessage {
	var top struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(raw, &top) != nil {
		return nil
	}
	return top.Extensions[protocol.Org]
}

func kebabOrg(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return s[len(s)-1] != '-'
}

func sortedKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkIdempotencyKeyV2 checks an Idempotency-Key against v2's grammar
// ^[A-Za-z0-9._~-]{22,128}$ (at least 128 bits of entropy): 400 idempotency_key_invalid.
func checkIdempotencyKeyV2(key string) error {
	ok := len(key) >= 22 && len(key) <= 128
	for i := 0; ok && i < len(key); i++ {
		c := key[i]
		ok = c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '~' || c == '-'
	}
	if !ok {
		return codeErr(protocol.CodeIdempotencyKeyInvalid, "Idempotency-Key must match ^[A-Za-z0-9._~-]{22,128}$ (22 to 128 of those characters, at least 128 bits of entropy); got %d characters", len(key)).
			with("field", "Idempotency-Key")
	}
	return nil
}
