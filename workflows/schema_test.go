package workflows

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
)

// schemaDir holds the OpenWOP JSON schemas, relative to this package.
const schemaDir = "../../shared/spec/schemas"

const v1 = "https://openwop.dev/spec/v1/"
const v2 = "https://openwop.dev/spec/v2/"

var (
	schemasOnce sync.Once
	schemaComp  *jsonschema.Compiler
	schemaErr   error
	schemaMu    sync.Mutex
	schemaByRef = map[string]*jsonschema.Schema{}
)

// loadSchemas registers every schema file under its $id and a stub {} for each
// external reference the folder's README lists.
func loadSchemas() {
	c := jsonschema.NewCompiler()
	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	v2files, _ := filepath.Glob(filepath.Join(schemaDir, "v2", "*.json"))
	if len(files) == 0 {
		schemaErr = os.ErrNotExist
		return
	}
	for _, f := range append(files, v2files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			schemaErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			schemaErr = err
			return
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if err := c.AddResource(id, doc); err != nil {
			schemaErr = err
			return
		}
	}
	for _, stub := range []string{
		v1 + "agent-ref.schema.json", v1 + "prompt-ref.schema.json", v1 + "prompt-kind.schema.json",
		v1 + "orchestrator-decision.schema.json", v1 + "channel-written-payload.schema.json",
		v1 + "credential-reference.schema.json", v1 + "compensation-policy.schema.json",
		v2 + "agent-ref.schema.json",
		v2 + "orchestrator-decision.schema.json", v2 + "credential-reference.schema.json", v2 + "compensation-policy.schema.json",
	} {
		_ = c.AddResource(stub, map[string]any{})
	}
	// A2A's Part, which v2's ConversationTurn.parts refers to.
	if b, err := os.ReadFile(filepath.Join(schemaDir, "..", "v2", "schemas", "sdks", "part.schema.json")); err == nil {
		if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b)); err == nil {
			_ = c.AddResource(v2+"part.schema.json", doc)
		}
	}
	// Not copied (see the README); the v2 conversation schema aliases its exchanged
	// payload to a $def in it.
	_ = c.AddResource(v2+"run-event-payloads.schema.json", map[string]any{"$defs": map[string]any{"conversationExchanged": map[string]any{}}})
	schemaComp = c
}

// withoutParts is a turn without its parts.
func withoutParts(turn any) any {
	m, ok := turn.(map[string]any)
	if !ok {
		return turn
	}
	out := map[string]any{}
	for k, v := range m {
		if k != "parts" {
			out[k] = v
		}
	}
	return out
}

// schemaFor compiles (once) the schema at ref.
func schemaFor(t *testing.T, ref string) *jsonschema.Schema {
	t.Helper()
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s, ok := schemaByRef[ref]; ok {
		return s
	}
	s, err := schemaComp.Compile(ref)
	require.NoError(t, err, "compile %s", ref)
	schemaByRef[ref] = s
	return s
}

func requireSchemas(t *testing.T) bool {
	t.Helper()
	schemasOnce.Do(loadSchemas)
	if schemaErr != nil {
		t.Logf("OpenWOP schemas not found at %s (%v); schema checks skipped", schemaDir, schemaErr)
		return false
	}
	return true
}

func validateJSON(t *testing.T, ref string, v any, what string) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	if err := schemaFor(t, ref).Validate(inst); err != nil {
		t.Errorf("%s does not validate against %s:\n%s\n%v", what, ref, b, err)
	}
}

