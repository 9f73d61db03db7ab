package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/api"
)

// tenantKeys are the keys of a keys-file API: two tenants of their own (unique names,
// so runs of other tests on the shared stack never show up), and a read-only key.
type tenantKeys struct {
	TenantA, TenantB  string
	AOps, ARead, BOps string
	File              string
	A, ARO, B         *apiClient // one client per key
	srv               *api.Server
}

// keysFileAPI serves a second API over c's Temporal and catalog whose keys come from a
// keys file written by `wop keys add`'s code (api.AppendKey).
func keysFileAPI(t *testing.T, c *apiClient) *tenantKeys {
	t.Helper()
	suffix := randomHex(4)
	k := &tenantKeys{TenantA: "acme-" + suffix, TenantB: "globex-" + suffix,
		AOps: "wop_" + randomHex(16), ARead: "wop_" + randomHex(16), BOps: "wop_" + randomHex(16),
		File: filepath.Join(t.TempDir(), "keys.yaml")}
	for _, e := range []api.KeyFileEntry{
		{Name: "acme-ops", Tenant: k.TenantA, SHA256: api.HashKey(k.AOps), Scopes: api.AllScopes},
		{Name: "acme-dashboard", Tenant: k.TenantA, SHA256: api.HashKey(k.ARead), Scopes: []string{api.ScopeRunsRead}},
		{Name: "globex-ops", Tenant: k.TenantB, SHA256: api.HashKey(k.BOps), Scopes: api.AllScopes},
	} {
		require.NoError(t, api.AppendKey(k.File, e))
	}
	srv, url, err := serveAPI(t, c, api.Config{KeysFile: k.File, TokenSecret: []byte(randomHex(16))}, furtherAPI{PublicURL: true})
	require.NoError(t, err)
	k.A, k.ARO, k.B, k.srv = clientAt(t, c, url, k.AOps, 30*time.Second), clientAt(t, c, url, k.ARead, 30*time.Second), clientAt(t, c, url, k.BOps, 30*time.Second), srv
	return k
}

// listRuns reads GET /v1/runs?<query> and returns the run ids and the next cursor.
func listRuns(t *testing.T, c *apiClient, query string) ([]string, []api.RunSummary, string) {
	t.Helper()
	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/runs?"+query, nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var list api.RunList
	require.NoError(t, json.Unmarshal(raw, &list))
	ids := make([]string, 0, len(list.Runs))
	for _, r := range list.Runs {
		ids = append(ids, r.RunID)
	}
	return ids, list.Runs, list.NextCursor
}

func TestKeysFileTenantsE2E(t *testing.T) {
	t.Parallel()
	k := keysFileAPI(t, startStack(t))
	id := cfCreate(t, k.A, "conformance-approval", nil)
	cfWaitStatus(t, k.A, id, "waiting-approval")
	// The read-only key of the tenant reads; it cannot start, cancel or approve.
	status, _, _ := cfCall(t, k.ARO, k.ARead, http.MethodGet, "/v1/runs/"+id, nil)
	assert.Equal(t, 200, status)
	for _, call := range []struct{ path, body string }{
		{"/v1/runs", `{"workflowId":"conformance-noop"}`},
		{"/v1/runs/" + id + "/cancel", `{}`},
		{"/v1/runs/" + id + "/interrupts/gate", `{"resumeValue":{"action":"accept"}}`},
	} {
		status, _, raw := cfCall(t, k.ARO, k.ARead, http.MethodPost, call.path, call.body)
		assert.Equal(t, 403, status, "%s as the read-only key: %s", call.path, raw)
	}
	// The other tenant does not see it.
	status, _, _ = cfCall(t, k.B, k.BOps, http.MethodGet, "/v1/runs/"+id, nil)
	assert.Equal(t, 404, status)

	// Revoking the read-only key in the file takes effect on reload (SIGHUP calls
	// ReloadKeys; the server also polls the file).
	require.NoError(t, api.RevokeKey(k.File, "acme-dashboard"))
	require.NoError(t, k.srv.ReloadKeys())
	status, _, raw := cfCall(t, k.ARO, k.ARead, http.MethodGet, "/v1/runs/"+id, nil)
	assert.Equal(t, 401, status)
	assert.Contains(t, string(raw), "key_revoked")
	// The run was started by the key's name.
	assert.Equal(t, "acme-ops", cfSnapshot(t, k.A, id)["owner"].(map[string]any)["principal"])
	cfCancel(t, k.A, id)
}

