package tests

// /v1 does not change when major 2 is served beside it. TestV1TranscriptUnchanged sends
// a fixed transcript of v1 requests — discovery, OpenAPI, workflows, runs of the
// conformance fixtures and a pack conversation, their snapshots, event reads (JSON,
// poll, SSE), resolves by node and by token, cancels, a fork, idempotent creates, a
// listing, webhooks and the error paths — and compares every answer with the one the
// build before the v2 work gave, recorded in testdata/v1-transcript.json. Answers are
// compared after the values that differ between any two runs are replaced (run ids by
// their order of creation, times, tokens, secrets, generated ids); status, the headers
// and the normalized body must be equal. What the new build may add is listed in
// v1TranscriptAdditions and nothing else: the OpenWOP-Version: 1.0 header on every
// answer, and what the issue adds to the v1 surface itself.
//
// To record the transcript again from a build, run in that build's tree:
//
//	WOP_RECORD_V1_TRANSCRIPT=/abs/path/v1-transcript.json go test ./tests -run TestV1TranscriptUnchanged
//
// This file uses only what the tests package of that build already had, so it can be
// copied into an older tree to record there.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/workflows"
)

const v1TranscriptFile = "testdata/v1-transcript.json"

// transcriptAnswer is one normalized answer.
type transcriptAnswer struct {
	Step    string            `json:"step"`
	Request string            `json:"request"`
	Status  int               `json:"status"`
	Header  map[string]string `json:"header"`
	Body    json.RawMessage   `json:"body,omitempty"`
	Text    string            `json:"text,omitempty"` // a body that is not JSON (an event stream, normalized)
}

// transcript drives the requests and keeps their normalized answers.
type transcript struct {
	t       *testing.T
	c       *apiClient
	runs    []string // run ids in order of creation
	answers []transcriptAnswer
}

// Header values compared as present or absent only, and headers not compared.
var (
	transcriptPresence = map[string]bool{"Etag": true, "Capabilities-Etag": true}
	transcriptIgnored  = map[string]bool{"Date": true, "Content-Length": true, "Openwop-Version": true}
)

func (tr *transcript) call(step, method, path string, body any, hdr map[string]string) transcriptAnswer {
	tr.t.Helper()
	h := map[string]string{"Accept": "application/json"}
	if hdr["Authorization"] != "-" {
		h["Authorization"] = "Bearer " + tr.c.Key
	}
	for k, v := range hdr {
		if v == "-" {
			delete(h, k)
			continue
		}
		h[k] = v
	}
	status, rh, raw := tr.c.doRaw(method, path, body, h)
	return tr.answer(step, method+" "+tr.norm(path), status, rh, raw)
}

// answer keeps one normalized answer.
func (tr *transcript) answer(step, request string, status int, rh http.Header, raw []byte) transcriptAnswer {
	a := transcriptAnswer{Step: step, Request: request, Status: status, Header: map[string]string{}}
	for k, vs := range rh {
		switch {
		case transcriptIgnored[k]:
		case transcriptPresence[k]:
			a.Header[k] = "<present>"
		default:
			a.Header[k] = tr.norm(strings.Join(vs, ", "))
		}
	}
	if v := rh.Get("OpenWOP-Version"); v != "" {
		a.Header["Openwop-Version"] = v // kept to be checked, not compared
	}
	a.setBody(tr, raw)
	tr.answers = append(tr.answers, a)
	return a
}

func (a *transcriptAnswer) setBody(tr *transcript, raw []byte) {
	if len(raw) == 0 {
		return
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		a.Text = tr.norm(string(raw))
		return
	}
	b, _ := json.Marshal(tr.normValue("", v))
	a.Body = b
}

