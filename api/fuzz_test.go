package api

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func seedBodies(f *testing.F) {
	for _, s := range []string{
		`{"workflowId":"conformance-identity","inputs":{"payload":{"a":1}}}`,
		`{"workflowId":"conformance-noop","tags":["a"],"metadata":{"k":"v"},"configurable":{}}`,
		`{"workflowId":"x","inputs":null}`, `{"workflowId":7}`, `[]`, `null`, `{`, `{"a":1}{}`,
		`{"resumeValue":{"action":"accept"}}`, `{"operation":"exchange","turn":{"content":"hi"}}`,
		`{"event":"approved","context":"ok"}`, `{"nodeId":"gate","resumeValue":1}`,
		"{\"workflowId\":\"\u0000\"}", `{"workflowId":"../../etc"}`, `"\ud800"`,
		"{\"resumeValue\":\"\xff\xfe\"}", `{"resumeValue":{"a":1,"a":2}}`, `{"resumeValue":"\ud83d\ude00 \udc00"}`,
		`{"resumeValue":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeStrict: a body decodeStrict accepts is valid UTF-8 and has no duplicate
// key that changes how it reads (re-encoding its decoded form keeps every key).
func FuzzDecodeStrict(f *testing.F) {
	seedBodies(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		err := decodeStrict(body, &v)
		checkDecodeErr(t, err)
		if err != nil {
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("invalid UTF-8 accepted: %q", body)
		}
		if depth(v) > MaxJSONDepth {
			t.Fatalf("nesting deeper than %d accepted: %q", MaxJSONDepth, body)
		}
	})
}

func depth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	}
	return 0
}

// checkDecodeErr asserts a decoding error is a 4xx envelope error.
func checkDecodeErr(t *testing.T, err error) {
	if err == nil {
		return
	}
	var ae *Error
	if !errors.As(err, &ae) || ae.Status < 400 || ae.Status > 499 || ae.Code == "" || ae.Message == "" {
		t.Fatalf("decode error is not a 4xx envelope error: %#v", err)
	}
}

func FuzzDecodeRunRequest(f *testing.F) {
	seedBodies(f)
	cat := testCatalog(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeCreateRun(body)
		checkDecodeErr(t, err)
		if err != nil {
			return
		}
		if validateID("workflowId", req.WorkflowID) != nil {
			t.Fatalf("invalid workflowId %q accepted", req.WorkflowID)
		}
		if def, ok := cat.Definition(req.WorkflowID); ok {
			checkDecodeErr(t, validateInputs(def, req.Inputs))
		}
		_ = requestDigest("t", req)
	})
}

func FuzzDecodeResolveBody(f *testing.F) {
	seedBodies(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, withNode := range []bool{false, true} {
			rb, err := decodeResolveBody(body, withNode)
			checkDecodeErr(t, err)
			if err == nil && withNode && validateID("nodeId", rb.NodeID) != nil {
				t.Fatalf("invalid nodeId %q accepted", rb.NodeID)
			}
		}
	})
}

func FuzzVerifyToken(f *testing.F) {
	ts := newTokenSigner("k1", []byte("s"), nil)
	good := ts.sign(tokenClaims{RunID: "r_1", NodeID: "n", InterruptID: "i", Exp: 2000, Intent: IntentResolve})
	f.Add(good)
	f.Add("!!!not-a-valid-token!!!")
	f.Add("tok_abc")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Fuzz(func(t *testing.T, tok string) {
		cl, err := ts.verify(tok, time.Unix(1000, 0))
		if err == nil && tok != good {
			// Only a correctly signed token verifies; the claims must be what was signed.
			if cl.RunID != "r_1" || cl.InterruptID != "i" {
				t.Fatalf("forged token verified: %q -> %+v", tok, cl)
			}
		}
		_ = tokenError(err)
	})
}

// FuzzCreateRunHandler drives POST /v1/runs end to end over the mocked client: no
// body may produce a 5xx or a panic.
func FuzzCreateRunHandler(f *testing.F) {
	seedBodies(f)
	env := newTestEnv(f, func(c *Config) { c.RateLimitPerSecond, c.RateLimitBurst = 1e9, 1e9 })
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/runs", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+fullKey)
		rec := httptest.NewRecorder()
		env.srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
