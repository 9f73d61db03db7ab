package tests

// The OpenWOP conformance scenarios of ../../shared/spec/openwop-conformance.md §3.1–3.4,
// reproduced call by call over HTTP against the embedded stack, plus the RFC 0005
// scenarios the public suite lacks (conversation timeout, schema-rejected exchange,
// replay determinism). Every response body on these paths is validated against the
// OpenWOP JSON schemas.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/workflows"
)

// ---------------------------------------------------------------------------------
// Schema validation of response bodies.
// ---------------------------------------------------------------------------------

const cfSchemaDir = "../../shared/spec/schemas"
const cfSchemaBase = "https://openwop.dev/spec/v1/"

type cfLoader struct{}

// Load serves the local schema files under their $ids and {} for the external
// documents the folder does not carry (schemas/README.md).
func (cfLoader) Load(u string) (any, error) {
	name := strings.TrimPrefix(u, cfSchemaBase)
	if !strings.Contains(name, "/") {
		if b, err := os.ReadFile(filepath.Join(cfSchemaDir, name)); err == nil {
			return jsonschema.UnmarshalJSON(bytes.NewReader(b))
		}
	}
	return map[string]any{}, nil
}

var cfSchemas struct {
	once     sync.Once
	mu       sync.Mutex
	c        *jsonschema.Compiler
	cache    map[string]*jsonschema.Schema
	payloads map[string]bool // $defs of run-event-payloads
}

// cfValidate validates raw JSON against a schema location (file[#fragment]).
func cfValidate(t *testing.T, loc string, raw []byte) {
	t.Helper()
	if _, err := os.Stat(cfSchemaDir); err != nil {
		t.Skipf("schema folder %s is absent: response bodies are not validated", cfSchemaDir)
	}
	cfSchemas.once.Do(func() {
		cfSchemas.c = jsonschema.NewCompiler()
		cfSchemas.c.UseLoader(cfLoader{})
		cfSchemas.cache = map[string]*jsonschema.Schema{}
		cfSchemas.payloads = map[string]bool{}
		var doc struct {
			Defs map[string]json.RawMessage `json:"$defs"`
		}
		if b, err := os.ReadFile(filepath.Join(cfSchemaDir, "run-event-payloads.schema.json")); err == nil && json.Unmarshal(b, &doc) == nil {
			for k := range doc.Defs {
				cfSchemas.payloads[k] = true
			}
		}
	})
	cfSchemas.mu.Lock()
	sch, ok := cfSchemas.cache[loc]
	if !ok {
		var err error
		sch, err = cfSchemas.c.Compile(cfSchemaBase + loc)
		if err != nil {
			cfSchemas.mu.Unlock()
			t.Fatalf("compile schema %s: %v", loc, err)
		}
		cfSchemas.cache[loc] = sch
	}
	cfSchemas.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err, "response is not JSON: %s", raw)
	if err := sch.Validate(v); err != nil {
		t.Errorf("body does not validate against %s: %v\n%s", loc, err, raw)
	}
}

// payloadDef is the run-event-payloads $defs name of an event type:
// "node.suspended" -> "nodeSuspended".
func payloadDef(typ string) string {
	var b strings.Builder
	up := false
	for _, r := range typ {
		if r == '.' || r == '-' || r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

// cfValidateEvent validates one run event: the closed envelope, its payload against
// the per-type $defs, and conversation payloads against the strict conversation schema.
func cfValidateEvent(t *testing.T, raw []byte) {
	t.Helper()
	cfValidate(t, "run-event.schema.json", raw)
	var ev struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(raw, &ev))
	if def := payloadDef(ev.Type); cfSchemas.payloads[def] {
		cfValidate(t, "run-event-payloads.schema.json#/$defs/"+def, ev.Payload)
	}
	switch ev.Type {
	case "conversation.opened":
		cfValidate(t, "conversation-event.schema.json#/$defs/ConversationOpenedPayload", ev.Payload)
	case "conversation.exchanged":
		cfValidate(t, "conversation-event.schema.json#/$defs/ConversationExchangedPayload", ev.Payload)
	case "conversation.closed":
		cfValidate(t, "conversation-event.schema.json#/$defs/ConversationClosedPayload", ev.Payload)
	}
}

// ---------------------------------------------------------------------------------
// Calls, as the suite's driver makes them (Accept: application/json, bearer key).
// ---------------------------------------------------------------------------------

// cfCall sends a request as the suite does and returns status, headers and raw body.
// Non-2xx bodies are validated against the error envelope.
func cfCall(t *testing.T, c *apiClient, key, method, path string, body any) (int, http.Header, []byte) {
	t.Helper()
	h := map[string]string{"Accept": "application/json"}
	if key != "" {
		h["Authorization"] = "Bearer " + key
	}
	status, hdr, raw := c.doRaw(method, path, body, h)
	if status >= 400 {
		cfValidate(t, "error-envelope.schema.json", raw)
	}
	return status, hdr, raw
}

func cfObj(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), "body: %s", raw)
	return m
}

// cfCreate starts a run of a fixture and asserts 201.
func cfCreate(t *testing.T, c *apiClient, workflowID string, inputs map[string]any) string {
	t.Helper()
	body := map[string]any{"workflowId": workflowID}
	if inputs != nil {
		body["inputs"] = inputs
	}
	status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs", body)
	require.Equal(t, http.StatusCreated, status, "create %s: %s", workflowID, raw)
	m := cfObj(t, raw)
	id, _ := m["runId"].(string)
	require.NotEmpty(t, id, "runId in %s", raw)
	require.IsType(t, "", m["status"])
	return id
}