// stream reads a whole event stream of a run that has ended and keeps its frames.
func (tr *transcript) stream(step, path string) {
	tr.t.Helper()
	s := openStream(tr.t, tr.c, path, nil)
	frames, closed := s.rest(15*time.Second, nil)
	require.True(tr.t, closed, "%s: the stream of an ended run closes", step)
	var b strings.Builder
	for _, f := range frames {
		var v any
		data := f.Data
		if json.Unmarshal([]byte(f.Data), &v) == nil {
			d, _ := json.Marshal(tr.normValue("", v))
			data = string(d)
		}
		fmt.Fprintf(&b, "id: %s\nevent: %s\ndata: %s\n\n", f.ID, f.Event, data)
	}
	a := transcriptAnswer{Step: step, Request: "GET " + tr.norm(path) + " (SSE)", Status: s.Status, Header: map[string]string{}, Text: b.String()}
	for k, vs := range s.Header {
		if !transcriptIgnored[k] {
			a.Header[k] = strings.Join(vs, ", ")
		}
	}
	if v := s.Header.Get("OpenWOP-Version"); v != "" {
		a.Header["Openwop-Version"] = v
	}
	tr.answers = append(tr.answers, a)
}

// create starts a run and remembers its id.
func (tr *transcript) create(step string, body map[string]any, hdr map[string]string) string {
	tr.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + tr.c.Key}
	for k, v := range hdr {
		h[k] = v
	}
	status, rh, raw := tr.c.doRaw(http.MethodPost, "/v1/runs", body, h)
	require.Equal(tr.t, http.StatusCreated, status, "%s: %s", step, raw)
	var r struct {
		RunID string `json:"runId"`
	}
	require.NoError(tr.t, json.Unmarshal(raw, &r))
	tr.runs = append(tr.runs, r.RunID)
	tr.answer(step, "POST /v1/runs", status, rh, raw)
	return r.RunID
}

var (
	transcriptTimeRe  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	transcriptIntRe   = regexp.MustCompile(`int_[0-9a-f]{24}`)
	transcriptHookRe  = regexp.MustCompile(`wh_[0-9a-f]{20}`)
	transcriptUUIDRe  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	transcriptCorrRe  = regexp.MustCompile(`c_[0-9a-f]{16}`)
	transcriptAutoRe  = regexp.MustCompile(`auto-[0-9a-f]{32}`)
	transcriptTokenRe = regexp.MustCompile(`/v1/interrupts/[A-Za-z0-9_~-]+(?:\.[A-Za-z0-9_~-]+)+`)
)

// transcriptSecret are the members whose values differ between any two runs by design.
var transcriptSecret = map[string]bool{
	"interruptToken": true, "secret": true, "secretFingerprint": true, "callbackSecret": true, "callbackSecretFingerprint": true,
	"requestId": true,
}

// transcriptVarying are numeric members that measure time.
var transcriptVarying = map[string]bool{"ts": true, "durationMs": true, "latencyMs": true, "receivedAtMs": true, "elapsedMs": true}

func (tr *transcript) norm(s string) string {
	s = strings.ReplaceAll(s, tr.c.BaseURL, "<base>")
	ids := append([]string(nil), tr.runs...)
	order := map[string]int{}
	for i, id := range ids {
		order[id] = i
	}
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) > len(ids[j]) })
	for _, id := range ids {
		s = strings.ReplaceAll(s, id, fmt.Sprintf("<run-%d>", order[id]))
	}
	s = transcriptTokenRe.ReplaceAllString(s, "/v1/interrupts/<token>")
	s = transcriptTimeRe.ReplaceAllString(s, "<time>")
	s = transcriptIntRe.ReplaceAllString(s, "<interrupt>")
	s = transcriptHookRe.ReplaceAllString(s, "<webhook>")
	s = transcriptUUIDRe.ReplaceAllString(s, "<uuid>")
	s = transcriptCorrRe.ReplaceAllString(s, "<correlation>")
	s = transcriptAutoRe.ReplaceAllString(s, "<auto-key>")
	return s
}

func (tr *transcript) normValue(key string, v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = tr.normValue(k, x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = tr.normValue(key, x)
		}
		return out
	case string:
		if transcriptSecret[key] {
			return "<" + key + ">"
		}
		return tr.norm(v)
	case float64:
		if transcriptVarying[key] {
			return 0
		}
	}
	return v
}

