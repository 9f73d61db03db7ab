package devserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

var testSAs = map[string]enumspb.IndexedValueType{
	"TestStatus": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"TestPack":   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// dialServer is a client of s's namespace, closed with the test, and a context for a
// call of 10 s.
func dialServer(t *testing.T, s *Server) (client.Client, context.Context) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.FrontendAddress(), Namespace: s.Namespace(), Logger: quietSDK()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c, ctx
}

func customSAs(t *testing.T, s *Server) map[string]enumspb.IndexedValueType {
	t.Helper()
	c, ctx := dialServer(t, s)
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
	if err != nil {
		t.Fatalf("ListSearchAttributes: %v", err)
	}
	return resp.GetCustomAttributes()
}

func TestInMemoryServerHasNamespaceAndSearchAttributes(t *testing.T) {
	s := start(t, Options{SearchAttributes: testSAs})
	if s.DBPath() != "" {
		t.Fatalf("in-memory server reports DB file %q", s.DBPath())
	}
	if !strings.HasPrefix(s.FrontendAddress(), "127.0.0.1:") {
		t.Fatalf("frontend address %q", s.FrontendAddress())
	}
	got := customSAs(t, s)
	for name, typ := range testSAs {
		if got[name] != typ {
			t.Errorf("search attribute %s = %v, want %v (have %v)", name, got[name], typ, got)
		}
	}
}

func TestFileDatabaseIsLockedAndGainsMissingSearchAttributes(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	// First start: no custom search attributes.
	s1, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatalf("first Start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, DBFileName)); err != nil {
		t.Fatalf("database file: %v", err)
	}
	// The file runs in WAL mode (FileAttributes): commits append to the log beside it.
	if _, err := os.Stat(filepath.Join(dir, DBFileName+"-wal")); err != nil {
		t.Fatalf("write-ahead log: %v", err)
	}

	// A second server on the same folder must refuse to start.
	_, err = Start(ctx, Options{DataDir: dir})
	var locked *LockedError
	if !errors.As(err, &locked) {
		s1.Stop()
		t.Fatalf("second Start on a locked folder: got %v, want *LockedError", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("lock error %q does not name the holder pid", err)
	}
	s1.Stop()

	// Restart on the same file, now asking for search attributes: they are added.
	s2 := start(t, Options{DataDir: dir, SearchAttributes: testSAs})
	got := customSAs(t, s2)
	for name := range testSAs {
		if _, ok := got[name]; !ok {
			t.Errorf("search attribute %s missing after restart: %v", name, got)
		}
	}
}

func TestBusyPortIsOneClearError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	for _, opts := range []Options{
		{FrontendPort: port},
		{UI: true, UIPort: port},
	} {
		start := time.Now()
		_, err := Start(context.Background(), opts)
		if !IsPortInUse(err) {
			t.Fatalf("Start(%+v) = %v, want a port-in-use error", opts, err)
		}
		if want := "127.0.0.1:" + strconv.Itoa(port) + " is already in use"; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("port check took %v; it must fail before the server starts", d)
		}
	}
}

func TestUnwritableDataFolder(t *testing.T) {
	// Permission bits do not stop root (CI runs as root), so use a path under a file.
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{DataDir: filepath.Join(file, "data")})
	if err == nil || !strings.Contains(err.Error(), "data folder") {
		t.Fatalf("Start under a file = %v, want a data folder error", err)
	}
}

func TestUIServesAssetsAndNamespaces(t *testing.T) {
	s := start(t, Options{UI: true})
	if s.UIURL() == "" {
		t.Fatal("UI URL empty with UI enabled")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(s.UIURL() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/"); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("GET / = %d, body %.80q", code, body)
	}
	if code, body := get("/api/v1/namespaces"); code != http.StatusOK || !strings.Contains(body, `"default"`) {
		t.Errorf("GET /api/v1/namespaces = %d, body %.200q", code, body)
	}
}

func quietSDK() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// The database and its journals are readable by their owner only, also when an earlier
// version left them wider.
func TestDataFilesAreOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := start(t, Options{DataDir: dir})
	s.Stop()
	db := filepath.Join(dir, DBFileName)
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, Options{DataDir: dir})
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("data folder: %v %v", st.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v; want owner only", e.Name(), perm)
		}
	}
}

func retention(t *testing.T, s *Server) time.Duration {
	t.Helper()
	c, ctx := dialServer(t, s)
	resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
	if err != nil {
		t.Fatalf("DescribeNamespace: %v", err)
	}
	return resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration()
}

// A new database's namespace keeps closed executions for DefaultRetention, not the
// server schema's 24 h; a database created with another retention takes the one asked
// for at the next start.
func TestNamespaceRetentionIsSetOnNewAndExistingDatabases(t *testing.T) {
	dir := t.TempDir()
	s1 := start(t, Options{DataDir: dir})
	if got := retention(t, s1); got != DefaultRetention {
		t.Errorf("new database: retention %s, want %s", got, DefaultRetention)
	}
	s1.Stop()
	s2 := start(t, Options{DataDir: dir, Retention: 90 * 24 * time.Hour})
	if got := retention(t, s2); got != 90*24*time.Hour {
		t.Errorf("existing database restarted with 90 days: retention %s", got)
	}
	s2.Stop()
	if _, err := Start(context.Background(), Options{DataDir: t.TempDir(), Retention: -time.Hour}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative retention: %v", err)
	}
}
