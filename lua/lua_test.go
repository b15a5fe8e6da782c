package lua_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/coordkit/coordination/lua"
)

// Every script begins with its contract: KEYS, ARGV (where it takes any),
// the reply, and its error codes.
func TestEveryScriptStatesItsContract(t *testing.T) {
	all := scripts(t)
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
	}
}

// Scripts never read the client's clock, never build key names, and never
// use floating-point math on shared state.
func TestScriptsFollowTheContract(t *testing.T) {
	for _, s := range scripts(t) {
		src := s.Source()
		for _, bad := range []string{"os.time", "math.random", "KEYS[1] ..", ".. KEYS[", "tostring(redis.call('INCR'"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s contains %q", s.Name(), bad)
			}
		}
	}
}

type script struct{ name, src string }

func (s script) Name() string   { return s.name }
func (s script) Source() string { return s.src }

func scripts(t *testing.T) []script {
	t.Helper()
	var out []script
	for _, n := range lua.Names() {
		b, err := fs.ReadFile(lua.FS(), n+".lua")
		if err != nil {
			t.Fatal(err)
		}
		// The release channel is the one string a script may build from a
		// key name: "coordination:" .. KEYS[1].
		src := strings.NewReplacer("'coordination:' .. KEYS[1]", "CHANNEL", `"coordination:" .. KEYS[1]`, "CHANNEL").Replace(string(b))
		out = append(out, script{n, src})
	}
	return out
}

// redis.pcall is only for best-effort notifications: a pcall around a data
// command would read a NOPERM (an ACL that denies the command) or an OOM
// as something else. Scripts read with redis.call; a WRONGTYPE then aborts
// the script before it writes, and the client maps it to ErrBadState (COORD_WRONGTYPE).
// One exception (added with timed denials): the deny-list scripts read a
// sorted set or, the earlier layout, a plain set (no TYPE: it is not in the
// library's ACL line), telling them apart by ZSCORE's WRONGTYPE; their
// pcall is followed by a check that raises any other error as it came.
func TestPcallOnlyPublishes(t *testing.T) {
	const typeProbe = "'ZSCORE', KEYS[1]"
	const reraise = "if not string.find(s.err, 'WRONGTYPE', 1, true) then\n    return redis.error_reply(s.err)"
	for _, s := range scripts(t) {
		src := s.Source()
		for i := strings.Index(src, "redis.pcall("); i >= 0; {
			rest := src[i+len("redis.pcall("):]
			probe := strings.HasPrefix(s.Name(), "ratelimit_deny_") && strings.HasPrefix(rest, typeProbe) &&
				strings.Contains(rest[:min(len(rest), 200)], reraise)
			if !probe && !strings.HasPrefix(rest, "'PUBLISH'") && !strings.HasPrefix(rest, "'SPUBLISH'") {
				line := strings.Count(src[:i], "\n") + 1
				t.Errorf("%s:%d: redis.pcall of something other than PUBLISH", s.Name(), line)
			}
			j := strings.Index(rest, "redis.pcall(")
			if j < 0 {
				break
			}
			i += len("redis.pcall(") + j
		}
	}
}
