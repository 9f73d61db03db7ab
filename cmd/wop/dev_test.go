//go:build !nodev

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/activities"
)

func TestDevSecretIsGeneratedOnceAndKept(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-key")
	v1, fromFile, err := devSecret(envMap(nil), "WOP_API_KEY", file, "wop_dev_", 8)
	if err != nil || !fromFile || !strings.HasPrefix(v1, "wop_dev_") || len(v1) != len("wop_dev_")+16 {
		t.Fatalf("first devSecret = %q, %v, %v", v1, fromFile, err)
	}
	v2, _, err := devSecret(envMap(nil), "WOP_API_KEY", file, "wop_dev_", 8)
	if err != nil || v2 != v1 {
		t.Fatalf("second devSecret = %q (%v), want the kept %q", v2, err, v1)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", st, err)
	}
	v3, fromFile, _ := devSecret(envMap(map[string]string{"WOP_API_KEY": "from-env"}), "WOP_API_KEY", file, "", 8)
	if v3 != "from-env" || fromFile {
		t.Errorf("env must win: %q %v", v3, fromFile)
	}
}

func TestDevUnwritableDataFolderIsOneLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runDev(context.Background(), []string{"--data", filepath.Join(file, "data")}, envMap(nil), &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errb.String())
	}
	msg := errb.String()
	if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "wop dev: data folder ") || !strings.Contains(msg, "not writable") {
		t.Errorf("want one clear line, got %q", msg)
	}
}

