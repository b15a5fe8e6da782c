package lua_test

import (
	"strings"
	"testing"

	"github.com/coordkit/coordination/lua"
)

// Every script begins with its contract: KEYS, ARGV (where it takes any),
// the reply, and its error codes.
func TestEveryScriptStatesItsContract(t *testing.T) {
	all := lua.All()
	if len(all) < 10 {
		t.Fatalf("only %d scripts embedded", len(all))
	}
	for _, s := range all {
		var header []string
		for _, line := range strings.Split(s.Source(), "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header = append(header, line)
		}
		h := strings.Join(header, "\n")
		if !strings.HasPrefix(h, "-- "+s.Name()+":") {
			t.Errorf("%s: header must start with %q", s.Name(), "-- "+s.Name()+":")
		}
		for _, want := range []string{"KEYS[1]", "Reply", "Error"} {
			if !strings.Contains(h, want) {
				t.Errorf("%s: header lacks %q", s.Name(), want)
			}
		}
		if strings.Contains(s.Source(), "ARGV[") && !strings.Contains(h, "ARGV[1]") {
			t.Errorf("%s: uses ARGV but its header does not describe it", s.Name())
		}
		if len(s.Hash()) != 40 {
			t.Errorf("%s: hash %q", s.Name(), s.Hash())
		}
	}
}

// Scripts never read the client's clock, never build key names, and never
// use floating-point math on shared state.
func TestScriptsFollowTheContract(t *testing.T) {
	for _, s := range lua.All() {
		src := s.Source()
		for _, bad := range []string{"os.time", "math.random", "KEYS[1] ..", ".. KEYS[", "tostring(redis.call('INCR'"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s contains %q", s.Name(), bad)
			}
		}
	}
}
