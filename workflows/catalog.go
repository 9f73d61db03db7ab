package workflows

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wop-dev/wop/protocol"
)

// PackNodeType is the node type that runs a PromptPack as an RFC 0005 conversation
// (the agent behind it is package packagent's). Its config is {"pack": "<pack id>"}
// (packagent.NodeConfig); the pack itself travels in RunInput.Packs.
const PackNodeType = "vendor.wop.pack"

// ServedPackNodeID is the id of the single node of the definition a pack is served
// as (workflowId = pack id).
const ServedPackNodeID = "agent"

//go:embed fixtures/*.json
var fixtureFS embed.FS

// Catalog is the set of workflow definitions a host serves: the packs of the packs
// folder (each as a workflow of its own, id = pack id) and, when seeded, the OpenWOP
// conformance fixtures.
type Catalog struct {
	defs     map[string]*Definition
	packs    map[string]ServedPack
	packJSON map[string]json.RawMessage // each pack as a run carries it (RunInput.Packs)
	fixtures []string
	limits   TurnLimits
}

// ServedPack is a pack the catalog serves as a workflow of its own. The catalog does
// not read packs: the pack's package (packagent.Serve) says what the catalog needs to
// know of one, and checks a run's inputs for it.
type ServedPack interface {
	// PackID is the pack's id, which is also the id of the workflow that serves it.
	PackID() string
	// PackHash is the pack's hash (RunInput.PackHashes).
	PackHash() string
	// Definition is the workflow definition that serves the pack.
	Definition() *Definition
	// RunJSON is the pack as a run carries it (RunInput.Packs).
	RunJSON() (json.RawMessage, error)
	// CheckRun checks, before a run exists, what would make the pack's node (whose
	// config is nodeConfig) fail as it starts with the run's inputs; a *PackRunError
	// names the fields.
	CheckRun(nodeConfig, inputs json.RawMessage) error
}

// CatalogOptions configures NewCatalog.
type CatalogOptions struct {
	Packs        []ServedPack
	SeedFixtures bool
	// Limits are the host's per-turn limits every run with a pack node carries
	// (RunInput.Limits); zero imposes none.
	Limits TurnLimits
}

// NewCatalog builds the catalog. A pack whose id collides with a fixture, or two packs
// with one id, is an error.
func NewCatalog(opts CatalogOptions) (*Catalog, error) {
	c := &Catalog{defs: map[string]*Definition{}, packs: map[string]ServedPack{}, packJSON: map[string]json.RawMessage{}, limits: opts.Limits}
	if opts.SeedFixtures {
		fx, err := LoadFixtures()
		if err != nil {
			return nil, err
		}
		for _, d := range fx {
			c.defs[d.ID] = d
			c.fixtures = append(c.fixtures, d.ID)
		}
		sort.Strings(c.fixtures)
	}
	for _, p := range opts.Packs {
		if p == nil {
			continue
		}
		id := p.PackID()
		if _, dup := c.packs[id]; dup {
			return nil, fmt.Errorf("catalog: two packs have the id %q", id)
		}
		if _, dup := c.defs[id]; dup {
			return nil, fmt.Errorf("catalog: pack id %q collides with a workflow definition", id)
		}
		b, err := p.RunJSON()
		if err != nil {
			return nil, fmt.Errorf("catalog: pack %q: %w", id, err)
		}
		c.packs[id], c.packJSON[id] = p, b
		c.defs[id] = p.Definition()
	}
	return c, nil
}

