package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wop-dev/wop/workflows"
)

// chromiumPath finds a Chromium or Chrome binary: WOP_CHROMIUM, else the usual names
// on PATH (Debian's package is chromium).
func chromiumPath() string {
	if p := os.Getenv("WOP_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where tests write files worth looking at after a run (screenshots):
// WOP_TEST_ARTIFACTS, else wop-test-artifacts in the system's temporary folder.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("WOP_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "wop-test-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// card is the CSS selector of the inbox card of a run's interrupt of a waiting kind,
// followed by a selector inside it when inner is given.
func card(runID, kind string, inner ...string) chromedp.CSS {
	sel := fmt.Sprintf(`li.item[data-run-id=%q][data-kind=%q]`, runID, kind)
	for _, in := range inner {
		sel += " " + in
	}
	return chromedp.CSS(sel)
}

// TestInboxInChromium drives the approvals inbox in a real headless Chromium: a person
// signs in with a key, sees the approvals and the pack's decision waiting on them (one
// of them arriving while the page is open, over SSE) but not the customer's chat, which
// waits for its customer, and the refund waiting for its reviewer once, as its
// decision; on request the chat is shown too, read-only. The person approves one
// approval, rejects another with a reason and injects the pack's decision; the runs
// move on as they would through the API.
func TestInboxInChromium(t *testing.T) {
	browser := chromiumPath()
	if browser == "" {
		t.Skip("no Chromium binary found (install the Debian package chromium, or set WOP_CHROMIUM): the inbox is not tested in a browser")
	}
	t.Parallel()
	k := keysFileAPI(t, startStack(t))
	a := k.A

	approve := cfCreate(t, a, "conformance-approval", nil)
	reject := cfCreate(t, a, "conformance-approval", nil)
	chat := cfCreate(t, a, "support", map[string]any{"message": "Hi, I have a question about my account."})
	refund := cfCreate(t, a, "refund", map[string]any{"message": "Hi, I'd like a refund, my jacket arrived torn."})
	for _, id := range []string{approve, reject, chat} {
		cfWaitStatus(t, a, id, "waiting-approval")
	}
	// The refund pack files the request on the customer's second message and waits in
	// its external state for a reviewer's decision.
	cfWait(t, a, refund, 20*time.Second, "answered", func(s map[string]any) bool {
		turns, _ := s["channels"].(map[string]any)["conversation"].([]any)
		return len(turns) >= 3
	})
	status, body := cfResolve(t, a, a.Key, refund, "agent", map[string]any{"resumeValue": map[string]any{"text": "It's order ORD-1042."}})
	require.Equal(t, 200, status, "%v", body)
	cfWaitStatus(t, a, refund, "waiting-external")
	// An approval of a tool call whose arguments the approver may edit: the approval gate
	// with data shaped like a consequential tool call's (name, arguments, action_scope).
	// The API serves no such workflow, so it is started on Temporal directly.
	tool := wfStart(t, a.Stack, "inbox-tool-"+randomHex(6), "conformance-approval", "", func(in *workflows.RunInput) {
		d := *in.Definition
		d.Nodes = append([]workflows.Node(nil), d.Nodes...)
		d.Nodes[0].Config = json.RawMessage(`{"title": "Issue a refund", "description": "The assistant wants to refund order ORD-1042.",
			"actions": ["accept", "reject", "edit-accept"],
			"artifactData": {"toolName": "issue_refund", "arguments": {"order_id": "ORD-1042", "amount": 89.9, "currency": "USD"}, "action_scope": "write"}}`)
		in.Definition = &d
		in.Owner = workflows.Owner{Tenant: k.TenantA, Principal: "acme-ops"}
	}).GetID()
	cfWaitStatus(t, a, tool, "waiting-approval")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 1800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...), what)
	}
	text := func(sel chromedp.CSS) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		require.NoError(t, err, "text of %s", sel)
		return v
	}
	attr := func(sel chromedp.CSS, name string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Attributes(sel))
		require.NoError(t, err, "attributes of %s", sel)
		return v[name]
	}
	screenshot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		file := filepath.Join(artifactDir(t), name)
		require.NoError(t, os.WriteFile(file, shot, 0o644))
		t.Logf("inbox screenshot: %s", file)
	}

	// Sign in with the key; the cards of what waits appear.
	run("open and sign in",
		chromedp.Navigate(a.BaseURL+"/inbox"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		chromedp.SendKeys(chromedp.CSS(`#key`), a.Key),
		chromedp.Click(chromedp.CSS(`#signin-button`)),
		chromedp.WaitVisible(card(approve, "approval")),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
	)
	// A run that starts waiting while the page is open shows up by itself (SSE).
	late := cfCreate(t, a, "conformance-approval", nil)
	run("see every card",
		chromedp.WaitVisible(card(late, "approval")),
		chromedp.WaitVisible(card(reject, "approval")),
		chromedp.WaitVisible(card(refund, "external-event")),
		chromedp.WaitVisible(card(tool, "approval")),
	)
	// count is the number of cards of a run on the page.
	count := func(runID string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('li.item[data-run-id=%q]').length`, runID)))
		require.NoError(t, err)
		return n
	}
	// The frame that brought the late approval lists everything waiting: the chat,
	// which waited before any of them, is not operator work.
	assert.Zero(t, count(chat), "a chat waiting for its customer is not in the operators' inbox")
	assert.Equal(t, 1, count(refund), "the refund waiting for its reviewer is one card, its decision")
	assert.Equal(t, "Approve the conformance run", text(card(approve, "approval", "h3")))
	assert.Contains(t, text(card(refund, "external-event", ".turns")), "filed your refund request", "the decision's card shows the conversation's last turns")
	events := text(card(refund, "external-event", ".actions"))
	assert.Contains(t, events, "Approved")
	assert.Contains(t, events, "Rejected")
	toolCall := strings.ToLower(text(card(tool, "approval", ".block")))
	for _, want := range []string{"tool call", "issue_refund", "action scope: write", "order_id", "ord-1042", "amount", "89.9"} {
		assert.Contains(t, toolCall, want, "the tool call block")
	}
	screenshot("inbox.png")

	// On request the chats waiting for their users are shown too, read-only: the inbox
	// does not answer in a customer's name.
	run("show the users' chats",
		chromedp.Click(chromedp.CSS(`#with-users`)),
		chromedp.WaitVisible(card(chat, "conversation")))
	assert.Equal(t, "user", attr(card(chat, "conversation"), "data-answered-by"))
	assert.Contains(t, text(card(chat, "conversation", ".turns")), "What is your account number?", "the chat's card shows the agent's last turn")
	assert.Contains(t, text(card(chat, "conversation", ".note")), "waits for its user")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('li.item[data-run-id=%q] textarea').length`, chat)))
	require.NoError(t, err)
	assert.Zero(t, n, "no reply box on a chat its user answers")
	assert.Equal(t, 1, count(refund), "still one card for the refund")
	run("hide them again",
		chromedp.Click(chromedp.CSS(`#with-users`)),
		chromedp.WaitNotPresent(card(chat, "conversation")))
	cfCancel(t, a, chat)

	// Edit the tool call's arguments and approve them.
	edited := `{"toolName":"issue_refund","arguments":{"order_id":"ORD-1042","amount":45,"currency":"USD"},"action_scope":"write"}`
	run("edit and approve",
		chromedp.Click(card(tool, "approval", `button[data-action="edit-accept"]`)),
		chromedp.WaitVisible(card(tool, "approval", `textarea[name="edited"]`)),
		chromedp.SetValue(card(tool, "approval", `textarea[name="edited"]`), edited),
		chromedp.Click(card(tool, "approval", `button[data-submit="Approve edited"]`)),
		chromedp.WaitNotPresent(card(tool, "approval")))
	assert.Equal(t, "completed", cfWaitTerminal(t, a, tool)["status"])
	got := approvalReceived(t, a, tool, "action", "editedArtifactData")
	assert.Equal(t, "edit-accept", got["action"])
	assert.JSONEq(t, edited, string(mustMarshal(t, got["editedArtifactData"])))

	// Approve one approval.
	run("approve",
		chromedp.Click(card(approve, "approval", `button[data-action="accept"]`)),
		chromedp.WaitNotPresent(card(approve, "approval")))
	assert.Equal(t, "completed", cfWaitTerminal(t, a, approve)["status"])
	assert.Equal(t, map[string]any{"action": "accept", "decidedBy": "acme-ops"}, approvalReceived(t, a, approve, "action", "decidedBy"))

	// Reject another with a reason.
	run("reject with a reason",
		chromedp.Click(card(reject, "approval", `button[data-action="reject"]`)),
		chromedp.WaitVisible(card(reject, "approval", `textarea[name="reason"]`)),
		chromedp.SendKeys(card(reject, "approval", `textarea[name="reason"]`), "The amount is over the limit."),
		chromedp.Click(card(reject, "approval", `button[data-submit="Reject"]`)),
		chromedp.WaitNotPresent(card(reject, "approval")))
	ended := cfWaitTerminal(t, a, reject)
	assert.Equal(t, "failed", ended["status"])
	assert.Equal(t, "approval_rejected", ended["error"].(map[string]any)["code"])
	assert.Equal(t, map[string]any{"action": "reject", "feedback": "The amount is over the limit."}, approvalReceived(t, a, reject, "action", "feedback"))

	// Decide the refund: the event the pack's external state waits for, with context.
	run("decide the refund",
		chromedp.SendKeys(card(refund, "external-event", `textarea[name="context"]`), "Approved 89.90 USD, ref APR-7731"),
		chromedp.Click(card(refund, "external-event", `button[data-event="Approved"]`)),
		chromedp.WaitNotPresent(card(refund, "external-event")))
	// The refund pack acts with approval: issue_refund's call waits for its own
	// decision, which the inbox shows as a tool call and approves.
	run("see the refund's payment", chromedp.WaitVisible(card(refund, "approval")))
	payment := strings.ToLower(text(card(refund, "approval", ".block")))
	for _, want := range []string{"tool call", "issue_refund", "external", "ord-1042", "89.90"} {
		assert.Contains(t, payment, want, "the payment's tool call block")
	}
	run("approve the refund's payment",
		chromedp.Click(card(refund, "approval", `button[data-action="accept"]`)),
		chromedp.WaitNotPresent(card(refund, "approval")))
	done := cfWaitTerminal(t, a, refund)
	assert.Equal(t, "completed", done["status"])
	assert.Equal(t, "refunded", done["pack"].(map[string]any)["state"])

	// What remains is the late approval alone.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		remaining, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('li.item:not([hidden])').length`))
		if assert.NoError(c, err) {
			assert.Equal(c, 1, remaining)
		}
	}, 15*time.Second, 100*time.Millisecond)
	screenshot("inbox-after.png")
	cfCancel(t, a, late)
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// approvalReceived returns the named fields of the run's approval.received payload.
func approvalReceived(t *testing.T, c *apiClient, runID string, fields ...string) map[string]any {
	t.Helper()
	for _, ev := range cfEvents(t, c, runID) {
		if ev.Type != "approval.received" {
			continue
		}
		var p map[string]any
		require.NoError(t, json.Unmarshal(ev.Payload, &p))
		out := map[string]any{}
		for _, f := range fields {
			if v, ok := p[f]; ok {
				out[f] = v
			}
		}
		return out
	}
	t.Fatalf("run %s has no approval.received event", runID)
	return nil
}
