package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/tools"
	"github.com/wop-dev/wop/worker"
)

func validate(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"pack", "validate"}, args...), envMap(nil), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPackValidateChecksTheBindingsBesideThePacks(t *testing.T) {
	code, out, errOut := validate("../../packs")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"4 packs checked: 0 errors, 0 warnings\n",
		"Tool bindings ../../packs/tools.yaml:\n",
		"  orders/track_order  POST http://127.0.0.1:8099/track_order (read, retried)\n",
		"  warning: unbound, answered by the mock's tool_results: code-fix/apply_patch,",
		"  1 bound, 10 unbound: 0 errors, 0 warnings\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPackValidateRefusesABadBindingsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bindings.yaml")
	src := "tools:\n  track_order:\n    http: { url: http://x/, timeout: soon }\n  cancel_order:\n    http: { url: http://x/cancel }\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := validate("--tools", file, "../../packs/orders.yaml")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := file + `:3:38: error: tools.track_order.http.timeout: must be a positive duration such as 10s, 2m or 1m30s (got "soon")`
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}

	// With --json the bindings' diagnostics join the packs' in one array.
	code, out, _ = validate("--json", "--tools="+file, "../../packs/orders.yaml")
	var diags packs.Diagnostics
	if err := json.Unmarshal([]byte(out), &diags); err != nil || code != 1 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if len(diags) != 1 || diags[0].String() != want {
		t.Errorf("diagnostics %v", diags)
	}

	// A binding no pack declares is a warning.
	good := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(good, []byte("tools:\n  cancel_order:\n    http: { url: http://x/cancel }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = validate("--tools", good, "../../packs/orders.yaml")
	if code != 0 || !strings.Contains(out, good+":2:3: warning: tools.cancel_order: no loaded pack declares tool cancel_order; the binding is not used") ||
		!strings.Contains(out, "warning: unbound, answered by the mock's tool_results: orders/track_order") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestBannerSaysWhichToolsAreBound(t *testing.T) {
	loaded, err := worker.LoadPacks("../../packs", nil)
	if err != nil {
		t.Fatal(err)
	}
	set := tools.NewSet()
	if _, err := set.LoadFile("../../packs/tools.yaml", tools.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printTools(&out, "packs/tools.yaml", set.Check(context.Background(), loaded))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 ||
		lines[0] != "  Tools        1 bound, 10 unbound (bindings from packs/tools.yaml)" ||
		lines[1] != "                 orders/track_order  POST http://127.0.0.1:8099/track_order (read, retried)" ||
		!strings.HasPrefix(lines[2], "                 warning: unbound, answered by the mock's tool_results: code-fix/apply_patch") ||
		!strings.HasPrefix(lines[3], "                 refund/issue_refund waits for approval: ") {
		t.Errorf("banner:\n%s", out.String())
	}

	// A pack whose mock has no tool_results: its unbound tools get an error result.
	for i, l := range loaded {
		if l.Pack.ID == "support" {
			bare := *l
			mock := *l.Mock
			mock.ToolResults = nil
			bare.Mock = &mock
			loaded[i] = &bare
		}
	}
	out.Reset()
	printTools(&out, "packs/tools.yaml", set.Check(context.Background(), loaded))
	if want := "                 warning: unbound, calls get an error result: support/create_handoff_ticket, support/get_balance, support/get_recent_transactions, support/verify_account\n"; !strings.Contains(out.String(), want) {
		t.Errorf("banner lacks %q:\n%s", want, out.String())
	}
}

// TestPackValidateWarnsOfRetryForOnAWrite: retry_for on a tool whose calls are
// attempted once (an external tool, not idempotent) does nothing, and says so.
func TestPackValidateWarnsOfRetryForOnAWrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(file, []byte("tools:\n  issue_refund:\n    http: { url: http://x/refund }\n    retry_for: 6h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := validate("--tools", file, "../../packs/refund.yaml")
	want := file + ":2:3: warning: tools.issue_refund: tool issue_refund of pack refund has effect external, so its calls are attempted once and never wait out an outage"
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, want the warning %q:\n%s", code, want, out)
	}
}
