package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestPackListShowsThePacksServed(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"pack", "list", "--packs", "../../packs", "--json"}, envMap(nil), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Packs []packListEntry `json:"packs"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	ids := []string{}
	for _, p := range got.Packs {
		ids = append(ids, p.WorkflowID)
		if !strings.HasPrefix(p.Hash, "sha256:") || p.Entry == "" || p.States == 0 || !p.Mock {
			t.Errorf("pack %+v", p)
		}
	}
	if strings.Join(ids, ",") != "code-fix,orders,refund,support" {
		t.Errorf("packs %v", ids)
	}
	out.Reset()
	if code := run([]string{"pack", "list"}, envMap(map[string]string{"WOP_PACKS": "../../packs"}), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "WORKFLOW ID") || !strings.Contains(out.String(), "Refund Desk") {
		t.Errorf("table:\n%s", out.String())
	}
	errb.Reset()
	if code := run([]string{"pack", "list", "--packs", "../../packs/testdata/nowhere"}, envMap(nil), &out, &errb); code != 0 || !strings.Contains(errb.String(), "No packs") {
		t.Errorf("missing folder: exit %d, %q", code, errb.String())
	}
}