// run drives the transcript.
func (tr *transcript) run() {
	t, c := tr.t, tr.c
	none := map[string]string(nil)
	noKey := map[string]string{"Authorization": "-"}
	terminal := func(id string) workflows.Snapshot {
		return waitSnapshot(t, c, id, 30*time.Second, "ended", func(s workflows.Snapshot) bool {
			return s.Status == "completed" || s.Status == "failed" || s.Status == "cancelled"
		})
	}
	status := func(id, want string) workflows.Snapshot {
		return waitSnapshot(t, c, id, 30*time.Second, want, func(s workflows.Snapshot) bool { return s.Status == want })
	}

	tr.call("discovery", "GET", "/.well-known/openwop", nil, noKey)
	tr.call("openapi", "GET", "/v1/openapi.json", nil, noKey)
	tr.call("workflow", "GET", "/v1/workflows/conformance-noop", nil, none)
	tr.call("workflows", "GET", "/v1/workflows", nil, none)

	noop := tr.create("create noop", map[string]any{"workflowId": "conformance-noop"}, none)
	terminal(noop)
	tr.call("noop snapshot", "GET", "/v1/runs/"+noop, nil, none)
	tr.call("noop events", "GET", "/v1/runs/"+noop+"/events", nil, none)
	tr.call("noop events after 1", "GET", "/v1/runs/"+noop+"/events?lastSequence=1", nil, none)
	tr.call("noop poll", "GET", "/v1/runs/"+noop+"/events/poll?timeout=1", nil, none)
	tr.call("noop poll after", "GET", "/v1/runs/"+noop+"/events/poll?timeout=1&afterSequence=1", nil, none)
	tr.stream("noop stream", "/v1/runs/"+noop+"/events?streamMode=debug")
	tr.stream("noop stream values", "/v1/runs/"+noop+"/events?streamMode=values")
	tr.call("noop cancel ended", "POST", "/v1/runs/"+noop+"/cancel", map[string]any{}, none)

	ident := tr.create("create identity", map[string]any{"workflowId": "conformance-identity", "inputs": map[string]any{"payload": map[string]any{"a": 1}}, "tags": []string{"t1"}, "metadata": map[string]any{"k": "v"}}, none)
	terminal(ident)
	tr.call("identity snapshot", "GET", "/v1/runs/"+ident, nil, none)
	// Visibility shows the close a moment after the run reads as ended.
	waitFor(t, 30*time.Second, "the identity run closed in visibility", func() string {
		_, _, raw := c.doRaw(http.MethodGet, "/v1/runs?workflowId=conformance-identity", nil, map[string]string{"Authorization": "Bearer " + c.Key})
		return string(raw)
	}, func(raw string) bool { return strings.Contains(raw, `"status":"Completed"`) })
	tr.call("identity listing", "GET", "/v1/runs?workflowId=conformance-identity", nil, none)

	fail := tr.create("create failure", map[string]any{"workflowId": "conformance-failure"}, none)
	terminal(fail)
	tr.call("failure snapshot", "GET", "/v1/runs/"+fail, nil, none)
	tr.call("failure events", "GET", "/v1/runs/"+fail+"/events", nil, none)

	gate := tr.create("create approval", map[string]any{"workflowId": "conformance-approval"}, none)
	status(gate, "waiting-approval")
	tr.call("approval snapshot", "GET", "/v1/runs/"+gate, nil, none)
	tr.call("interrupts listing", "GET", "/v1/interrupts", nil, none)
	tr.call("approval bad action", "POST", "/v1/runs/"+gate+"/interrupts/gate", map[string]any{"resumeValue": map[string]any{"action": "maybe"}}, none)
	tr.call("approval unknown node", "POST", "/v1/runs/"+gate+"/interrupts/no-such-node", map[string]any{"resumeValue": map[string]any{"action": "accept"}}, none)
	tr.call("approval accept", "POST", "/v1/runs/"+gate+"/interrupts/gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}}, none)
	terminal(gate)
	tr.call("approval events", "GET", "/v1/runs/"+gate+"/events", nil, none)
	tr.call("approval resolve ended", "POST", "/v1/runs/"+gate+"/interrupts/gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}}, none)

	byToken := tr.create("create approval for a token", map[string]any{"workflowId": "conformance-approval"}, none)
	s := status(byToken, "waiting-approval")
	require.NotNil(t, s.Interrupt)
	tok := s.Interrupt.InterruptToken
	require.NotEmpty(t, tok)
	tr.call("token inspect", "GET", "/v1/interrupts/"+tok, nil, noKey)
	tr.call("token resolve", "POST", "/v1/interrupts/"+tok, map[string]any{"resumeValue": map[string]any{"action": "accept"}}, noKey)
	terminal(byToken)
	tr.call("token spent", "POST", "/v1/interrupts/"+tok, map[string]any{"resumeValue": map[string]any{"action": "accept"}}, noKey)
	tr.call("token unknown", "GET", "/v1/interrupts/tok_unknown.unknown", nil, noKey)

	delay := tr.create("create cancellable", map[string]any{"workflowId": "conformance-cancellable", "inputs": map[string]any{"delayMs": 15000}}, none)
	status(delay, "running")
	tr.call("cancel running", "POST", "/v1/runs/"+delay+"/cancel", map[string]any{"reason": "transcript"}, none)
	status(delay, "cancelled")
	tr.call("cancelled snapshot", "GET", "/v1/runs/"+delay, nil, none)
	tr.call("cancelled events", "GET", "/v1/runs/"+delay+"/events", nil, none)
	tr.call("cancel cancelled", "POST", "/v1/runs/"+delay+":cancel", map[string]any{}, none)

	key := map[string]string{"Idempotency-Key": "v1-transcript-key-0001"}
	tr.create("idempotent create", map[string]any{"workflowId": "conformance-noop"}, key)
	tr.call("idempotent replay", "POST", "/v1/runs", map[string]any{"workflowId": "conformance-noop"}, key)
	tr.call("idempotent mismatch", "POST", "/v1/runs", map[string]any{"workflowId": "conformance-identity", "inputs": map[string]any{"payload": map[string]any{}}}, key)

	support := tr.create("create support", map[string]any{"workflowId": "support", "inputs": map[string]any{"message": "Hi, I have a question about my account."}}, none)
	waitSnapshot(t, c, support, 30*time.Second, "first reply", func(s workflows.Snapshot) bool {
		return s.Pack != nil && s.Pack.ModelRounds >= 1 && s.Status == "waiting-approval"
	})
	tr.call("support reply", "POST", "/v1/runs/"+support+"/interrupts/agent", map[string]any{"resumeValue": map[string]any{"text": "It's ACC-12345. What's my balance?"}}, none)
	terminal(support)
	tr.call("support snapshot", "GET", "/v1/runs/"+support, nil, none)
	tr.call("support events", "GET", "/v1/runs/"+support+"/events", nil, none)

	status2, fh, fork := c.doRaw(http.MethodPost, "/v1/runs/"+support+":fork", map[string]any{"mode": "replay"}, map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusCreated, status2, "fork: %s", fork)
	var f struct {
		RunID string `json:"runId"`
	}
	require.NoError(t, json.Unmarshal(fork, &f))
	tr.runs = append(tr.runs, f.RunID)
	tr.answer("fork support", "POST /v1/runs/"+tr.norm(support)+":fork", status2, fh, fork)
	terminal(f.RunID)
	tr.call("fork events", "GET", "/v1/runs/"+f.RunID+"/events", nil, none)

	status3, hh, hook := c.doRaw(http.MethodPost, "/v1/webhooks", map[string]any{"url": "https://hooks.example.test/transcript", "events": []string{"run.completed"}},
		map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusCreated, status3, "%s", hook)
	tr.answer("webhook register", "POST /v1/webhooks", status3, hh, hook)
	var wh struct {
		WebhookID string `json:"webhookId"`
	}
	require.NoError(t, json.Unmarshal(hook, &wh))
	tr.call("webhooks listing", "GET", "/v1/webhooks", nil, none)
	tr.call("webhook remove", "DELETE", "/v1/webhooks/"+wh.WebhookID, nil, none)
	tr.call("webhook remove again", "DELETE", "/v1/webhooks/"+wh.WebhookID, nil, none)

	tr.call("unknown run", "GET", "/v1/runs/r_00000000000000000000000000", nil, none)
	tr.call("malformed body", "POST", "/v1/runs", "{", none)
	tr.call("unknown workflow", "POST", "/v1/runs", map[string]any{"workflowId": "nope"}, none)
	tr.call("unknown field", "POST", "/v1/runs", map[string]any{"workflowId": "conformance-noop", "bogus": 1}, none)
	tr.call("no key", "GET", "/v1/runs/"+noop, nil, noKey)
	tr.call("bad key", "GET", "/v1/runs/"+noop, nil, map[string]string{"Authorization": "Bearer nope"})
	tr.call("method not allowed", "DELETE", "/v1/runs", nil, none)
	tr.call("verb missing", "POST", "/v1/runs/"+noop, map[string]any{}, none)
	tr.call("unknown verb", "POST", "/v1/runs/"+noop+":explode", map[string]any{}, none)
	tr.call("no route", "GET", "/v1/nothing-here", nil, none)
	tr.call("bad stream mode", "GET", "/v1/runs/"+noop+"/events?streamMode=bogus", nil, none)
	tr.call("bad cursor", "GET", "/v1/runs/"+noop+"/events/poll?lastSequence=-4", nil, none)
}

// v1TranscriptAdditions are the differences from the recorded answers this build
// makes on purpose, by step: what the issue adds to the v1 surface.
var v1TranscriptAdditions = map[string]func(t *testing.T, old, now map[string]any){
	// The v1 discovery document names the other major and its keys, and the era of new
	// runs; its representation varies with OpenWOP-Version.
	"discovery": func(t *testing.T, old, now map[string]any) {
		assert.Equal(t, []any{"1.0", "2.0"}, now["protocolVersions"])
		assert.Equal(t, "1.0", now["preferredVersion"])
		assert.Equal(t, []any{}, now["signingKeys"])
		assert.Equal(t, float64(1), old["eventLogSchemaVersion"])
		assert.Equal(t, float64(3), now["eventLogSchemaVersion"])
		// Pause and resume are served (issue 28).
		assert.Equal(t, map[string]any{"pauseResume": map[string]any{"supported": false}}, old["runs"])
		assert.Equal(t, map[string]any{"pauseResume": map[string]any{"supported": true, "drainPolicies": []any{"drain-current-node", "immediate"}}}, now["runs"])
		// The roster is advertised (issue 28), with v2's multi-party council fixtures.
		now["fixtures"] = withoutCouncilFixtures(t, now["fixtures"].([]any), func(v any) string { s, _ := v.(string); return s })
		assert.Nil(t, old["multiPartyConversation"])
		assert.Equal(t, map[string]any{"supported": true, "maxParticipants": float64(workflows.MaxParticipants)}, now["multiPartyConversation"])
		for _, k := range []string{"protocolVersions", "preferredVersion", "signingKeys", "eventLogSchemaVersion", "runs", "multiPartyConversation"} {
			delete(now, k)
			delete(old, k)
		}
		// Replay's side-effect suppression and its manifest, the fixture that witnesses
		// it, and the webhooks' dead-letter sink (issue 29).
		replay := now["replay"].(map[string]any)
		assert.Equal(t, "recorded-outcome", replay["sideEffectSuppression"])
		assert.Equal(t, "/host/effect-seams", replay["effectSeamsManifest"])
		delete(replay, "sideEffectSuppression")
		delete(replay, "effectSeamsManifest")
		fixtures := now["fixtures"].([]any)
		i := slices.Index(fixtures, any("conformance-replay-side-effect"))
		require.GreaterOrEqual(t, i, 0)
		now["fixtures"] = slices.Delete(fixtures, i, i+1)
		if hooks, ok := now["webhooks"].(map[string]any); ok {
			assert.Equal(t, map[string]any{"retentionDays": float64(30), "maxPageSize": float64(100)}, hooks["deadLetter"])
			delete(hooks, "deadLetter")
		}
	},
	// The workflows listed gain v2's multi-party council fixtures and the fixture
	// conformance-replay-side-effect (issue 29).
	"workflows": func(t *testing.T, old, now map[string]any) {
		list := withoutCouncilFixtures(t, now["workflows"].([]any), func(v any) string { m, _ := v.(map[string]any); s, _ := m["workflowId"].(string); return s })
		i := slices.IndexFunc(list, func(w any) bool { return w.(map[string]any)["workflowId"] == "conformance-replay-side-effect" })
		require.GreaterOrEqual(t, i, 0)
		assert.Equal(t, "fixture", list[i].(map[string]any)["kind"])
		now["workflows"] = slices.Delete(list, i, i+1)
	},
	// v1's OpenAPI document gains POST /v1/runs:bulk-cancel, :pause and :resume and their
	// bodies, the host's codec routes (README "Encrypted payloads") with theirs, the
	// effect ledger, the effect-seam manifest and the dead-letter read.
	"openapi": func(t *testing.T, old, now map[string]any) {
		paths := now["paths"].(map[string]any)
		for _, p := range []string{"/v1/runs:bulk-cancel", "/v1/runs/{runId}:pause", "/v1/runs/{runId}:resume", "/codec/encode", "/codec/decode",
			"/v1/runs/{runId}/effects", "/v1/host/effect-seams", "/v1/webhooks/{webhookId}/dead-letters"} {
			require.Contains(t, paths, p)
			delete(paths, p)
		}
		schemas := now["components"].(map[string]any)["schemas"].(map[string]any)
		for _, s := range []string{"BulkCancelRequest", "PauseRequest", "ResumeRequest", "Payloads"} {
			require.Contains(t, schemas, s)
			delete(schemas, s)
		}
		// The fork body's inputs (issue 29).
		fork := schemas["ForkRequest"].(map[string]any)["properties"].(map[string]any)
		require.Contains(t, fork, "inputs")
		delete(fork, "inputs")
	},
}

// councilFixtures are the fixtures issue 28 adds (RFC 0239's council and its oversize twin).
var councilFixtures = []string{"conformance-multi-party-council", "conformance-multi-party-council-oversize"}

// withoutCouncilFixtures requires the council fixtures in list (named by id) and
// returns it without them.
func withoutCouncilFixtures(t *testing.T, list []any, id func(any) string) []any {
	t.Helper()
	out := []any{}
	found := 0
	for _, v := range list {
		if slices.Contains(councilFixtures, id(v)) {
			found++
			continue
		}
		out = append(out, v)
	}
	assert.Equal(t, len(councilFixtures), found, "the council fixtures are listed")
	return out
}

func TestV1TranscriptUnchanged(t *testing.T) {
	t.Parallel()
	c := startPrivateStack(t, stackOptions{})
	tr := &transcript{t: t, c: c}
	tr.run()
	if out := os.Getenv("WOP_RECORD_V1_TRANSCRIPT"); out != "" {
		for i := range tr.answers {
			delete(tr.answers[i].Header, "Openwop-Version")
		}
		b, err := json.MarshalIndent(tr.answers, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, append(b, '\n'), 0o644))
		t.Logf("recorded %d answers into %s", len(tr.answers), out)
		return
	}
	raw, err := os.ReadFile(v1TranscriptFile)
	require.NoError(t, err)
	var recorded []transcriptAnswer
	require.NoError(t, json.Unmarshal(raw, &recorded))
	require.Len(t, tr.answers, len(recorded), "the same transcript")
	for i, now := range tr.answers {
		old := recorded[i]
		require.Equal(t, old.Step, now.Step)
		assert.Equal(t, old.Request, now.Request, now.Step)
		assert.Equal(t, old.Status, now.Status, "%s: status", now.Step)
		assert.Equal(t, "1.0", now.Header["Openwop-Version"], "%s: every v1 answer names major 1", now.Step)
		delete(now.Header, "Openwop-Version")
		if now.Step == "discovery" {
			assert.Equal(t, "Accept, OpenWOP-Version", now.Header["Vary"], "discovery is one resource for both majors")
			delete(now.Header, "Vary")
		}
		assert.Equal(t, old.Header, now.Header, "%s: headers", now.Step)
		assert.Equal(t, old.Text, now.Text, "%s: body", now.Step)
		if len(old.Body) == 0 {
			assert.Empty(t, now.Body, now.Step)
			continue
		}
		var ob, nb map[string]any
		if json.Unmarshal(old.Body, &ob) != nil || json.Unmarshal(now.Body, &nb) != nil {
			assert.JSONEq(t, string(old.Body), string(now.Body), "%s: body", now.Step)
			continue
		}
		if fix := v1TranscriptAdditions[now.Step]; fix != nil {
			fix(t, ob, nb)
		}
		ob2, _ := json.Marshal(ob)
		nb2, _ := json.Marshal(nb)
		assert.JSONEq(t, string(ob2), string(nb2), "%s: body", now.Step)
	}
}
