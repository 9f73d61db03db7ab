package tests

// A write whose worker dies mid-call. The tool file_ticket (action_scope write, so
// attempted once) is a Temporal activity of another worker process — this test binary
// run as a worker (crashWorkerVar) — that applies the write at a recorder and is
// killed with SIGKILL before it answers. The model must read that the outcome is
// unknown, with the call's idempotency key, and its repeat of the call must carry the
// same key, so the recorder applies the write once.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/wop-dev/wop/packagent"
)

// crashWorkerVar makes the test binary a worker that serves FileTicket (see TestMain);
// the other crash* variables configure it.
const (
	crashWorkerVar   = "WOP_TESTS_CRASH_WORKER"
	crashQueueVar    = "WOP_TESTS_CRASH_QUEUE"
	crashRecorderVar = "WOP_TESTS_CRASH_RECORDER"
	crashHangVar     = "WOP_TESTS_CRASH_HANG"
)

// serveCrashWorker runs the FileTicket worker until the process is killed: each call
// posts its ActivityID (the call's idempotency key) and arguments to the recorder, and
// then, with crashHangVar set, never answers.
func serveCrashWorker() int {
	c, err := client.Dial(client.Options{
		HostPort: os.Getenv("TEMPORAL_ADDRESS"), Namespace: os.Getenv("TEMPORAL_NAMESPACE"),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := sdkworker.New(c, os.Getenv(crashQueueVar), sdkworker.Options{})
	hang := os.Getenv(crashHangVar) == "1"
	w.RegisterActivityWithOptions(func(ctx context.Context, args map[string]any) (map[string]any, error) {
		body, _ := json.Marshal(map[string]any{"key": activity.GetInfo(ctx).ActivityID, "args": args})
		resp, err := http.Post(os.Getenv(crashRecorderVar), "application/json", strings.NewReader(string(body)))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, err
		}
		if hang {
			select {} // applied; the answer never leaves: the process is killed here
		}
		return out, nil
	}, activity.RegisterOptions{Name: "FileTicket"})
	if err := w.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	select {}
}

// ticketRecorder applies each ticket once per idempotency key.
type ticketRecorder struct {
	mu      sync.Mutex
	keys    []string // every call's key, in arrival order
	applied map[string]string
}

func (r *ticketRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var call struct {
		Key string `json:"key"`
	}
	_ = json.NewDecoder(req.Body).Decode(&call)
	r.mu.Lock()
	r.keys = append(r.keys, call.Key)
	ticket, seen := r.applied[call.Key]
	if !seen {
		ticket = fmt.Sprintf("T-%d", len(r.applied)+1)
		r.applied[call.Key] = ticket
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ticket": ticket, "duplicate": seen})
}

func (r *ticketRecorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// startCrashWorker starts the test binary as a FileTicket worker and waits until it
// polls.
func startCrashWorker(t *testing.T, c *apiClient, queue, recorder string, hang bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashWorkerVar+"=1", crashQueueVar+"="+queue, crashRecorderVar+"="+recorder,
		"TEMPORAL_ADDRESS="+c.Stack.TemporalAddress(), "TEMPORAL_NAMESPACE="+c.Stack.Namespace())
	if hang {
		cmd.Env = append(cmd.Env, crashHangVar+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "the worker process ended before it was ready")
	case <-time.After(30 * time.Second):
		t.Fatal("the worker process was not ready within 30s")
	}
	return cmd
}

const crashPack = `id: crash-write
name: Crash write
version: 1.0.0
template_engine: { version: v1, syntax: "{{variable}}" }
tools:
  file_ticket:
    name: file_ticket
    description: File a support ticket.
    parameters: { type: object, properties: { subject: { type: string } }, required: [subject] }
    action_scope: { effect: write, reversibility: irreversible }
prompts:
  desk: { id: desk, name: Desk, version: 1.0.0, system_template: "File tickets with file_ticket.", tools: [file_ticket] }
  closed: { id: closed, name: Closed, version: 1.0.0, system_template: "Say goodbye." }
workflow:
  version: 2
  entry: desk
  states:
    desk: { prompt_task: desk, on_event: { Done: closed } }
    closed: { prompt_task: closed, terminal: true }
`

const crashMock = `mock:
  fail_when_exhausted: true
  rounds:
    - expect_state: desk
      expect_user: broken
      tool_calls: [{ name: file_ticket, args: { subject: broken screen } }]
    - expect_state: desk
      expect_tool_result: outcome unknown
      tool_calls: [{ name: file_ticket, args: { subject: broken screen } }]
    - expect_state: desk
      expect_tool_result: T-1
      text: Filed once, as T-1.
      tool_calls: [{ name: workflow__transition, args: { event: Done, context: filed } }]
    - expect_state: closed
      text: Goodbye.
`

// TestUnknownOutcomeAfterWorkerCrashE2E: the worker running the write is killed with
// SIGKILL after it applied it; the call times out, the model reads "outcome unknown,
// do not repeat; idempotency key K", and its repeat carries K, which the recorder
// applies once.
func TestUnknownOutcomeAfterWorkerCrashE2E(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crash-write.yaml"), []byte(crashPack), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crash-write.mock.yaml"), []byte(crashMock), 0o644))
	queue := "crash-tools-" + randomHex(4)
	file := writeBindings(t, `tools:
  file_ticket:
    activity: { type: FileTicket, task_queue: `+queue+`, start_to_close_timeout: 3s }
`)
	c := startPrivateStack(t, stackOptions{PacksDir: dir, ToolsFile: file})
	rec := &ticketRecorder{applied: map[string]string{}}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)

	first := startCrashWorker(t, c, queue, srv.URL, true)
	id := createRun(t, c, "crash-write", map[string]any{"message": "My screen is broken, file a ticket."})
	waitFor(t, 30*time.Second, "the write applied", rec.calls, func(k []string) bool { return len(k) == 1 })
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	killed := time.Now()

	startCrashWorker(t, c, queue, srv.URL, false)
	s := waitCompleted(t, c, id)
	t.Logf("the run completed %s after the worker was killed", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, "closed", s.Pack.State)

	keys := rec.calls()
	require.Len(t, keys, 2, "the write, then the model's repeat")
	require.Equal(t, keys[0], keys[1], "the repeat carries the first call's key")
	require.Len(t, rec.applied, 1, "applied once")

	returned := toolReturned(t, events(t, c, id))
	unknown := returned["call_0_0_file_ticket"]
	require.Equal(t, "error", unknown.Status)
	var out map[string]string
	require.NoError(t, json.Unmarshal(unknown.Outcome, &out))
	require.Equal(t, packagent.ToolStatusOutcomeUnknown, out["status"])
	require.Equal(t, keys[0], out["idempotencyKey"])
	require.Contains(t, out["error"], "outcome unknown, do not repeat; idempotency key "+keys[0])
	require.Contains(t, out["error"], "start-to-close timeout")
	require.JSONEq(t, `{"ticket":"T-1","duplicate":true}`, string(returned["call_1_0_file_ticket"].Outcome))
	turns := turnsIn(t, events(t, c, id))
	require.Equal(t, "Filed once, as T-1.\n\nGoodbye.", textOf(t, turns[len(turns)-1]))
	replayHistory(t, c, id, "pack-tool-outcome-unknown")
}
