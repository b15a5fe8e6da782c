package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/examples/internal/copytest"
)

// The example copied without its tests into a fresh module outside the
// repository (go.mod: require the library, replaced by this checkout;
// go mod tidy adds the SQLite driver) builds; -h exits 0, and the copy
// runs the scenario to its end: the late write refused.
func TestCopyBuildsOutsideTheRepository(t *testing.T) {
	start := time.Now()
	bin := copytest.Build(t, copytest.Options{Root: "../..", Sums: []string{"go.sum", "../../go.sum"}}, ".")
	t.Logf("copied, tidied and built in %v", time.Since(start).Round(time.Millisecond))
	exe := filepath.Join(bin, "fenced-sql")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "usage: fenced-sql"},
		{[]string{"--help"}, "usage: fenced-sql"},
		{nil, `the invoice: "total 120 (by B)" (fence 2)`},
	} {
		var out bytes.Buffer
		cmd := exec.Command(exe, c.args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil || !strings.Contains(out.String(), c.want) {
			t.Errorf("fenced-sql %v: %v, want exit 0 and %q\n%s", c.args, err, c.want, out.String())
		}
	}
}
