package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/wop-dev/wop/worker"
)

// packListEntry is one pack of `wop pack list --json`.
type packListEntry struct {
	WorkflowID string `json:"workflowId"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	Hash       string `json:"hash"`
	Entry      string `json:"entry,omitempty"`
	States     int    `json:"states"`
	Tools      int    `json:"tools"`
	Mock       bool   `json:"mockScript"`
	Path       string `json:"path"`
}

// runPackList is `wop pack list`: the packs a worker and API started on the same
// folder serve, each as a workflow whose id is the pack id. It loads the folder as
// they do, so a pack that would fail their start fails here too.
func runPackList(args []string, env func(string) string, stdout, stderr io.Writer) int {
	dir := envOr(env, "WOP_PACKS", "packs")
	asJSON := false
	fs := newFlagSet("pack list", "pack list [--packs FOLDER] [--json]", stderr)
	fs.StringVar(&dir, "packs", dir, "packs `folder` (env WOP_PACKS)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if code := parseFlags(fs, args); code >= 0 {
		return code
	}
	loaded, err := worker.LoadPacks(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return fail(stderr, "pack list", err)
	}
	entries := make([]packListEntry, 0, len(loaded))
	for _, l := range loaded {
		e := packListEntry{WorkflowID: l.Pack.ID, Name: l.Pack.Name, Version: l.Pack.Version, Hash: l.Pack.Hash,
			Tools: len(l.Pack.Tools), Mock: l.Mock != nil, Path: l.Path}
		if w := l.Pack.Workflow; w != nil {
			e.Entry, e.States = w.Entry, len(w.States)
		} else {
			e.Entry, e.States = l.Pack.DefaultPrompt(), 1 // a conversation with its default prompt
		}
		entries = append(entries, e)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"packs": entries})
		return 0
	}
	if len(entries) == 0 {
		fmt.Fprintf(stderr, "No packs in %s.\n", dir)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW ID\tVERSION\tNAME\tENTRY\tSTATES\tTOOLS\tMOCK\tHASH")
	for _, e := range entries {
		mock := "-"
		if e.Mock {
			mock = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", e.WorkflowID, e.Version, e.Name, e.Entry, e.States, e.Tools, mock,
			strings.TrimPrefix(e.Hash, "sha256:")[:12])
	}
	_ = tw.Flush()
	return 0
}
