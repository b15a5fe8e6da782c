package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/cliconn"
)

// A key or identity over the library's bound is refused before anything
// is sent or waited for (no server is named here: a check made after
// connecting would say "no server"), in one line naming the flag and the
// flag's own bound (issue 22: lock run named an internal argument,
// leaseKey, and the bound of the whole key, after it started waiting).
func TestKeyAndIdentityBoundsBeforeConnecting(t *testing.T) {
	t.Setenv(cliconn.EnvURL, "")
	k := func(n int) string { return strings.Repeat("k", n) }
	for _, c := range []struct {
		args []string
		want string // "" : accepted (the next error is "no server")
	}{
		{[]string{"lock", "run", "--key", k(1017), "--", "true"}, "--key is 1017 bytes long; at most 1016 are allowed (the keys {K}:lock and {K}:fence are at most 1024 bytes each)"},
		{[]string{"lock", "run", "--key", k(1016), "--", "true"}, ""},
		{[]string{"leader", "run", "--key", k(1016), "--", "true"}, "--key is 1016 bytes long; at most 1015 are allowed (the keys {K}:leader and {K}:fence"},
		{[]string{"leader", "run", "--key", "k", "--id", k(257), "--", "true"}, "--id is 257 bytes long; at most 256 are allowed"},
		{[]string{"leader", "run", "--key", "k", "--id", k(256), "--", "true"}, ""},
		{[]string{"leader", "status", "--key", k(1016)}, "at most 1015 are allowed"},
		{[]string{"semaphore", "run", "--key", k(1025), "--capacity", "1", "--", "true"}, "--key is 1025 bytes long; at most 1024 are allowed"},
		{[]string{"latch", "create", "--key", k(1025), "--count", "1"}, "--key is 1025 bytes long; at most 1024 are allowed"},
		{[]string{"latch", "create", "--key", k(1024), "--count", "1"}, ""},
		{[]string{"denylist", "add", "--key", "d", "ok", k(257)}, "identity 2 is 257 bytes long; at most 256 are allowed"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		name := strings.Join(c.args[:2], " ")
		if c.want == "" {
			if !strings.Contains(errOut, "no server") {
				t.Errorf("coordctl %s (within its bounds): stderr %q; want it to get to the connection", name, errOut)
			}
			continue
		}
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "leaseKey") {
			t.Errorf("coordctl %s: exit %d, stderr %q; want 2 and one line with %q", name, code, errOut, c.want)
		}
	}
}

// An --id is quoted in leader run's log lines: one with a newline cannot
// forge a line of its own.
func TestLeaderRunIdentityQuotedInLogs(t *testing.T) {
	url, _ := leaderServer(t)
	code, _, errOut := runCoordctl("leader", "run", "--redis", url, "--key", "q", "--id", "a\n12:00:00.000 coordctl leader run [b]: elected", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	line := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} coordctl leader run "a\\n12:00:00.000 coordctl leader run \[b\]: elected": `)
	for l := range strings.SplitSeq(strings.TrimSuffix(errOut, "\n"), "\n") {
		if !line.MatchString(l) {
			t.Errorf("log line %q does not start with the quoted identity", l)
		}
	}
}