func TestListRunsE2E(t *testing.T) {
	t.Parallel()
	k := keysFileAPI(t, startStack(t))
	a := k.A
	var noops []string
	for range 3 {
		noops = append(noops, cfCreate(t, a, "conformance-noop", nil))
	}
	for _, id := range noops {
		cfWaitTerminal(t, a, id)
	}
	// Creation times compare at millisecond precision: the runs before the cut and
	// those after it are created in different milliseconds.
	cut := time.Now().UTC()
	require.Eventually(t, func() bool { return time.Since(cut) > 2*time.Millisecond }, time.Second, time.Millisecond)
	approvals := []string{cfCreate(t, a, "conformance-approval", nil), cfCreate(t, a, "conformance-approval", nil)}
	chat := cfCreate(t, a, "support", map[string]any{"message": "Hi, what is my balance?"})
	other := cfCreate(t, k.B, "conformance-approval", nil)
	for _, id := range approvals {
		cfWaitStatus(t, a, id, "waiting-approval")
	}
	cfWaitStatus(t, a, chat, "waiting-approval")
	cfWaitStatus(t, k.B, other, "waiting-approval")
	all := append(append(append([]string{}, noops...), approvals...), chat)

	// Visibility follows the runs within moments; wait until it shows every one.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ids, runs, _ := listRuns(t, a, "limit=100")
		assert.ElementsMatch(c, all, ids)
		for _, r := range runs {
			if slices.Contains(approvals, r.RunID) {
				assert.Equal(c, "waiting-approval", r.Status)
				assert.NotNil(c, r.WaitingOn)
			}
		}
	}, 20*time.Second, 100*time.Millisecond)

	// The read-only key lists too; the other tenant sees only its own run.
	ids, _, _ := listRuns(t, k.ARO, "limit=100")
	assert.ElementsMatch(t, all, ids)
	ids, _, _ = listRuns(t, k.B, "limit=100")
	assert.Equal(t, []string{other}, ids)

	cases := []struct {
		query string
		want  []string
	}{
		{"status=completed", noops},
		{"workflowId=conformance-noop", noops},
		{"status=waiting-approval", append(append([]string{}, approvals...), chat)},
		{"waiting=approval", approvals},
		{"waiting=conversation", []string{chat}},
		{"waiting=any", append(append([]string{}, approvals...), chat)},
		{"packId=support", []string{chat}},
		{"createdAfter=" + url.QueryEscape(cut.Format(time.RFC3339Nano)), append(append([]string{}, approvals...), chat)},
		{"createdBefore=" + url.QueryEscape(cut.Format(time.RFC3339Nano)), noops},
		{"status=waiting-approval&workflowId=conformance-approval", approvals},
	}
	for _, tc := range cases {
		ids, runs, _ := listRuns(t, a, tc.query)
		assert.ElementsMatch(t, tc.want, ids, tc.query)
		if tc.query == "waiting=conversation" && assert.Len(t, runs, 1) {
			w := runs[0].WaitingOn
			if assert.NotNil(t, w) {
				assert.Equal(t, "conversation", w.Kind)
				assert.True(t, strings.HasPrefix(w.InterruptKind, "conversation."), w.InterruptKind)
				assert.Equal(t, "agent", w.NodeID)
			}
			assert.Equal(t, "support", runs[0].PackID)
			assert.Equal(t, k.TenantA, runs[0].Owner.Tenant)
		}
	}

	// Pages of two walk every run exactly once.
	var walked []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the cursor never ends")
		q := "limit=2"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		ids, _, next := listRuns(t, a, q)
		require.LessOrEqual(t, len(ids), 2)
		walked = append(walked, ids...)
		if next == "" {
			break
		}
		cursor = next
	}
	assert.ElementsMatch(t, all, walked)
	// A cursor of this listing is refused for another tenant.
	_, _, next := listRuns(t, a, "limit=2")
	status, _, raw := cfCall(t, k.B, k.BOps, http.MethodGet, "/v1/runs?limit=2&cursor="+url.QueryEscape(next), nil)
	assert.Equal(t, 400, status, "%s", raw)

	// A resolved approval leaves the waiting lists and shows its end.
	status, body := cfResolve(t, a, a.Key, approvals[0], "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, 200, status, "%v", body)
	cfWaitTerminal(t, a, approvals[0])
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ids, _, _ := listRuns(t, a, "waiting=any")
		assert.ElementsMatch(c, []string{approvals[1], chat}, ids)
		ids, runs, _ := listRuns(t, a, "status=completed")
		assert.Contains(c, ids, approvals[0])
		for _, r := range runs {
			assert.Nil(c, r.WaitingOn, "%s is closed", r.RunID)
			assert.NotEmpty(c, r.CompletedAt)
		}
	}, 20*time.Second, 100*time.Millisecond)
	for _, id := range []string{approvals[1], chat} {
		cfCancel(t, a, id)
	}
	cfCancel(t, k.B, other)
}

// pendingItems reads GET /v1/interrupts.
func pendingItems(t *testing.T, c *apiClient, query string) (int, []api.PendingItem) {
	t.Helper()
	status, _, raw := cfCall(t, c, c.Key, http.MethodGet, "/v1/interrupts?"+query, nil)
	if status != http.StatusOK {
		return status, nil
	}
	var list api.PendingList
	require.NoError(t, json.Unmarshal(raw, &list))
	return status, list.Interrupts
}

