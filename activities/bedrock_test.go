package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/internal/fakemodel"
)

const (
	testAWSKeyID  = "AKIATESTKEYID0000001"
	testAWSSecret = "aws-secret-0123456789abcdefSECRET"
)

func newBedrock(t *testing.T, base string, noStream bool) *BedrockProvider {
	t.Helper()
	p, err := NewBedrockProvider(context.Background(), BedrockConfig{
		Model: "anthropic.claude-test-v1:0", Endpoint: base, NoStream: noStream,
		AWS: &aws.Config{Region: "eu-west-1", Credentials: awscreds.NewStaticCredentialsProvider(testAWSKeyID, testAWSSecret, "")},
	})
	require.NoError(t, err)
	return p
}

func TestBedrockConverseStreamText(t *testing.T) {
	fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply {
		return fakemodel.Reply{Text: "Hello from Bedrock.", InputTokens: 14, OutputTokens: 4}
	})
	p := newBedrock(t, base, false)
	var pieces []string
	res, err := p.Complete(context.Background(), &Request{
		Input:    convo.ModelRoundInput{System: "Be brief.", Parameters: []byte(`{"temperature":0.5,"max_tokens":64,"top_p":0.9,"top_k":5}`)},
		Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}},
		Stream:   func(s string) { pieces = append(pieces, s) },
	})
	require.NoError(t, err)
	assert.Equal(t, &convo.ModelRoundResult{Text: "Hello from Bedrock.", Provider: ProviderBedrock, Model: "anthropic.claude-test-v1:0",
		Usage: convo.Usage{InputTokens: 14, OutputTokens: 4}, FinishReason: "end_turn"}, res)
	assert.Equal(t, []string{"Hello", " from", " Bedrock."}, pieces, "the reply streams from the event stream")

	calls := fake.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, "/model/anthropic.claude-test-v1:0/converse-stream", calls[0].Path)
	assert.Contains(t, calls[0].Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+testAWSKeyID+"/", "requests are SigV4-signed")
	assert.Contains(t, calls[0].Header.Get("Authorization"), "/eu-west-1/bedrock/aws4_request")
	assert.NotContains(t, calls[0].Header.Get("Authorization"), testAWSSecret)
	assert.JSONEq(t, `[{"text":"Be brief."}]`, jsonOf(t, calls[0].Body["system"]))
	assert.JSONEq(t, `[{"role":"user","content":[{"text":"hi"}]}]`, jsonOf(t, calls[0].Body["messages"]))
	assert.JSONEq(t, `{"maxTokens":64,"temperature":0.5,"topP":0.9}`, jsonOf(t, calls[0].Body["inferenceConfig"]))
	assert.NotContains(t, calls[0].Body, "toolConfig")
}

