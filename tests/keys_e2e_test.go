package tests

// Keys, over HTTP on the embedded stack: a key that stops authenticating (revoked,
// expired) loses its open streams and its tokens within the keys file's reload; one key
// never counts as two approvers; wrong keys never lock out a valid one; request bodies
// keep their numbers in range; a quiet inbox stream stays quiet; and the host's own
// workflows are no tenant's runs.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/workflows"
)

// keySpec is one key of a keys-file API.
type keySpec struct {
	Name      string
	Scopes    []string
	ExpiresAt time.Time // zero: none
}

// keyedAPI is an API process over a stack whose keys are those of a keys file, all of
// one tenant of its own (so other tests' runs never show in its listings).
type keyedAPI struct {
	t      *testing.T
	c      *apiClient
	Tenant string
	File   string
	URL    string
	secret map[string]string
}

// newKeyedAPI writes a keys file with specs and serves an API over c's stack that reads
// it (and reads it again every api.DefaultKeysFilePoll, 2 s, as `wop api` does).
func newKeyedAPI(t *testing.T, c *apiClient, specs ...keySpec) *keyedAPI {
	t.Helper()
	k := &keyedAPI{t: t, c: c, Tenant: "keys-" + randomHex(4), File: filepath.Join(t.TempDir(), "keys.yaml"), secret: map[string]string{}}
	for _, s := range specs {
		k.secret[s.Name] = "wop_" + randomHex(16)
	}
	k.write(specs...)
	_, url, err := serveAPI(t, c, api.Config{KeysFile: k.File, TokenSecret: []byte(randomHex(16))}, furtherAPI{PublicURL: true})
	require.NoError(t, err)
	k.URL = url
	return k
}

// write replaces the keys file with specs (keys named before keep their secrets).
func (k *keyedAPI) write(specs ...keySpec) {
	k.t.Helper()
	var b strings.Builder
	b.WriteString("keys:\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "  - name: %s\n    tenant: %s\n    sha256: %s\n    scopes: [%s]\n", s.Name, k.Tenant, api.HashKey(k.secret[s.Name]), strings.Join(s.Scopes, ", "))
		if !s.ExpiresAt.IsZero() {
			fmt.Fprintf(&b, "    expiresAt: %s\n", s.ExpiresAt.UTC().Format(time.RFC3339))
		}
	}
	require.NoError(k.t, os.WriteFile(k.File, []byte(b.String()), 0o600))
}

// as is a client of the API with the key called name.
func (k *keyedAPI) as(name string) *apiClient {
	return clientAt(k.t, k.c, k.URL, k.secret[name], 30*time.Second)
}

// inboxToken is the token an inbox frame (a PendingList) carries for run id's interrupt.
func inboxToken(t *testing.T, f sseEvent, id string) string {
	t.Helper()
	var list api.PendingList
	require.NoError(t, json.Unmarshal([]byte(f.Data), &list), "%s", f.Data)
	for _, it := range list.Interrupts {
		if it.RunID == id {
			require.NotEmpty(t, it.InterruptToken)
			return it.InterruptToken
		}
	}
	t.Fatalf("no interrupt of %s in %s", id, f.Data)
	return ""
}

// errorCode is the code of an error envelope.
func errorCode(raw []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Error
}

