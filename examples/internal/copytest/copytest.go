// Package copytest checks that the programs under examples/ are what a
// user can copy: it copies an example's non-test Go files into a fresh
// module outside the repository, one that requires
// github.com/coordkit/coordination (replaced by the repository's root,
// so that the copy builds against the code under test), tidies it and
// builds it. An example that imports an internal package of the library
// fails here, since such an import cannot build outside the repository.
//
// The test of each example's module calls [Build]: the main module's
// examples/examples_test.go for the examples in the main module, and
// examples/fenced-sql's own test for that module.
package copytest

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Module is the library's module path.
const Module = "github.com/coordkit/coordination"

// Options are what [Build] needs besides the examples.
type Options struct {
	// Root is the repository's root (the library's module), relative to
	// the test's working directory or absolute.
	Root string
	// Sums are go.sum files whose lines are copied into the fresh module,
	// so that go mod tidy finds every checksum it needs without asking
	// the checksum database.
	Sums []string
}

// Build copies the non-test .go files of each directory in dirs (relative
// to the working directory) into a directory of the same base name in one
// fresh module under t.TempDir(), tidies the module (go mod tidy, with
// GOFLAGS=-mod=mod and GOWORK=off, GOPROXY as the environment has it) and
// builds every example into the returned directory, one executable per
// example named after its directory (with -race when the test runs with
// the race detector). It fails t when a directory is not a
// main package, imports an internal package of the library, or does not
// build.
func Build(t testing.TB, o Options, dirs ...string) (binDir string) {
	t.Helper()
	root, err := filepath.Abs(o.Root)
	if err != nil {
		t.Fatal(err)
	}
	goVersion, err := goLine(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	if rel, err := filepath.Rel(root, mod); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary module %s is inside the repository %s: set TMPDIR elsewhere", mod, root)
	}
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := copyExample(dir, filepath.Join(mod, filepath.Base(abs)), true); err != nil {
			t.Fatal(err)
		}
	}
	gomod := fmt.Sprintf("module example.com/copied\n\ngo %s\n\nrequire %s v0.0.0\n\nreplace %s => %s\n", goVersion, Module, Module, root)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, p := range o.Sums {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	slices.Sort(sums)
	sums = slices.Compact(sums)
	if err := os.WriteFile(filepath.Join(mod, "go.sum"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	binDir = filepath.Join(mod, "bin")
	build := []string{"build", "-o", binDir + string(filepath.Separator)}
	if raceEnabled {
		// The test runs with the race detector: so does the build, which
		// then reuses the packages the test run compiled.
		build = append(build, "-race")
	}
	for _, args := range [][]string{{"mod", "tidy"}, append(build, "./...")} {
		start := time.Now()
		if err := goCmd(mod, args...); err != nil {
			t.Fatalf("go %s in a copy of %v: %v", strings.Join(args, " "), dirs, err)
		}
		t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	}
	return binDir
}

// internalImport matches an import of an internal package of the library.
var internalImport = regexp.MustCompile(`^` + regexp.QuoteMeta(Module) + `(/.*)?/internal(/|$)`)

// CheckPublic returns an error when a non-test Go file in dir is not in
// package main or imports an internal package of the library (without
// building anything: for an example in a module of its own, whose test
// builds it with [Build]).
func CheckPublic(dir string) error { return copyExample(dir, "", false) }

// copyExample checks the non-test Go files of the main package in dir,
// refusing an import of the library's internal packages, and copies them
// to dst when write is true.
func copyExample(dir, dst string, write bool) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	if write {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		if f.Name.Name != "main" {
			return fmt.Errorf("%s: package %s; an example is a main package", name, f.Name.Name)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if internalImport.MatchString(path) {
				return fmt.Errorf("%s imports %s: an example uses only the public API (a copy of it cannot import the library's internal packages)", name, path)
			}
		}
		if write {
			if err := os.WriteFile(filepath.Join(dst, filepath.Base(name)), src, 0o644); err != nil {
				return err
			}
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s: no Go files", dir)
	}
	return nil
}

// goLine returns the go directive's version of the go.mod at path.
func goLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s: no go directive", path)
}

// goCmd runs the go command in dir: in module mode with updates allowed
// (GOFLAGS gains -mod=mod), outside any workspace, with the toolchain
// that runs the test.
func goCmd(dir string, args ...string) error {
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v\n%s", err, out.String())
	}
	return nil
}

// goTool is the go command of the toolchain that built the test, else
// the one on $PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