// camel turns "conversation.opened" / "node.suspend-failed" into the payload $def name.
func camel(typ string) string {
	var b strings.Builder
	up := false
	for _, r := range typ {
		if r == '.' || r == '-' || r == '_' {
			up = true
			continue
		}
		if up {
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// v1View is a stored event as a v1 reader is served it (api/render.go eventV1): a run
// of the v2 era stores the renamed types under their v2 names and its run.started
// names the owner's subject, and a v1 reader gets the v1 name and no subject; its
// conversation.opened names the roster, which v1's closed payload has no key for.
func v1View(t *testing.T, e Event) Event {
	t.Helper()
	if _, renamed := protocol.RenamedAtV2(e.Type); !renamed {
		v1name, ok := protocol.EventTypeV1(e.Type)
		require.True(t, ok, "%s has a v1 name", e.Type)
		e.Type = v1name
	}
	if e.Type == protocol.EvConversationOpened {
		var p map[string]any
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		delete(p, "participants")
		b, err := json.Marshal(p)
		require.NoError(t, err)
		e.Payload = b
	}
	if e.Type == protocol.EvRunStarted {
		var p map[string]any
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		if owner, ok := p["owner"].(map[string]any); ok {
			delete(owner, "subject")
		}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		e.Payload = b
	}
	return e
}

// recordForSchemaCheck validates every event as a v1 reader gets it (v1View): the
// closed v1 envelope, the v1 payload $def of its type, and for conversation events the
// strict v1 and v2 conversation schemas and the turn schemas.
func recordForSchemaCheck(t *testing.T, evs []Event) {
	t.Helper()
	if !requireSchemas(t) {
		return
	}
	defs := payloadDefs(t)
	for _, stored := range evs {
		e := v1View(t, stored)
		what := e.Type + " #" + e.EventID
		validateJSON(t, v1+"run-event.schema.json", e, what)
		var p any
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		if defs[camel(e.Type)] {
			validateJSON(t, v1+"run-event-payloads.schema.json#/$defs/"+camel(e.Type), p, what+" payload")
		}
		switch e.Type {
		case protocol.EvConversationOpened, protocol.EvConversationExchanged, protocol.EvConversationClosed:
			validateJSON(t, v1+"conversation-event.schema.json", p, what+" payload (v1 strict)")
			name := map[string]string{protocol.EvConversationOpened: "ConversationOpenedPayload", protocol.EvConversationExchanged: "ConversationExchangedPayload", protocol.EvConversationClosed: "ConversationClosedPayload"}[e.Type]
			validateJSON(t, v1+"conversation-event.schema.json#/$defs/"+name, p, what+" payload (v1 "+name+")")
			m := p.(map[string]any)
			turn := m["turn"]
			switch e.Type {
			case protocol.EvConversationOpened:
				turn = m["initialTurn"]
				validateJSON(t, v2+"conversation-event.schema.json#/$defs/ConversationOpenedPayload", p, what+" payload (v2)")
			case protocol.EvConversationClosed:
				turn = m["finalTurn"]
				validateJSON(t, v2+"conversation-event.schema.json#/$defs/ConversationClosedPayload", p, what+" payload (v2)")
			}
			validateJSON(t, v1+"conversation-turn.schema.json", turn, what+" turn (v1)")
			// The copy of v2's conversation-turn.schema.json predates RFC 0205's parts,
			// which conversation-event.schema.json's ConversationTurn (its mirror,
			// "kept in sync") has: the copy checks the rest of the turn.
			validateJSON(t, v2+"conversation-turn.schema.json", withoutParts(turn), what+" turn (v2)")
			validateJSON(t, v2+"conversation-event.schema.json#/$defs/ConversationTurn", turn, what+" turn (v2 inline)")
		}
	}
}

var (
	defsOnce  sync.Once
	defsNames map[string]bool
)

func payloadDefs(t *testing.T) map[string]bool {
	defsOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join(schemaDir, "run-event-payloads.schema.json"))
		require.NoError(t, err)
		var d struct {
			Defs map[string]json.RawMessage `json:"$defs"`
		}
		require.NoError(t, json.Unmarshal(b, &d))
		defsNames = map[string]bool{}
		for k := range d.Defs {
			defsNames[k] = true
		}
	})
	return defsNames
}

// TestFixturesValidateAgainstDefinitionSchema checks every embedded fixture (and a
// pack definition) against workflow-definition.schema.json, as served.
func TestFixturesValidateAgainstDefinitionSchema(t *testing.T) {
	fx, err := LoadFixtures()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(fx), 17)
	if !requireSchemas(t) {
		t.Skip("OpenWOP schemas are absent; nothing to validate against")
	}
	for _, d := range fx {
		validateJSON(t, v1+"workflow-definition.schema.json", d, "fixture "+d.ID)
	}
}

// TestSchemaCheckCatchesBadEvents proves the event check is not vacuous.
func TestSchemaCheckCatchesBadEvents(t *testing.T) {
	if !requireSchemas(t) {
		t.Skip("OpenWOP schemas are absent; nothing to validate against")
	}
	bad := []struct {
		ref string
		v   any
	}{
		{v1 + "run-event.schema.json", map[string]any{"eventId": "e", "runId": "r", "type": "run.started", "payload": map[string]any{}, "timestamp": "2026-01-01T00:00:00Z", "sequence": 0, "extra": 1}},
		{v1 + "run-event.schema.json", map[string]any{"eventId": "e", "runId": "r", "type": "no.such.type", "payload": map[string]any{}, "timestamp": "2026-01-01T00:00:00Z", "sequence": 0}},
		{v1 + "conversation-event.schema.json", map[string]any{"conversationId": "c", "turnIndex": 1, "finalTurn": map[string]any{"messageId": "m", "from": "system", "content": nil, "ts": 1, "role": "system", "turnIndex": 1}, "reason": "x"}},
		{v1 + "conversation-turn.schema.json", map[string]any{"messageId": "m", "from": "a", "content": "x", "ts": 1, "role": "agent", "turnIndex": 1}},
	}
	for i, b := range bad {
		raw, _ := json.Marshal(b.v)
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		require.Error(t, schemaFor(t, b.ref).Validate(inst), "case %d should be rejected", i)
	}
}
