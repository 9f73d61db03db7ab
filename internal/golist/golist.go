// Package golist lists packages with the go command, for the tests that keep the
// module's import graph in shape (engine/deps_test.go, cmd/wop/deps_test.go).
package golist

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Deps runs `go list -deps` with args (flags, then packages) and returns the packages
// it lists, those named included.
func Deps(args ...string) ([]string, error) {
	gocmd, err := command()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(gocmd, append([]string{"list", "-deps"}, args...)...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out)), nil
}

// command is the go command: the one on PATH, else the one of the toolchain that
// built the running binary, which a `go test` always has.
func command() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	//lint:ignore SA1019 the fallback is for a test binary, run where it was built: the toolchain's root is there.
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(p); err != nil {
		return "", fmt.Errorf("no go command on PATH nor at %s: %w", p, err)
	}
	return p, nil
}
