package testharness

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The leak check of [Main]: goleak's Find (go.uber.org/goleak v1.3.0) in a
// few lines, so that goleak stays out of the library's go.mod. It reads
// every goroutine's stack (runtime.Stack with all set), parses each as
// goleak does (the state in the header's brackets; a frame's function is
// its line up to the last '('; the "created by" line names another
// goroutine's function and is not part of the stack), and leaves out the
// goroutine calling it and those goleak leaves out by default:
//
//   - the test runner's own, blocked in a channel receive with
//     testing.RunTests, testing.(*T).Run, testing.(*T).Parallel,
//     testing.runFuzzing or testing.runFuzzTests on top;
//   - a syscall-state goroutine started by the runtime for cgo
//     (runtime.goexit on its stack);
//   - os/signal's loop (os/signal.signal_recv or os/signal.loop on top) and
//     any goroutine with runtime.ensureSigM on its stack;
//   - an execution tracer's reader (runtime.ReadTrace on its stack).
//
// It retries as goleak does, 20 times after the first look, sleeping 1 µs
// doubled each time up to 100 ms (about 0.43 s in all), and reports the
// goroutines still there.

// goroutine is one parsed stack of runtime.Stack's output.
type goroutine struct {
	id    int
	state string              // e.g. "chan receive", "select, 2 minutes"
	top   string              // the function on top of the stack
	funcs map[string]struct{} // every function of the stack
	full  string              // the stack as printed
}

func (g goroutine) has(fn string) bool { _, ok := g.funcs[fn]; return ok }

// goroutines parses the stacks of every goroutine (all) or of the calling
// one.
func goroutines(all bool) []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, all)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, block := range strings.Split(strings.TrimSpace(string(buf)), "\n\n") {
		lines := strings.Split(block, "\n")
		// "goroutine 12 [chan receive]:"
		head := strings.SplitN(strings.TrimSuffix(lines[0], ":"), " ", 3)
		if len(head) != 3 || head[0] != "goroutine" {
			continue
		}
		id, err := strconv.Atoi(head[1])
		if err != nil {
			continue
		}
		// The state is in the brackets (after "gp=... m=..." with
		// GOTRACEBACK=system).
		state := head[2]
		if i, j := strings.IndexByte(state, '['), strings.LastIndexByte(state, ']'); i >= 0 && j > i {
			state = state[i+1 : j]
		}
		g := goroutine{id: id, state: state, funcs: map[string]struct{}{}, full: block}
		for _, l := range lines[1:] {
			if l == "" || strings.HasPrefix(l, "\t") {
				continue // a frame's file:line
			}
			if strings.HasPrefix(l, "created by ") {
				break // the creator's function, and perhaps its ancestors
			}
			fn := l
			if i := strings.LastIndexByte(l, '('); i > 0 {
				fn = l[:i]
			}
			if g.top == "" {
				g.top = fn
			}
			g.funcs[fn] = struct{}{}
		}
		out = append(out, g)
	}
	return out
}

// ignoredByDefault reports whether g is one of the goroutines goleak leaves
// out by default (see the list above).
func ignoredByDefault(g goroutine) bool {
	switch g.top {
	case "testing.RunTests", "testing.(*T).Run", "testing.(*T).Parallel", "testing.runFuzzing", "testing.runFuzzTests":
		if strings.HasPrefix(g.state, "chan receive") {
			return true
		}
	case "os/signal.signal_recv", "os/signal.loop":
		return true
	}
	return (g.has("runtime.goexit") && strings.HasPrefix(g.state, "syscall")) ||
		g.has("runtime.ensureSigM") || g.has("runtime.ReadTrace")
}

// FindLeaks returns an error listing the goroutines other than the caller's
// that are still running after retries for about 0.43 s, leaving out the
// test runner's and the runtime's own (goleak's defaults) and any goroutine
// with one of ignoreFuncs on its stack (a function's full name as a stack
// trace prints it, e.g.
// "github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial": goleak's
// IgnoreAnyFunction). It returns nil when none is left. [Main] calls it
// after a package's tests.
func FindLeaks(ignoreFuncs ...string) error {
	self := goroutines(false)[0].id
	var left []goroutine
	for i := 0; ; i++ {
		left = left[:0]
		for _, g := range goroutines(true) {
			if g.id == self || ignoredByDefault(g) || ignored(g, ignoreFuncs) {
				continue
			}
			left = append(left, g)
		}
		if len(left) == 0 {
			return nil
		}
		if i == 20 {
			break
		}
		time.Sleep(min(time.Microsecond<<i, 100*time.Millisecond))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d goroutines left:", len(left))
	for _, g := range left {
		fmt.Fprintf(&b, "\n\ngoroutine %d in state %s, with %s on top of the stack:\n%s", g.id, g.state, g.top, g.full)
	}
	return fmt.Errorf("%s", b.String())
}

func ignored(g goroutine, funcs []string) bool {
	for _, f := range funcs {
		if g.has(f) {
			return true
		}
	}
	return false
}