// LoadFixtures returns the embedded conformance fixture definitions, sorted by id.
func LoadFixtures() ([]*Definition, error) {
	entries, err := fs.ReadDir(fixtureFS, "fixtures")
	if err != nil {
		return nil, fmt.Errorf("read embedded fixtures: %w", err)
	}
	var out []*Definition
	for _, e := range entries {
		b, err := fixtureFS.ReadFile(path.Join("fixtures", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read fixture %s: %w", e.Name(), err)
		}
		var d Definition
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("parse fixture %s: %w", e.Name(), err)
		}
		if d.ID+".json" != e.Name() {
			return nil, fmt.Errorf("fixture file %s holds definition %q; name the file after the id", e.Name(), d.ID)
		}
		d.Normalize()
		out = append(out, &d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Normalize fills the members the definition schema requires but a definition may
// leave out (empty edges/triggers/variables, metadata, settings, node position, config
// and inputs), so a served definition validates.
func (d *Definition) Normalize() {
	if d.Edges == nil {
		d.Edges = []Edge{}
	}
	if d.Triggers == nil {
		d.Triggers = []json.RawMessage{}
	}
	if d.Variables == nil {
		d.Variables = []Variable{}
	}
	if len(d.Metadata) == 0 || string(d.Metadata) == "null" {
		d.Metadata = json.RawMessage(`{}`)
	}
	if len(d.Settings) == 0 || string(d.Settings) == "null" {
		d.Settings = json.RawMessage(`{}`)
	}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		if len(n.Position) == 0 || string(n.Position) == "null" {
			n.Position = json.RawMessage(fmt.Sprintf(`{"x":%d,"y":0}`, i*200))
		}
		if len(n.Config) == 0 || string(n.Config) == "null" {
			n.Config = json.RawMessage(`{}`)
		}
		if n.Inputs == nil {
			n.Inputs = map[string]json.RawMessage{}
		}
		if n.Name == "" {
			n.Name = n.ID
		}
	}
}

// Definition returns the definition with the given id.
func (c *Catalog) Definition(id string) (*Definition, bool) {
	d, ok := c.defs[id]
	return d, ok
}

// Pack returns the pack with the given id.
func (c *Catalog) Pack(id string) (ServedPack, bool) {
	p, ok := c.packs[id]
	return p, ok
}

// IDs lists every definition id, sorted.
func (c *Catalog) IDs() []string {
	ids := make([]string, 0, len(c.defs))
	for id := range c.defs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// PackIDs lists the ids of the packs served as workflows, sorted.
func (c *Catalog) PackIDs() []string {
	ids := make([]string, 0, len(c.packs))
	for id := range c.packs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Fixtures lists the seeded conformance fixture ids, sorted.
func (c *Catalog) Fixtures() []string { return append([]string(nil), c.fixtures...) }

// RunRequest is what the API knows when it starts a run.
type RunRequest struct {
	RunID         string
	WorkflowID    string
	Inputs        json.RawMessage
	Owner         Owner
	Tags          []string
	Metadata      json.RawMessage
	Configurable  json.RawMessage
	RequestDigest string
	CallbackURL   string
	// Era is the new run's eventLogSchemaVersion (RunInput.Era).
	Era int
}

// NewRunInput builds the RunInput of a run of definition req.WorkflowID: the
// definition, the definitions its core.subWorkflow nodes start (transitively), and the
// packs its pack nodes run with their hashes. It checks the inputs against the
// definition's variables (required ones present, declared types respected) and
// returns an error whose message names the offending field.
func (c *Catalog) NewRunInput(req RunRequest) (*RunInput, error) {
	def, ok := c.defs[req.WorkflowID]
	if !ok {
		return nil, fmt.Errorf("unknown workflowId %q", req.WorkflowID)
	}
	if err := CheckInputs(def, req.Inputs); err != nil {
		return nil, err
	}
	if err := checkRosters(def); err != nil {
		return nil, err
	}
	in := &RunInput{
		RunID: req.RunID, Definition: def, Inputs: req.Inputs, Owner: req.Owner, Tags: req.Tags,
		Metadata: req.Metadata, Configurable: req.Configurable, RequestDigest: req.RequestDigest, CallbackURL: req.CallbackURL,
		Era: req.Era, Notices: NoticesNodeEvents, TurnShape: CurrentTurnShape, Attributes: AttributesTags,
	}
	seen := map[string]bool{def.ID: true}
	queue := []*Definition{def}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, n := range d.Nodes {
			var cfg struct {
				WorkflowID string `json:"workflowId"`
				Pack       string `json:"pack"`
			}
			// A config that does not decode names nothing to follow; the node itself
			// fails on it when it runs (execSubWorkflow, the pack's agent).
			_ = json.Unmarshal(n.Config, &cfg)
			switch {
			case n.TypeID == "core.subWorkflow":
				if seen[cfg.WorkflowID] {
					continue
				}
				child, ok := c.defs[cfg.WorkflowID]
				if !ok {
					return nil, fmt.Errorf("definition %q: node %q starts unknown workflow %q", d.ID, n.ID, cfg.WorkflowID)
				}
				seen[cfg.WorkflowID] = true
				if in.Definitions == nil {
					in.Definitions = map[string]*Definition{}
				}
				in.Definitions[child.ID] = child
				queue = append(queue, child)
			case n.TypeID == PackNodeType:
				p, ok := c.packs[cfg.Pack]
				if !ok {
					return nil, fmt.Errorf("definition %q: node %q runs unknown pack %q", d.ID, n.ID, cfg.Pack)
				}
				if d == def {
					if err := p.CheckRun(n.Config, req.Inputs); err != nil {
						return nil, err
					}
				}
				if in.Packs == nil {
					in.Packs, in.PackHashes = map[string]json.RawMessage{}, map[string]string{}
				}
				in.Packs[cfg.Pack] = c.packJSON[cfg.Pack]
				in.PackHashes[cfg.Pack] = p.PackHash()
			}
		}
	}
	if len(in.Packs) > 0 && c.limits != (TurnLimits{}) {
		lim := c.limits
		in.Limits = &lim
	}
	return in, nil
}

// PackRunError is a run a pack cannot start with: an inputs.prompt that names no
// prompt, required variables without a value, or required providers the host cannot
// bind. Fields names what is missing or wrong (inputs.<name>, requires.providers.<key>).
type PackRunError struct {
	Pack   string
	Fields []string
	Err    error
}

func (e *PackRunError) Error() string { return e.Err.Error() }
func (e *PackRunError) Unwrap() error { return e.Err }

// Limits are the per-turn limits the catalog's runs carry.
func (c *Catalog) Limits() TurnLimits { return c.limits }

// CheckInputs validates run inputs against a definition's declared variables.
func CheckInputs(def *Definition, inputs json.RawMessage) error {
	vals := map[string]json.RawMessage{}
	if len(inputs) > 0 && string(inputs) != "null" {
		if err := json.Unmarshal(inputs, &vals); err != nil {
			return fmt.Errorf("inputs must be a JSON object")
		}
	}
	for _, v := range def.Variables {
		raw, ok := vals[v.Name]
		if !ok || string(raw) == "null" {
			if v.Required && len(v.DefaultValue) == 0 {
				return fmt.Errorf("inputs.%s is required", v.Name)
			}
			continue
		}
		var x any
		_ = json.Unmarshal(raw, &x) // raw is a value of the object decoded above: it decodes
		okType := true
		switch v.Type {
		case "string":
			_, okType = x.(string)
		case "number":
			_, okType = x.(float64)
		case "boolean":
			_, okType = x.(bool)
		case "object":
			_, okType = x.(map[string]any)
		case "array":
			_, okType = x.([]any)
		}
		if !okType {
			return fmt.Errorf("inputs.%s must be of type %s", v.Name, v.Type)
		}
	}
	return nil
}

// RunSummary is a one-line static summary for the run's Temporal workflow (the API
// passes it as client.StartWorkflowOptions.StaticSummary).
func RunSummary(in *RunInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "OpenWOP run of %s", in.Definition.ID)
	for _, id := range slices.Sorted(maps.Keys(in.Packs)) {
		var p struct {
			Version string `json:"version"`
		}
		_ = json.Unmarshal(in.Packs[id], &p) // the catalog wrote it; an unreadable one has no version
		fmt.Fprintf(&b, " · pack %s@%s", id, p.Version)
	}
	if in.Owner.Tenant != "" {
		fmt.Fprintf(&b, " · tenant %s", in.Owner.Tenant)
	}
	if in.ParentRunID != "" {
		fmt.Fprintf(&b, " · child of %s", in.ParentRunID)
	}
	if in.Fork != nil {
		fmt.Fprintf(&b, " · fork of %s", in.Fork.SourceRunID)
	}
	if w := startedWith(in.Inputs); w != "" {
		fmt.Fprintf(&b, " · %s", w)
	}
	return cutBytes(b.String(), summaryMaxBytes)
}

const (
	// summaryInputRunes bounds what a run's summary quotes of its inputs.
	summaryInputRunes = 80
	// summaryMaxBytes bounds a run's summary well inside Temporal's limit on the
	// summary's payload (limit.userMetadataSummarySize, 400 bytes with its encoding),
	// past which the start itself would fail.
	summaryMaxBytes = 320
)

// cutBytes cuts s to at most n bytes on a rune boundary, ending in "…" when it cut.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n - len("…")
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…"
}

// startedWith says in a few words what a run was started with, for the Temporal UI's
// list: the opening message of a conversation ("message" or "text"), else the inputs'
// JSON, cut to summaryInputRunes.
func startedWith(inputs json.RawMessage) string {
	if len(inputs) == 0 || string(inputs) == "null" || string(inputs) == "{}" {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(inputs, &fields) == nil {
		for _, k := range []string{"message", "text"} {
			var text string
			if json.Unmarshal(fields[k], &text) == nil && strings.TrimSpace(text) != "" {
				return strconv.Quote(cutRunes(strings.Join(strings.Fields(text), " "), summaryInputRunes))
			}
		}
	}
	var compact bytes.Buffer
	if json.Compact(&compact, inputs) != nil {
		return ""
	}
	return "inputs " + cutRunes(compact.String(), summaryInputRunes)
}

// cutRunes cuts s to at most n runes, ending in "…" when it cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// NewForkInput builds the RunInput of a `:fork` replay of a source run from the
// source's event log: the definition and inputs its run.started recorded, and the log
// itself as the recorded outcomes to re-fold (see fork.go).
func (c *Catalog) NewForkInput(runID string, owner Owner, sourceRunID string, fromSeq int64, events []Event) (*RunInput, error) {
	if len(events) == 0 || events[0].Type != protocol.EvRunStarted {
		return nil, fmt.Errorf("source run %s has no run.started event to fork from", sourceRunID)
	}
	var started struct {
		WorkflowID string          `json:"workflowId"`
		Inputs     json.RawMessage `json:"inputs"`
	}
	if err := json.Unmarshal(events[0].Payload, &started); err != nil {
		return nil, fmt.Errorf("source run %s: unreadable run.started: %w", sourceRunID, err)
	}
	in, err := c.NewRunInput(RunRequest{RunID: runID, WorkflowID: started.WorkflowID, Inputs: started.Inputs, Owner: owner})
	if err != nil {
		return nil, fmt.Errorf("fork of %s: %w", sourceRunID, err)
	}
	in.Fork = &ForkSource{SourceRunID: sourceRunID, FromSeq: fromSeq, Events: events}
	return in, nil
}
