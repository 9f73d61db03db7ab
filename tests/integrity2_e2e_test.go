package tests

// Tokens, limits and connections end to end (see integrity_e2e_test.go).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/api"
)

// snapshotToken reads the conversation token a snapshot carries.
func snapshotToken(t *testing.T, c *apiClient, id string) string {
	t.Helper()
	tok := cfToken(t, cfSnapshot(t, c, id))
	require.NotEmpty(t, tok)
	return tok
}

// A conversation's token carries one exchange: used once, it is spent (409); the next
// read of the run serves a fresh one. Tokens are served with a fresh expiry, so a
// conversation older than the token TTL never gets an expired one.
func TestConversationTokensArePerExchangeAndNeverServedExpired(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := cfCreate(t, c, "conformance-conversation-council", nil)
	cfWaitStatus(t, c, id, "waiting-approval")
	t1 := snapshotToken(t, c, id)
	assert.Equal(t, "test", tokenClaims(t, t1)["sub"], "issued to the reader")
	exchange := func(tok, text string) (int, map[string]any) {
		return post(c, "", "/v1/interrupts/"+tok, map[string]any{"resumeValue": map[string]any{"text": text}})
	}
	status, body := exchange(t1, "one")
	require.Equal(t, 200, status, "%v", body)
	status, body = exchange(t1, "two")
	assert.Equal(t, 409, status, "a spent token: %v", body)
	assert.Equal(t, "interrupt_already_resolved", body["error"])
	t2 := snapshotToken(t, c, id)
	assert.NotEqual(t, t1, t2)
	status, body = exchange(t2, "two")
	require.Equal(t, 200, status, "%v", body)
	var texts []string
	for _, e := range cfEvents(t, c, id) {
		if e.Type == "conversation.exchanged" && strings.Contains(string(e.Payload), `"role":"user"`) {
			texts = append(texts, string(e.Payload))
		}
	}
	assert.Len(t, texts, 2, "one turn per token")

	// An API whose clock reads two days after the conversation opened (past the 24 h
	// TTL): the token it serves is valid for another TTL, and works.
	later := newAPIWith(t, c, api.Config{TokenTTL: 24 * time.Hour, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	tok := snapshotToken(t, later, id)
	exp, _ := tokenClaims(t, tok)["exp"].(float64)
	assert.Greater(t, int64(exp), time.Now().Add(48*time.Hour).Unix(), "the served token has not expired")
	status, body = post(later, "", "/v1/interrupts/"+tok, map[string]any{"resumeValue": map[string]any{"text": "three"}})
	assert.Equal(t, 200, status, "%v", body)
	cfCancel(t, c, id)
}

// The auth-required fixture's approval resumes with a bearer key only: its snapshot
// carries no token, and a signed token is refused 401 with a Bearer challenge.
func TestBearerOnlyInterruptRefusesTokens(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	secret := []byte(randomHex(16))
	b := newAPIWith(t, c, api.Config{TokenSecret: secret})
	id := cfCreate(t, b, "conformance-interrupt-auth-required", nil)
	s := cfWaitStatus(t, b, id, "waiting-approval")
	in, _ := s["interrupt"].(map[string]any)
	require.NotNil(t, in)
	assert.Empty(t, in["interruptToken"])
	assert.Empty(t, in["callbackUrl"])
	tok := signToken(secret, map[string]any{"runId": id, "nodeId": "gate", "interruptId": in["interruptId"],
		"exp": time.Now().Add(time.Hour).Unix(), "intent": "resolve", "kid": "k1"})
	status, hdr, raw := b.doRaw(http.MethodPost, "/v1/interrupts/"+tok, map[string]any{"resumeValue": map[string]any{"action": "accept"}}, nil)
	assert.Equal(t, 401, status, "%s", raw)
	assert.Equal(t, "unauthenticated", cfObj(t, raw)["error"])
	assert.True(t, strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer"), "challenge %q", hdr.Get("WWW-Authenticate"))
	assert.Equal(t, "waiting-approval", cfSnapshot(t, b, id)["status"])
	status, body := cfResolve(t, b, b.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, 200, status, "%v", body)
	assert.Equal(t, "completed", cfWaitTerminal(t, b, id)["status"])
}

// Wrong keys and token routes are rate-limited per client; every 401 names Bearer.
func TestFailedAuthAndTokenRoutesAreRateLimited(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	b := newAPIWith(t, c, api.Config{})
	counts := map[int]int{}
	var retryAfter string
	for i := range 300 {
		status, hdr, _ := b.doRaw(http.MethodGet, "/v1/runs/r_x", nil, map[string]string{"Authorization": fmt.Sprintf("Bearer wrong-%d", i)})
		counts[status]++
		switch status {
		case 401:
			assert.Equal(t, `Bearer realm="openwop"`, hdr.Get("WWW-Authenticate"))
		case 429:
			retryAfter = hdr.Get("Retry-After")
		}
	}
	assert.Equal(t, 300, counts[401]+counts[429], "%v", counts)
	assert.Greater(t, counts[429], 200, "failed authentication is limited: %v", counts)
	assert.NotEmpty(t, retryAfter)
	status, hdr, _ := b.doRaw(http.MethodGet, "/v1/runs/r_x", nil, nil)
	assert.Contains(t, []int{401, 429}, status)
	if status == 401 {
		assert.NotEmpty(t, hdr.Get("WWW-Authenticate"))
	}

	tb := newAPIWith(t, c, api.Config{})
	counts = map[int]int{}
	for range 300 {
		status, _, _ := tb.doRaw(http.MethodGet, "/v1/interrupts/tok_"+randomHex(12), nil, nil)
		counts[status]++
	}
	assert.Equal(t, 300, counts[404]+counts[429], "%v", counts)
	assert.Greater(t, counts[429], 200, "token routes are limited: %v", counts)
}

// create refuses what it would not honour: a callbackUrl (no webhooks are offered),
// thousands of tags, hundreds of KB of metadata.
func TestCreateRefusesCallbackURLAndUnboundedTagsAndMetadata(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	tags := make([]string, 20000)
	for i := range tags {
		tags[i] = "t" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"callbackUrl", map[string]any{"workflowId": "conformance-noop", "callbackUrl": "http://169.254.169.254/latest/meta-data"}, "callbackUrl"},
		{"20,000 tags", map[string]any{"workflowId": "conformance-noop", "tags": tags}, "tags"},
		{"900 KB metadata", map[string]any{"workflowId": "conformance-noop", "metadata": map[string]any{"blob": strings.Repeat("m", 900<<10)}}, "metadata"},
	} {
		status, _, raw := cfCall(t, c, c.Key, http.MethodPost, "/v1/runs", tc.body)
		assert.Equal(t, 400, status, "%s: %.300s", tc.name, raw)
		details, _ := cfObj(t, raw)["details"].(map[string]any)
		assert.Equal(t, tc.field, details["field"], "%s: %.300s", tc.name, raw)
	}
}

// Without WOP_PUBLIC_URL, callback URLs (which carry live tokens) are built only for
// allow-listed hosts; any other Host header gets none, and relative links.
func TestCallbackURLsOnlyForTrustedHosts(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	b := newAPIWith(t, c, api.Config{Guards: api.GuardConfig{AllowedHosts: []string{"api.example.test"}}})
	get := func(host, path string) map[string]any {
		req, err := http.NewRequest(http.MethodGet, b.BaseURL+path, nil)
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+b.Key)
		resp, err := b.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		require.Equal(t, 200, resp.StatusCode, "%s", raw)
		return cfObj(t, raw)
	}
	id := cfCreate(t, b, "conformance-interrupt-external-event", nil)
	cfWaitStatus(t, b, id, "waiting-external")
	evil := get("evil.example", "/v1/runs/"+id)["interrupt"].(map[string]any)
	assert.NotEmpty(t, evil["interruptToken"], "the token itself is served")
	assert.Empty(t, evil["callbackUrl"], "no callback URL built from an untrusted Host")
	good := get("api.example.test", "/v1/runs/"+id)["interrupt"].(map[string]any)
	assert.True(t, strings.HasPrefix(good["callbackUrl"].(string), "http://api.example.test/v1/interrupts/"), "%v", good["callbackUrl"])

	req, err := http.NewRequest(http.MethodPost, b.BaseURL+"/v1/runs", strings.NewReader(`{"workflowId":"conformance-noop"}`))
	require.NoError(t, err)
	req.Host = "evil.example"
	req.Header.Set("Authorization", "Bearer "+b.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 201, resp.StatusCode, "%s", raw)
	assert.True(t, strings.HasPrefix(cfObj(t, raw)["eventsUrl"].(string), "/v1/runs/"), "%s", raw)
	cfCancel(t, c, id)
}

// The same create again under its Idempotency-Key gets the original 201 and body.
func TestIdempotentCreateReplaysTheOriginalResponse(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	key := "idem-" + randomHex(8)
	h := map[string]string{"Authorization": "Bearer " + c.Key, "Idempotency-Key": key}
	body := map[string]any{"workflowId": "conformance-idempotent", "inputs": map[string]any{"nonce": key}}
	s1, _, r1 := c.doRaw(http.MethodPost, "/v1/runs", body, h)
	require.Equal(t, 201, s1, "%s", r1)
	cfWaitTerminal(t, c, cfObj(t, r1)["runId"].(string))
	s2, h2, r2 := c.doRaw(http.MethodPost, "/v1/runs", body, h)
	assert.Equal(t, 201, s2, "%s", r2)
	assert.Equal(t, string(r1), string(r2), "the original body, not the run's current status")
	assert.Equal(t, "true", h2.Get("openwop-Idempotent-Replay"))
}

// values-mode SSE ids only grow: the snapshot's id is the last sequence it reflects, and
// a finished run is sent once.
func TestValuesStreamIdsGrow(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	id := cfCreate(t, c, "conformance-approval", nil)
	cfWaitStatus(t, c, id, "waiting-approval")
	// Resolve once the stream has sent its first frame (the run is then followed).
	_, got, _, resolved := cfFollowAndResolve(t, c, "/v1/runs/"+id+"/events?streamMode=values", 30*time.Second, func() int {
		status, _ := cfResolve(t, c, c.Key, id, "gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}})
		return status
	})
	require.Equal(t, 200, resolved, "the resolve sent once the stream was attached")
	require.NotEmpty(t, got)
	prev := int64(-1)
	for _, f := range got {
		n, err := strconv.ParseInt(f.ID, 10, 64)
		require.NoError(t, err)
		assert.Greater(t, n, prev, "ids %v", got)
		prev = n
	}
	evs := cfEvents(t, c, id)
	assert.Equal(t, evs[len(evs)-1].Sequence, prev, "the last frame reflects the terminal event")
	_, done, _ := cfSSE(t, c, "/v1/runs/"+id+"/events?streamMode=values", nil, 10*time.Second)
	require.Len(t, done, 1, "a finished run: one snapshot")
	assert.Equal(t, strconv.FormatInt(prev, 10), done[0].ID)
}

// A body trickled slower than the body timeout (1 s here) is cut with 408; an event
// stream outlives the write timeout of ordinary responses (3 s here).
func TestConnectionTimeoutsSuitStreams(t *testing.T) {
	t.Parallel()
	c := startStack(t)
	b := newAPIWith(t, c, api.Config{KeepAlive: 100 * time.Millisecond, Guards: api.GuardConfig{
		BodyReadTimeout: time.Second, WriteTimeout: 3 * time.Second, StreamWriteTimeout: 5 * time.Second,
	}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.BaseURL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", b.Key)
	require.NoError(t, err)
	// Trickle one byte every 100 ms (for at most a minute) until the server answers.
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answered <- line
	}()
	var status string
trickle:
	for range 600 {
		select {
		case status = <-answered:
			break trickle
		case <-time.After(100 * time.Millisecond):
			if _, err := conn.Write([]byte(" ")); err != nil {
				status = <-answered
				break trickle
			}
		}
	}
	assert.Contains(t, status, "408", "the trickled body was cut")

	// The stream of a waiting run keeps sending keepalives well past WriteTimeout.
	id := cfCreate(t, b, "conformance-approval", nil)
	cfWaitStatus(t, b, id, "waiting-approval")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.BaseURL+"/v1/runs/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.Key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	keepalives := 0
	for keepalives < 50 && sc.Scan() {
		if sc.Text() == ":keepalive" {
			keepalives++
		}
	}
	assert.Equal(t, 50, keepalives, "50 keepalives 100 ms apart outlast a 3 s write timeout: %v", sc.Err())
	cfCancel(t, c, id)
}

// A resolve whose outcome does not come within the wait (the run is busy: its model
// round hangs) is answered 202 queued with an Idempotency-Key; repeated with that key
// once the run has taken it, it answers the outcome, and the turn is recorded once.
func TestQueuedResolveIsSafeToRepeat(t *testing.T) {
	t.Parallel()
	c := startFaultStack(t, "")
	b := newAPIWith(t, c, api.Config{Guards: api.GuardConfig{ResolveWait: 2 * time.Second}})
	fc := openFaultConv(t, b, "fault-echo")
	fc.say("first")

	blocker, stopBlocker := swapInBlockingWorker(t, c)
	fc.sendAccepted("second") // the turn is recorded before its round
	blocker.waitEntered(t)
	status, body := fc.send("third", "")
	require.Equal(t, 202, status, "queued behind the hanging round: %v", body)
	assert.Equal(t, "queued", body["status"])
	key, _ := body["idempotencyKey"].(string)
	require.NotEmpty(t, key)

	stopBlocker()
	require.NoError(t, c.Stack.StartWorker())
	fc.waitAgentTurns(3, 60*time.Second)
	status, body = post(b, b.Key, "/v1/runs/"+fc.runID+"/interrupts/"+faultNode, exchangeBody("third", ""), "Idempotency-Key", key)
	assert.Equal(t, 200, status, "the repeated request answers its outcome: %v", body)
	evs := fc.close()
	checkLog(t, evs, logCheck{Accepted: []string{"first", "second", "third"}, Ordered: true, Replies: true, Terminal: "run.completed"})
}