func TestDevBadPortEnvIsAnError(t *testing.T) {
	var out, errb bytes.Buffer
	code := runDev(context.Background(), nil, envMap(map[string]string{"WOP_TEMPORAL_PORT": "seventy"}), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "WOP_TEMPORAL_PORT") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

func TestDevKeyIsShownMaskedAndKeptPrivate(t *testing.T) {
	key := "wop_dev_0123456789abcdef0123456789abcdef"
	if got := maskSecret(key); got != "wop_dev_…cdef" || strings.Contains(got, "0123456789") {
		t.Errorf("maskSecret = %q", got)
	}
	if got := maskSecret("short"); got != "*****" {
		t.Errorf("a short secret shows nothing: %q", got)
	}
	// A key file an earlier version left readable by others is narrowed on read.
	file := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, _, err := devSecret(envMap(nil), "WOP_API_KEY", file, "wop_dev_", 8); err != nil || v != key {
		t.Fatalf("devSecret = %q, %v", v, err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode after read: %v %v", st.Mode(), err)
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a running command.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// devRun is a `wop dev` started by a test on free ports, with its banner and logs.
type devRun struct {
	out, errb *syncBuffer
	cancel    context.CancelFunc
	done      chan int
}

// startDev starts `wop dev` with its data in dataDir, the extra args and env (quiet logs
// unless env says otherwise), and waits for its banner; stop ends it and requires a
// clean exit.
func startDev(t *testing.T, dataDir string, args []string, env map[string]string) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &devRun{out: &syncBuffer{}, errb: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	t.Cleanup(cancel)
	all := map[string]string{"WOP_TEMPORAL_LOG_LEVEL": "error", "WOP_LOG_LEVEL": "warn"}
	for k, v := range env {
		all[k] = v
	}
	go func() {
		d.done <- runDev(ctx, append([]string{"--data", dataDir, "--http", "127.0.0.1:0", "--temporal-port", "0",
			"--ui-port", "0", "--workflow-cache", "32", "--shutdown-timeout", "1s"}, args...), envMap(all), d.out, d.errb)
	}()
	require.Eventually(t, func() bool { return strings.Contains(d.out.String(), "Press Ctrl-C") || len(d.done) > 0 },
		2*time.Minute, 50*time.Millisecond, "dev did not start: %s", d.errb.String())
	return d
}

// banner is the URL the banner shows on the line of label.
func (d *devRun) banner(t *testing.T, label string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  ` + label + ` +(http://\S+)`).FindStringSubmatch(d.out.String())
	require.NotNil(t, m, "the banner has a %s line: %s", label, d.out.String())
	return m[1]
}

// stop ends the dev process and requires a clean exit.
func (d *devRun) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	require.Equal(t, 0, <-d.done, "stderr: %s", d.errb.String())
}

// TestDevServesTheGoodPacksAndReportsBrokenOnesOnce starts wop dev on a packs folder
// with a broken pack and a pack whose mock script is broken: each is reported once,
// with its file:line:col, before the server starts, and the good pack serves.
func TestDevServesTheGoodPacksAndReportsBrokenOnesOnce(t *testing.T) {
	dir := t.TempDir()
	packsDir := filepath.Join(dir, "packs")
	require.NoError(t, os.MkdirAll(packsDir, 0o755))
	src, err := os.ReadFile("../../packs/support.yaml")
	require.NoError(t, err)
	files := map[string]string{
		"support.yaml":      string(src),
		"broken.yaml":       "id: broken\nname: Broken\nprompts:\n  chat:\n    id: chat\n   name: Chat\n",
		"badmock.yaml":      strings.Replace(string(src), "id: support\n", "id: badmock\n", 1),
		"badmock.mock.yaml": "rounds:\n  - expect_state: verifying\n    txt: hello\n",
	}
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(packsDir, name), []byte(body), 0o644))
	}
	d := startDev(t, filepath.Join(dir, "data"), []string{"--packs", packsDir}, nil)
	// The banner's inbox and metrics addresses answer.
	for _, line := range []string{"Inbox", "Metrics"} {
		u := d.banner(t, line)
		resp, err := http.Get(u)
		if assert.NoError(t, err) {
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, u)
		}
	}
	d.stop(t)
	out := d.out

	stderr := d.errb.String()
	broken := filepath.Join(packsDir, "broken.yaml")
	badmock := filepath.Join(packsDir, "badmock.mock.yaml")
	assert.Equal(t, 1, strings.Count(stderr, broken+" is not served:"), stderr)
	assert.Contains(t, stderr, broken+":6:4: error: YAML syntax error: did not find expected key")
	assert.Equal(t, 1, strings.Count(stderr, filepath.Join(packsDir, "badmock.yaml")+" is not served:"), stderr)
	assert.Contains(t, stderr, badmock+`:3:5: error: rounds[0]: unknown field "txt" (did you mean "text"?)`)
	assert.NotContains(t, stderr, "load packs from")
	assert.NotContains(t, stderr, "level=ERROR")
	assert.Contains(t, out.String(), "Packs        1 from "+packsDir+" (2 not served, see above)")
	assert.Contains(t, out.String(), "Model        scripted mock")
}

