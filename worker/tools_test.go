package worker

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wop-dev/wop/convo"
	"github.com/wop-dev/wop/tools"
)

func TestToolsFileFromEnvFlagAndDefault(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{"WOP_TOOLS": "/etc/wop/tools.yaml", "ORDERS_TOKEN": "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ToolsFile != "/etc/wop/tools.yaml" || cfg.Getenv("ORDERS_TOKEN") != "t" {
		t.Errorf("ToolsFile %q; Getenv must be the environment ConfigFromEnv read", cfg.ToolsFile)
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--tools", "mine.yaml"}); err != nil || cfg.ToolsFile != "mine.yaml" {
		t.Errorf("--tools: %q %v", cfg.ToolsFile, err)
	}

	dir := t.TempDir()
	cfg = Config{PacksDir: dir}
	if got := cfg.ToolsFilePath(); got != "" {
		t.Errorf("no tools.yaml, no file: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.yaml"), []byte("tools: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := cfg.ToolsFilePath(); got != filepath.Join(dir, "tools.yaml") {
		t.Errorf("default: %q", got)
	}
}

func TestLoadToolsRefusesABadFileWithItsLine(t *testing.T) {
	loaded, err := LoadPacks("../packs", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tools.yaml")
	bad := "tools:\n  track_order:\n    http: { url: http://x/ }\n  get_balance:\n    http:\n      url: http://x/\n      headers: { Authorization: \"Bearer ${BANK_TOKEN}\" }\n    approval: sometimes\n"
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadTools(context.Background(), Config{ToolsFile: file, Getenv: env(nil)}, loaded, nil)
	if err == nil {
		t.Fatal("a bad bindings file must refuse the start")
	}
	msg := err.Error()
	for _, want := range []string{
		file + ":7:33: error: tools.get_balance.http.headers.Authorization: ${BANK_TOKEN} is not set in the worker's environment",
		file + ":8:15: error: tools.get_balance.approval: must be never or required (got \"sometimes\")",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q:\n%s", want, msg)
		}
	}

	_, _, err = LoadTools(context.Background(), Config{ToolsFile: filepath.Join(dir, "nope.yaml")}, loaded, nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml does not exist") {
		t.Errorf("a missing file named by --tools is an error: %v", err)
	}
}

func TestLoadToolsMergesCodeAndFile(t *testing.T) {
	loaded, err := LoadPacks("../packs", nil)
	if err != nil {
		t.Fatal(err)
	}
	code := tools.NewSet()
	fn := func(context.Context, convo.ToolCallInput) (*convo.ToolCallResult, error) { return nil, nil }
	if err := code.Add("get_balance", tools.Binding{Executor: tools.Func(fn)}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{PacksDir: "../packs", Tools: code}
	for range 2 { // a stack started again with the same Config loads again
		set, report, err := LoadTools(context.Background(), cfg, loaded, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(set.Names(), ","); got != "get_balance,track_order" {
			t.Errorf("bound %s", got)
		}
		if len(report.Bound) != 2 || len(report.Diags) != 0 {
			t.Errorf("report %+v", report)
		}
		_ = set.Close()
	}
}