// cfSnapshot reads a run snapshot (snapshotJSON), validating it against
// run-snapshot.schema.json.
func cfSnapshot(t *testing.T, c *apiClient, id string) map[string]any {
	t.Helper()
	raw := snapshotJSON(t, c, id)
	cfValidate(t, "run-snapshot.schema.json", raw)
	return cfObj(t, raw)
}

func cfTerminal(s map[string]any) bool {
	switch s["status"] {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

// cfWait reads the validated snapshot until pred holds (waitFor; the suite polls every
// 250 ms with a 10 s bound).
func cfWait(t *testing.T, c *apiClient, id string, within time.Duration, what string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	return waitFor(t, within, "run "+id+" "+what, func() map[string]any {
		raw, answered := tryGetJSON(t, c, "/v1/runs/"+id)
		if !answered {
			return nil // a 503 is read again
		}
		cfValidate(t, "run-snapshot.schema.json", raw)
		return cfObj(t, raw)
	}, func(s map[string]any) bool { return s != nil && pred(s) })
}

func cfWaitTerminal(t *testing.T, c *apiClient, id string) map[string]any {
	t.Helper()
	return cfWait(t, c, id, 20*time.Second, "terminal", cfTerminal)
}

func cfWaitStatus(t *testing.T, c *apiClient, id, status string) map[string]any {
	t.Helper()
	return cfWait(t, c, id, 15*time.Second, status, func(s map[string]any) bool {
		if cfTerminal(s) && s["status"] != status {
			t.Fatalf("run %s ended %v while waiting for %s: %v", id, s["status"], status, s)
		}
		return s["status"] == status
	})
}

// cfDecodeEvents decodes a page of events, validating each against the event schema.
func cfDecodeEvents(t *testing.T, raw []byte) ([]event, bool) {
	t.Helper()
	var page struct {
		Events     []json.RawMessage `json:"events"`
		IsComplete bool              `json:"isComplete"`
	}
	require.NoError(t, json.Unmarshal(raw, &page), "events body: %s", raw)
	out := make([]event, 0, len(page.Events))
	for _, e := range page.Events {
		cfValidateEvent(t, e)
		var ev event
		require.NoError(t, json.Unmarshal(e, &ev))
		out = append(out, ev)
	}
	return out, page.IsComplete
}

// cfEvents reads the run's event log (eventsJSON), validating every event.
func cfEvents(t *testing.T, c *apiClient, id string) []event {
	t.Helper()
	evs, _ := cfDecodeEvents(t, eventsJSON(t, c, id))
	return evs
}

func cfResolve(t *testing.T, c *apiClient, key, id, node string, body any) (int, map[string]any) {
	t.Helper()
	status, _, raw := cfCall(t, c, key, http.MethodPost, "/v1/runs/"+id+"/interrupts/"+node, body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return status, m
}

func cfCancel(t *testing.T, c *apiClient, id string) int {
	t.Helper()
	status, _, _ := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+id+"/cancel", map[string]any{"reason": "conformance-cleanup"})
	return status
}

func cfRequireFixture(t *testing.T, c *apiClient, ids ...string) {
	t.Helper()
	_, _, raw := cfCall(t, c, "", http.MethodGet, "/.well-known/openwop", nil)
	doc := cfObj(t, raw)
	fx, _ := doc["fixtures"].([]any)
	for _, id := range ids {
		require.Contains(t, fx, id, "fixture %s must be advertised, or the suite skips its scenario", id)
	}
}

// ---------------------------------------------------------------------------------
// §3.1 Conversation scenarios.
// ---------------------------------------------------------------------------------

func TestConformanceConversationLifecycle(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-conversation-lifecycle")
	id := cfCreate(t, c, "conformance-conversation-lifecycle", nil)
	cfWaitTerminal(t, c, id)
	evs := cfEvents(t, c, id)
	var convID string
	closedAt := -1
	var opened, closed int
	for i, e := range evs {
		if !strings.HasPrefix(e.Type, "conversation.") {
			continue
		}
		var p struct {
			ConversationID string `json:"conversationId"`
		}
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		if convID == "" {
			convID = p.ConversationID
		}
		assert.Equal(t, convID, p.ConversationID, "one conversationId on every conversation event")
		switch e.Type {
		case "conversation.opened":
			opened++
		case "conversation.closed":
			closed++
			if closedAt < 0 {
				closedAt = i
			}
		case "conversation.exchanged":
			assert.True(t, closedAt < 0, "conversation.exchanged after conversation.closed")
		}
	}
	assert.NotEmpty(t, convID)
	assert.GreaterOrEqual(t, opened, 1, "conversation.opened: %v", types(evs))
	assert.GreaterOrEqual(t, closed, 1, "conversation.closed: %v", types(evs))
}

func TestConformanceConversationVsLegacySuspend(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-conversation-vs-clarification")
	id := cfCreate(t, c, "conformance-conversation-vs-clarification", nil)
	cfWaitTerminal(t, c, id)
	var conv, clar int
	for _, e := range cfEvents(t, c, id) {
		if strings.HasPrefix(e.Type, "conversation.") {
			conv++
		}
		if strings.HasPrefix(e.Type, "clarification.") {
			clar++
		}
	}
	assert.Greater(t, conv, 0, "conversation.* events")
	assert.Zero(t, clar, "no clarification.* events for conversations")
}

func TestConformanceConversationReplayDeterminism(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-conversation-replay")
	id := cfCreate(t, c, "conformance-conversation-replay", nil)
	src := cfWaitTerminal(t, c, id)
	require.Equal(t, "completed", src["status"])
	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+id, nil)
	require.Equal(t, 200, status)
	srcChannels := rawMember(t, raw, "channels")

	status, _, raw = cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+id+":fork", map[string]any{"mode": "replay"})
	require.Contains(t, []int{200, 201}, status, "fork: %s", raw)
	fork := cfObj(t, raw)
	forkID := fork["runId"].(string)
	assert.Equal(t, id, fork["sourceRunId"])
	assert.Equal(t, "replay", fork["mode"])
	assert.Equal(t, "completed", cfWaitTerminal(t, c, forkID)["status"])
	_, _, raw = cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+forkID, nil)
	assert.Equal(t, string(srcChannels), string(rawMember(t, raw, "channels")), "forked channels are byte-identical")
}

