package leader_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Leader is built on the fencing lock through internal/fencelock's
// unadmitted entry points (fencelock.Attempt, fencelock.Release): its code
// never names the engine's admission switch (AcquireRequest.Unadmitted,
// Handle.ReleaseUnadmitted) itself, so that which of its operations are
// admitted is decided by the entry points it calls, not by a flag each
// call site sets. (leader set Request.Unadmitted and called
// h.ReleaseUnadmitted.)
func TestLeaderAdmitsThroughFencelockEntryPoints(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("leader's sources: %v, %v", files, err)
	}
	fset := token.NewFileSet()
	sources := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(name, "_test.go") {
			sources++
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && strings.Contains(id.Name, "Unadmitted") {
				t.Errorf("%s: names %s; use fencelock.Attempt and fencelock.Release", fset.Position(id.Pos()), id.Name)
			}
			return true
		})
	}
	if sources < 2 { // leader.go, read.go, ...
		t.Fatalf("parsed %d non-test sources of leader; want them all", sources)
	}
}
