//go:build nodev

package main

import (
	"context"
	"fmt"
	"io"
)

// hasEmbeddedServer is false in a build with -tags nodev, which links neither the
// Temporal server nor its UI: the production image only needs `wop worker` and `wop api`.
const hasEmbeddedServer = false

var devCommand = command{"dev", "not in this build (built with -tags nodev)", func(_ context.Context, _ []string, _ func(string) string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "wop dev: this binary was built with -tags nodev and has no embedded Temporal server; use `go run ./cmd/wop dev` or a default build")
	return 1
}}

var benchCommand = command{"bench", "not in this build (built with -tags nodev)", func(_ context.Context, _ []string, _ func(string) string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "wop bench: this binary was built with -tags nodev and has no embedded Temporal server")
	return 1
}}