// rawMember returns one member of a JSON object exactly as served (key order included).
func rawMember(t *testing.T, raw []byte, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	return m[key]
}

// ---------------------------------------------------------------------------------
// §3.2 Interrupt scenarios.
// ---------------------------------------------------------------------------------

func TestConformanceInterruptApproval(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-approval")
	t.Run("accept completes", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-approval", nil)
		s := cfWaitStatus(t, c, id, "waiting-approval")
		assert.Equal(t, "gate", s["currentNodeId"])
		status, body := cfResolve(t, c, c.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
		require.Equal(t, 200, status, "%v", body)
		assert.Equal(t, "completed", cfWaitTerminal(t, c, id)["status"])
	})
	t.Run("action outside the list", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-approval", nil)
		cfWaitStatus(t, c, id, "waiting-approval")
		status, body := cfResolve(t, c, c.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "maybe"}})
		assert.Contains(t, []int{400, 422}, status, "%v", body)
		assert.Equal(t, "waiting-approval", cfSnapshot(t, c, id)["status"])
		cfCancel(t, c, id)
	})
	t.Run("unknown node is 404", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-approval", nil)
		cfWaitStatus(t, c, id, "waiting-approval")
		status, body := cfResolve(t, c, c.Key, id, "no-such-node", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
		assert.Equal(t, 404, status, "%v", body)
		cfCancel(t, c, id)
	})
}

func TestConformanceInterruptClarification(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-clarification")
	id := cfCreate(t, c, "conformance-clarification", nil)
	s := cfWaitStatus(t, c, id, "waiting-input")
	assert.Equal(t, "ask", s["currentNodeId"])
	status, body := cfResolve(t, c, c.Key, id, "ask", map[string]any{"resumeValue": map[string]any{"answers": map[string]any{"q1": "blue"}}})
	require.Equal(t, 200, status, "%v", body)
	assert.Equal(t, "completed", cfWaitTerminal(t, c, id)["status"])
}

// cfToken reads the external-event token from the snapshot as the suite does.
func cfToken(t *testing.T, s map[string]any) string {
	t.Helper()
	in, _ := s["interrupt"].(map[string]any)
	require.NotNil(t, in, "snapshot interrupt: %v", s)
	if tok, _ := in["interruptToken"].(string); tok != "" {
		return tok
	}
	cb, _ := in["callbackUrl"].(string)
	_, tok, ok := strings.Cut(cb, "/v1/interrupts/")
	require.True(t, ok, "callbackUrl %q", cb)
	return tok
}

func TestConformanceInterruptExternalEventCorrelation(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-interrupt-external-event")
	t.Run("matching event completes", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-interrupt-external-event", nil)
		tok := cfToken(t, cfWaitStatus(t, c, id, "waiting-external"))
		status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/interrupts/"+tok,
			map[string]any{"resumeValue": map[string]any{"orderId": "fixture-order-1", "status": "completed", "externalReference": "conformance-test-123"}})
		require.True(t, status >= 200 && status < 300, "%d %s", status, raw)
		assert.Equal(t, "completed", cfWaitTerminal(t, c, id)["status"])
	})
	t.Run("mismatched correlation is refused", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-interrupt-external-event", nil)
		tok := cfToken(t, cfWaitStatus(t, c, id, "waiting-external"))
		status, _, raw := cfCall(t, c, "", http.MethodPost, "/v1/interrupts/"+tok,
			map[string]any{"resumeValue": map[string]any{"orderId": "different-order", "status": "completed"}})
		assert.Contains(t, []int{400, 422}, status, "%s", raw)
		assert.True(t, strings.HasPrefix(cfSnapshot(t, c, id)["status"].(string), "waiting-"))
		cfCancel(t, c, id)
	})
}

func TestConformanceInterruptTokenMatrix(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-interrupt-external-event")
	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/interrupts/"+url.PathEscape("!!!not-a-valid-token!!!"), nil)
	assert.Contains(t, []int{400, 404}, status, "malformed: %s", raw)
	status, _, raw = cfCall(t, c, c.Key, http.MethodGet, "/v1/interrupts/tok_"+randomHex(12), nil)
	assert.Equal(t, 404, status, "unknown: %s", raw)
	status, _, raw = cfCall(t, c, c.Key, http.MethodPost, "/v1/interrupts/tok_"+randomHex(12), map[string]any{"correlation": map[string]any{"orderId": "x"}})
	assert.Equal(t, 404, status, "unknown POST: %s", raw)

	id := cfCreate(t, c, "conformance-interrupt-external-event", nil)
	tok := cfToken(t, cfWaitStatus(t, c, id, "waiting-external"))
	status, _, raw = cfCall(t, c, c.Key, http.MethodGet, "/v1/interrupts/"+tok, nil)
	require.Equal(t, 200, status, "inspect: %s", raw)
	match := map[string]any{"resumeValue": map[string]any{"orderId": "fixture-order-1", "status": "completed"}}
	status, _, raw = cfCall(t, c, "", http.MethodPost, "/v1/interrupts/"+tok, match)
	require.True(t, status >= 200 && status < 300, "first use: %d %s", status, raw)
	status, _, raw = cfCall(t, c, "", http.MethodPost, "/v1/interrupts/"+tok, match)
	assert.Contains(t, []int{404, 409, 410}, status, "replayed token: %s", raw)
	cfCancel(t, c, id)
}

