package tests

// Sealed payloads: a host started with payload keys writes nothing readable to Temporal.
// A pack conversation (model rounds and tool calls as activities) and a fixture
// conversation that continues as new every few events are driven over HTTP; a Temporal
// client without the keys then reads every history event of every execution of both
// and finds none of the messages, while the API, which reads the same histories through
// the codec (closed executions' event records, start inputs), answers every turn. The
// codec endpoint opens a sealed payload for a key with payloads:codec only (and for the
// embedded UI's origin), and a host restarted with a rotated keys file still reads the
// runs sealed under the old key and seals new ones under the new.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/internal/payloadcodec"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
)

func TestPayloadsAreSealedInTemporalE2E(t *testing.T) {
	t.Parallel()
	k1 := payloadcodec.Key{ID: "k1", Key: bytes.Repeat([]byte{0x11}, 32)}
	k2 := payloadcodec.Key{ID: "k2", Key: bytes.Repeat([]byte{0x22}, 32)}
	first, err := payloadcodec.New([]payloadcodec.Key{k1})
	require.NoError(t, err)
	const uiOrigin, corsOrigin = "http://127.0.0.1:1", "https://temporal-ui.example"
	lowKey := randomHex(16)
	c := startPrivateStack(t, stackOptions{DataDir: t.TempDir(), Tweak: func(o *stack.Options) {
		o.API.PayloadCodec = first
		o.API.CodecUIOrigin, o.API.CodecCORSOrigins = uiOrigin, []string{corsOrigin}
		o.API.Keys = append(o.API.Keys, api.Key{ID: "no-codec", Secret: lowKey, Tenant: "default", Scopes: api.AllScopes})
		o.ServerDynamicConfig = map[string]any{"history.workflowIdReuseMinimalInterval": time.Millisecond}
	}})

	// A pack conversation: the account number travels through model rounds and tools.
	packRun := createRun(t, c, "support", map[string]any{"message": "Hi, I have a question about my account."})
	waitRounds(t, c, packRun, 1, protocol.StatusWaitingApproval)
	sayTo(t, c, packRun, "It's ACC-12345. What's my balance?")
	waitCompleted(t, c, packRun)
	require.Contains(t, string(eventsJSON(t, c, packRun)), "ACC-12345", "the API reads the sealed run")

	// A conversation that continues as new every six events: its earlier events are read
	// from the event records of closed executions.
	long := "sealed-long-" + randomHex(4)
	sideStart(t, c, long, 6)
	secrets := []string{"sealed-word-alpha", "sealed-word-bravo", "sealed-word-charlie", "sealed-word-delta"}
	for _, s := range secrets {
		status, _, body := c.do(http.MethodPost, "/v1/runs/"+long+"/interrupts/"+sideNode, map[string]any{"resumeValue": map[string]any{"text": s}})
		require.Equal(t, http.StatusOK, status, "%v", body)
	}
	longEvents := allEventsText(t, c, long)
	for _, s := range secrets {
		require.Contains(t, longEvents, s)
	}

	// Temporal, read without the keys, holds none of it.
	plain, err := client.Dial(client.Options{HostPort: c.Stack.TemporalAddress(), Namespace: cmp.Or(c.Stack.Namespace(), "default")})
	require.NoError(t, err)
	defer plain.Close()
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer lcancel()
	execs, err := plain.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: cmp.Or(c.Stack.Namespace(), "default"), Query: "WorkflowId = '" + long + "'"})
	require.NoError(t, err)
	require.Greater(t, len(execs.GetExecutions()), 1, "the run continued as new")
	sealedInput := rawHistoriesHoldNone(t, plain, cmp.Or(c.Stack.Namespace(), "default"), []string{packRun, long}, append(secrets, "ACC-12345", "question about my account"))

	// The codec endpoint opens it, for a key that holds payloads:codec.
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{sealedInput}})
	require.NoError(t, err)
	status, _, opened := c.doRaw(http.MethodPost, "/codec/decode", body, map[string]string{"Authorization": "Bearer " + c.Key})
	require.Equal(t, http.StatusOK, status, "%s", opened)
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(opened, &out))
	require.Equal(t, "json/plain", string(out.GetPayloads()[0].GetMetadata()["encoding"]), "the opened payload is the original")
	require.Contains(t, string(out.GetPayloads()[0].GetData()), "question about my account")

	low := clientAt(t, c, c.BaseURL, lowKey, 10*time.Second)
	status, _, refused := low.doRaw(http.MethodPost, "/codec/decode", body, map[string]string{"Authorization": "Bearer " + lowKey})
	require.Equal(t, http.StatusForbidden, status, "%s", refused)
	status, _, _ = rawPost(t, c.BaseURL+"/codec/decode", body, map[string]string{"Origin": corsOrigin})
	require.Equal(t, http.StatusUnauthorized, status, "a CORS origin still needs a key")
	status, hdr, fromUI := rawPost(t, c.BaseURL+"/codec/decode", body, map[string]string{"Origin": uiOrigin})
	require.Equal(t, http.StatusOK, status, "%s", fromUI)
	require.Equal(t, uiOrigin, hdr.Get("Access-Control-Allow-Origin"))
	require.Equal(t, string(opened), string(fromUI))

	// A browser's preflight: answered for the configured origins only.
	for origin, want := range map[string]int{corsOrigin: http.StatusNoContent, uiOrigin: http.StatusNoContent, "https://evil.example": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodOptions, c.BaseURL+"/codec/decode", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, origin)
		if want == http.StatusNoContent {
			require.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"))
			require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")
		}
	}

	// A rotated keys file: k2 seals, k1 still opens the runs sealed before.
	rotated, err := payloadcodec.New([]payloadcodec.Key{k2, k1})
	require.NoError(t, err)
	opts := c.Stack.Options()
	c.Stack.Stop()
	opts.API.PayloadCodec = rotated
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := stack.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(st.Stop)
	c = newAPIClient(t, st, c.Key)
	require.Contains(t, string(eventsJSON(t, c, packRun)), "ACC-12345", "a run sealed under k1 is read after the rotation")
	status, _, body2 := c.do(http.MethodPost, "/v1/runs/"+long+"/interrupts/"+sideNode, map[string]any{"resumeValue": map[string]any{"text": "sealed-word-echo"}})
	require.Equal(t, http.StatusOK, status, "%v", body2)
	require.Contains(t, allEventsText(t, c, long), "sealed-word-echo")
	plain2, err := client.Dial(client.Options{HostPort: st.TemporalAddress(), Namespace: cmp.Or(st.Namespace(), "default")})
	require.NoError(t, err)
	defer plain2.Close()
	require.Equal(t, "k2", sealedKeyOfLastSignal(t, plain2, long), "the turn after the rotation is sealed under k2")
}

