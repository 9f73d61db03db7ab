package packs

import (
	"path/filepath"
	"reflect"
	"testing"
)

// TestUnboundedLoops: the loops a turn can spin in with nothing in the pack to stop them.
func TestUnboundedLoops(t *testing.T) {
	for file, want := range map[string][][]string{
		"rfc0014_example2.yaml":    nil,                                          // every way round meets a max_visits
		"rfc0005_example2.yaml":    nil,                                          // control: user everywhere
		"rfc0014_loops.yaml":       {{"spin_a", "spin_b"}, {"trap_a", "trap_b"}}, // bound_a's max_visits bounds the third
		"rfc0014_budget_loop.yaml": nil,                                          // the budget bounds it
		"host_caps.yaml":           {{"spin"}},                                   // capped's redirect leaves the loop
	} {
		p, diags, err := Load(filepath.Join("testdata", "packs", file))
		if err != nil {
			t.Fatalf("%s: %v\n%s", file, err, diags)
		}
		if got := p.UnboundedLoops(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: UnboundedLoops = %v, want %v", file, got, want)
		}
	}
}