// TestRevokedKeyLosesItsStreamsAndTokens: `wop keys revoke` (api.RevokeKey) ends the
// key's inbox and run event streams within the file's reload, and its tokens, served
// by those streams before, resolve nothing; an expiry an operator sets ends a key's
// streams when it comes, with no further change to the file. The key that stays
// decides through its own token, and the run records that key, not "token".
func TestRevokedKeyLosesItsStreamsAndTokens(t *testing.T) {
	t.Parallel()
	all := api.AllScopes
	k := newKeyedAPI(t, startStack(t), keySpec{Name: "ops", Scopes: all}, keySpec{Name: "night", Scopes: all}, keySpec{Name: "day", Scopes: all})
	ops, night, day := k.as("ops"), k.as("night"), k.as("day")
	id := cfCreate(t, day, "conformance-approval", nil)
	cfWaitStatus(t, day, id, "waiting-approval")

	inbox, tokens := map[string]*sseStream{}, map[string]string{}
	for _, name := range []string{"ops", "night", "day"} {
		s := openStream(t, k.as(name), "/v1/interrupts", nil)
		require.Equal(t, http.StatusOK, s.Status, "%s", s.Body)
		frames := s.until(t, 30*time.Second, "the approval in "+name+"'s inbox", func(f sseEvent) bool { return strings.Contains(f.Data, id) })
		tokens[name] = inboxToken(t, frames[len(frames)-1], id)
		inbox[name] = s
	}
	runEvents := map[string]*sseStream{}
	for _, name := range []string{"ops", "night"} {
		s := openStream(t, k.as(name), "/v1/runs/"+id+"/events", nil)
		require.Equal(t, http.StatusOK, s.Status, "%s", s.Body)
		s.until(t, 10*time.Second, "the run's first event", func(f sseEvent) bool { return f.Data != "" })
		runEvents[name] = s
	}

	// The operator gives night an expiry a few seconds away, then revokes ops.
	expires := time.Now().Add(5 * time.Second).Truncate(time.Second)
	k.write(keySpec{Name: "ops", Scopes: all}, keySpec{Name: "night", Scopes: all, ExpiresAt: expires}, keySpec{Name: "day", Scopes: all})
	revoked := time.Now()
	require.NoError(t, api.RevokeKey(k.File, "ops"))
	for _, s := range []*sseStream{inbox["ops"], runEvents["ops"]} {
		_, ended := s.rest(api.DefaultKeysFilePoll+10*time.Second, nil)
		require.True(t, ended, "the server ended the revoked key's stream")
	}
	took := time.Since(revoked)
	t.Logf("the revoked key's two streams ended %s after the revocation (the file is read every %s)", took.Round(time.Millisecond), api.DefaultKeysFilePoll)
	assert.Less(t, took, api.DefaultKeysFilePoll+5*time.Second, "within the reload, give or take a loaded machine")

	// Its tokens resolve nothing and show nothing; the key itself is refused.
	status, _, raw := cfCall(t, ops, "", http.MethodPost, "/v1/interrupts/"+tokens["ops"], map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	assert.Equal(t, http.StatusUnauthorized, status, "%s", raw)
	assert.Equal(t, "key_revoked", errorCode(raw), "%s", raw)
	status, _, raw = cfCall(t, ops, "", http.MethodGet, "/v1/interrupts/"+tokens["ops"], nil)
	assert.Equal(t, http.StatusUnauthorized, status, "%s", raw)
	status, _, raw = cfCall(t, ops, ops.Key, http.MethodGet, "/v1/runs/"+id, nil)
	assert.Equal(t, http.StatusUnauthorized, status, "%s", raw)
	assert.Equal(t, "key_revoked", errorCode(raw))
	assert.Equal(t, "waiting-approval", cfSnapshot(t, day, id)["status"], "nothing was decided")

	// night's streams end at its expiry, and its token with them.
	for _, s := range []*sseStream{inbox["night"], runEvents["night"]} {
		_, ended := s.rest(time.Until(expires)+api.DefaultKeysFilePoll+10*time.Second, nil)
		require.True(t, ended, "the server ended the expired key's stream")
	}
	assert.False(t, time.Now().Before(expires), "not before the expiry")
	status, _, raw = cfCall(t, night, "", http.MethodPost, "/v1/interrupts/"+tokens["night"], map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	assert.Equal(t, http.StatusUnauthorized, status, "%s", raw)
	assert.Equal(t, "key_expired", errorCode(raw), "%s", raw)

	// day's stream is still open: its own token decides, and the stream shows the
	// approval gone.
	status, _, raw = cfCall(t, day, "", http.MethodPost, "/v1/interrupts/"+tokens["day"], map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "%s", raw)
	inbox["day"].until(t, 30*time.Second, "the decided approval leaving day's inbox", func(f sseEvent) bool { return !strings.Contains(f.Data, id) })
	cfWaitTerminal(t, day, id)
	evs := cfEvents(t, day, id)
	var resolved, received map[string]any
	require.NoError(t, json.Unmarshal(ofType(evs, "interrupt.resolved")[0].Payload, &resolved))
	require.NoError(t, json.Unmarshal(ofType(evs, "approval.received")[0].Payload, &received))
	assert.Equal(t, "day", resolved["resolvedBy"], "the key the token was issued to decided")
	assert.Equal(t, "token", resolved["via"])
	assert.Equal(t, "day", received["decidedBy"])
}

// TestOneKeyNeverCountsAsTwoApprovers: in a quorum of three, a full-access key votes
// once however it votes (again, through its token, naming another voter); "all" does
// not hold approvals:delegate. A key granted it by name votes for the approvers it
// names, and the run records both the principal and the caller.
func TestOneKeyNeverCountsAsTwoApprovers(t *testing.T) {
	t.Parallel()
	k := newKeyedAPI(t, startStack(t), keySpec{Name: "ops", Scopes: api.AllScopes},
		keySpec{Name: "relay", Scopes: []string{api.ScopeRunsRead, api.ScopeApprovalsRespond, api.ScopeApprovalsDelegate}})
	ops, relay := k.as("ops"), k.as("relay")
	id := cfCreate(t, ops, "conformance-interrupt-quorum", nil)
	cfWaitStatus(t, ops, id, "waiting-approval")
	vote := func(c *apiClient, value map[string]any) (int, map[string]any) {
		return cfResolve(t, c, c.Key, id, "gate", map[string]any{"resumeValue": value})
	}

	status, body := vote(ops, map[string]any{"action": "accept"})
	require.Equal(t, http.StatusOK, status, "%v", body)
	assert.Equal(t, "waiting-approval", body["status"])
	status, body = vote(ops, map[string]any{"action": "accept"})
	assert.Equal(t, http.StatusOK, status, "the same vote again changes nothing: %v", body)
	tok := snapshotToken(t, ops, id)
	status, _, raw := cfCall(t, ops, "", http.MethodPost, "/v1/interrupts/"+tok, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	assert.Equal(t, http.StatusOK, status, "through its token the key is the same voter: %s", raw)
	for _, named := range []map[string]any{{"action": "accept", "voter": "approver-2"}, {"action": "accept", "decidedBy": "approver-3"}} {
		status, body = vote(ops, named)
		assert.Equal(t, http.StatusForbidden, status, "a key with \"all\" names no other voter: %v", body)
		assert.Equal(t, api.ScopeApprovalsDelegate, body["details"].(map[string]any)["scopeRequired"])
	}
	assert.Equal(t, "waiting-approval", cfSnapshot(t, ops, id)["status"], "one approval of three")

	status, body = vote(relay, map[string]any{"action": "accept", "voter": "approver-2"})
	require.Equal(t, http.StatusOK, status, "a delegate names its voter: %v", body)
	assert.Equal(t, "waiting-approval", body["status"], "ops and approver-2: two of three")

	var votes []string
	for _, e := range ofType(cfEvents(t, ops, id), "approval.received") {
		var p map[string]any
		require.NoError(t, json.Unmarshal(e.Payload, &p))
		votes = append(votes, fmt.Sprintf("%v by %v", p["decidedBy"], p["caller"]))
	}
	assert.Equal(t, []string{"ops by <nil>", "approver-2 by relay"}, votes, "one vote of ops; the delegated vote names its caller")
	cfCancel(t, ops, id)
}

// TestWrongKeysNeverLockOutAValidKey: while wrong keys arrive from the same address as
// fast as it can send them, every request of a valid key is answered; the wrong ones
// end in 429.
func TestWrongKeysNeverLockOutAValidKey(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	b := newAPIWith(t, c, api.Config{})
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var wrong, limited atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.BaseURL+"/v1/workflows", nil)
				req.Header.Set("Authorization", fmt.Sprintf("Bearer wrong-%d-%d", w, i))
				resp, err := b.http.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				wrong.Add(1)
				if resp.StatusCode == http.StatusTooManyRequests {
					limited.Add(1)
				}
			}
		}()
	}
	// Let the wrong keys empty the address's budget before the valid key asks.
	waitFor(t, 30*time.Second, "wrong keys limited", func() int64 { return limited.Load() }, func(n int64) bool { return n > 0 })
	answered := map[int]int{}
	for range 100 {
		status, _, _ := b.doRaw(http.MethodGet, "/v1/workflows", nil, map[string]string{"Authorization": "Bearer " + b.Key})
		answered[status]++
	}
	stop()
	wg.Wait()
	t.Logf("%d wrong keys sent meanwhile, %d of them answered 429", wrong.Load(), limited.Load())
	assert.Equal(t, map[int]int{http.StatusOK: 100}, answered, "the valid key from the same address")
	assert.Greater(t, limited.Load(), wrong.Load()/2, "the wrong keys are limited")
}

