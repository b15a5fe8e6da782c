package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemoRateLimit(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "--only", "ratelimit"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "2 invariants held, 0 failed") {
		t.Fatalf("output:\n%s", out.String())
	}
}
