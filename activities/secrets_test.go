package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/fakemodel"
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

// TestCloudProviderSecretsStayOut does the same for the gemini, azure-openai and
// bedrock providers: their servers echo the key (or, for Bedrock, the access key id)
// back in error messages, and no error, log line or result holds the key or the AWS
// secret.
func TestCloudProviderSecretsStayOut(t *testing.T) {
	const key = "cloud-live-ABCDEFGH12345678-very-secret-IJKLMNOP"
	masked := key[:8] + "****" + key[len(key)-8:]
	for _, kind := range []string{ProviderGemini, ProviderAzureOpenAI, ProviderBedrock} {
		t.Run(kind, func(t *testing.T) {
			n := 0
			answer := func(fakemodel.Call) fakemodel.Reply {
				n++
				switch n {
				case 1:
					return fakemodel.Reply{Text: "fine, your key is not repeated here"}
				case 2:
					return fakemodel.Reply{Fail: &fakemodel.Failure{Status: 401, Header: map[string]string{"X-Amzn-ErrorType": "UnrecognizedClientException"},
						Body: `{"error":{"code":401,"message":"API key not valid: ` + masked + `"},"message":"bad key ` + masked + `"}`}}
				default:
					return fakemodel.Reply{Fail: &fakemodel.Failure{Status: 429, Header: map[string]string{"Retry-After": "1", "X-Amzn-ErrorType": "ThrottlingException"},
						Body: `{"error":{"code":429,"message":"limit for key ` + key + `"},"message":"limit for ` + key + `"}`}}
				}
			}
			var p Provider
			var fake *fakemodel.Server
			switch kind {
			case ProviderGemini:
				var base string
				fake, base = fakeModelServer(t, answer)
				g, err := NewGeminiProvider(context.Background(), GeminiConfig{Model: "gemini-test", APIKey: key, BaseURL: base})
				require.NoError(t, err)
				p = g
			case ProviderAzureOpenAI:
				fake, p = newAzureFake(t, answer, AzureOpenAIConfig{APIKey: key})
			case ProviderBedrock:
				var base string
				fake, base = fakeModelServer(t, answer)
				b, err := NewBedrockProvider(context.Background(), BedrockConfig{Model: "m", Endpoint: base,
					AWS: &aws.Config{Region: "us-east-1", Credentials: awscreds.NewStaticCredentialsProvider("AKIAEXAMPLE", key, "")}})
				require.NoError(t, err)
				p = b
			}
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			src := &fakeTranscripts{msgs: map[string][]convo.Message{"c": {{Role: convo.RoleUser, Text: "hello"}}}}
			a, env := newTestActivities(t, Config{Transcripts: src, Providers: map[string]Provider{DefaultProviderKey: p}, Logger: logger})
			logger.Info("Providers configured", "provider", p, "described", fmt.Sprint(p))

			in := convo.ModelRoundInput{RunID: "run-s", PackID: "bank", State: "s", Transcript: convo.TranscriptRef{RunID: "run-s", Key: "c", To: 1}}
			val, err := env.ExecuteActivity(a.ModelRound, in)
			require.NoError(t, err)
			var res convo.ModelRoundResult
			require.NoError(t, val.Get(&res))
			b, _ := json.Marshal(res)
			outputs := []string{string(b)}
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
			assert.Contains(t, outputs[2], "rate limit")
			require.Len(t, fake.Calls(), 3)
			if kind != ProviderBedrock {
				h := fake.Calls()[0].Header
				assert.Contains(t, h.Get("x-goog-api-key")+h.Get("Api-Key"), key, "the key does reach the provider")
			}
		})
	}
}
