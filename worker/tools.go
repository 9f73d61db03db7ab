package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wop-dev/wop/activities"
	"github.com/wop-dev/wop/packs"
	"github.com/wop-dev/wop/tools"
)

// toolsCheckTimeout bounds the start-up check of the bindings (it connects to MCP
// servers).
const toolsCheckTimeout = time.Minute

// ToolsFilePath returns the bindings file the configuration names: ToolsFile, else
// <PacksDir>/tools.yaml (or tools.yml) when it exists, else "".
func (c Config) ToolsFilePath() string {
	if c.ToolsFile != "" {
		return c.ToolsFile
	}
	for _, name := range packs.BindingsFileNames {
		p := filepath.Join(c.PacksDir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// LoadTools builds the worker's tool bindings: the ones of c.Tools (built in code) and
// those of the bindings file (ToolsFilePath), checked against the loaded packs. MCP
// servers are connected for the check and stay connected. A bad file, a binding that
// does not fit its MCP server and any other error refuse the start with every
// diagnostic (file:line) in the message; warnings are in the report. The caller
// closes the set.
func LoadTools(ctx context.Context, c Config, loaded []*packs.Loaded, logger *slog.Logger) (*tools.Set, *tools.Report, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	set := tools.NewSet()
	if c.Tools != nil {
		if err := set.Merge(c.Tools); err != nil {
			return nil, nil, fmt.Errorf("tool bindings: %w", err)
		}
	}
	if file := c.ToolsFilePath(); file != "" {
		diags, err := set.LoadFile(file, tools.LoadOptions{Getenv: c.Getenv})
		if err != nil {
			_ = set.Close()
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("tool bindings file %s does not exist (--tools, WOP_TOOLS)", file)
			}
			return nil, nil, fmt.Errorf("load tool bindings: %w%s", err, listDiags(diags.Errors()))
		}
		for _, d := range diags {
			logger.Warn("Tool bindings warning", "diagnostic", d.String())
		}
	}
	cctx, cancel := context.WithTimeout(ctx, toolsCheckTimeout)
	defer cancel()
	report := set.Check(cctx, loaded)
	if !mockOnly(c.Providers) {
		// A worker that serves a real model never answers from the mock's tool_results.
		for i := range report.Unbound {
			report.Unbound[i].Mock = false
		}
	}
	if err := report.Err(); err != nil {
		_ = set.Close()
		return nil, nil, fmt.Errorf("tool bindings do not fit the packs: %w%s", err, listDiags(report.Diags.Errors()))
	}
	return set, report, nil
}

// LogTools logs which pack tools are bound, to what, and which are not.
func LogTools(logger *slog.Logger, set *tools.Set, r *tools.Report) {
	if logger == nil || r == nil {
		return
	}
	for _, b := range r.Bound {
		logger.Info("Tool bound", "pack", b.Pack, "tool", b.Tool, "binding", b.Kind, "target", b.Target, "attempts", b.Attempts)
	}
	for _, u := range r.Unbound {
		answer := "an error result"
		if u.Mock {
			answer = "the mock's tool_results"
		}
		logger.Warn("Tool unbound", "pack", u.Pack, "tool", u.Tool, "answeredBy", answer)
	}
	for _, a := range r.Approvals {
		logger.Info("Tool calls wait for approval", "pack", a.Pack, "tool", a.Tool, "reason", a.Reason)
	}
	for _, d := range r.Diags {
		logger.Warn("Tool bindings warning", "diagnostic", d.String())
	}
	if set != nil {
		logger.Info("Tool bindings loaded", "files", strings.Join(set.Files(), ", "), "bound", set.Len())
	}
}

// listDiags renders diagnostics one per line, indented, for an error message.
func listDiags(ds packs.Diagnostics) string {
	if len(ds) <= 1 {
		return ""
	}
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("\n  ")
		b.WriteString(d.String())
	}
	return b.String()
}

// toolBindings is set as activities.ToolBindings, nil when there is no set (a nil
// *tools.Set in the interface would not be nil).
func toolBindings(set *tools.Set) activities.ToolBindings {
	if set == nil {
		return nil
	}
	return set
}

// mockOnly reports whether every provider is the scripted mock (no providers: the mock).
func mockOnly(providers map[string]activities.Provider) bool {
	for _, p := range providers {
		if _, ok := p.(*activities.MockProvider); !ok {
			return false
		}
	}
	return true
}
