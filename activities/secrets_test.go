package activities

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
)

// TestNoKeyInErrorsLogsOrResults runs both real providers through the ModelRound
// activity, against servers that echo the key back in their error messages (as
// providers do, partly masked), and checks that the key appears in no error, no log
// line and no result, while it does reach the provider's server.
func TestNoKeyInErrorsLogsOrResults(t *testing.T) {
	const key = "sk-live-ABCDEFGH12345678-very-secret-IJKLMNOP"
	masked := key[:8] + "****" + key[len(key)-8:]
	for _, kind := range []string{ProviderOpenAI, ProviderAnthropic} {
		t.Run(kind, func(t *testing.T) {
			var ok, unauthorized, limited wireResponse
			if kind == ProviderOpenAI {
				ok = openAIText("fine, your key " + "is not repeated here")
				unauthorized = wireResponse{status: 401, body: `{"error":{"message":"Incorrect API key provided: ` + masked + `","type":"invalid_request_error"}}`}
				limited = wireResponse{status: 429, header: map[string]string{"Retry-After": "1"}, body: `{"error":{"message":"limit for key ` + key + `"}}`}
			} else {
				ok = wireResponse{status: 200, body: anthropicBody(`[{"type":"text","text":"fine"}]`, "end_turn")}
				unauthorized = wireResponse{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + masked + `"}}`}
				limited = wireResponse{status: 429, body: `{"type":"error","error":{"type":"rate_limit_error","message":"limit for ` + key + `"}}`}
			}
			ws := newWireServer(t, ok, unauthorized, limited)
			var p Provider
			if kind == ProviderOpenAI {
				p = NewOpenAIProvider(key, "m", ws.URL+"/v1")
			} else {
				p = NewAnthropicProvider(key, "m", ws.URL)
			}

			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			src := &fakeTranscripts{msgs: map[string][]convo.Message{"c": {{Role: convo.RoleUser, Text: "hello"}}}}
			a, env := newTestActivities(t, Config{Transcripts: src, Providers: map[string]Provider{DefaultProviderKey: p}, Logger: logger})
			logger.Info("Providers configured", "provider", p)

			in := convo.ModelRoundInput{RunID: "run-s", PackID: "bank", State: "s", Transcript: convo.TranscriptRef{RunID: "run-s", Key: "c", To: 1}}
			var outputs []string
			val, err := env.ExecuteActivity(a.ModelRound, in)
			require.NoError(t, err)
			var res convo.ModelRoundResult
			require.NoError(t, val.Get(&res))
			b, _ := json.Marshal(res)
			outputs = append(outputs, string(b))

			for range 2 {
				_, err := env.ExecuteActivity(a.ModelRound, in)
				require.Error(t, err)
				outputs = append(outputs, err.Error())
			}
			outputs = append(outputs, logs.String())

			for _, out := range outputs {
				for _, frag := range []string{key, key[:8], key[len(key)-8:], "very-secret"} {
					assert.False(t, strings.Contains(out, frag), "key fragment %q leaked into %q", frag, out)
				}
			}
			assert.Contains(t, outputs[1], "key is invalid")
			assert.Contains(t, logs.String(), "Model round failed", "failures are logged, scrubbed")

			reqs := ws.got()
			require.Len(t, reqs, 3)
			assert.Contains(t, reqs[0].Header.Get("Authorization"), key, "the key does reach the provider")
		})
	}
}
