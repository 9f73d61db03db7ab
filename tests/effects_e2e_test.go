package tests

// The effect seams over HTTP: the manifest, and the effect ledger across a replay fork.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
)

// ledger is a run's effect ledger as GET /v1/runs/{runId}/effects answers it.
type ledger struct {
	RunID   string `json:"runId"`
	Effects []struct {
		EffectID     string `json:"effectId"`
		NodeID       string `json:"nodeId"`
		Attempt      int    `json:"attempt"`
		InvocationID string `json:"invocationId"`
		Keying       string `json:"keying"`
		ProviderKey  string `json:"providerKey"`
		State        string `json:"state"`
	} `json:"effects"`
}

func effectsOf(t *testing.T, c *apiClient, id string) ledger {
	t.Helper()
	var l ledger
	require.NoError(t, json.Unmarshal(getJSON(t, c, "/v1/runs/"+id+"/effects"), &l))
	return l
}

// TestReplayForkPerformsNoEffectE2E: a run looks an invoice up (a read tool), pays it
// once its payment was approved (a write under acts_with_approval) and is delivered to
// a webhook; its replay fork completes with the same decision in its log, and across
// the two runs the tool server saw each call once, the effect ledger lists each once
// (the source's, with the key the server received), and the webhook got the source's
// events only. The manifest and the ledger validate against OpenWOP v2's schemas.
func TestReplayForkPerformsNoEffectE2E(t *testing.T) {
	t.Parallel()
	svc := newPayService(t)
	c := startWebhookStack(t, stackOptions{PacksDir: approvalPacksDir, ToolsFile: writeBindings(t, payBindings(svc.URL))})
	rec := newReceiver(t, nil)
	register(t, c, rec, "run.completed", "approval.received")

	src := createRun(t, c, "pay-accept", map[string]any{"message": "Please pay INV-7."})
	waitToolApproval(t, c, src)
	status, body := resolveAt(c, src, map[string]any{"action": "accept"})
	require.Equal(t, http.StatusOK, status, "%v", body)
	waitCompleted(t, c, src)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Len(ct, rec.of(src), 2) }, 30*time.Second, 50*time.Millisecond)

	fork := forkReplay(t, c, src, nil)
	assert.Len(t, ofType(events(t, c, fork), protocol.EvApprovalReceived), 1, "the fork's log has the decision")

	// The tool server: each call once, by the source.
	pay, lookup := svc.received(src, "/pay"), svc.received(src, "/lookup")
	require.Len(t, pay, 1)
	require.Len(t, lookup, 1)
	assert.Empty(t, svc.received(fork, "/pay"))
	assert.Empty(t, svc.received(fork, "/lookup"))

	// The ledger: the same two effects, once, in the source's ledger only.
	sl, fl := effectsOf(t, c, src), effectsOf(t, c, fork)
	assert.Equal(t, src, sl.RunID)
	assert.Empty(t, fl.Effects, "the fork performed nothing: %+v", fl.Effects)
	var keys []string
	for _, e := range sl.Effects {
		assert.Equal(t, "completed", e.State)
		assert.Equal(t, "activity-recipe", e.Keying)
		assert.Equal(t, packNode, e.NodeID)
		assert.Equal(t, 1, e.Attempt)
		keys = append(keys, e.ProviderKey+" "+e.InvocationID)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{"tool:lookup_invoice " + lookup[0].Key, "tool:pay_invoice " + pay[0].Key}, keys,
		"one row per call, with the idempotency key the tool server received")

	// The webhook: the source's events; the fork never told the dispatcher of its own.
	assert.Positive(t, dispatcherNotices(t, c, src))
	assert.Zero(t, dispatcherNotices(t, c, fork))
	assert.Empty(t, rec.of(fork))

	// Both documents at major 2, checked against the schemas.
	status, _, raw := v2Call(t, c, c.Key, http.MethodGet, "/host/effect-seams", nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	v2Validate(t, "effect-seam-manifest.schema.json", raw)
	var manifest struct {
		Seams []struct {
			Seam, Kind string
			Guarded    bool
		} `json:"seams"`
	}
	require.NoError(t, json.Unmarshal(raw, &manifest))
	kinds := map[string]bool{}
	for _, s := range manifest.Seams {
		kinds[s.Kind] = true
		assert.True(t, s.Guarded, s.Seam)
	}
	assert.Equal(t, map[string]bool{"provider-sdk": true, "http": true, "queue": true, "webhook-fanout": true}, kinds,
		"model calls, tool calls per binding kind and webhooks")
	status, _, raw = v2Call(t, c, c.Key, http.MethodGet, v2Path(protocol.BindID("default", src), "/effects"), nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	v2Validate(t, "effect-ledger-projection.schema.json", raw)

	// Discovery says suppression binds with replay, and where the manifest is.
	var disc map[string]any
	require.NoError(t, json.Unmarshal(getJSON(t, c, "/.well-known/openwop"), &disc))
	replay := disc["replay"].(map[string]any)
	assert.Equal(t, true, replay["sideEffectSuppression"])
	assert.Equal(t, "/host/effect-seams", replay["effectSeamsManifest"])

	// A run the tenant does not have is not found.
	status, _, _ = c.do(http.MethodGet, "/v1/runs/"+url.PathEscape("r_nope")+"/effects", nil)
	assert.Equal(t, http.StatusNotFound, status)
	replayHistory(t, c, src, "pack-effects-source")
	replayHistory(t, c, fork, "pack-effects-fork")
}