// lowScopeAPI serves a second API over the same Temporal and catalog with extra keys:
// a key without approvals:respond and a key of another tenant.
func lowScopeAPI(t *testing.T, c *apiClient) (*apiClient, string, string) {
	t.Helper()
	low, other := "low-"+randomHex(8), "other-"+randomHex(8)
	srv, err := newAPI(t, c, []api.Key{
		{ID: "full", Secret: c.Key, Tenant: "default", Scopes: harnessScopes},
		{ID: "low", Secret: low, Tenant: "default", Scopes: []string{"runs:read", "runs:create", "runs:cancel"}},
		{ID: "other", Secret: other, Tenant: "tenant-b", Scopes: api.AllScopes},
	})
	require.NoError(t, err)
	return srv, low, other
}

func TestConformanceInterruptAuthRequiredResume(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-interrupt-auth-required")
	t.Run("bearer resolve completes", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-interrupt-auth-required", nil)
		cfWaitStatus(t, c, id, "waiting-approval")
		status, body := cfResolve(t, c, c.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
		require.True(t, status >= 200 && status < 300, "%d %v", status, body)
		assert.Equal(t, "completed", cfWaitTerminal(t, c, id)["status"])
	})
	t.Run("low-scope key is 403", func(t *testing.T) {
		c2, low, _ := lowScopeAPI(t, c)
		id := cfCreate(t, c2, "conformance-interrupt-auth-required", nil)
		cfWaitStatus(t, c2, id, "waiting-approval")
		status, body := cfResolve(t, c2, low, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
		assert.Equal(t, 403, status, "%v", body)
		assert.Equal(t, "waiting-approval", cfSnapshot(t, c2, id)["status"])
		cfCancel(t, c2, id)
	})
}

func TestConformanceInterruptQuorum(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-interrupt-quorum")
	t.Run("three accepts complete", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-interrupt-quorum", nil)
		cfWaitStatus(t, c, id, "waiting-approval")
		for i := 1; i <= 3; i++ {
			status, body := cfResolve(t, c, c.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept", "voter": fmt.Sprintf("approver-%d", i)}})
			require.True(t, status >= 200 && status < 300, "vote %d: %d %v", i, status, body)
			if i < 3 {
				assert.Equal(t, "waiting-approval", cfSnapshot(t, c, id)["status"], "after vote %d", i)
			}
		}
		assert.Equal(t, "completed", cfWaitTerminal(t, c, id)["status"])
	})
	t.Run("two rejects fail", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-interrupt-quorum", nil)
		cfWaitStatus(t, c, id, "waiting-approval")
		for i := 1; i <= 2; i++ {
			cfResolve(t, c, c.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "reject", "voter": fmt.Sprintf("approver-%d", i)}})
		}
		assert.Contains(t, []any{"failed", "rejected"}, cfWaitTerminal(t, c, id)["status"])
	})
}

func TestConformanceInterruptParentChildCascade(t *testing.T) {
	c := startStack(t)
	cfRequireFixture(t, c, "conformance-interrupt-parent-child-cancel", "conformance-interrupt-parent-child-cancel-child")
	start := func(t *testing.T) (string, string) {
		parent := cfCreate(t, c, "conformance-interrupt-parent-child-cancel", nil)
		s := cfWaitStatus(t, c, parent, "waiting-approval")
		kids, _ := s["childRuns"].([]any)
		require.NotEmpty(t, kids, "childRuns: %v", s)
		child, _ := kids[0].(map[string]any)["runId"].(string)
		require.NotEmpty(t, child)
		status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+parent+"/cancel", map[string]any{"reason": "conformance-cascade"})
		require.True(t, status >= 200 && status < 300, "%d %s", status, raw)
		return parent, child
	}
	t.Run("cancel cascades", func(t *testing.T) {
		parent, child := start(t)
		assert.Equal(t, "cancelled", cfWaitTerminal(t, c, parent)["status"])
		assert.Equal(t, "cancelled", cfWait(t, c, child, 5*time.Second, "cancelled", cfTerminal)["status"])
	})
	t.Run("resolving the cancelled child fails", func(t *testing.T) {
		_, child := start(t)
		cfWaitTerminal(t, c, child)
		status, body := cfResolve(t, c, c.Key, child, "child-gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
		assert.Contains(t, []int{404, 409, 410}, status, "%v", body)
	})
}

func TestConformanceInterruptRace(t *testing.T) {
	c := startStack(t)
	t.Run("cancel races a legacy resolve", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-approval", nil)
		s := cfWaitStatus(t, c, id, "waiting-approval")
		node, _ := s["currentNodeId"].(string)
		require.NotEmpty(t, node)
		var wg sync.WaitGroup
		var cancelStatus, resolveStatus int
		wg.Add(2)
		go func() {
			defer wg.Done()
			cancelStatus, _, _ = c.doRaw(http.MethodPost, "/v1/runs/"+id+"/cancel", map[string]any{"reason": "race"}, map[string]string{"Authorization": "Bearer " + c.Key})
		}()
		go func() {
			defer wg.Done()
			resolveStatus, _, _ = c.doRaw(http.MethodPost, "/v1/runs/"+id+"/approvals/"+node, map[string]any{"action": "accept"}, map[string]string{"Authorization": "Bearer " + c.Key})
		}()
		wg.Wait()
		assert.Contains(t, []int{200, 202, 409}, cancelStatus)
		assert.Contains(t, []int{200, 202, 400, 404, 409, 410}, resolveStatus)
		ok := func(s int) bool { return s == 200 || s == 202 }
		assert.True(t, ok(cancelStatus) || ok(resolveStatus), "cancel %d resolve %d", cancelStatus, resolveStatus)
		final := cfWait(t, c, id, 30*time.Second, "terminal", cfTerminal)
		if ok(cancelStatus) && !ok(resolveStatus) {
			assert.Equal(t, "cancelled", final["status"])
		}
	})
	t.Run("cancel of a finished run is 200", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-noop", nil)
		cfWaitTerminal(t, c, id)
		status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+id+"/cancel", map[string]any{})
		assert.Equal(t, 200, status, "%s", raw)
		assert.Equal(t, "completed", cfObj(t, raw)["status"])
	})
	t.Run("two racing resolves: exactly one wins", func(t *testing.T) {
		id := cfCreate(t, c, "conformance-approval", nil)
		cfWaitStatus(t, c, id, "waiting-approval")
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _, _ = c.doRaw(http.MethodPost, "/v1/runs/"+id+"/interrupts/gate",
					map[string]any{"resumeValue": map[string]any{"action": "accept"}}, map[string]string{"Authorization": "Bearer " + c.Key})
			}()
		}
		wg.Wait()
		wins := 0
		for _, code := range codes {
			if code == 200 {
				wins++
			} else {
				assert.Contains(t, []int{404, 409}, code)
			}
		}
		assert.Equal(t, 1, wins, "codes %v", codes)
		assert.Equal(t, "completed", cfWaitTerminal(t, c, id)["status"])
	})
}

