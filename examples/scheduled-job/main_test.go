package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Two replicas: only the leader runs the job; when it leaves after its runs,
// the other takes over and continues the count with a newer token.
func TestTwoReplicas(t *testing.T) {
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	url := "redis://" + srv.Addr + "/0"
	args := func(id string) []string {
		return []string{"--redis", url, "--id", id, "--every", "20ms", "--lease", "1s", "--retry", "50ms", "--runs", "3"}
	}
	var out lockedBuffer
	ctx := context.Background()
	errs := make(chan error, 2)
	go func() { errs <- run(ctx, args("a"), &out) }()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "a: leading") {
		if time.Now().After(deadline) {
			t.Fatalf("a never led:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	go func() { errs <- run(ctx, args("b"), &out) }()
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("replicas did not finish:\n%s", out.String())
		}
	}
	got := out.String()
	for _, want := range []string{
		"a: job run #1 done (fencing token 1)", "a: job run #3 done (fencing token 1)",
		"b: leading (fencing token 2)", "b: job run #4 done (fencing token 2)", "b: job run #6 done (fencing token 2)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "b: job run #1 ") || strings.Contains(got, "a: job run #4 ") {
		t.Errorf("a replica ran the job while not leading:\n%s", got)
	}
}
