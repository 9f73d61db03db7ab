package packagent

// A pack as the catalog serves it (ServedPack): a workflow of its own whose one node
// runs the pack as a conversation, and the checks of a run's inputs the pack's node
// would otherwise fail on once the run exists.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// Served is pack p as the catalog serves it.
type Served struct{ p *packs.Pack }

// Serve is p as the catalog serves it (CatalogOptions.Packs).
func Serve(p *packs.Pack) *Served { return &Served{p: p} }

// Pack is the pack served.
func (s *Served) Pack() *packs.Pack { return s.p }

// PackID implements ServedPack.
func (s *Served) PackID() string { return s.p.ID }

// PackHash implements ServedPack.
func (s *Served) PackHash() string { return s.p.Hash }

// Definition implements ServedPack.
func (s *Served) Definition() *workflows.Definition { return servedPackDefinition(s.p) }

// RunJSON implements ServedPack: the pack's JSON (its Hash is not part of it; the run
// carries it in RunInput.PackHashes).
func (s *Served) RunJSON() (json.RawMessage, error) { return json.Marshal(s.p) }

// CheckRun implements ServedPack.
func (s *Served) CheckRun(nodeConfig, inputs json.RawMessage) error {
	return checkPackRun(s.p, nodeConfig, inputs)
}

// PackOf is the pack with the given id that cat serves.
func PackOf(cat *workflows.Catalog, id string) (*packs.Pack, bool) {
	sp, ok := cat.Pack(id)
	if !ok {
		return nil, false
	}
	s, ok := sp.(*Served)
	if !ok {
		return nil, false
	}
	return s.p, true
}

// servedPackDefinition is the workflow definition that serves pack p: one
// vendor.wop.pack node with id "agent", a conversation channel, and an optional
// "message" input (the first user turn).
func servedPackDefinition(p *packs.Pack) *workflows.Definition {
	name := cmp.Or(p.Name, p.ID)
	d := &workflows.Definition{
		ID:          p.ID,
		Name:        name,
		Version:     cmp.Or(p.Version, "1.0"),
		Description: cmp.Or(p.Description, "PromptPack "+p.ID+" as a conversation"),
		Nodes: []workflows.Node{{
			ID: workflows.ServedPackNodeID, TypeID: workflows.PackNodeType, Name: name,
			Config: servedPackConfig(p),
		}},
		Triggers:  []json.RawMessage{json.RawMessage(`{"id":"manual","type":"manual","enabled":true}`)},
		Variables: []workflows.Variable{{Name: "message", Type: "string", Description: "Optional first user message, answered at once."}},
		Metadata:  protocol.MustJSON(map[string]any{"tags": []string{"promptpack"}}),
		Channels:  map[string]workflows.Channel{"conversation": {Schema: json.RawMessage(`{"type":"array"}`), Reducer: "message"}},
	}
	d.Normalize()
	return d
}

// servedPackConfig is the config of the node a pack is served by: the pack, and for
// a pack without a workflow its default prompt (the first of the file, which the
// pack carried in a run's input no longer knows).
func servedPackConfig(p *packs.Pack) json.RawMessage {
	cfg := map[string]string{"pack": p.ID}
	if p.Conversational() {
		cfg["prompt"] = p.DefaultPrompt()
	}
	return protocol.MustJSON(cfg)
}

// checkPackRun checks, before a run exists, what would make the pack's node fail as it
// starts: the prompt a pack without a workflow holds (inputs.prompt), the required
// variables of the prompts the run can render, and the pack's required providers
// (RFC 0012).
func checkPackRun(p *packs.Pack, nodeConfig json.RawMessage, inputs json.RawMessage) error {
	var cfg NodeConfig
	_ = json.Unmarshal(nodeConfig, &cfg) // decoded above; an odd config fails in the node
	vars := runVars(inputs)
	run := p
	if p.Conversational() {
		prompt, err := conversationPrompt(p, cfg, vars)
		if err != nil {
			return &workflows.PackRunError{Pack: p.ID, Fields: []string{"inputs." + packs.PromptInput}, Err: err}
		}
		run = p.AsConversation(prompt)
	}
	if err := packs.CheckVariables(run, vars); err != nil {
		var ve *packs.VariableError
		fields := []string{}
		if errors.As(err, &ve) {
			for _, name := range ve.Missing {
				fields = append(fields, "inputs."+name)
			}
		}
		return &workflows.PackRunError{Pack: p.ID, Fields: fields, Err: fmt.Errorf("pack %q: %w", p.ID, err)}
	}
	if missing := p.UnservedProviders(); len(missing) > 0 {
		pe := &packs.ProvidersError{Pack: p.ID, Missing: missing}
		fields := make([]string, 0, len(missing))
		for _, k := range pe.Keys() {
			fields = append(fields, "requires.providers."+k)
		}
		return &workflows.PackRunError{Pack: p.ID, Fields: fields, Err: pe}
	}
	return nil
}
