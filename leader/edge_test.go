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

// Leader is built on the fencing lock through internal/fencelock's entry
// points for a primitive's own admitted operation (fencelock.Attempt, as
// part of LEADER CAMPAIGN; fencelock.Release, part of Run): no code of the
// module names an admission switch (the engine had AcquireRequest.Unadmitted
// and Handle.ReleaseUnadmitted; leader and the concurrency limiter set it
// per call), so which operations are admitted is decided where each public
// operation begins, once.
func TestLeaderAdmitsThroughFencelockEntryPoints(t *testing.T) {
	var files []string
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("the module's sources: %v, %v", files, err)
	}
	fset := token.NewFileSet()
	leaderSources := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(name) == filepath.Join("..", "leader") {
			leaderSources++
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && strings.Contains(id.Name, "Unadmitted") {
				t.Errorf("%s: names %s; admit the public operation once and act as part of it (engine.Op.Acquire, fencelock.Attempt)", fset.Position(id.Pos()), id.Name)
			}
			return true
		})
	}
	if leaderSources < 2 { // leader.go, read.go, ...
		t.Fatalf("parsed %d non-test sources of leader among %d; want them all", leaderSources, len(files))
	}
}
