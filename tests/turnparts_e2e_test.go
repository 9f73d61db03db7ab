package tests

// Agent turns at v2 (RFC 0205 §B, RFC 0109) over HTTP: a pack's reply carries its text
// as A2A parts beside its content, and agent.model names the provider and model that
// answered, at both majors' reads; discovery advertises the provenance.

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/protocol"
)

func TestV2AgentTurnPartsAndModelProvenance(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := v2Create(t, c, map[string]any{"workflowId": "support", "inputs": map[string]any{"message": "Hi, what is my balance?"}})
	evs := waitFor(t, 30*time.Second, "the agent's first turn", func() []map[string]any { return v2Events(t, c, id) }, func(evs []map[string]any) bool {
		for _, e := range evs {
			if e["type"] == "conversation.exchanged" {
				if turn, _ := e["payload"].(map[string]any)["turn"].(map[string]any); turn["role"] == "agent" {
					return true
				}
			}
		}
		return false
	})
	var agent map[string]any
	for _, e := range evs {
		if turn, _ := e["payload"].(map[string]any)["turn"].(map[string]any); turn != nil && turn["role"] == "agent" {
			agent = turn
			break
		}
	}
	require.NotNil(t, agent)
	content, _ := agent["content"].(map[string]any)
	text, _ := content["text"].(string)
	require.NotEmpty(t, text, "the content stays readable: %v", agent)
	assert.Equal(t, []any{map[string]any{"text": text}}, agent["parts"], "the text as one A2A text part")
	assert.Equal(t, map[string]any{"agentId": agent["speakerId"], "model": map[string]any{"provider": activities.ProviderMock, "model": activities.MockModel}}, agent["agent"])

	// The same turn at v1 is as v1 served it before: no parts, no agent.
	var found bool
	for _, turn := range turnsIn(t, events(t, c, v2Workflow(id))) {
		if turn.Role == protocol.RoleAgent {
			assert.Nil(t, turn.Agent)
			assert.Empty(t, turn.Parts)
			assert.Equal(t, text, textOf(t, turn))
			found = true
			break
		}
	}
	assert.True(t, found, "the v1 read has the agent turn")
	snap := snapshot(t, c, v2Workflow(id))
	assert.NotContains(t, string(snap.Channels["conversation"]), `"parts"`, "nor in the v1 snapshot")

	status, _, raw := c.doRaw(http.MethodGet, "/.well-known/openwop", nil, map[string]string{"OpenWOP-Version": "2.0"})
	require.Equal(t, http.StatusOK, status)
	var root map[string]any
	require.NoError(t, json.Unmarshal(raw, &root))
	assert.Contains(t, root, "conversationTurnModelProvenance")
	replayHistory(t, c, v2Workflow(id), "pack-support-turn-parts")
}
