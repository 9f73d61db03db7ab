//go:build !nodev

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDevSecretIsGeneratedOnceAndKept(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-key")
	v1, fromFile, err := devSecret(envMap(nil), "WOP_API_KEY", file, "wop_dev_", 8)
	if err != nil || !fromFile || !strings.HasPrefix(v1, "wop_dev_") || len(v1) != len("wop_dev_")+16 {
		t.Fatalf("first devSecret = %q, %v, %v", v1, fromFile, err)
	}
	v2, _, err := devSecret(envMap(nil), "WOP_API_KEY", file, "wop_dev_", 8)
	if err != nil || v2 != v1 {
		t.Fatalf("second devSecret = %q (%v), want the kept %q", v2, err, v1)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", st, err)
	}
	v3, fromFile, _ := devSecret(envMap(map[string]string{"WOP_API_KEY": "from-env"}), "WOP_API_KEY", file, "", 8)
	if v3 != "from-env" || fromFile {
		t.Errorf("env must win: %q %v", v3, fromFile)
	}
}

func TestDevUnwritableDataFolderIsOneLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := runDev(context.Background(), []string{"--data", filepath.Join(file, "data")}, envMap(nil), &out, &errb)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errb.String())
	}
	msg := errb.String()
	if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "wop dev: data folder ") || !strings.Contains(msg, "not writable") {
		t.Errorf("want one clear line, got %q", msg)
	}
}

func TestDevBadPortEnvIsAnError(t *testing.T) {
	var out, errb bytes.Buffer
	code := runDev(context.Background(), nil, envMap(map[string]string{"WOP_TEMPORAL_PORT": "seventy"}), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "WOP_TEMPORAL_PORT") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

func TestDevKeyIsShownMaskedAndKeptPrivate(t *testing.T) {
	key := "wop_dev_0123456789abcdef0123456789abcdef"
	if got := maskSecret(key); got != "wop_dev_…cdef" || strings.Contains(got, "0123456789") {
		t.Errorf("maskSecret = %q", got)
	}
	if got := maskSecret("short"); got != "*****" {
		t.Errorf("a short secret shows nothing: %q", got)
	}
	// A key file an earlier version left readable by others is narrowed on read.
	file := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, _, err := devSecret(envMap(nil), "WOP_API_KEY", file, "wop_dev_", 8); err != nil || v != key {
		t.Fatalf("devSecret = %q, %v", v, err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode after read: %v %v", st.Mode(), err)
	}
}