// TestRequestNumbersStayInRange: numbers past a double or integers past 2^53-1 are
// refused with a 400 naming the field, and nothing reaches the run.
func TestRequestNumbersStayInRange(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	for _, tc := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","inputs":{"amount":1e400}}`, "inputs.amount"},
		{`{"workflowId":"conformance-noop","inputs":{"n":[1,1e1000000000]}}`, "inputs.n[1]"},
		{`{"workflowId":"conformance-noop","inputs":{"id":1234567890123456789012345678901234567890}}`, "inputs.id"},
	} {
		status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs", tc.body)
		assert.Equal(t, http.StatusBadRequest, status, "%s: %s", tc.body, raw)
		details, _ := cfObj(t, raw)["details"].(map[string]any)
		assert.Equal(t, tc.field, details["field"], "%s", raw)
	}
	id := cfCreate(t, c, "conformance-approval", map[string]any{"amount": 9007199254740991, "big": 1e300})
	cfWaitStatus(t, c, id, "waiting-approval")
	before := len(cfEvents(t, c, id))
	status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs/"+id+"/interrupts/gate", `{"resumeValue":{"action":"accept","comment":"ok","score":-1e999}}`)
	assert.Equal(t, http.StatusBadRequest, status, "%s", raw)
	assert.Equal(t, "resumeValue.score", cfObj(t, raw)["details"].(map[string]any)["field"])
	assert.Len(t, cfEvents(t, c, id), before, "nothing reached the run")
	var snap map[string]any
	require.NoError(t, json.Unmarshal(snapshotJSON(t, c, id), &snap), "a Go client decodes the run")
	cfCancel(t, c, id)
}