// rawHistoriesHoldNone reads every event of every execution of the runs with a client
// that has no keys and requires that none of the texts appears in them, nor in the
// runs' memos and summaries. It returns the sealed input of the first run's first
// execution.
func rawHistoriesHoldNone(t *testing.T, plain client.Client, namespace string, runs []string, texts []string) *commonpb.Payload {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var firstInput *commonpb.Payload
	sealed := 0
	for _, id := range runs {
		list, err := plain.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: "WorkflowId = '" + id + "'"})
		require.NoError(t, err)
		require.NotEmpty(t, list.GetExecutions(), id)
		for _, ex := range list.GetExecutions() {
			raw, err := proto.Marshal(ex) // memo, summary and search attributes as visibility holds them
			require.NoError(t, err)
			for _, s := range texts {
				require.False(t, bytes.Contains(raw, []byte(s)), "run %s: visibility holds %q", id, s)
			}
			it := plain.GetWorkflowHistory(ctx, id, ex.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				require.NoError(t, err)
				raw, err := proto.Marshal(ev)
				require.NoError(t, err)
				for _, s := range texts {
					require.False(t, bytes.Contains(raw, []byte(s)), "run %s: event %d (%s) holds %q", id, ev.GetEventId(), ev.GetEventType(), s)
					for _, b := range base64Forms(s) {
						require.False(t, bytes.Contains(raw, []byte(b)), "run %s: event %d (%s) holds %q in base64", id, ev.GetEventId(), ev.GetEventType(), s)
					}
				}
				sealed += bytes.Count(raw, []byte(payloadcodec.Encoding))
				if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil && firstInput == nil {
					firstInput = a.GetInput().GetPayloads()[0]
				}
			}
		}
	}
	require.NotNil(t, firstInput)
	require.Equal(t, payloadcodec.Encoding, string(firstInput.GetMetadata()["encoding"]))
	require.Greater(t, sealed, 20, "the histories hold sealed payloads")
	return firstInput
}

// base64Forms are the base64 texts every encoding of s holds, whatever its offset in
// the bytes encoded: for each of the three alignments, the characters that depend on s
// alone.
func base64Forms(s string) []string {
	var out []string
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", k) + s))
		start, end := 4*((k+2)/3), 4*((k+len(s))/3)
		out = append(out, enc[start:end])
	}
	return out
}

// sealedKeyOfLastSignal is the key id the run's latest resolve (an update or a signal)
// was sealed under.
func sealedKeyOfLastSignal(t *testing.T, plain client.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := plain.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var last *commonpb.Payload
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
			last = a.GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0]
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			last = a.GetInput().GetPayloads()[0]
		}
	}
	require.NotNil(t, last, "run %s received no resolve", id)
	return string(last.GetMetadata()[payloadcodec.MetadataKeyID])
}

// allEventsText is the JSON of every event of the run's log, read page after page.
func allEventsText(t *testing.T, c *apiClient, id string) string {
	t.Helper()
	evs, _ := sideReadJSONComplete(t, c, id, -1)
	raw, err := json.Marshal(evs)
	require.NoError(t, err)
	return string(raw)
}

// rawPost posts body with headers and no key.
func rawPost(t *testing.T, url string, body []byte, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, buf.Bytes()
}
