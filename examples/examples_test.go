// Package examples_test checks the programs under examples/ as a user
// meets them: copied out of the repository into a module of their own.
package examples_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/examples/internal/copytest"
)

// examples returns the example directories (those with a main.go), split
// into those of the main module and those that are modules of their own.
func examples(t *testing.T) (inModule, ownModule []string) {
	t.Helper()
	mains, err := filepath.Glob("*/main.go")
	if err != nil || len(mains) < 3 {
		t.Fatalf("example programs: %v, %v", mains, err)
	}
	for _, m := range mains {
		dir := filepath.Dir(m)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			ownModule = append(ownModule, dir)
		} else {
			inModule = append(inModule, dir)
		}
	}
	return inModule, ownModule
}

// Every example of the main module, copied without its tests into one
// fresh module outside the repository (go.mod: require the library,
// replaced by this checkout), tidies and builds; -h and --help print the
// usage and exit 0; its README.md names every flag. An example in a
// module of its own (fenced-sql: the SQLite driver) must not import
// internal packages either; its own test builds its copy.
func TestExamplesBuildOutsideTheRepository(t *testing.T) {
	start := time.Now()
	inModule, ownModule := examples(t)
	for _, dir := range ownModule {
		if err := copytest.CheckPublic(dir); err != nil {
			t.Error(err)
		}
	}
	bin := copytest.Build(t, copytest.Options{Root: "..", Sums: []string{"../go.sum"}}, inModule...)
	t.Logf("copied, tidied and built %v in %v", inModule, time.Since(start).Round(time.Millisecond))
	flagLine := regexp.MustCompile(`(?m)^  (-[a-z-]+)`)
	for _, dir := range inModule {
		readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
		if err != nil {
			t.Errorf("%s has no README.md: %v", dir, err)
		}
		for _, help := range []string{"-h", "--help"} {
			cmd := exec.Command(filepath.Join(bin, filepath.Base(dir)), help)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Errorf("%s %s: %v, want exit 0\n%s", dir, help, err, out.String())
				continue
			}
			flags := flagLine.FindAllStringSubmatch(out.String(), -1)
			if len(flags) == 0 || !strings.Contains(out.String(), "-redis") {
				t.Errorf("%s %s printed no usage with -redis:\n%s", dir, help, out.String())
			}
			for _, f := range flags {
				if readme != nil && !bytes.Contains(readme, []byte(f[1])) {
					t.Errorf("%s/README.md does not mention %s", dir, f[1])
				}
			}
		}
	}
}

// An example importing an internal package of the library is refused
// (such an import cannot build in a user's module), and so is a directory
// that is not a main package.
func TestCheckPublicRefusesInternalImports(t *testing.T) {
	for src, want := range map[string]string{
		"package main\n\nimport _ \"github.com/coordkit/coordination/internal/engine\"\n": "imports github.com/coordkit/coordination/internal/engine",
		"package main\n\nimport _ \"github.com/coordkit/coordination/lock/internal/x\"\n": "imports github.com/coordkit/coordination/lock/internal/x",
		"package demo\n": "package demo; an example is a main package",
		"package main\n\nimport _ \"github.com/coordkit/coordination/internalish\"\n":          "",
		"package main\n\nimport _ \"github.com/coordkit/coordination/lock\"\nfunc main() {}\n": "",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		err := copytest.CheckPublic(dir)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckPublic(%q) = %v, want %q", src, err, want)
		}
	}
}

// The examples read their server from -redis, else from $COORD_REDIS_URL
// (the one variable coordctl reads too), and no other environment
// variable names a server.
func TestExamplesReadOneVariable(t *testing.T) {
	files, err := filepath.Glob("*/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example sources: %v", err)
	}
	getenv := regexp.MustCompile(`Getenv\("([^"]*)"\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range getenv.FindAllSubmatch(b, -1) {
			if string(m[1]) != "COORD_REDIS_URL" {
				t.Errorf("%s reads $%s; the examples read their server from -redis or $COORD_REDIS_URL only", f, m[1])
			}
		}
		if strings.HasSuffix(f, "main.go") && bytes.Contains(b, []byte("redis.ParseURL(")) && !bytes.Contains(b, []byte(`Getenv("COORD_REDIS_URL")`)) {
			t.Errorf("%s parses a server URL but does not read $COORD_REDIS_URL", f)
		}
	}
}
