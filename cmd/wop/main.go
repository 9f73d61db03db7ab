// Command wop is the OpenWOP host whose runs are Temporal workflows and whose agents are
// PromptPack packs.
//
//	wop dev                    everything in one process: embedded Temporal + UI, worker, API
//	wop worker                 the production worker, against any Temporal
//	wop api                    the production HTTP API, against any Temporal
//	wop setup                  create the namespace and its search attributes on a Temporal
//	wop pack validate PATH...  check packs and mock scripts
//	wop chat                   talk to a run from the terminal
//	wop version                print the version
//
// Configuration comes from environment variables, each overridable by a flag; see
// `wop <command> -h` and the README.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; "dev" means
// unset (see versionString).
var version = "dev"

// command is one subcommand. run gets the arguments after the command name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int
}

// commands lists the subcommands in help order. devCommand and benchCommand are defined
// in dev.go, the only file that reaches the embedded Temporal server (see dev_nodev.go).
func commands() []command {
	return []command{
		devCommand,
		{"worker", "run the worker against a Temporal server (TEMPORAL_ADDRESS)", runWorker},
		{"api", "serve the HTTP API against a Temporal server (TEMPORAL_ADDRESS)", runAPI},
		{"setup", "create the namespace and register the search attributes on a Temporal server", runSetup},
		{"gates", "list the workflow gates with the open runs that keep each (when a gate may retire)", runGates},
		{"pack", "pack tools: `wop pack validate PATH...`, `wop pack list`", runPack},
		{"keys", "API keys of the keys file (WOP_KEYS_FILE): add, revoke, list", runKeys},
		{"chat", "hold a conversation with a run through the API", runChat},
		{"certify", "sign and verify OpenWOP certification bundles with the host's key", runCertify},
		benchCommand,
		{"version", "print the version", runVersion},
		{"healthcheck", "GET a URL, exit 0 on 2xx (container health checks)", runHealthcheck},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == name {
			// The first SIGINT/SIGTERM cancels ctx for a clean shutdown; a second one
			// kills the process (signal.NotifyContext's stop restores the default).
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() { <-ctx.Done(); stop() }()
			return c.run(ctx, rest, env, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "wop: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "wop: an OpenWOP host whose runs are Temporal workflows and whose agents are PromptPack packs")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: wop <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-11s %s\n", "help", "show this help")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `wop <command> -h` for the flags of a command.")
}

func runVersion(_ context.Context, _ []string, _ func(string) string, stdout, _ io.Writer) int {
	server := "included"
	if !hasEmbeddedServer {
		server = "not included (-tags nodev)"
	}
	fmt.Fprintf(stdout, "wop version %s\n", versionString())
	fmt.Fprintf(stdout, "  %s %s/%s, embedded Temporal server %s\n", goVersion(), runtime.GOOS, runtime.GOARCH, server)
	return 0
}

// versionString is the version set at build time, the module version of a `go install`,
// or "development build" with the commit it was built from.
func versionString() string {
	if version != "dev" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "development build"
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	var rev, modified string
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			modified = st.Value
		}
	}
	if rev == "" {
		return "development build"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += ", with local changes"
	}
	return "development build (commit " + rev + ")"
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown Go"
}

// newFlagSet returns a flag set that prints its usage to stderr and returns errors
// instead of exiting.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("wop "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wop %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; it returns -1 to go on, or the exit code (0 for -h).
func parseFlags(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	return -1
}

// envOr returns env(name), or def when it is empty.
func envOr(env func(string) string, name, def string) string {
	if v := strings.TrimSpace(env(name)); v != "" {
		return v
	}
	return def
}

// newLogger builds the process logger: text to stderr at the given level.
func newLogger(stderr io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})), nil
}

// fail prints one error line and returns exit code 1.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "wop %s: %v\n", cmd, err)
	return 1
}
