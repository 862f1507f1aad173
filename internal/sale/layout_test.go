package sale

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDomainIsPlain holds the domain to its two rules: it imports the standard library only, and
// its types carry no wire format (the HTTP shapes, with their JSON tags, live in httpapi).
func TestDomainIsPlain(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		read++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") || first == "seckill" {
				t.Errorf("%s imports %s: the domain uses the standard library only", fset.Position(imp.Pos()), path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if field, ok := n.(*ast.Field); ok && field.Tag != nil && strings.Contains(field.Tag.Value, "json:") {
				t.Errorf("%s: a JSON tag %s in the domain: the HTTP shape belongs in httpapi", fset.Position(field.Pos()), field.Tag.Value)
			}
			return true
		})
	}
	if read < 10 {
		t.Fatalf("read %d files of package sale: the test looked in the wrong place", read)
	}
}
