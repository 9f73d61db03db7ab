package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatePackages are the directories whose workflow code may ask gates: the run core's,
// and the pack agent's, which asks them through Conversation.Changed.
var gatePackages = []string{".", "../packagent"}

// TestGatesAskedThroughTheRegistry reads the workflow code: workflow.GetVersion is called
// only by runner.changed (versions.go), every gate asked is a Gate constant of the
// registry, and the registry lists each gate once, with its date, what it guards and
// when it may go, oldest first.
func TestGatesAskedThroughTheRegistry(t *testing.T) {
	registered := map[string]bool{}
	for i, g := range Gates {
		require.False(t, registered[g.ID], "gate %q is listed twice", g.ID)
		registered[g.ID] = true
		_, err := time.Parse(time.DateOnly, g.Added)
		require.NoError(t, err, "gate %q: Added is a date", g.ID)
		require.NotEmpty(t, g.Guards, "gate %q says what it guards", g.ID)
		require.NotEmpty(t, g.Retire, "gate %q says when it may go", g.ID)
		if i > 0 {
			require.LessOrEqual(t, Gates[i-1].Added, g.Added, "Gates is oldest first")
		}
	}

	consts := map[string]string{} // Gate constant name -> id
	asked := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range gatePackages {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, 0)
			require.NoError(t, err)
			for _, d := range file.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Gate") || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						require.True(t, ok && lit.Kind == token.STRING, "%s: %s is a string literal", f, name.Name)
						require.Equal(t, "versions.go", filepath.Base(f), "gate %s is declared in versions.go, not %s", name.Name, f)
						consts[name.Name] = strings.Trim(lit.Value, `"`)
					}
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pos := fset.Position(call.Pos())
				switch sel.Sel.Name {
				case "GetVersion":
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "workflow" {
						require.Equal(t, "versions.go", filepath.Base(pos.Filename), "%s asks workflow.GetVersion directly; ask the gate with changed", pos)
					}
				case "changed", "Changed", "tookNew":
					require.Len(t, call.Args, 1, "%s", pos)
					var name string
					switch a := call.Args[0].(type) {
					case *ast.Ident:
						name = a.Name
					case *ast.SelectorExpr:
						name = a.Sel.Name
					}
					if name == "id" && filepath.Base(pos.Filename) == "versions.go" {
						return true // Conversation.Changed hands an agent's gate to runner.changed
					}
					require.True(t, strings.HasPrefix(name, "Gate"), "%s asks %s: ask a Gate constant of versions.go", pos, name)
					asked[name] = true
				}
				return true
			})
		}
	}
	var ids []string
	for name, id := range consts {
		require.True(t, registered[id], "gate %s (%q) is not listed in Gates", name, id)
		require.True(t, asked[name], "gate %s (%q) is declared but never asked", name, id)
		ids = append(ids, id)
	}
	for name := range asked {
		require.Contains(t, consts, name, "%s is asked but is not a gate constant", name)
	}
	sort.Strings(ids)
	require.Len(t, ids, len(Gates), "every entry of Gates has its constant")
}
