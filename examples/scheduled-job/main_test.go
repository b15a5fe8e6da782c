package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
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

// A replica that cannot reach its server says so at once (exit 1); bad
// flags are usage errors (exit 2) that name the flag, never a panic; -h
// prints the flags and exits 0. (Until the example left internal/cliconn
// an unreachable server was exit 3, cliconn's status for coordctl; the
// example now uses only public go-redis setup and keeps 2 and 1.)
func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--redis", "redis://127.0.0.1:1/0"}, 1, "cannot reach the server at 127.0.0.1:1: "},
		{[]string{"--redis", "redis://u:hunter2@127.0.0.1:1/0"}, 1, "cannot reach the server at 127.0.0.1:1: "},
		{[]string{"--redis", "bogus"}, 2, "-redis: redis: invalid URL scheme: ; want a URL such as redis://"},
		{[]string{"--redis", "http://h/0"}, 2, "invalid URL scheme: http"},
		{[]string{"--redis", "redis://u:hun%zzter2@h:1/0"}, 2, "-redis: invalid URL escape"},
		{[]string{"--every", "0"}, 2, "-every must be positive, got 0s; e.g. -every 10s"},
		{[]string{"--every", "10"}, 2, "invalid value"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
	} {
		start := time.Now()
		var out lockedBuffer
		err := run(ctx, c.args, &out)
		if err == nil || exitCode(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v (exit %d); want exit %d and %q", c.args, err, exitCode(err), c.code, c.want)
		}
		if err != nil && strings.Contains(err.Error()+out.String(), "hun") {
			t.Errorf("%v: the password shows: %v\n%s", c.args, err, out.String())
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%v took %v", c.args, took)
		}
	}
	t.Setenv("COORD_REDIS_URL", "redis://127.0.0.1:1/0")
	if err := run(ctx, nil, &lockedBuffer{}); exitCode(err) != 1 || !strings.Contains(fmt.Sprint(err), "127.0.0.1:1") {
		t.Errorf("$COORD_REDIS_URL unreachable: %v", err)
	}
	for _, h := range []string{"-h", "--help"} {
		var out lockedBuffer
		if err := run(ctx, []string{h}, &out); err != nil || exitCode(err) != 0 || !strings.Contains(out.String(), "-give-up duration") {
			t.Errorf("%s: %v (exit %d)\n%s", h, err, exitCode(err), out.String())
		}
	}
}

// When the server goes away for longer than --give-up, the replica stops
// with a clear error instead of retrying forever.
func TestGivesUpOnALostServer(t *testing.T) {
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	p := faultproxy.Start(t, srv.Addr)
	var out lockedBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- run(context.Background(), []string{"--redis", "redis://" + p.Addr() + "/0", "--id", "a", "--every", "50ms",
			"--lease", "1s", "--retry", "50ms", "--give-up", "500ms"}, &out)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "a: job run #1") {
		if time.Now().After(deadline) {
			t.Fatalf("a never ran the job:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.BlackHole(faultproxy.Both)
	select {
	case err := <-errc:
		if !errors.Is(err, errUnreachable) || !strings.Contains(err.Error(), "no answer for 500ms") {
			t.Fatalf("run = %v (exit %d), want the give-up error\n%s", err, exitCode(err), out.String())
		}
		if n := strings.Count(out.String(), "giving up in"); n != 1 {
			t.Fatalf("said %d times that the server is unreachable, want once:\n%s", n, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("did not give up:\n%s", out.String())
	}
}
