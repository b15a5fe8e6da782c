package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemoIdempotency(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"demo", "--only", "idempotency"}, &out, &out); code != 0 {
		t.Fatalf("demo exited %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "5 invariants held, 0 failed") {
		t.Fatalf("unexpected demo output:\n%s", out.String())
	}
}
