package packs

import (
	"path/filepath"
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
