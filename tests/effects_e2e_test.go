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
	"github.com/wop-dev/wop/workflows"
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

	src := decidePayment(t, c, "pay-accept", map[string]any{"action": "accept"})
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
	assert.Equal(t, "recorded-outcome", replay["sideEffectSuppression"])
	assert.Equal(t, "/host/effect-seams", replay["effectSeamsManifest"])

	// A run the tenant does not have is not found.
	status, _, _ = c.do(http.MethodGet, "/v1/runs/"+url.PathEscape("r_nope")+"/effects", nil)
	assert.Equal(t, http.StatusNotFound, status)
	replayHistory(t, c, src, "pack-effects-source")
	replayHistory(t, c, fork, "pack-effects-fork")
}

// TestReplaySideEffectSuppressionE2E follows the suite's replay-side-effect-suppression
// scenario (RFC 0140) on conformance-replay-side-effect and goes on: a source cancelled
// before its side-effecting node ran gives a replay fork that fails the node closed
// with replay_source_missing instead of performing it; a source that performed it
// gives a fork that completes the node with the source's recorded outputs, and the
// effect is in the source's ledger only.
func TestReplaySideEffectSuppressionE2E(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	var disc map[string]any
	require.NoError(t, json.Unmarshal(getJSON(t, c, "/.well-known/openwop"), &disc))
	assert.Contains(t, disc["fixtures"], "conformance-replay-side-effect")
	assert.Equal(t, "recorded-outcome", disc["replay"].(map[string]any)["sideEffectSuppression"])
	effectEvents := func(id string) []event {
		var out []event
		for _, e := range events(t, c, id) {
			if e.NodeID == "effect" {
				out = append(out, e)
			}
		}
		return out
	}

	cancelled := cfCreate(t, c, "conformance-replay-side-effect", map[string]any{"delayMs": 3000})
	status, _, body := c.do(http.MethodPost, "/v1/runs/"+cancelled+"/cancel", map[string]any{})
	require.Equal(t, http.StatusOK, status, "%v", body)
	waitSnapshot(t, c, cancelled, 30*time.Second, "cancelled", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCancelled })
	require.Empty(t, ofType(effectEvents(cancelled), protocol.EvNodeCompleted), "the source never performed the effect")
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+cancelled+":fork", map[string]any{"mode": "replay"})
	require.Equal(t, http.StatusCreated, status, "%v", body)
	missing := body["runId"].(string)
	waitSnapshot(t, c, missing, 30*time.Second, "failed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusFailed })
	evs := effectEvents(missing)
	assert.Empty(t, ofType(evs, protocol.EvNodeCompleted), "the fork did not perform the effect")
	failed := ofType(evs, protocol.EvNodeFailed)
	require.Len(t, failed, 1)
	var p struct {
		Error protocol.RunError `json:"error"`
	}
	require.NoError(t, json.Unmarshal(failed[0].Payload, &p))
	assert.Equal(t, protocol.CodeReplaySourceMissing, p.Error.Code)
	assert.Empty(t, effectsOf(t, c, missing).Effects)

	done := cfCreate(t, c, "conformance-replay-side-effect", map[string]any{"delayMs": 1})
	waitSnapshot(t, c, done, 30*time.Second, "completed", func(s workflows.Snapshot) bool { return s.Status == protocol.StatusCompleted })
	recorded := forkReplay(t, c, done, nil)
	src, fork := ofType(effectEvents(done), protocol.EvNodeCompleted), ofType(effectEvents(recorded), protocol.EvNodeCompleted)
	require.Len(t, src, 1)
	require.Len(t, fork, 1)
	var so, fo struct {
		Outputs map[string]json.RawMessage `json:"outputs"`
	}
	require.NoError(t, json.Unmarshal(src[0].Payload, &so))
	require.NoError(t, json.Unmarshal(fork[0].Payload, &fo))
	assert.Equal(t, so.Outputs, fo.Outputs, "the fork's node completes with the source's recorded outputs")
	assert.JSONEq(t, "true", string(so.Outputs["performed"]))
	sl := effectsOf(t, c, done)
	require.Len(t, sl.Effects, 1, "%+v", sl.Effects)
	assert.Equal(t, "effect", sl.Effects[0].NodeID)
	assert.Equal(t, "conformance:side-effect", sl.Effects[0].ProviderKey)
	assert.Empty(t, effectsOf(t, c, recorded).Effects, "the fork performed nothing")

	replayHistory(t, c, done, "conformance-replay-side-effect")
	replayHistory(t, c, recorded, "fork-side-effect-recorded")
	replayHistory(t, c, missing, "fork-side-effect-missing")
}
