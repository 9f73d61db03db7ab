package tests

// The multi-party roster over HTTP (RFC 0101; RFC 0239): conversation.opened names the
// gate config's roster, an off-roster speaker is 422 with the turn not taken, a roster
// over maxParticipants is refused at create, and discovery says so at both majors.

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/workflows"
)

func TestV2MultiPartyCouncil(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := v2Create(t, c, map[string]any{"workflowId": "conformance-multi-party-council"})
	v2Wait(t, c, id, "waiting-approval")
	_, evs := v2Log(t, c, id)
	opened := v2Payload(evs, "conversation.opened")
	assert.Equal(t, []any{map[string]any{"agentId": "host:conformance-council-a"}, map[string]any{"agentId": "host:conformance-council-b"},
		map[string]any{"agentId": "host:conformance-council-c"}}, opened["participants"], "the roster of the gate config, unchanged")

	turn := func(speaker string) map[string]any {
		return map[string]any{"resumeValue": map[string]any{"role": "agent", "speakerId": speaker, "content": "turn text"}}
	}
	status, _, raw := v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/interrupts/convo"), turn("host:conformance-council-z"))
	require.Equal(t, http.StatusUnprocessableEntity, status, "%s", raw)
	var e struct {
		Error   string            `json:"error"`
		Details map[string]string `json:"details"`
	}
	require.NoError(t, json.Unmarshal(raw, &e))
	assert.Equal(t, "wop.conversation_speaker_not_participant", e.Error, "unregistered at v2: the host's vendor code")
	assert.Equal(t, "host:conformance-council-z", e.Details["speakerId"])
	st, body := post(c, c.Key, "/v1/runs/"+v2Workflow(id)+"/interrupts/convo", turn("host:conformance-council-z"))
	assert.Equal(t, http.StatusUnprocessableEntity, st, "%v", body)
	assert.Equal(t, "conversation_speaker_not_participant", body["error"])
	ty, _ := v2Log(t, c, id)
	assert.NotContains(t, ty, "conversation.exchanged", "the refused turns were not taken")
	s, _ := v2Snapshot(t, c, id)
	assert.Equal(t, "waiting-approval", s["status"], "the interrupt stays open")

	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, v2Path(id, "/interrupts/convo"), turn("host:conformance-council-b"))
	require.Equal(t, http.StatusOK, status, "a participant's turn resolves it: %s", raw)
	ty, _ = v2Log(t, c, id)
	assert.Equal(t, 1, count(ty, "conversation.exchanged"))

	// A roster over maxParticipants is refused at create, at both majors.
	status, _, raw = v2Call(t, c, c.Key, http.MethodPost, "/runs", map[string]any{"workflowId": "conformance-multi-party-council-oversize"})
	require.Equal(t, http.StatusUnprocessableEntity, status, "%s", raw)
	var over struct {
		Error   string         `json:"error"`
		Details map[string]any `json:"details"`
	}
	require.NoError(t, json.Unmarshal(raw, &over))
	assert.Equal(t, "wop.conversation_roster_exceeded", over.Error)
	assert.Equal(t, float64(workflows.MaxParticipants), over.Details["maxParticipants"])
	st, body = post(c, c.Key, "/v1/runs", map[string]any{"workflowId": "conformance-multi-party-council-oversize"})
	assert.Equal(t, http.StatusUnprocessableEntity, st, "%v", body)
	assert.Equal(t, "conversation_roster_exceeded", body["error"])

	// Discovery advertises the roster at both majors.
	for _, hdr := range []map[string]string{{"OpenWOP-Version": "2.0"}, {}} {
		status, _, raw := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, hdr)
		require.Equal(t, http.StatusOK, status)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(raw, &doc))
		mp, _ := doc["multiPartyConversation"].(map[string]any)
		require.NotNil(t, mp, "multiPartyConversation at %v", hdr)
		assert.Equal(t, float64(workflows.MaxParticipants), mp["maxParticipants"])
	}
	replayHistory(t, c, v2Workflow(id), "conformance-multi-party-council")
}
