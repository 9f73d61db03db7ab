package tests

// `go test -bench` entry points of wop bench: each runs the bench's quick workloads
// against a fresh embedded stack and reports its figures as benchmark metrics, e.g.
//
//	go test ./tests -run '^$' -bench WopBench -benchtime 1x
//
// They assert nothing about speed; `wop bench` prints the same figures with targets.

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wop-dev/wop/bench"
)

// BenchmarkWopBenchQuick runs `wop bench --quick` once per iteration.
func BenchmarkWopBenchQuick(b *testing.B) {
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var out bytes.Buffer
		err := bench.Run(ctx, bench.Options{Quick: true}, &out)
		cancel()
		if err != nil {
			b.Fatalf("wop bench --quick: %v\n%s", err, out.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var res map[string]float64
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			b.Fatalf("last line is not the JSON result: %v\n%s", err, out.String())
		}
		for _, k := range []string{"floor_p50_ms", "exchange_p50_ms", "ratio_p50", "turns_per_s", "floor_turns_per_s",
			"history_bytes_turn5", "history_bytes_turn200", "idle_rss_mb"} {
			b.ReportMetric(res[k], k)
		}
		b.Log("\n" + out.String())
	}
}
