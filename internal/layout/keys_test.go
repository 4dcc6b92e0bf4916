package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoStateKeyedByAgentAlone (C1): no map of the module's code is keyed
// by an agent's name alone (troupe.AgentID): two projects may each have
// an agent "lead", so runtime state is keyed by troupe.RuntimeKey
// {Project, Agent} or held by a project-scoped object. Tests may build
// such maps (a team's fixtures); code may not.
func TestNoStateKeyedByAgentAlone(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var checked int
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git", "web", "third_party":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			m, ok := n.(*ast.MapType)
			if ok && isAgentID(m.Key, f.Name.Name) {
				t.Errorf("%s: a map keyed by an agent's name alone (C1): key it by troupe.RuntimeKey, or hold it in a project-scoped object", fset.Position(m.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files checked: the walk missed the code", checked)
	}
}

// isAgentID reports whether e names troupe.AgentID (AgentID inside the
// troupe package itself).
func isAgentID(e ast.Expr, pkg string) bool {
	switch k := e.(type) {
	case *ast.SelectorExpr:
		x, ok := k.X.(*ast.Ident)
		return ok && x.Name == "troupe" && k.Sel.Name == "AgentID"
	case *ast.Ident:
		return pkg == "troupe" && k.Name == "AgentID"
	}
	return false
}
