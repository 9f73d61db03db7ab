package activities

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/wop-dev/wop/internal/fakemodel"
)

// wireServer is an httptest server that answers each request with the next scripted
// response and records what it received, so tests run the real SDK code paths and
// assert the JSON that went over the wire.
type wireServer struct {
	*httptest.Server
	mu        sync.Mutex
	responses []wireResponse
	requests  []wireRequest
}

type wireResponse struct {
	status int
	header map[string]string
	body   string
}

type wireRequest struct {
	Method string
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    string
}

func newWireServer(t *testing.T, responses ...wireResponse) *wireServer {
	t.Helper()
	ws := &wireServer{responses: responses}
	ws.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		ws.mu.Lock()
		ws.requests = append(ws.requests, wireRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: string(raw)})
		var resp wireResponse
		if len(ws.responses) > 0 {
			resp, ws.responses = ws.responses[0], ws.responses[1:]
		} else {
			resp = wireResponse{status: 500, body: `{"error":{"message":"test server has no more responses"}}`}
		}
		ws.mu.Unlock()
		for k, v := range resp.header {
			w.Header().Set(k, v)
		}
		if stream, _ := body["stream"].(bool); stream && resp.status == http.StatusOK && w.Header().Get("Content-Type") == "" {
			writeStreamed(w, r.URL.Path, resp.body)
			return
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(resp.status)
		_, _ = io.WriteString(w, resp.body)
	}))
	t.Cleanup(ws.Close)
	return ws
}

// writeStreamed answers a streamed request with the scripted answer as the provider
// streams it (fakemodel): a completion or message body becomes its events; a body that
// is not JSON is sent as the data of a single event, as a broken stream would.
func writeStreamed(w http.ResponseWriter, path, body string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	var events []fakemodel.Event
	var err error
	if strings.HasSuffix(path, "/chat/completions") {
		events, err = fakemodel.OpenAIChunks([]byte(body))
		events = append(events, fakemodel.Event{Data: []byte("[DONE]")})
	} else {
		events, err = fakemodel.AnthropicEvents([]byte(body))
	}
	if err != nil {
		events = []fakemodel.Event{{Name: "message_start", Data: []byte(body)}}
		if strings.HasSuffix(path, "/chat/completions") {
			events[0].Name = ""
		}
	}
	for _, ev := range events {
		if ev.Name != "" {
			_, _ = io.WriteString(w, "event: "+ev.Name+"\n")
		}
		_, _ = io.WriteString(w, "data: "+string(ev.Data)+"\n\n")
	}
}

func (ws *wireServer) got() []wireRequest {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]wireRequest(nil), ws.requests...)
}

// jsonOf re-marshals a decoded request fragment so tests can compare it with JSONEq.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