// TestQuietInboxStreamStaysQuiet: while nothing changes, the inbox stream sends its
// list once (keepalive comments carry no frames); a decision sends the new list.
func TestQuietInboxStreamStaysQuiet(t *testing.T) {
	t.Parallel()
	k := newKeyedAPI(t, startStack(t), keySpec{Name: "ops", Scopes: api.AllScopes})
	ops := k.as("ops")
	id := cfCreate(t, ops, "conformance-approval", nil)
	cfWaitStatus(t, ops, id, "waiting-approval")
	s := openStream(t, ops, "/v1/interrupts", nil)
	require.Equal(t, http.StatusOK, s.Status, "%s", s.Body)
	s.until(t, 30*time.Second, "the approval in the inbox", func(f sseEvent) bool { return strings.Contains(f.Data, id) })
	// The stream looks for changes every second: four looks find none.
	quiet := time.After(4500 * time.Millisecond)
	for done := false; !done; {
		f, ok, timedOut := s.next(quiet)
		switch {
		case timedOut:
			done = true
		case !ok:
			t.Fatal("the stream ended")
		default:
			t.Fatalf("a frame though nothing changed: %s %.200s", f.Event, f.Data)
		}
	}
	status, body := cfResolve(t, ops, ops.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "%v", body)
	s.until(t, 30*time.Second, "the new list", func(f sseEvent) bool { return f.Event == "interrupts" && !strings.Contains(f.Data, id) })
}