// ---------------------------------------------------------------------------------
// §3.3 Core floor scenarios.
// ---------------------------------------------------------------------------------

func TestConformanceRunsLifecycle(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-noop", nil)
	s := cfWaitTerminal(t, c, id)
	assert.Equal(t, "completed", s["status"])
	assert.Equal(t, id, s["runId"])
	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/openwop-conformance-this-run-id-does-not-exist", nil)
	assert.Contains(t, []int{403, 404}, status, "%s", raw)
}

func TestConformanceDiscovery(t *testing.T) {
	c := startStack(t)
	status, hdr, raw := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, map[string]string{"Accept": "application/json"})
	require.Equal(t, 200, status)
	cfValidate(t, "capabilities.schema.json", raw)
	doc := cfObj(t, raw)
	for _, k := range []string{"protocolVersion", "supportedEnvelopes", "schemaVersions", "limits"} {
		assert.Contains(t, doc, k)
	}
	assert.NotEmpty(t, hdr.Get("Cache-Control"))
	if etag := hdr.Get("ETag"); etag != "" {
		st, _, _ := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, map[string]string{"If-None-Match": etag})
		assert.Equal(t, http.StatusNotModified, st)
	}
	if ce := hdr.Get("Capabilities-Etag"); ce != "" {
		_, hdr2, _ := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, nil)
		assert.Equal(t, ce, hdr2.Get("Capabilities-Etag"))
	}
	lim := doc["limits"].(map[string]any)
	for _, k := range []string{"clarificationRounds", "schemaRounds", "envelopesPerTurn"} {
		n, ok := lim[k].(float64)
		assert.True(t, ok && n >= 0, "limits.%s = %v", k, lim[k])
	}
	seen := map[string]bool{}
	for _, f := range doc["fixtures"].([]any) {
		s, _ := f.(string)
		assert.NotEmpty(t, s)
		assert.False(t, seen[s], "duplicate fixture %s", s)
		seen[s] = true
	}
	assert.NotContains(t, doc["fixtures"], "conformance-conversation-capability-negotiation")
	status, _, raw = c.doRaw(http.MethodGet, "/v1/openapi.json", nil, nil)
	require.Equal(t, 200, status)
	assert.Regexp(t, `^3\.[1-9]`, cfObj(t, raw)["openapi"])
}

func TestConformanceAuth(t *testing.T) {
	c := startStack(t)
	for _, key := range []string{"", "hk_definitely_not_a_real_key_12345"} {
		status, _, raw := cfCall(t, c, key, http.MethodPost, "/v1/runs", map[string]any{"workflowId": "conformance-noop"})
		assert.Equal(t, 401, status, "%s", raw)
		m := cfObj(t, raw)
		assert.IsType(t, "", m["error"])
		assert.IsType(t, "", m["message"])
	}
}

func TestConformanceEventOrdering(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-noop", nil)
	cfWaitTerminal(t, c, id)
	read := func() []event {
		status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+id+"/events/poll", nil)
		require.Equal(t, 200, status, "%s", raw)
		evs, complete := cfDecodeEvents(t, raw)
		assert.True(t, complete)
		return evs
	}
	a, b := read(), read()
	require.GreaterOrEqual(t, len(a), 2, "poll must return the log (the suite soft-skips otherwise)")
	require.Equal(t, len(a), len(b))
	terminal := 0
	for i := range a {
		assert.Equal(t, a[i].Sequence, b[i].Sequence)
		if i > 0 {
			assert.Greater(t, a[i].Sequence, a[i-1].Sequence)
		}
		if a[i].Type == "run.completed" || a[i].Type == "run.failed" || a[i].Type == "run.cancelled" {
			terminal++
		}
	}
	assert.Equal(t, 1, terminal)
	assert.Equal(t, "run.completed", a[len(a)-1].Type)
	assert.Equal(t, int64(0), a[0].Sequence)
}

func TestConformanceFailurePath(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-failure", nil)
	s := cfWaitTerminal(t, c, id)
	assert.Equal(t, "failed", s["status"])
	e, _ := s["error"].(map[string]any)
	require.NotNil(t, e, "error: %v", s)
	assert.IsType(t, "", e["code"])
	assert.IsType(t, "", e["message"])
	types := types(cfEvents(t, c, id))
	assert.Contains(t, types, "node.failed")
	assert.Equal(t, "run.failed", types[len(types)-1])
}

