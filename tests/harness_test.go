package tests

// The end-to-end harness: a whole host (embedded Temporal on SQLite, the real worker
// registration, the real Echo API) booted in-process through internal/stack, driven over
// HTTP as a client would.
//
// startStack(t) returns a client of one stack shared by the package's tests (started on
// first use, stopped after the last test). Tests that stop parts of a stack or restart
// it use startPrivateStack instead.
//
// Set TEMPORAL_ADDRESS to run the tests against an external Temporal server instead of
// the embedded one.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wop-dev/wop/api"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/webhooks"
	"github.com/wop-dev/wop/worker"
	"go.temporal.io/sdk/client"
)

// packsDir is the repository's packs folder, loaded by every harness stack.
const packsDir = "../packs"

var shared struct {
	once  sync.Once
	stack *stack.Stack
	key   string
	err   error
}

func TestMain(m *testing.M) {
	if os.Getenv(mcpStdioVar) == "1" {
		os.Exit(serveMCPStdio()) // the test binary as an MCP tool server (tools_e2e_test.go)
	}
	if os.Getenv(crashWorkerVar) == "1" {
		os.Exit(serveCrashWorker()) // the test binary as a tool worker to kill (crash_e2e_test.go)
	}
	code := m.Run()
	if shared.stack != nil {
		shared.stack.Stop()
	}
	stopAgentStack()
	stopStreamStack()
	stopOutageStack()
	os.Exit(code)
}

// apiClient talks to a stack's API as one test.
type apiClient struct {
	t *testing.T
	// BaseURL is the API's base URL, e.g. http://127.0.0.1:41234.
	BaseURL string
	// Key is a full-access bearer key of tenant "default".
	Key string
	// Stack is the stack behind the API (its Temporal client, catalog, parts).
	Stack *stack.Stack
	http  *http.Client
}

// startStack returns a client of the package's shared stack, starting it on first use.
// Tests that use it must not stop parts of it or depend on a clean slate: give runs
// unique ids and filter listings by them.
func startStack(t *testing.T) *apiClient {
	t.Helper()
	shared.once.Do(func() {
		shared.key = randomHex(16)
		shared.stack, shared.err = stack.Start(context.Background(), harnessOptions("", shared.key))
	})
	if shared.err != nil {
		t.Fatalf("start shared stack: %v", shared.err)
	}
	return newAPIClient(t, shared.stack, shared.key)
}

// stackOptions tune a private stack.
type stackOptions struct {
	// DataDir keeps the embedded server's SQLite file there; empty is in-memory.
	DataDir string
	// Key is the API key; empty generates one.
	Key string
	// Tweak, when set, changes the stack's options before it starts (its own packs,
	// lower Temporal limits, API limits).
	Tweak func(*stack.Options)
	// ForgivingMock lets the scripted mock answer off-script rounds (as wop dev does)
	// instead of failing them.
	ForgivingMock bool
	// PacksDir replaces the repository's packs folder.
	PacksDir string
	// ToolsFile is the worker's tool bindings file, and Env the environment its ${VAR}
	// references are read from.
	ToolsFile string
	Env       map[string]string
	// Logger receives the host's logs instead of the harness's.
	Logger *slog.Logger
	// Webhooks: deliveries may reach the test's loopback receivers, with this retry
	// policy.
	WebhookAllowPrivate bool
	WebhookDelivery     webhooks.WebhookDeliveryConfig
}

// startPrivateStack starts a stack of its own for a test that stops or restarts parts of
// it. It is stopped when the test ends (Stop is idempotent, so the test may stop it
// earlier).
func startPrivateStack(t *testing.T, o stackOptions) *apiClient {
	t.Helper()
	if o.Key == "" {
		o.Key = randomHex(16)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := harnessOptions(o.DataDir, o.Key)
	opts.Worker.MockStrict = !o.ForgivingMock
	if o.PacksDir != "" {
		opts.Worker.PacksDir = o.PacksDir
	}
	opts.Worker.ToolsFile = o.ToolsFile
	if o.Env != nil {
		opts.Worker.Getenv = func(k string) string { return o.Env[k] }
	}
	if o.Logger != nil {
		opts.Logger, opts.Worker.Logger = o.Logger, o.Logger
	}
	opts.API.WebhookAllowPrivate, opts.Worker.WebhookAllowPrivate = o.WebhookAllowPrivate, o.WebhookAllowPrivate
	opts.API.WebhookDelivery = o.WebhookDelivery
	if o.Tweak != nil {
		o.Tweak(&opts)
	}
	st, err := stack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start private stack: %v", err)
	}
	t.Cleanup(st.Stop)
	return newAPIClient(t, st, o.Key)
}

