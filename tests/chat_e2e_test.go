package tests

// wop chat driven through a pseudo-terminal against a real stack: what a person at a
// terminal sees (prompt, colour, thinking indicator, tool calls, the external wait) and
// what the chat does when `wop dev` restarts under it.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/chat"
	"github.com/wop-dev/wop/internal/stack"
	"github.com/wop-dev/wop/protocol"
)

// terminal is a pseudo-terminal running `wop chat` in-process: the chat reads and
// writes the terminal's tty, the test types into and reads from its master side.
type terminal struct {
	t        *testing.T
	ptmx     *os.File
	mu       sync.Mutex
	raw      strings.Builder // everything the chat wrote, escape sequences included
	done     chan int
	cancel   context.CancelFunc
	readDone chan struct{}
}

func startChat(t *testing.T, env map[string]string, args ...string) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	require.NoError(t, pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 200}))
	ctx, cancel := context.WithCancel(context.Background())
	term := &terminal{t: t, ptmx: ptmx, done: make(chan int, 1), cancel: cancel, readDone: make(chan struct{})}
	go func() {
		defer close(term.readDone)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			term.mu.Lock()
			term.raw.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		term.done <- chat.RunEnv(ctx, args, func(k string) string { return env[k] }, tty, tty, tty)
	}()
	t.Cleanup(func() {
		cancel()
		_ = tty.Close()
		_ = ptmx.Close()
	})
	return term
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// screen is what the chat wrote, without escape sequences and carriage returns.
func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return strings.ReplaceAll(ansi.ReplaceAllString(term.raw.String(), ""), "\r", "")
}

func (term *terminal) rawOutput() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.raw.String()
}

// waitFor waits until the screen shows text (count times, at least).
func (term *terminal) waitFor(text string, count ...int) {
	term.t.Helper()
	n := 1
	if len(count) > 0 {
		n = count[0]
	}
	require.EventuallyWithT(term.t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, strings.Count(term.screen(), text), n, "the terminal does not show %q (%d times)", text, n)
	}, 60*time.Second, 20*time.Millisecond, "screen:\n%s", term.screenTail())
}

func (term *terminal) screenTail() string {
	s := term.screen()
	if len(s) > 3000 {
		s = s[len(s)-3000:]
	}
	return s
}

// typeLine types a line and presses Enter.
func (term *terminal) typeLine(line string) {
	term.t.Helper()
	_, err := io.WriteString(term.ptmx, line+"\r")
	require.NoError(term.t, err)
}

// exit waits for the chat to end and returns its exit code.
func (term *terminal) exit() int {
	term.t.Helper()
	select {
	case code := <-term.done:
		return code
	case <-time.After(60 * time.Second):
		term.t.Fatalf("wop chat did not end; screen:\n%s", term.screenTail())
		return -1
	}
}

var startedRe = regexp.MustCompile(`Started run (\S+) of refund`)