func TestConformanceIdempotency(t *testing.T) {
	c := startStack(t)
	post := func(key string, nonce string) (int, http.Header, []byte) {
		h := map[string]string{"Authorization": "Bearer " + c.Key, "Idempotency-Key": key, "Accept": "application/json"}
		return c.doRaw(http.MethodPost, "/v1/runs", map[string]any{"workflowId": "conformance-idempotent", "inputs": map[string]any{"nonce": nonce}}, h)
	}
	k1 := "idem-" + randomHex(8)
	s1, h1, r1 := post(k1, "abc-123")
	require.Equal(t, 201, s1, "%s", r1)
	assert.Empty(t, h1.Get("openwop-Idempotent-Replay"))
	s2, h2, r2 := post(k1, "abc-123")
	assert.Contains(t, []int{200, 201}, s2, "%s", r2)
	assert.Equal(t, cfObj(t, r1)["runId"], cfObj(t, r2)["runId"])
	assert.NotEmpty(t, h2.Get("openwop-Idempotent-Replay"))

	k2 := "idem-" + randomHex(8)
	s3, _, r3 := post(k2, "first")
	require.Equal(t, 201, s3, "%s", r3)
	s4, _, r4 := post(k2, "DIFFERENT")
	assert.Equal(t, 409, s4, "%s", r4)
	cfValidate(t, "error-envelope.schema.json", r4)
	m := cfObj(t, r4)
	assert.Equal(t, "idempotency_key_mismatch", m["error"])
	assert.NotContains(t, m, "runId")
	assert.NotContains(t, string(r4), cfObj(t, r3)["runId"].(string))
}

// TestConformanceWebhookNegative follows the suite's webhook-negative and
// webhook-tenant-isolation scenarios: the host advertises webhooks, so its SSRF guard
// refuses loopback (and metadata) destinations with 400 webhook_url_rejected, malformed
// bodies are 400 validation_error, an unknown subscription is 404
// subscription_not_found, and a key registers and removes webhooks of its own tenant
// only.
func TestConformanceWebhookNegative(t *testing.T) {
	c := startStack(t)
	_, _, raw := cfCall(t, c, "", http.MethodGet, "/.well-known/openwop", nil)
	caps := cfObj(t, raw)
	require.Contains(t, caps, "webhooks")
	wh := caps["webhooks"].(map[string]any)
	assert.Equal(t, true, wh["supported"])
	assert.Equal(t, []any{"v1"}, wh["signatureAlgorithms"])

	refused := func(body map[string]any) {
		t.Helper()
		status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/webhooks", body)
		require.Equal(t, 400, status, "%v: %s", body, raw)
		cfValidate(t, "error-envelope.schema.json", raw)
		assert.Equal(t, "webhook_url_rejected", cfObj(t, raw)["error"], "%v", body)
	}
	refused(map[string]any{"url": "http://127.0.0.1:65535/", "events": []string{"run.completed"}, "tenantId": "default"})
	for _, u := range []string{"https://169.254.169.254/latest/meta-data/", "https://[fd00:ec2::254]/", "https://metadata.google.internal/computeMetadata/v1/", "https://10.0.0.7/hook", "https://localhost/hook"} {
		refused(map[string]any{"url": u, "events": []string{"run.completed"}})
	}

	status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/webhooks", map[string]any{"url": "not a url"})
	assert.Contains(t, []int{400, 422}, status)
	assert.Contains(t, []string{"validation_error", "webhook_url_rejected"}, cfObj(t, raw)["error"])
	status, _, raw = cfCall(t, c, c.Key, http.MethodPost, "/v1/webhooks", map[string]any{"eventTypes": []string{"run.completed"}})
	assert.Equal(t, 400, status)
	assert.Equal(t, "validation_error", cfObj(t, raw)["error"])
	status, _, raw = cfCall(t, c, c.Key, http.MethodPost, "/v1/webhooks", map[string]any{"url": "https://example.com/x", "events": []string{}})
	assert.Equal(t, 400, status, "empty events: %s", raw)
	status, _, raw = cfCall(t, c, c.Key, http.MethodDelete, "/v1/webhooks/wh-does-not-exist", nil)
	assert.Equal(t, 404, status)
	cfValidate(t, "error-envelope.schema.json", raw)
	assert.Equal(t, "subscription_not_found", cfObj(t, raw)["error"])

	// Tenant scoping (webhook-tenant-isolation).
	const safeURL = "https://example.com/openwop-conformance/webhook-tenant-isolation"
	status, _, _ = cfCall(t, c, c.Key, http.MethodPost, "/v1/webhooks", map[string]any{"url": safeURL, "events": []string{"run.completed"}, "tenantId": "openwop-conformance-foreign-1"})
	assert.NotEqual(t, 201, status, "registering under a foreign tenant is refused")
	status, _, raw = cfCall(t, c, c.Key, http.MethodPost, "/v1/webhooks", map[string]any{"url": safeURL, "events": []string{"run.completed"}})
	require.Equal(t, 201, status, "%s", raw)
	reg := cfObj(t, raw)
	id, _ := reg["webhookId"].(string)
	require.NotEmpty(t, id)
	require.Len(t, reg["secret"], 64)
	require.Len(t, reg["secretFingerprint"], 8)
	status, _, _ = cfCall(t, c, c.Key, http.MethodDelete, "/v1/webhooks/"+id+"?tenantId=openwop-conformance-foreign-1", nil)
	assert.True(t, status != 204 && status < 500, "a foreign tenant scope does not remove it: %d", status)
	status, _, _ = cfCall(t, c, c.Key, http.MethodDelete, "/v1/webhooks/"+id, nil)
	assert.Equal(t, 204, status)
	status, _, _ = cfCall(t, c, c.Key, http.MethodDelete, "/v1/webhooks/"+id, nil)
	assert.Equal(t, 404, status, "removed once")
}

