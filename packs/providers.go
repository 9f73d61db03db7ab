package packs

import (
	"encoding/json"
	"fmt"
	"strings"
)

// DefaultProviderKey is RFC 0012's reserved key of the primary LLM; a prompt without a
// provider runs on it (RFC 0017).
const DefaultProviderKey = "default"

// RoleLLM is the provider role of a chat model, the only role this host serves.
const RoleLLM = "llm"

// ProviderRequirement is one entry of requires.providers (RFC 0012), with the string
// shorthand expanded to {key, role: llm, required: true}.
type ProviderRequirement struct {
	Key         string
	Role        string
	Required    bool
	Description string
}

// ProviderRequirements returns the pack's requires.providers, in file order, expanded.
// Entries that do not decode (the schema refuses them) are left out.
func (p *Pack) ProviderRequirements() []ProviderRequirement {
	if p.Requires == nil || len(p.Requires.Providers) == 0 {
		return nil
	}
	var raw []json.RawMessage
	if json.Unmarshal(p.Requires.Providers, &raw) != nil {
		return nil
	}
	out := make([]ProviderRequirement, 0, len(raw))
	for _, r := range raw {
		var key string
		if json.Unmarshal(r, &key) == nil {
			out = append(out, ProviderRequirement{Key: key, Role: RoleLLM, Required: true})
			continue
		}
		var o struct {
			Key         string `json:"key"`
			Role        string `json:"role"`
			Required    *bool  `json:"required"`
			Description string `json:"description"`
		}
		if json.Unmarshal(r, &o) != nil || o.Key == "" {
			continue
		}
		out = append(out, ProviderRequirement{Key: o.Key, Role: o.Role, Required: o.Required == nil || *o.Required, Description: o.Description})
	}
	return out
}

// ProviderRequirement returns the requirement with key, or nil.
func (p *Pack) ProviderRequirement(key string) *ProviderRequirement {
	for _, r := range p.ProviderRequirements() {
		if r.Key == key {
			return &r
		}
	}
	return nil
}

// UnservedProviders returns the required provider requirements this host cannot bind,
// in file order: every provider of a worker is a chat model, so a required
// requirement whose role is not llm (an embedding, tts, stt, image or inference
// model) has nothing to bind to. An llm key without a provider of its own runs on the
// worker's primary model (see package activities).
func (p *Pack) UnservedProviders() []ProviderRequirement {
	var out []ProviderRequirement
	for _, r := range p.ProviderRequirements() {
		if r.Required && r.Role != RoleLLM {
			out = append(out, r)
		}
	}
	return out
}

// ProvidersError is a pack whose required providers the host cannot bind.
type ProvidersError struct {
	Pack    string
	Missing []ProviderRequirement
}

func (e *ProvidersError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, r := range e.Missing {
		parts[i] = fmt.Sprintf("%q (role %s)", r.Key, r.Role)
	}
	return fmt.Sprintf("pack %q requires the provider%s %s, which this host cannot bind: its workers serve chat models (role llm) only",
		e.Pack, plural(len(parts), "", "s"), strings.Join(parts, ", "))
}

// Keys are the missing requirements' keys.
func (e *ProvidersError) Keys() []string {
	out := make([]string, len(e.Missing))
	for i, r := range e.Missing {
		out[i] = r.Key
	}
	return out
}