// TestHostWorkflowsAreNoTenantsRuns: a tenant's own webhook dispatcher, another
// tenant's, and a workflow of another application in the namespace answer 404 on every
// run route, like an id that names nothing.
func TestHostWorkflowsAreNoTenantsRuns(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	k := newKeyedAPI(t, c, keySpec{Name: "ops", Scopes: api.AllScopes})
	ops := k.as("ops")
	dispatcher, other := protocol.WebhookDispatcherID(k.Tenant), "billing-"+randomHex(6)
	tc := c.Stack.Client()
	for _, wid := range []string{dispatcher, other} {
		run, err := tc.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: wid, TaskQueue: workflows.TaskQueue},
			webhooks.WebhookDispatcherWorkflowName, webhooks.WebhookDispatcherInput{Tenant: k.Tenant})
		require.NoError(t, err)
		t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), wid, run.GetRunID(), "test over") })
		// The workflow runs: it answers a query of its own.
		waitFor(t, 30*time.Second, wid+" answering its own query", func() error {
			_, err := tc.QueryWorkflow(t.Context(), wid, "", webhooks.WebhookListQuery)
			return err
		}, func(err error) bool { return err == nil })
	}
	for _, caller := range []*apiClient{ops, c} { // the dispatcher's own tenant, and another
		for _, wid := range []string{dispatcher, other} {
			for _, call := range []struct{ method, path, body string }{
				{http.MethodGet, "/v1/runs/" + wid, ""},
				{http.MethodGet, "/v1/runs/" + wid + "/events", ""},
				{http.MethodGet, "/v1/runs/" + wid + "/events/poll?timeout=1", ""},
				{http.MethodPost, "/v1/runs/" + wid + "/cancel", `{}`},
				{http.MethodPost, "/v1/runs/" + wid + "/interrupts/gate", `{"resumeValue":{"action":"accept"}}`},
				// Major 2's paths read the same ids (bare: in the caller's tenant).
				{http.MethodGet, "/runs/" + wid, ""},
				{http.MethodGet, "/runs/" + wid + "/events", ""},
				{http.MethodGet, "/runs/" + wid + "/events/poll?timeout=1", ""},
				{http.MethodPost, "/runs/" + wid + "/cancel", `{}`},
			} {
				var body any
				if call.body != "" {
					body = call.body
				}
				status, _, raw := cfCall(t, caller, caller.Key, call.method, call.path, body)
				assert.Equal(t, http.StatusNotFound, status, "%s %s: %s", call.method, call.path, raw)
				assert.Equal(t, "not_found", errorCode(raw), "%s %s: %s", call.method, call.path, raw)
			}
			// A bulk cancel names the workflow as an entry that is not found.
			status, _, raw := cfCall(t, caller, caller.Key, http.MethodPost, "/v1/runs:bulk-cancel", `{"runIds":["`+wid+`"]}`)
			require.Equal(t, http.StatusOK, status, "%s", raw)
			var bulk struct {
				Results []struct {
					OK    bool              `json:"ok"`
					Error map[string]string `json:"error"`
				} `json:"results"`
			}
			require.NoError(t, json.Unmarshal(raw, &bulk), "%s", raw)
			require.Len(t, bulk.Results, 1, "%s", raw)
			assert.False(t, bulk.Results[0].OK, "%s", raw)
			assert.Equal(t, "not_found", bulk.Results[0].Error["code"], "bulk cancel of %s: %s", wid, raw)
		}
	}
}