// ---------------------------------------------------------------------------------
// §3.4 SSE scenarios.
// ---------------------------------------------------------------------------------

// cfSSE reads an SSE stream (openStream) until the server closes it (or maxWait),
// returning frames and whether the server closed it.
func cfSSE(t *testing.T, c *apiClient, path string, hdr map[string]string, maxWait time.Duration) (int, []sseEvent, bool) {
	t.Helper()
	return cfSSEFollow(t, c, path, hdr, maxWait, nil)
}

// cfSSEFollow is cfSSE that also hands each frame to onFrame (when not nil) as it
// arrives, so a test can act on a live stream. Frames are validated against the event
// schema, an answer other than 200 against the error envelope.
func cfSSEFollow(t *testing.T, c *apiClient, path string, hdr map[string]string, maxWait time.Duration, onFrame func(sseEvent)) (int, []sseEvent, bool) {
	t.Helper()
	s := openStream(t, c, path, hdr)
	if s.Status != http.StatusOK {
		cfValidate(t, "error-envelope.schema.json", s.Body)
		return s.Status, nil, true
	}
	assert.Contains(t, s.Header.Get("Content-Type"), "text/event-stream")
	frames, closedByServer := s.rest(maxWait, onFrame)
	for _, f := range frames {
		if f.Event != "state.snapshot" {
			cfValidateEvent(t, []byte(f.Data))
		}
	}
	return s.Status, frames, closedByServer
}

// cfFollowAndResolve reads the SSE stream at path (cfSSEFollow) and, once its first
// frame has arrived (the stream is attached), calls resolve, so what the resolve causes
// can reach the reader only by following the run live. It returns what cfSSEFollow
// returns and resolve's status (0 when no frame came).
func cfFollowAndResolve(t *testing.T, c *apiClient, path string, maxWait time.Duration, resolve func() int) (int, []sseEvent, bool, int) {
	t.Helper()
	resolved := 0
	status, frames, closed := cfSSEFollow(t, c, path, nil, maxWait, func(sseEvent) {
		if resolved == 0 {
			resolved = resolve()
		}
	})
	return status, frames, closed, resolved
}

func TestConformanceStreamModes(t *testing.T) {
	c := startStack(t)
	run := func() string { return cfCreate(t, c, "conformance-delay", map[string]any{"delayMs": 1000}) }
	status, frames, closed := cfSSE(t, c, "/v1/runs/"+run()+"/events?streamMode=updates", nil, 15*time.Second)
	require.Equal(t, 200, status)
	assert.True(t, closed, "updates stream closed by the server")
	assert.Contains(t, frameNames(frames), "run.started")
	assert.Contains(t, frameNames(frames), "run.completed")
	updates := len(frames)

	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+run()+"/events?streamMode=does-not-exist", nil)
	assert.Equal(t, 400, status)
	e := cfObj(t, raw)
	assert.Equal(t, "unsupported_stream_mode", e["error"])
	assert.NotEmpty(t, e["details"].(map[string]any)["supported"])

	status, frames, closed = cfSSE(t, c, "/v1/runs/"+run()+"/events?streamMode=values", nil, 15*time.Second)
	require.Equal(t, 200, status)
	assert.True(t, closed)
	assert.GreaterOrEqual(t, len(frames), 1)

	status, frames, closed = cfSSE(t, c, "/v1/runs/"+run()+"/events?streamMode=debug", nil, 15*time.Second)
	require.Equal(t, 200, status)
	assert.True(t, closed)
	assert.GreaterOrEqual(t, len(frames), updates)
}

func TestConformanceStreamReconnect(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-cancellable", map[string]any{"delayMs": 2000})
	_, frames, _ := cfSSE(t, c, "/v1/runs/"+id+"/events?streamMode=debug", nil, time.Second)
	require.NotEmpty(t, frames, "events within the first second")
	last := int64(-1)
	for _, f := range frames {
		n, err := strconv.ParseInt(f.ID, 10, 64)
		require.NoError(t, err)
		last = max(last, n)
	}
	status, frames, closed := cfSSE(t, c, "/v1/runs/"+id+"/events?streamMode=debug", map[string]string{"Last-Event-ID": strconv.FormatInt(last, 10)}, 15*time.Second)
	require.Equal(t, 200, status)
	assert.True(t, closed)
	for _, f := range frames {
		n, _ := strconv.ParseInt(f.ID, 10, 64)
		assert.Greater(t, n, last, "resumed strictly after %d", last)
	}
	assert.Contains(t, frameNames(frames), "run.completed")

	noop := cfCreate(t, c, "conformance-noop", nil)
	cfWaitTerminal(t, c, noop)
	evs := cfEvents(t, c, noop)
	term := evs[len(evs)-1].Sequence
	status, frames, closed = cfSSE(t, c, "/v1/runs/"+noop+"/events", map[string]string{"Last-Event-ID": strconv.FormatInt(term, 10)}, 10*time.Second)
	assert.Equal(t, 200, status)
	assert.True(t, closed)
	assert.Empty(t, frames)
}

// ---------------------------------------------------------------------------------
// RFC 0005 scenarios the public suite lacks.
// ---------------------------------------------------------------------------------