// restartStack stops c's stack and starts a new one with the same options (the same
// data folder and key), returning a client of the new one.
func restartStack(t *testing.T, c *apiClient) *apiClient {
	t.Helper()
	opts := c.Stack.Options()
	c.Stack.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := stack.Start(ctx, opts)
	if err != nil {
		t.Fatalf("restart stack: %v", err)
	}
	t.Cleanup(st.Stop)
	return newAPIClient(t, st, c.Key)
}

// harnessOptions are the options of every harness stack: free ports, the repository's
// packs, seeded fixtures, one full-access key, a strict scripted mock, quiet logs
// (WOP_TEST_LOG=1 for all).
func harnessOptions(dataDir, key string) stack.Options {
	wcfg := worker.DefaultConfig()
	wcfg.PacksDir = packsDir
	wcfg.ShutdownTimeout = time.Second
	// The tests' scripts are acceptance oracles: a round off script fails the run.
	wcfg.MockStrict = true
	webhookKey := []byte(randomHex(32)) // the API and the worker share it
	wcfg.WebhookSecret = webhookKey
	level := slog.LevelError
	if os.Getenv("WOP_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := stack.Options{
		DataDir:         dataDir,
		TemporalAddress: os.Getenv("TEMPORAL_ADDRESS"),
		Namespace:       os.Getenv("TEMPORAL_NAMESPACE"),
		SeedFixtures:    true,
		API: api.Config{
			// The public suite's quorum legs cast three votes with this one key, naming
			// their voters: it is a delegate, granted by name as an operator would.
			Keys:          []api.Key{{ID: "test", Secret: key, Tenant: "default", Scopes: harnessScopes}},
			TokenSecret:   []byte(randomHex(32)),
			WebhookSecret: webhookKey,
		},
		Worker:         wcfg,
		Logger:         logger,
		ServerLogLevel: slog.LevelError,
	}
	return opts
}

// harnessScopes are the scopes of the harness's key: every scope, approvals:delegate
// included.
var harnessScopes = api.KnownScopes

func newAPIClient(t *testing.T, st *stack.Stack, key string) *apiClient {
	return &apiClient{t: t, BaseURL: st.APIURL(), Key: key, Stack: st, http: &http.Client{Timeout: 30 * time.Second}}
}

// do sends a request with the client's key. body is JSON-encoded unless it is nil,
// []byte or string. It returns the status, the headers and the decoded JSON object of
// the response (nil when the body is empty or not a JSON object).
func (c *apiClient) do(method, path string, body any) (int, http.Header, map[string]any) {
	c.t.Helper()
	status, hdr, raw := c.doRaw(method, path, body, map[string]string{"Authorization": "Bearer " + c.Key})
	var obj map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &obj); err != nil {
			obj = nil
		}
	}
	return status, hdr, obj
}

// doRaw sends a request with exactly the given headers (no key unless given) and
// returns the raw response body.
func (c *apiClient) doRaw(method, path string, body any, headers map[string]string) (int, http.Header, []byte) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			c.t.Fatalf("encode request body: %v", err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, c.BaseURL+path, rd)
	if err != nil {
		c.t.Fatalf("build request %s %s: %v", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, raw
}

// furtherAPI tunes an API process served over a stack beside its own (serveAPI).
type furtherAPI struct {
	// Temporal replaces the stack's Temporal client.
	Temporal client.Client
	// PublicURL: the API knows its public URL (the test server's), as a deployed one
	// does (callback URLs are built from it, never from a request's Host).
	PublicURL bool
	// OwnServer puts the API behind the http.Server it builds for itself (its
	// timeouts), not the test server's default one.
	OwnServer bool
}

// serveAPI serves a further API process with cfg over c's Temporal client and catalog,
// as a second `wop api` would run (its own limiters and locks), until the test ends. It
// returns the API and its base URL; an API that cannot start returns its error.
func serveAPI(t *testing.T, c *apiClient, cfg api.Config, o furtherAPI) (*api.Server, string, error) {
	t.Helper()
	tc := o.Temporal
	if tc == nil {
		tc = c.Stack.Client()
	}
	ts := httptest.NewUnstartedServer(nil)
	if o.PublicURL {
		cfg.PublicURL = "http://" + ts.Listener.Addr().String()
	}
	srv, err := api.New(cfg, tc, c.Stack.Catalog(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		ts.Close()
		return nil, "", err
	}
	if o.OwnServer {
		ts.Config = srv.HTTPServer()
	} else {
		ts.Config.Handler = srv.Handler()
	}
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
	})
	return srv, ts.URL, nil
}

// clientAt is a client, as test t, of the API at baseURL over c's stack with key, whose
// requests time out after timeout.
func clientAt(t *testing.T, c *apiClient, baseURL, key string, timeout time.Duration) *apiClient {
	return &apiClient{t: t, BaseURL: baseURL, Key: key, Stack: c.Stack, http: &http.Client{Timeout: timeout}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }
