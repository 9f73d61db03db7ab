package workflows

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/protocol"
)

// A run of the v2 era stores the types OpenWOP v2 renamed under their v2 names, and
// records its era and its owner's subject; a run created before the era key (no era,
// no subject in its input) writes and reads exactly as before.
func TestEraSelectsTheVocabulary(t *testing.T) {
	subject := protocol.APIKeySubject("acme", "key-1")
	for _, tc := range []struct {
		name     string
		era      int
		subject  *protocol.Subject
		toolType string
	}{
		{"v1 era", 0, nil, "agent.toolCalled"},
		{"v2 era", protocol.EraV2, subject, "agent.tool-called"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fakeInput(`{"message":"explode"}`)
			in.Era = tc.era
			in.Owner = Owner{Tenant: "acme", Principal: "key-1", Subject: tc.subject}
			tr := newTestRun(t, in)
			snap := tr.execute()
			evs := tr.events()
			require.Len(t, ofType(evs, tc.toolType), 1, "types: %v", types(evs))
			other := "agent.tool-called"
			if tc.toolType == other {
				other = "agent.toolCalled"
			}
			require.Empty(t, ofType(evs, other))
			require.Equal(t, tc.era, snap.Era)
			var started struct {
				Owner map[string]json.RawMessage `json:"owner"`
			}
			require.NoError(t, json.Unmarshal(ofType(evs, protocol.EvRunStarted)[0].Payload, &started))
			if tc.subject == nil {
				require.NotContains(t, started.Owner, "subject", "the payload of a run without a subject is what it was")
			} else {
				var got protocol.Subject
				require.NoError(t, json.Unmarshal(started.Owner["subject"], &got))
				require.Equal(t, *tc.subject, got, "run.started echoes the owner's subject")
			}
		})
	}
}