func TestPendingInterruptsE2E(t *testing.T) {
	t.Parallel()
	k := keysFileAPI(t, startStack(t))
	a := k.A
	approval := cfCreate(t, a, "conformance-approval", nil)
	chat := cfCreate(t, a, "support", map[string]any{"message": "Hi, what is my balance?"})
	other := cfCreate(t, k.B, "conformance-approval", nil)
	cfWaitStatus(t, a, approval, "waiting-approval")
	cfWaitStatus(t, a, chat, "waiting-approval")

	// An SSE reader of the list, started before the next approval exists.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frames := streamPending(t, ctx, a)

	// The operators' list holds the approval; the chat waits for its end user and is
	// listed on request (answeredBy=user, or any for both).
	runsOf := func(items []api.PendingItem) []string {
		runs := []string{}
		for _, it := range items {
			runs = append(runs, it.RunID)
		}
		return runs
	}
	var items []api.PendingItem
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, items = pendingItems(t, a, "answeredBy=any")
		assert.ElementsMatch(c, []string{approval, chat}, runsOf(items))
	}, 20*time.Second, 100*time.Millisecond)
	_, operators := pendingItems(t, a, "")
	assert.Equal(t, []string{approval}, runsOf(operators), "a chat waiting for its user is not operator work")
	_, users := pendingItems(t, a, "answeredBy=user")
	assert.Equal(t, []string{chat}, runsOf(users))
	for _, it := range items {
		switch it.RunID {
		case approval:
			assert.Equal(t, "approval", it.WaitingKind)
			assert.Equal(t, "operator", it.AnsweredBy)
			assert.Equal(t, "gate", it.NodeID)
			assert.Contains(t, string(it.Data), "Approve the conformance run")
			assert.NotEmpty(t, it.InterruptToken)
			assert.Contains(t, it.CallbackURL, "/v1/interrupts/"+it.InterruptToken)
		case chat:
			assert.Equal(t, "conversation", it.WaitingKind)
			assert.Equal(t, "user", it.AnsweredBy)
			assert.Equal(t, "conversation.exchange", it.Kind)
			assert.Equal(t, "support", it.PackID)
			require.NotEmpty(t, it.RecentTurns, "the inbox shows what the agent last said")
		}
	}
	_, onlyApprovals := pendingItems(t, a, "waiting=approval")
	require.Len(t, onlyApprovals, 1)
	assert.Equal(t, approval, onlyApprovals[0].RunID)
	status, _ := pendingItems(t, k.ARO, "")
	assert.Equal(t, 403, status, "listing what to resolve needs approvals:respond")
	_, theirs := pendingItems(t, k.B, "")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, theirs = pendingItems(t, k.B, "")
		assert.Len(c, theirs, 1)
	}, 20*time.Second, 100*time.Millisecond)
	assert.Equal(t, other, theirs[0].RunID)

	// The stream sends the list again when a new approval starts waiting.
	second := cfCreate(t, a, "conformance-approval", nil)
	waitFrame(t, frames, func(l api.PendingList) bool { return hasRun(l, second) && hasRun(l, approval) })
	// And when one is resolved, the next frame drops it.
	status, body := cfResolve(t, a, a.Key, second, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, 200, status, "%v", body)
	waitFrame(t, frames, func(l api.PendingList) bool { return !hasRun(l, second) && hasRun(l, approval) })
	for _, id := range []string{approval, chat} {
		cfCancel(t, a, id)
	}
	cfCancel(t, k.B, other)
}

func hasRun(l api.PendingList, runID string) bool {
	return slices.ContainsFunc(l.Interrupts, func(it api.PendingItem) bool { return it.RunID == runID })
}

// streamPending opens GET /v1/interrupts as SSE and sends every `interrupts` frame it
// reads on the returned channel until ctx ends.
func streamPending(t *testing.T, ctx context.Context, c *apiClient) <-chan api.PendingList {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/v1/interrupts", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.Key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	out := make(chan api.PendingList, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[7:]
			case strings.HasPrefix(line, "data: ") && event == "interrupts":
				var l api.PendingList
				if json.Unmarshal([]byte(line[6:]), &l) == nil {
					out <- l
				}
			case line == "":
				event = ""
			}
		}
	}()
	return out
}

// waitFrame reads frames until one satisfies ok.
func waitFrame(t *testing.T, frames <-chan api.PendingList, ok func(api.PendingList) bool) {
	t.Helper()
	timeout := time.After(25 * time.Second)
	for {
		select {
		case l, open := <-frames:
			require.True(t, open, "the stream ended before the expected frame")
			if ok(l) {
				return
			}
		case <-timeout:
			t.Fatal("no stream frame showed the expected change")
		}
	}
}
