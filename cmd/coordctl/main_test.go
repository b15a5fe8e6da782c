package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

// runCmd runs coordctl in-process and returns its exit code and output.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// serverArgs returns the connection flags for a backend: nothing for
// miniredis (demo starts its own embedded server), --redis, --cluster or
// --sentinel for real servers; on the least-privilege backend, as the user of
// docs/acl.md's two lines.
func serverArgs(b *testharness.Backend) []string {
	switch {
	case b.IsMini():
		return nil
	case b.IsCluster():
		return []string{"--cluster", strings.Join(b.Cluster.Addrs(), ",")}
	case b.IsSentinel():
		return []string{"--sentinel", b.Sentinel.Master + "@" + strings.Join(b.Sentinel.Addrs(), ",")}
	case b.LeastPrivilege():
		// docs/acl.md's two lines, and nothing else (testharness.CoordctlUser).
		return []string{"--redis", "redis://" + testharness.CoordctlUser + ":" + testharness.CoordctlPassword + "@" + b.Server.Addr + "/0"}
	default:
		return []string{"--redis", "redis://" + b.Server.Addr + "/0"}
	}
}

func TestDemoEveryScenarioEveryBackend(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		code, out, errOut := runCmd(t, append([]string{"demo"}, serverArgs(b)...)...)
		if code != 0 {
			t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		if !strings.Contains(out, " 0 failed") || strings.Contains(out, "FAIL") {
			t.Fatalf("demo output does not report success:\n%s", out)
		}
		for _, s := range scenarios {
			if !strings.Contains(out, "== "+s.title+" ==") {
				t.Errorf("scenario %q did not run", s.name)
			}
		}
		// The leases scenario runs where the server has hash-field
		// expiration, and elsewhere says plainly that it cannot.
		want, not := "[ok  ] leases: one holder per field", unsupportedLine
		if !b.HasHashFieldTTL() {
			want, not = "[ok  ] leases: unsupported server refused before writing", "leases: one holder per field"
			if !strings.Contains(out, unsupportedLine) || !strings.Contains(out, "Valkey 9.0") {
				t.Errorf("on %s the leases scenario does not say the server lacks hash-field expiration:\n%s", b.Name, out)
			}
		}
		if !strings.Contains(out, want) || strings.Contains(out, not) {
			t.Errorf("on %s the leases scenario printed no %q (or printed %q):\n%s", b.Name, want, not, out)
		}
		if !strings.Contains(out, "[ok  ] rwlease: the writer got in while readers kept arriving") {
			t.Errorf("on %s the rwlease scenario did not check writer preference:\n%s", b.Name, out)
		}
	})
}

func TestUsageAndBadFlags(t *testing.T) {
	if code, out, errOut := runCmd(t); code != exitUsage || out != "" || !strings.Contains(errOut, "demo") {
		t.Fatalf("no args: exit %d, stdout %q, stderr %q; want 2 and the help on stderr", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: exit %d, stderr %q", code, errOut)
	}
	// A URL given before the command is echoed without its password, with
	// a hint where flags go.
	code, _, errOut := runCmd(t, "--redis", "redis://app:s3cret-pw@127.0.0.1:6379/0", "inspect", "k")
	if code != exitUsage || strings.Contains(errOut, "s3cret-pw") || !strings.Contains(errOut, "xxxxx") || !strings.Contains(errOut, "flags go after the command") {
		t.Fatalf("flags before the command: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "demo", "--only", "nope"); code != 2 || !strings.Contains(errOut, "no scenario") {
		t.Fatalf("--only nope: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "demo", "--redis", "http://x"); code != exitUsage || !strings.Contains(errOut, "--redis") {
		t.Fatalf("bad URL: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "demo", "--redis", "redis://127.0.0.1:1/0"); code != exitConn || !strings.Contains(errOut, "cannot reach") {
		t.Fatalf("unreachable server: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCmd(t, "demo", "--list"); code != 0 || !strings.Contains(out, "fencing") {
		t.Fatalf("--list: exit %d, output %q", code, out)
	}
	// An empty KEY and a negative --count are usage errors that say so
	// (both found by a new user's try: "no such key" exit 1; "--count is
	// required" for a count given).
	if code, _, errOut := runCmd(t, "inspect", "--redis", "redis://127.0.0.1:1/0", ""); code != exitUsage || !strings.Contains(errOut, "KEY is empty") {
		t.Fatalf("inspect '': exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "latch", "create", "--redis", "redis://127.0.0.1:1/0", "--key", "l", "--count", "-1"); code != exitUsage || !strings.Contains(errOut, "--count must be 0 or more, got -1") {
		t.Fatalf("latch create --count -1: exit %d, stderr %q", code, errOut)
	}
}

// docs/coordctl.md's exit-status table and coordctl --help say the same things
// where they were once at odds with the behaviour (TestUsageAndBadFlags,
// TestRatelimitTry, TestMissingKeyOneLine and TestNoPasswordInAnyOutput
// check the behaviour).
func TestExitTableMatchesREADME(t *testing.T) {
	b, err := os.ReadFile("../../docs/coordctl.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, phrase := range []string{"no such key", "other settings", "no command", "a duration", "database", "during a demo"} {
		if !strings.Contains(readme, phrase) || !strings.Contains(exitTable, phrase) {
			t.Errorf("%q is not in both docs/coordctl.md's exit table and coordctl --help's", phrase)
		}
	}
}

// coordctl --help lists the commands in two aligned columns.
func TestHelpColumnsAligned(t *testing.T) {
	_, out, _ := runCmd(t, "--help")
	_, block, _ := strings.Cut(out, "Commands:\n")
	block, _, _ = strings.Cut(block, "\n\n")
	col := -1
	for line := range strings.SplitSeq(block, "\n") {
		i := strings.LastIndex(line, "  ") + 2
		if i < 4 {
			t.Fatalf("no description column in %q", line)
		}
		if col >= 0 && i != col {
			t.Errorf("description of %q starts at column %d, the others at %d:\n%s", line, i, col, block)
		}
		col = i
	}
}

// coordctl version prints the module version the build recorded: "(devel)"
// in a test binary and under go run, a pseudo-version or a tag when built
// from a clone or installed (issue 22: there was no version command).
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCmd(t, args...)
		if code != exitOK || errOut != "" || !strings.HasPrefix(out, "coordctl (devel) (github.com/coordkit/coordination") || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
			t.Errorf("coordctl %s: exit %d, stdout %q, stderr %q", args[0], code, out, errOut)
		}
	}
	if code, _, errOut := runCmd(t, "version", "extra"); code != exitUsage || !strings.Contains(errOut, "takes no arguments") {
		t.Errorf("coordctl version extra: exit %d, stderr %q", code, errOut)
	}
	// A binary built from this clone: the version go build stamps, the
	// same one ReadBuildInfo reads (go version -m says it too).
	if testing.Short() {
		return
	}
	bin := filepath.Join(t.TempDir(), "coordctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mod, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for line := range strings.SplitSeq(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/coordkit/coordination" {
			want = f[2]
		}
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || want == "" || !strings.HasPrefix(string(out), "coordctl "+want+" (github.com/coordkit/coordination") {
		t.Fatalf("built coordctl version = %q (%v); go version -m says %q", out, err, want)
	}
	t.Logf("%s", out)
}
