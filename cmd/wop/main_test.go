package main

import (
	"bytes"
	"strings"
	"testing"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestUnknownCommandAndHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"nope"}, envMap(nil), &out, &errb); code != 2 {
		t.Errorf("unknown command exit %d, want 2", code)
	}
	if !strings.Contains(errb.String(), `unknown command "nope"`) {
		t.Errorf("stderr %q", errb.String())
	}
	out.Reset()
	if code := run([]string{"help"}, envMap(nil), &out, &errb); code != 0 {
		t.Errorf("help exit %d", code)
	}
	for _, c := range []string{"dev", "worker", "api", "pack", "chat", "version"} {
		if !strings.Contains(out.String(), "  "+c+" ") {
			t.Errorf("help does not list %s:\n%s", c, out.String())
		}
	}
}

func TestVersionSaysWhatItIs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, envMap(nil), &out, &errb); code != 0 {
		t.Fatalf("version exit %d: %s", code, errb.String())
	}
	first := strings.SplitN(out.String(), "\n", 2)[0]
	if !strings.HasPrefix(first, "wop version ") || strings.HasPrefix(first, "wop dev") {
		t.Errorf("first line %q", first)
	}
	if !strings.Contains(out.String(), "embedded Temporal server") {
		t.Errorf("output %q", out.String())
	}
}

func TestWorkerRefusesToStartWithoutAProvider(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"worker"}, envMap(map[string]string{"GEMINI_API_KEY": "g-key"}), &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errb.String())
	}
	for _, want := range []string{"no model provider is configured", "WOP_MODEL_PROVIDER=mock serves the scripted mock on purpose"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr %q does not say %q", errb.String(), want)
		}
	}
	errb.Reset()
	if code := run([]string{"worker"}, envMap(map[string]string{"WOP_MODEL_PROVIDER": "bedrock"}), &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "WOP_MODEL") {
		t.Errorf("a provider missing its variables: exit %d, stderr %q", code, errb.String())
	}
}
