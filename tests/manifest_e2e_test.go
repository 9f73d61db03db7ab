package tests

// The pairing rule of versioning.md §1.2 over HTTP: every operation of
// spec/v2/path-manifest.json this host serves under one major is reachable under the
// other. Each row is called under major 1 (its /v1 twin, derived by prefixing) and
// under major 2 (the unversioned path with OpenWOP-Version: 2.0), with real resources
// (runs, an interrupt token, webhooks) so that a served operation never answers 404; a
// row is served under a major when its answer, naming that major, is neither 404 nor
// 405.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
	"github.com/wop-dev/wop/workflows"
)

// pairingPending are the manifest rows served under one major only, each until the
// issue that adds its twin: the test fails when one becomes paired (drop it here) or
// another breaks pairing.
var pairingPending = map[string]string{}

func TestV2PathManifestPairing(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	raw, err := os.ReadFile(v2Dir + "/path-manifest.json")
	require.NoError(t, err)
	var manifest struct {
		Operations []struct {
			Method, Path, OperationID string
			RequestBody               bool
		} `json:"operations"`
		Channels []struct{ Name, Address string } `json:"channels"`
	}
	require.NoError(t, json.Unmarshal(raw, &manifest))
	require.Len(t, manifest.Operations, 55)

	// Resources for the path parameters: a waiting run per major for the rows that
	// read, and a fresh one for each row that resolves or cancels.
	shared := map[int]string{}
	approval := func(major int, fresh bool) (id, path string) {
		if id = shared[major]; id == "" || fresh {
			id = createRun(t, c, "conformance-approval", nil)
			waitSnapshot(t, c, id, 15*time.Second, "waiting", func(s workflows.Snapshot) bool { return s.Status == "waiting-approval" })
			if !fresh {
				shared[major] = id
			}
		}
		if major == protocol.Major2 {
			return id, url.PathEscape("default/" + id)
		}
		return id, id
	}
	token := func(id string) string {
		s := snapshot(t, c, id)
		require.NotNil(t, s.Interrupt)
		require.NotEmpty(t, s.Interrupt.InterruptToken)
		return s.Interrupt.InterruptToken
	}
	// Every webhook a row registers is removed at the end, so that the stack shared by
	// the package's tests does not go on delivering to an address nobody answers.
	registered := func(major int, raw []byte) string {
		id, _ := cfObj(t, raw)["webhookId"].(string)
		require.NotEmpty(t, id)
		prefix, hdr := "/v1", map[string]string{"Authorization": "Bearer " + c.Key, "OpenWOP-Version": protocol.VersionOf(major)}
		if major == protocol.Major2 {
			prefix = ""
		}
		t.Cleanup(func() { c.doRaw(http.MethodDelete, prefix+"/webhooks/"+url.PathEscape(id), nil, hdr) })
		return id
	}
	webhook := func(major int) string {
		prefix := "/v1"
		if major == protocol.Major2 {
			prefix = ""
		}
		status, _, raw := c.doRaw(http.MethodPost, prefix+"/webhooks", map[string]any{"url": "https://hooks.example.test/x", "events": []string{"run.completed"}},
			map[string]string{"Authorization": "Bearer " + c.Key, "OpenWOP-Version": protocol.VersionOf(major)})
		require.Equal(t, http.StatusCreated, status, "register a webhook: %s", raw)
		return url.PathEscape(registered(major, raw))
	}
	bodyOf := func(method, path string) any {
		switch {
		case method == http.MethodPost && path == "/runs":
			return map[string]any{"workflowId": "conformance-noop"}
		case strings.HasSuffix(path, "/cancel"):
			return map[string]any{}
		case strings.HasSuffix(path, ":fork"):
			return map[string]any{"mode": "replay"}
		case strings.Contains(path, "/interrupts/"):
			return map[string]any{"resumeValue": map[string]any{"action": "accept"}}
		case path == "/webhooks":
			return map[string]any{"url": "https://hooks.example.test/x", "events": []string{"run.completed"}}
		case strings.HasSuffix(path, ":bulk-cancel"):
			return map[string]any{"runIds": []string{"r_pairing0000000000000000"}}
		case method == http.MethodPost || method == http.MethodPut:
			return map[string]any{}
		}
		return nil
	}
	served := func(method, path string, major int) bool {
		hdr := map[string]string{"Authorization": "Bearer " + c.Key, "Accept": "application/json", "OpenWOP-Version": protocol.VersionOf(major)}
		if path == DiscoveryPathForTests && major == protocol.Major1 {
			delete(hdr, "OpenWOP-Version")
		}
		// Fill the parameters with real resources of this major.
		if strings.Contains(path, "{runId}") || strings.Contains(path, "{token}") {
			mutates := method == http.MethodPost && (strings.HasSuffix(path, "/cancel") || strings.Contains(path, "/interrupts/") ||
				strings.HasSuffix(path, ":pause") || strings.HasSuffix(path, ":resume"))
			id, seg := approval(major, mutates)
			if strings.Contains(path, "{token}") {
				path = strings.ReplaceAll(path, "{token}", token(id))
			}
			path = strings.ReplaceAll(path, "{runId}", seg)
		}
		if strings.Contains(path, "{webhookId}") {
			path = strings.ReplaceAll(path, "{webhookId}", webhook(major))
		}
		path = strings.NewReplacer("{nodeId}", "gate", "{workflowId}", "conformance-noop").Replace(path)
		for strings.Contains(path, "{") {
			i, j := strings.IndexByte(path, '{'), strings.IndexByte(path, '}')
			path = path[:i] + "pairing-" + path[i+1:j] + path[j+1:]
		}
		if major == protocol.Major1 && path != DiscoveryPathForTests {
			path = "/v1" + path
		}
		status, rh, raw := c.doRaw(method, path, bodyOf(method, strings.TrimPrefix(path, "/v1")), hdr)
		if status == http.StatusServiceUnavailable {
			t.Fatalf("%s %s: Temporal answered late: %s", method, path, raw)
		}
		if method == http.MethodPost && strings.HasSuffix(path, "/webhooks") && status == http.StatusCreated {
			registered(major, raw)
		}
		assert.Equal(t, protocol.VersionOf(major), rh.Get("OpenWOP-Version"), "%s %s names major %d", method, path, major)
		return status != http.StatusNotFound && status != http.StatusMethodNotAllowed
	}
	var v1Only, v2Only, both []string
	for _, op := range manifest.Operations {
		key := op.Method + " " + op.Path
		s1, s2 := served(op.Method, op.Path, protocol.Major1), served(op.Method, op.Path, protocol.Major2)
		switch {
		case s1 && s2:
			both = append(both, key)
		case s1:
			v1Only = append(v1Only, key)
		case s2:
			v2Only = append(v2Only, key)
		}
	}
	pending := []string{}
	for k := range pairingPending {
		pending = append(pending, k)
	}
	assert.ElementsMatch(t, pending, v1Only, "rows served under major 1 only")
	assert.Empty(t, v2Only, "rows served under major 2 only")
	assert.ElementsMatch(t, []string{
		"GET /.well-known/openwop", "GET /openapi.json", "GET /workflows/{workflowId}", "GET /runs", "POST /runs",
		"GET /runs/{runId}", "POST /runs/{runId}/cancel", "GET /runs/{runId}/events", "GET /runs/{runId}/events/poll",
		"POST /runs/{runId}/interrupts/{nodeId}", "POST /runs/{runId}:fork", "GET /interrupts/{token}", "POST /interrupts/{token}",
		"POST /webhooks", "DELETE /webhooks/{webhookId}", "POST /runs:bulk-cancel",
		"POST /runs/{runId}:pause", "POST /runs/{runId}:resume",
		"GET /host/effect-seams", "GET /runs/{runId}/effects", "GET /webhooks/{webhookId}/dead-letters",
	}, both, "the manifest rows this host serves, under both majors")
	for _, ch := range manifest.Channels {
		if ch.Name == "runEvents" {
			assert.Contains(t, both, "GET "+ch.Address, "the run events channel is served under both majors")
		}
	}
}

// DiscoveryPathForTests is the one discovery resource, which has no /v1 twin: its
// representation, not its path, is chosen by the major.
const DiscoveryPathForTests = "/.well-known/openwop"