func TestBedrockToolCallsBothWays(t *testing.T) {
	for _, noStream := range []bool{false, true} {
		t.Run(map[bool]string{false: "ConverseStream", true: "Converse"}[noStream], func(t *testing.T) {
			fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply {
				return fakemodel.Reply{Text: "Let me check.", ToolCalls: []fakemodel.ToolCall{
					{ID: "tooluse_1", Name: "workflow__transition", Arguments: `{"event":"AccountVerified","context":"ok"}`},
					{ID: "tooluse_2", Name: "verify_account", Arguments: `{"account_id":"ACC-2"}`},
				}, InputTokens: 80, OutputTokens: 30}
			})
			p := newBedrock(t, base, noStream)
			var pieces []string
			req := conversationRequest()
			req.Stream = func(s string) { pieces = append(pieces, s) }
			res, err := p.Complete(context.Background(), req)
			require.NoError(t, err)
			assert.Equal(t, "Let me check.", res.Text)
			assert.Equal(t, "tool_use", res.FinishReason)
			assert.Equal(t, convo.Usage{InputTokens: 80, OutputTokens: 30}, res.Usage)
			require.Len(t, res.ToolCalls, 2)
			assert.Equal(t, "tooluse_1", res.ToolCalls[0].ID)
			assert.JSONEq(t, `{"event":"AccountVerified","context":"ok"}`, string(res.ToolCalls[0].Args), "tool input assembles from its fragments")
			assert.Equal(t, "tooluse_2", res.ToolCalls[1].ID)
			assert.JSONEq(t, `{"account_id":"ACC-2"}`, string(res.ToolCalls[1].Args))
			assert.Equal(t, "Let me check.", joined(pieces))

			calls := fake.Calls()
			require.Len(t, calls, 1)
			want := map[bool]string{false: "/converse-stream", true: "/converse"}[noStream]
			assert.Equal(t, "/model/anthropic.claude-test-v1:0"+want, calls[0].Path)
			body := calls[0].Body
			assert.JSONEq(t, `[
				{"role":"user","content":[{"text":"What is the balance of ACC-1?"}]},
				{"role":"assistant","content":[{"text":"Checking."},
					{"toolUse":{"toolUseId":"call_a","name":"verify_account","input":{"account_id":"ACC-1"}}},
					{"toolUse":{"toolUseId":"call_b","name":"get_balance","input":{"account_id":"ACC-1"}}}]},
				{"role":"user","content":[
					{"toolResult":{"toolUseId":"call_a","content":[{"text":"{\"ok\":true}"}]}},
					{"toolResult":{"toolUseId":"call_b","content":[{"text":"{\"error\":\"no executor\"}"}],"status":"error"}}]}
			]`, jsonOf(t, body["messages"]))
			assert.JSONEq(t, `{"tools":[
				{"toolSpec":{"name":"verify_account","description":"Verify an account","inputSchema":{"json":{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}}}},
				{"toolSpec":{"name":"workflow__transition","description":"Transition the workflow","inputSchema":{"json":{"type":"object","properties":{"event":{"type":"string","enum":["AccountVerified"]},"context":{"type":"string"}},"required":["event","context"]}}}}],
				"toolChoice":{"auto":{}}}`, jsonOf(t, body["toolConfig"]))
		})
	}
}

func joined(pieces []string) string {
	out := ""
	for _, p := range pieces {
		out += p
	}
	return out
}

func TestBedrockWithoutToolsSendsEarlierCallsAsText(t *testing.T) {
	fake, base := fakeModelServer(t, nil)
	req := conversationRequest()
	req.Input.ToolChoice = "none"
	_, err := newBedrock(t, base, false).Complete(context.Background(), req)
	require.NoError(t, err)
	body := fake.Calls()[0].Body
	assert.NotContains(t, body, "toolConfig")
	msgs := jsonOf(t, body["messages"])
	assert.NotContains(t, msgs, "toolUse", "Bedrock refuses tool blocks in a request without tools")
	assert.Contains(t, msgs, `[called tool verify_account with {\"account_id\":\"ACC-1\"}]`)
	assert.Contains(t, msgs, `[result of tool get_balance: ERROR: {\"error\":\"no executor\"}]`)
}

func TestBedrockFallsBackToConverseForAModelThatCannotStream(t *testing.T) {
	fake, base := fakeModelServer(t, func(c fakemodel.Call) fakemodel.Reply {
		if c.Stream {
			return fakemodel.Reply{Fail: &fakemodel.Failure{Status: 400, Header: map[string]string{"X-Amzn-ErrorType": "ValidationException"},
				Body: `{"message":"This model doesn't support tool use in streaming mode."}`}}
		}
		return fakemodel.Reply{Text: "answered whole"}
	})
	p := newBedrock(t, base, false)
	for range 2 {
		var pieces []string
		res, err := p.Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}},
			Stream: func(s string) { pieces = append(pieces, s) }})
		require.NoError(t, err)
		assert.Equal(t, "answered whole", res.Text)
		assert.Equal(t, []string{"answered whole"}, pieces)
	}
	calls := fake.Calls()
	require.Len(t, calls, 3, "one refused stream, then Converse for this round and the next")
	assert.True(t, calls[0].Stream)
	assert.False(t, calls[1].Stream)
	assert.False(t, calls[2].Stream)
}

