package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wop-dev/wop/api"
)

const keysUsage = `Usage:
  wop keys add NAME --tenant TENANT --scopes SCOPES [--file PATH]
      create a key, print it once on stdout and append its SHA-256 to the keys file;
      SCOPES is a comma-separated list of %s; "all" is every scope but
      approvals:delegate (a key with it may vote for the approvers it names) and
      payloads:codec (a key with it may decode any run's sealed payloads at /codec),
      which are granted only by name, e.g. --scopes all,approvals:delegate
  wop keys revoke NAME [--file PATH]
      mark a key revoked: it is answered 401 key_revoked from the next reload
  wop keys list [--file PATH]
      show the keys of the file (names, tenants, scopes, state; never the keys)
  wop keys hash
      print the SHA-256 of a key read from stdin, for a keys file entry written by hand

The keys file is --file or WOP_KEYS_FILE. A running wop api or wop dev reloads it when it
changes or on SIGHUP.
`

// runKeys is `wop keys`: it manages the keys file (WOP_KEYS_FILE) of `wop api` and
// `wop dev`.
func runKeys(_ context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if code, asked := usageAsked(args, fmt.Sprintf(keysUsage, strings.Join(api.KnownScopes, ", ")), stderr); asked {
		return code
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet("keys "+sub, "keys "+sub+" [flags]", stderr)
	file := fs.String("file", strings.TrimSpace(env("WOP_KEYS_FILE")), "keys `file` (env WOP_KEYS_FILE)")
	tenant := fs.String("tenant", "", "tenant of the new key")
	scopes := fs.String("scopes", "", "comma-separated scopes of the new key, or \"all\"")
	name, code := parseNameAndFlags(fs, rest, sub == "add" || sub == "revoke")
	if code >= 0 {
		return code
	}
	if sub != "hash" && *file == "" {
		return fail(stderr, "keys", errors.New("no keys file: set WOP_KEYS_FILE or pass --file"))
	}
	switch sub {
	case "add":
		return keysAdd(*file, name, *tenant, *scopes, stdout, stderr)
	case "revoke":
		if err := api.RevokeKey(*file, name); err != nil {
			return fail(stderr, "keys", err)
		}
		fmt.Fprintf(stderr, "Revoked key %s in %s; running servers answer it 401 key_revoked after their next reload.\n", name, *file)
		return 0
	case "list":
		return keysList(*file, stdout, stderr)
	case "hash":
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) || strings.TrimSpace(line) == "" {
			return fail(stderr, "keys", errors.New("write the key on stdin, e.g. `printf %s \"$KEY\" | wop keys hash`"))
		}
		fmt.Fprintln(stdout, api.HashKey(strings.TrimSpace(line)))
		return 0
	}
	fmt.Fprintf(stderr, "wop keys: unknown subcommand %q (want add, revoke, list or hash)\n", sub)
	return 2
}

// parseNameAndFlags parses flags given before or after the NAME argument.
func parseNameAndFlags(fs *flag.FlagSet, args []string, wantName bool) (string, int) {
	name := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if code := parseFlags(fs, args); code >= 0 {
		return "", code
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "wop %s: unexpected arguments %q\n", fs.Name()[4:], fs.Args())
		return "", 2
	}
	if wantName && name == "" {
		fmt.Fprintf(fs.Output(), "wop %s: the key's NAME is required\n", fs.Name()[4:])
		fs.Usage()
		return "", 2
	}
	return name, -1
}

func keysAdd(file, name, tenant, scopeList string, stdout, stderr io.Writer) int {
	if tenant == "" {
		return fail(stderr, "keys", errors.New("--tenant is required: the tenant whose runs the key sees and starts"))
	}
	if strings.TrimSpace(scopeList) == "" {
		return fail(stderr, "keys", fmt.Errorf("--scopes is required: a comma-separated list of %s, or \"all\"", strings.Join(api.KnownScopes, ", ")))
	}
	scopes, err := api.ParseScopes(scopeList)
	if err != nil {
		return fail(stderr, "keys", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return fail(stderr, "keys", err)
	}
	key := "wop_" + hex.EncodeToString(b)
	if err := api.AppendKey(file, api.KeyFileEntry{Name: name, Tenant: tenant, SHA256: api.HashKey(key), Scopes: scopes}); err != nil {
		return fail(stderr, "keys", err)
	}
	fmt.Fprintf(stderr, "Added key %s (tenant %s, scopes %s) to %s.\n", name, tenant, strings.Join(scopes, ", "), file)
	fmt.Fprintln(stderr, "This is the only time the key is shown; only its SHA-256 is kept:")
	fmt.Fprintln(stdout, key)
	return 0
}

func keysList(file string, stdout, stderr io.Writer) int {
	keys, err := api.LoadKeysFile(file)
	if err != nil {
		return fail(stderr, "keys", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTENANT\tSCOPES\tSTATE\tSHA256")
	for _, k := range keys {
		state := "active"
		switch {
		case k.Revoked:
			state = "revoked"
		case !k.ExpiresAt.IsZero() && !time.Now().Before(k.ExpiresAt):
			state = "expired"
		case !k.ExpiresAt.IsZero():
			state = "expires " + k.ExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s…\n", k.ID, k.Tenant, strings.Join(k.Scopes, ","), state, k.SHA256[:12])
	}
	_ = tw.Flush()
	return 0
}

// usageAsked prints a command's usage when its arguments ask for it (none, or -h,
// --help, help) and returns the exit code: 2 for none, 0 for a request.
func usageAsked(args []string, usage string, stderr io.Writer) (code int, asked bool) {
	if len(args) > 0 && args[0] != "-h" && args[0] != "help" && args[0] != "--help" {
		return 0, false
	}
	fmt.Fprint(stderr, usage)
	if len(args) == 0 {
		return 2, true
	}
	return 0, true
}
