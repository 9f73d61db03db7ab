package packs

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplePacksLoadCleanly loads every example pack in this folder with its mock script
// and requires zero errors and zero warnings.
func TestExamplePacksLoadCleanly(t *testing.T) {
	loaded, diags, err := LoadDir(".")
	for _, d := range diags {
		t.Log(d.String())
	}
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if len(diags) != 0 {
		t.Errorf("example packs produce %d diagnostics, want none", len(diags))
	}
	ids := map[string]bool{}
	for _, l := range loaded {
		ids[l.Pack.ID] = true
		if l.Mock == nil {
			t.Errorf("%s: no mock script beside the pack", l.Path)
		}
		if filepath.Dir(l.Path) != "." {
			t.Errorf("unexpected path %s", l.Path)
		}
	}
	for _, id := range []string{"support", "code-fix", "refund", "orders"} {
		if !ids[id] {
			t.Errorf("example pack %q not loaded", id)
		}
	}
}

// TestRefundScriptSaysWhetherThePaymentWasMade plays the refund script to its payment
// with each answer the model can read back from issue_refund: paid, rejected by the
// approver (or expired), of unknown outcome, failed. The customer is told which.
func TestRefundScriptSaysWhetherThePaymentWasMade(t *testing.T) {
	m, _, err := LoadMock("refund.mock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lookup := `{"order_id":"ORD-1042","status":"delivered"}`
	before := []MockSeen{
		{State: "intake", User: "Hi, I'd like a refund, my jacket arrived torn.", HasUser: true},
		{State: "intake", User: "It's order ORD-1042.", HasUser: true},
		{State: "intake", User: "It's order ORD-1042.", HasUser: true, ToolResult: lookup, HasToolResult: true},
		{State: "refunded", User: "It's order ORD-1042.", HasUser: true, ToolResult: lookup, HasToolResult: true},
	}
	if ans := m.Play(before); ans.Round == nil || len(ans.Round.ToolCalls) != 1 || ans.Round.ToolCalls[0].Name != "issue_refund" {
		t.Fatalf("the refunded state calls issue_refund first: %+v", ans)
	}
	for result, want := range map[string]string{
		`{"amount":"89.90","refund_id":"RF-55210","status":"issued"}`:                                 "has been issued",
		`{"error":"issue_refund was not run: fin rejected the call","reason":"","status":"rejected"}`: "nothing has been paid",
		`{"error":"issue_refund was not run: nobody decided","reason":"expired","status":"rejected"}`: "nothing has been paid",
		`{"error":"outcome unknown","idempotencyKey":"K","status":"outcome_unknown"}`:                 "could not confirm",
		`{"error":"tool issue_refund failed: POST … answered HTTP 500"}`:                              "failed on our side",
	} {
		seen := append(append([]MockSeen(nil), before...), MockSeen{State: "refunded", User: "It's order ORD-1042.", HasUser: true, ToolResult: result, HasToolResult: true})
		ans := m.Play(seen)
		if ans.Round == nil || !strings.Contains(ans.Round.Text, want) {
			t.Errorf("after %s the customer reads %+v, want a text saying %q", result, ans.Round, want)
		}
	}
}