func TestBedrockErrors(t *testing.T) {
	fail := func(status int, typ, msg string, header ...string) *fakemodel.Failure {
		h := map[string]string{"X-Amzn-ErrorType": typ}
		for i := 0; i+1 < len(header); i += 2 {
			h[header[i]] = header[i+1]
		}
		return &fakemodel.Failure{Status: status, Header: h, Body: `{"message":` + jsonString(msg) + `}`}
	}
	cases := []struct {
		name         string
		reply        fakemodel.Reply
		wantType     string
		nonRetryable bool
		retryDelay   time.Duration
		contains     string
	}{
		{"400 validation", fakemodel.Reply{Fail: fail(400, "ValidationException", "The provided model identifier is invalid.")}, ErrTypeBadRequest, true, 0, "model identifier is invalid"},
		{"403 access denied", fakemodel.Reply{Fail: fail(403, "AccessDeniedException", "You don't have access to the model with the specified model ID.")}, ErrTypeAuth, true, 0, "HTTP 403"},
		{"401 unrecognized", fakemodel.Reply{Fail: fail(401, "UnrecognizedClientException", "The security token included in the request is invalid.")}, ErrTypeAuth, true, 0, "key is invalid"},
		{"429 throttled", fakemodel.Reply{Fail: fail(429, "ThrottlingException", "Too many requests, please wait before trying again.", "Retry-After", "3")}, ErrTypeRateLimited, false, 3 * time.Second, "ThrottlingException"},
		{"500", fakemodel.Reply{Fail: fail(500, "InternalServerException", "internal")}, ErrTypeUnavailable, false, 0, "HTTP 500"},
		{"503", fakemodel.Reply{Fail: fail(503, "ServiceUnavailableException", "Service Unavailable")}, ErrTypeUnavailable, false, 0, "Service Unavailable"},
		{"throttled mid-stream", fakemodel.Reply{Text: "partial reply", StreamException: "ThrottlingException"}, ErrTypeRateLimited, false, 0, "ThrottlingException"},
		{"model stream error", fakemodel.Reply{Text: "partial reply", StreamException: "ModelStreamErrorException"}, ErrTypeUnavailable, false, 0, "ModelStreamErrorException"},
		{"validation mid-stream", fakemodel.Reply{Text: "partial reply", StreamException: "ValidationException"}, ErrTypeBadRequest, true, 0, "ValidationException"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake, base := fakeModelServer(t, func(fakemodel.Call) fakemodel.Reply { return tc.reply })
			_, err := newBedrock(t, base, false).Complete(context.Background(), &Request{Messages: []convo.Message{{Role: convo.RoleUser, Text: "hi"}}})
			appErr := requireAppError(t, err, tc.wantType, tc.nonRetryable)
			assert.Equal(t, tc.retryDelay, appErr.NextRetryDelay())
			assert.Contains(t, err.Error(), tc.contains)
			assert.NotContains(t, err.Error(), testAWSSecret)
			assert.Len(t, fake.Calls(), 1, "the SDK must not retry on its own")
		})
	}
}

func TestBedrockCheckNeedsCredentials(t *testing.T) {
	p := newBedrock(t, "http://127.0.0.1:1", false)
	require.NoError(t, p.Check(context.Background()))

	none, err := NewBedrockProvider(context.Background(), BedrockConfig{Model: "m", Endpoint: "http://127.0.0.1:1",
		AWS: &aws.Config{Region: "us-east-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no EC2 IMDS role found")
		})}})
	require.NoError(t, err)
	require.ErrorContains(t, none.Check(context.Background()), "no EC2 IMDS role found")

	_, err = NewBedrockProvider(context.Background(), BedrockConfig{Model: "m", AWS: &aws.Config{}})
	require.ErrorContains(t, err, "region")
	_, err = NewBedrockProvider(context.Background(), BedrockConfig{AWS: &aws.Config{Region: "us-east-1"}})
	require.ErrorContains(t, err, EnvModel)
}
