package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/wop-dev/wop/chat"
)

// runPack is `wop pack <subcommand>`.
func runPack(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: wop pack validate [--json] [--tools FILE] PATH...")
		fmt.Fprintln(stderr, "       wop pack list [--packs FOLDER] [--json]")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "validate":
		return runPackValidate(ctx, args[1:], stdout, stderr)
	case "list":
		return runPackList(args[1:], env, stdout, stderr)
	}
	fmt.Fprintf(stderr, "wop pack: unknown subcommand %q (want validate or list)\n", args[0])
	return 2
}

// runChat is `wop chat`: a terminal conversation with a run, through the API.
func runChat(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) int {
	return chat.Run(ctx, args, os.Stdin, stdout, stderr)
}

// runHealthcheck is `wop healthcheck URL`: GET URL and exit 0 on a 2xx answer. Container
// images without curl or wget use it for their health checks.
func runHealthcheck(ctx context.Context, args []string, _ func(string) string, _, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "Usage: wop healthcheck URL")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fail(stderr, "healthcheck", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(stderr, "healthcheck", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fail(stderr, "healthcheck", fmt.Errorf("%s answered %s", args[0], resp.Status))
	}
	return 0
}