// TestDevSaysWhenTemporalAddressReplacesTheEmbeddedServer: an exported TEMPORAL_ADDRESS
// is used, and wop dev says so before it dials.
func TestDevSaysWhenTemporalAddressReplacesTheEmbeddedServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out, errb syncBuffer
	code := runDev(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0", "--packs", t.TempDir()},
		envMap(map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1"}), &out, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errb.String(), "TEMPORAL_ADDRESS is set (127.0.0.1:1): using that Temporal server instead of the embedded one")
}

func TestDevAcceptsTheWorkerTuningFlags(t *testing.T) {
	var out, errb bytes.Buffer
	// A bad value after the tuning flags shows that they parsed.
	code := runDev(context.Background(), []string{"--workflow-cache", "10", "--max-activities", "4", "--max-workflow-tasks", "4",
		"--workflow-pollers", "2", "--shutdown-timeout", "2s", "--log-level", "loud"}, envMap(nil), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), `log level "loud"`) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

// TestDevOpensSealedPayloadsInItsUI starts wop dev with a payload keys file: the banner
// says payloads are sealed, the embedded Temporal UI is configured with the API's codec
// endpoint, and that endpoint seals and opens payloads for the UI's origin without a
// key, while any other caller without a key is refused.
func TestDevOpensSealedPayloadsInItsUI(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "payload-keys.yaml")
	require.NoError(t, os.WriteFile(keys, []byte("keys:\n  - id: dev1\n    key: "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n"), 0o600))
	d := startDev(t, filepath.Join(dir, "data"), nil, map[string]string{"WOP_PAYLOAD_KEYS_FILE": keys})
	apiURL, uiURL := d.banner(t, "API"), d.banner(t, "Temporal UI")
	assert.Contains(t, d.out.String(), `sealed with AES-256-GCM under key "dev1"`)

	resp, err := http.Get(uiURL + "/api/v1/settings")
	require.NoError(t, err)
	var settings struct{ Codec struct{ Endpoint string } }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&settings))
	resp.Body.Close()
	assert.Equal(t, apiURL+"/codec", settings.Codec.Endpoint)

	post := func(path, body, origin string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, apiURL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}
	plain := `{"payloads":[{"metadata":{"encoding":"` + base64.StdEncoding.EncodeToString([]byte("json/plain")) + `"},"data":"` + base64.StdEncoding.EncodeToString([]byte(`"hello"`)) + `"}]}`
	status, sealed := post("/codec/encode", plain, uiURL)
	require.Equal(t, http.StatusOK, status, sealed)
	assert.Contains(t, sealed, base64.StdEncoding.EncodeToString([]byte("binary/encrypted")))
	status, opened := post("/codec/decode", sealed, uiURL)
	require.Equal(t, http.StatusOK, status, opened)
	assert.Contains(t, opened, base64.StdEncoding.EncodeToString([]byte(`"hello"`)))
	status, refused := post("/codec/decode", sealed, "")
	assert.Equal(t, http.StatusUnauthorized, status, refused)
	d.stop(t)
}

// TestDevDeliversWebhooksWithoutAnExportedKey: plain wop dev (no WOP_WEBHOOK_SECRET)
// makes one webhook key, kept in its data folder, and its API and worker share it: a
// webhook registered over the API gets a run's event, signed under the secret the
// registration returned. The key is never written to the output.
func TestDevDeliversWebhooksWithoutAnExportedKey(t *testing.T) {
	dir := t.TempDir()
	type got struct {
		header http.Header
		body   []byte
	}
	deliveries := make(chan got, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		deliveries <- got{r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	dev := startDev(t, filepath.Join(dir, "data"), []string{"--packs", t.TempDir()}, map[string]string{"WOP_WEBHOOK_ALLOW_PRIVATE": "true"})
	out, errb := dev.out, dev.errb
	apiURL := dev.banner(t, "API")
	apiKey, err := os.ReadFile(filepath.Join(dir, "data", devKeyFile))
	require.NoError(t, err)
	call := func(path string, body any) map[string]any {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, apiURL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(apiKey)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var v map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %v", path, v)
		return v
	}
	hook := call("/v1/webhooks", map[string]any{"url": recv.URL + "/hook", "events": []string{"run.completed"}})
	run := call("/v1/runs", map[string]any{"workflowId": "conformance-noop"})
	select {
	case d := <-deliveries:
		require.NoError(t, activities.VerifyWebhook(d.header, d.body, hook["secret"].(string), time.Now()))
		assert.Equal(t, hook["webhookId"], d.header.Get(activities.HeaderWebhookID))
		assert.Contains(t, string(d.body), run["runId"].(string))
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery; stderr: %s", errb.String())
	}
	dev.stop(t)
	key, err := os.ReadFile(filepath.Join(dir, "data", devWebhookFile))
	require.NoError(t, err)
	require.NotEmpty(t, strings.TrimSpace(string(key)))
	assert.NotContains(t, out.String()+errb.String(), strings.TrimSpace(string(key)), "the webhook key is never logged")
	assert.NotContains(t, errb.String(), "no webhook signing key")
}