// TestChatThroughAPseudoTerminal holds a refund conversation through wop chat on a
// pseudo-terminal: a prompt, colour, the thinking indicator, a tool call; the external
// wait for the reviewer is shown with the call that resolves it, and a line typed then
// is not sent; the stack restarts under the chat, which reconnects and goes on; the
// reviewer's approval arrives; the chat ends with the run id. Attached again, it shows
// the whole conversation, the user's lines too, and without colour under NO_COLOR.
func TestChatThroughAPseudoTerminal(t *testing.T) {
	t.Parallel()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // the same address after the restart
	c := startPrivateStack(t, stackOptions{DataDir: t.TempDir(), Tweak: func(o *stack.Options) { o.HTTPAddr = httpAddr }})
	key := c.Key

	term := startChat(t, map[string]string{"TERM": "xterm-256color"}, "--api", c.BaseURL, "--key", key, "refund")
	term.waitFor("you › ")
	m := startedRe.FindStringSubmatch(term.screen())
	require.NotNil(t, m, "screen:\n%s", term.screen())
	runID := m[1]
	assert.Contains(t, term.rawOutput(), "\x1b[1;32myou › ", "the prompt is in colour on a terminal")

	term.typeLine("Hi, I'd like a refund, my jacket arrived torn.")
	term.waitFor("refund: I'm sorry the jacket arrived damaged.")
	assert.Contains(t, term.screen(), "thinking…", "an indicator shows while the agent works")
	assert.Contains(t, term.rawOutput(), "\x1b[1;36mrefund: ", "the agent's name is in colour")

	term.typeLine("It's order ORD-1042.")
	term.waitFor("⚙ lookup_order(order_id: ORD-1042)")
	term.waitFor("── state intake → awaiting_approval (RefundRequested)")
	term.waitFor("⏸ The run waits for an external event (Approved or Rejected) at node agent.")
	term.waitFor(`"event":"Approved"`)

	// A shell command typed into the chat by mistake is not sent to the agent.
	term.typeLine(`curl -s -X POST ` + c.BaseURL + `/v1/runs/` + runID + `/interrupts/agent -d '{"resumeValue":{"event":"Approved"}}'`)
	term.waitFor("not sent: the run waits for an external event (Approved or Rejected) at node agent")
	s := snapshot(t, c, runID)
	assert.Equal(t, protocol.StatusWaitingExternal, s.Status)
	assert.Equal(t, 3, s.Pack.ModelRounds, "no round ran for the refused line")

	// wop dev stops under the chat, which says so and keeps trying, then starts again.
	opts := c.Stack.Options()
	c.Stack.Stop()
	term.waitFor("· Lost the connection to " + c.BaseURL + "; reconnecting…")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	st2, err := stack.Start(ctx2, opts)
	require.NoError(t, err)
	t.Cleanup(st2.Stop)
	c = newAPIClient(t, st2, key)
	term.waitFor("· Reconnected.")

	// /say talks to the agent while the reviewer decides; the answer comes through the
	// reconnected stream.
	term.typeLine("/say Any news on my refund?")
	term.waitFor("refund: Your refund request for order ORD-1042 ($89.90) is with a reviewer")

	status, _, body := c.do(http.MethodPost, "/v1/runs/"+runID+"/interrupts/"+packNode,
		map[string]any{"resumeValue": map[string]any{"event": "Approved", "context": "Approved 89.90 USD, ref APR-7731"}})
	require.True(t, status >= 200 && status < 300, "approve: %d %v", status, body)
	term.waitFor("── state awaiting_approval → refunded (Approved, external)")
	term.waitFor("⚙ issue_refund(")
	// The refund pack acts with approval: the payment waits for its own decision, which
	// the chat shows and does not take from the keyboard.
	term.waitFor("⏸ issue_refund(amount: 89.90")
	term.waitFor(`{"resumeValue":{"action":"accept"}}`)
	term.typeLine("/say is it paid?")
	term.waitFor("not sent: the agent's issue_refund call waits for approval")
	status, _, body = c.do(http.MethodPost, "/v1/runs/"+runID+"/interrupts/"+packNode, map[string]any{"resumeValue": map[string]any{"action": "accept"}})
	require.Equal(t, http.StatusOK, status, "accept the refund: %v", body)
	term.waitFor("refund: Good news: your refund of $89.90")
	term.waitFor(fmt.Sprintf("· Run %s completed.", runID))
	assert.Equal(t, chat.ExitOK, term.exit())

	// Attached again: the whole conversation, without colour under NO_COLOR.
	again := startChat(t, map[string]string{"TERM": "xterm-256color", "NO_COLOR": "1"}, "--api", c.BaseURL, "--key", key, runID)
	assert.Equal(t, chat.ExitOK, again.exit())
	again.waitFor(fmt.Sprintf("· Run %s completed.", runID))
	screen := again.screen()
	for _, line := range []string{
		"you: Hi, I'd like a refund, my jacket arrived torn.",
		"refund: I'm sorry the jacket arrived damaged.",
		"you: It's order ORD-1042.",
		"you: Any news on my refund?",
		"refund: Good news: your refund of $89.90",
	} {
		assert.Contains(t, screen, line)
	}
	assert.NotContains(t, screen, "you: curl", "the refused line never reached the run")
	assert.NotContains(t, screen, "you: is it paid?", "nor the line sent while the payment waited")
	assert.NotContains(t, again.rawOutput(), "\x1b[1;", "no colour under NO_COLOR")
}