// A conversation whose timeout elapses closes with outcome null and a system final
// turn saying why. The run is started through Temporal with a short-timeout copy of
// the council fixture and observed over HTTP.
func TestConversationTimeout(t *testing.T) {
	c := startStack(t)
	def, ok := c.Stack.Catalog().Definition("conformance-conversation-council")
	require.True(t, ok)
	short := *def
	short.Nodes = append([]workflows.Node(nil), def.Nodes...)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(short.Nodes[0].Config, &cfg))
	cfg["timeoutMs"] = 1500
	short.Nodes[0].Config, _ = json.Marshal(cfg)
	id := "r_timeout_" + randomHex(6)
	in, err := c.Stack.Catalog().NewRunInput(workflows.RunRequest{RunID: id, WorkflowID: def.ID, Owner: workflows.Owner{Tenant: "default"}})
	require.NoError(t, err)
	in.Definition = &short
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Stack.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunWorkflowName, *in)
	require.NoError(t, err)

	cfWaitStatus(t, c, id, "waiting-approval")
	s := cfWaitTerminal(t, c, id)
	evs := cfEvents(t, c, id)
	var closed *event
	for i := range evs {
		if evs[i].Type == "conversation.closed" {
			closed = &evs[i]
		}
	}
	require.NotNil(t, closed, "conversation.closed in %v", types(evs))
	var p struct {
		Outcome   json.RawMessage `json:"outcome"`
		FinalTurn struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"finalTurn"`
	}
	require.NoError(t, json.Unmarshal(closed.Payload, &p))
	assert.True(t, len(p.Outcome) == 0 || string(p.Outcome) == "null", "outcome %s", p.Outcome)
	assert.Equal(t, "system", p.FinalTurn.Role)
	assert.NotEmpty(t, p.FinalTurn.Content)
	assert.True(t, cfTerminal(s))
}

// An exchange whose content fails the conversation's schema is refused with
// validation_error; nothing is recorded and the run stays suspended. A valid one is
// accepted, and an exchange after close is refused.
func TestConversationSchemaRejectedExchange(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-conversation-council", nil)
	s := cfWaitStatus(t, c, id, "waiting-approval")
	node, _ := s["currentNodeId"].(string)
	require.NotEmpty(t, node)
	before := len(cfEvents(t, c, id))

	status, body := cfResolve(t, c, c.Key, id, node, map[string]any{"resumeValue": map[string]any{"text": ""}})
	assert.Contains(t, []int{400, 422}, status, "%v", body)
	assert.Equal(t, "validation_error", body["error"])
	status, body = cfResolve(t, c, c.Key, id, node, map[string]any{"resumeValue": map[string]any{"operation": "exchange", "turn": map[string]any{"role": "user", "content": map[string]any{"nope": 1}}}})
	assert.Contains(t, []int{400, 422}, status, "%v", body)
	assert.Equal(t, before, len(cfEvents(t, c, id)), "a rejected turn appends no event")
	assert.Equal(t, "waiting-approval", cfSnapshot(t, c, id)["status"])

	status, body = cfResolve(t, c, c.Key, id, node, map[string]any{"resumeValue": map[string]any{"text": "hello council"}})
	require.Equal(t, 200, status, "%v", body)
	assert.Equal(t, "waiting-approval", body["status"])
	// RFC 0005's :resolveInterrupt alias with a ConversationResolve close.
	status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+id+":resolveInterrupt",
		map[string]any{"nodeId": node, "resumeValue": map[string]any{"operation": "close", "outcome": map[string]any{"summary": "done"}}})
	require.Equal(t, 200, status, "%s", raw)
	assert.Equal(t, "running", cfObj(t, raw)["status"])
	cfWaitTerminal(t, c, id)
	status, body = cfResolve(t, c, c.Key, id, node, map[string]any{"resumeValue": map[string]any{"text": "too late"}})
	assert.Contains(t, []int{400, 404, 409, 410, 422}, status, "%v", body)
	types := types(cfEvents(t, c, id))
	assert.Contains(t, types, "conversation.exchanged")
	assert.Contains(t, types, "conversation.closed")
}

// Replaying a conversation driven by real resolves reproduces its channels and its
// conversation events without any resolve: no human is re-prompted.
func TestConversationReplayDeterminismWithRealTurns(t *testing.T) {
	c := startStack(t)
	id := cfCreate(t, c, "conformance-conversation-council", nil)
	node := cfWaitStatus(t, c, id, "waiting-approval")["currentNodeId"].(string)
	for _, text := range []string{"first", "second"} {
		status, body := cfResolve(t, c, c.Key, id, node, map[string]any{"resumeValue": map[string]any{"text": text}})
		require.Equal(t, 200, status, "%v", body)
	}
	status, body := cfResolve(t, c, c.Key, id, node, map[string]any{"resumeValue": map[string]any{"operation": "close", "outcome": map[string]any{"ok": true}}})
	require.Equal(t, 200, status, "%v", body)
	require.Equal(t, "completed", cfWaitTerminal(t, c, id)["status"])
	_, _, src := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+id, nil)

	status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+id+":fork", map[string]any{"mode": "replay"})
	require.Equal(t, 201, status, "%s", raw)
	forkID := cfObj(t, raw)["runId"].(string)
	require.Equal(t, "completed", cfWaitTerminal(t, c, forkID)["status"], "the fork completes without resolves")
	_, _, fork := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs/"+forkID, nil)
	assert.Equal(t, string(rawMember(t, src, "channels")), string(rawMember(t, fork, "channels")))
	turns := func(run string) []string {
		var out []string
		for _, e := range cfEvents(t, c, run) {
			if strings.HasPrefix(e.Type, "conversation.") {
				var p map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(e.Payload, &p))
				out = append(out, e.Type+string(p["turn"])+string(p["finalTurn"]))
			}
		}
		return out
	}
	srcTurns := turns(id)
	// opened, two user turns each answered by the chair's echo, closed.
	assert.Len(t, srcTurns, 6, "conversation events: %v", srcTurns)
	assert.Equal(t, srcTurns, turns(forkID), "the fork re-folds the recorded turns verbatim")
	status, _, raw = cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+id+":fork", map[string]any{"mode": "branch", "fromSeq": 1})
	assert.Equal(t, 400, status, "%s", raw)
}
