package coordination_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// README's Quick start is a whole program a new user pastes into a new
// module: copied into a fresh module outside the repository (its go.mod
// requires this module, replaced by the repository's root, and reuses the
// repository's go.sum; go mod tidy completes it from the module cache or
// the module proxy), it builds, and it runs against a real server started
// by the test harness, twice: each run holds the lock, prints a fencing
// token, releases it, and logs nothing (coordination.New's warning about
// ContextTimeoutEnabled included); the second run's token is the next one.
func TestQuickStartInAFreshModule(t *testing.T) {
	src := quickStart(t)
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	dir := t.TempDir() // outside the repository: os.TempDir()
	if rel, err := filepath.Rel(root, dir); err == nil && filepath.IsLocal(rel) {
		t.Fatalf("the temporary module %s is inside the repository", dir)
	}
	gomod := "module example.com/quickstart\n\ngo 1.26.0\n\n" +
		"require github.com/coordkit/coordination v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/coordkit/coordination => " + strconv.Quote(root) + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = dir
		// The user's module, not this test's: no workspace, no vendoring,
		// the user's default proxy settings (the module cache first).
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v in the fresh module: %v\n%s", args, err, out)
		}
	}
	goCmd("mod", "tidy")
	bin := filepath.Join(dir, "quickstart")
	goCmd("build", "-o", bin, ".")

	b := testharness.Get(t, testharness.FirstFlavor(t))
	var last int64
	for run := 1; run <= 2; run++ {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), "REDIS_ADDR="+b.Server.Addr)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("run %d: %v\nstdout: %s\nstderr: %s", run, err, stdout.String(), stderr.String())
		}
		m := regexp.MustCompile(`^holding fencing token (\d+)\n$`).FindStringSubmatch(stdout.String())
		if m == nil {
			t.Fatalf("run %d printed %q, want \"holding fencing token N\\n\"", run, stdout.String())
		}
		if stderr.Len() != 0 {
			t.Errorf("run %d logged %q, want nothing", run, stderr.String())
		}
		token, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if run == 2 && token != last+1 {
			t.Errorf("second run's token %d, want %d (the next one: the first run released the lock)", token, last+1)
		}
		last = token
	}
}
