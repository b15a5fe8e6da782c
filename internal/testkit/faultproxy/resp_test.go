package faultproxy

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// got is one frame the splitter returned.
type got struct {
	frame string
	kind  byte
	args  []string
}

// feed splits data delivered in pieces ending at cuts (increasing offsets),
// growing the buffer as a connection reader does, and returns the frames,
// the error if any, and how many bytes were left in an incomplete frame.
func feed(commands bool, data []byte, cuts []int) (frames []got, rest int, err error) {
	sp := newSplitter(commands)
	var buf []byte
	prev := 0
	for _, cut := range append(slices.Clone(cuts), len(data)) {
		buf = append(buf, data[prev:cut]...)
		prev = cut
		for {
			n, err := sp.next(buf)
			if err != nil {
				return frames, len(buf), err
			}
			if n == 0 {
				break
			}
			g := got{frame: string(buf[:n]), kind: sp.kind}
			for _, a := range sp.args {
				g.args = append(g.args, string(buf[a[0]:a[1]]))
			}
			frames = append(frames, g)
			buf = buf[n:]
		}
	}
	return frames, len(buf), nil
}

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func multibulk(args ...string) string {
	s := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		s += bulk(a)
	}
	return s
}

type want struct {
	frame string
	kind  byte
	args  []string
}

var splitCases = []struct {
	name     string
	commands bool
	frames   []want
}{
	{"resp2 simple", false, []want{
		{"+OK\r\n", '+', nil}, {"-ERR wrong\r\n", '-', nil}, {":-42\r\n", ':', nil},
		{bulk("hello"), '$', nil}, {"$-1\r\n", '$', nil}, {"*-1\r\n", '*', nil}, {"*0\r\n", '*', nil},
		{"$0\r\n\r\n", '$', nil},
	}},
	{"bulk holding CRLF and type bytes", false, []want{
		{bulk("\r\n*1\r\n$3\r\n"), '$', nil}, {bulk("\n"), '$', nil}, {bulk("\r"), '$', nil},
	}},
	{"nested arrays with nulls", false, []want{
		{"*3\r\n*2\r\n:1\r\n$1\r\na\r\n*0\r\n*2\r\n$-1\r\n*-1\r\n", '*', nil},
	}},
	{"resp3 scalars", false, []want{
		{"_\r\n", '_', nil}, {",3.141\r\n", ',', nil}, {",-inf\r\n", ',', nil}, {"#t\r\n", '#', nil},
		{"(1234567999999999999999999999999999999\r\n", '(', nil},
		{"=29\r\ntxt:This is a verbatim\nstring\r\n", '=', nil},
		{"!21\r\nSYNTAX invalid syntax\r\n", '!', nil},
	}},
	{"resp3 aggregates", false, []want{
		{"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n", '%', nil},
		{"~3\r\n:0\r\n:1\r\n:2\r\n", '~', nil},
		{"%0\r\n", '%', nil}, {"~0\r\n", '~', nil},
		{"%1\r\n+m\r\n%1\r\n~1\r\n*1\r\n_\r\n,1.5\r\n", '%', nil},
	}},
	{"push then reply (DEBUG PROTOCOL push)", false, []want{
		{">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n", '>', nil},
		{bulk("Some real reply following the push reply"), '$', nil},
		{">3\r\n" + bulk("message") + bulk("ch") + bulk("hi"), '>', nil},
	}},
	{"attribute before a reply (DEBUG PROTOCOL attrib)", false, []want{
		{"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n" +
			bulk("Some real reply following the attribute"), '$', nil},
		{"|0\r\n:1\r\n", ':', nil},
		{"|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n>1\r\n+e\r\n", '>', nil},
	}},
	{"attribute inside an aggregate", false, []want{
		{"*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n|1\r\n+x\r\n*1\r\n:9\r\n:2\r\n", '*', nil},
	}},
	{"streamed string and aggregates", false, []want{
		{"$?\r\n;4\r\nHell\r\n;1\r\no\r\n;0\r\n", '$', nil},
		{"*?\r\n:1\r\n$?\r\n;1\r\na\r\n;0\r\n*?\r\n.\r\n.\r\n", '*', nil},
		{"%?\r\n+a\r\n:1\r\n.\r\n", '%', nil},
		{"~?\r\n.\r\n", '~', nil},
		{"*2\r\n*?\r\n:1\r\n.\r\n:2\r\n", '*', nil},
	}},
	{"multibulk commands", true, []want{
		{multibulk("SET", "k", "v"), '*', []string{"SET", "k", "v"}},
		{multibulk("EVAL", "return 'a\r\nb'", "1", "{k}:x", "*1\r\n"), '*',
			[]string{"EVAL", "return 'a\r\nb'", "1", "{k}:x", "*1\r\n"}},
		{multibulk("SET", "", "v"), '*', []string{"SET", "", "v"}},
		{"*0\r\n", '*', nil}, {"*-1\r\n", '*', nil},
		{"*2\r\n$4\r\nECHO\r\n*1\r\n$1\r\nx\r\n", '*', []string{"ECHO"}},
		{"*2\r\n+PING\r\n:7\r\n", '*', []string{"PING", "7"}},
	}},
	{"inline commands", true, []want{
		{"PING\r\n", 'i', []string{"PING"}},
		{"set  k\tv\n", 'i', []string{"set", "k", "v"}},
		{"\r\n", 'i', nil},
		{"\n", 'i', nil},
		{"  get x  \r\n", 'i', []string{"get", "x"}},
		{"+notresp\r\n", 'i', []string{"+notresp"}},
	}},
}

func TestSplitterEverySplitPoint(t *testing.T) {
	for _, c := range splitCases {
		t.Run(c.name, func(t *testing.T) {
			var stream string
			for _, w := range c.frames {
				stream += w.frame
			}
			data := []byte(stream)
			check := func(how string, cuts []int) {
				t.Helper()
				frames, rest, err := feed(c.commands, data, cuts)
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				if rest != 0 {
					t.Fatalf("%s: %d bytes left over", how, rest)
				}
				if len(frames) != len(c.frames) {
					t.Fatalf("%s: %d frames, want %d: %q", how, len(frames), len(c.frames), frames)
				}
				for i, w := range c.frames {
					g := frames[i]
					if g.frame != w.frame || g.kind != w.kind || !slices.Equal(g.args, w.args) {
						t.Fatalf("%s: frame %d = %q kind %q args %q, want %q kind %q args %q",
							how, i, g.frame, g.kind, g.args, w.frame, w.kind, w.args)
					}
				}
			}
			check("whole", nil)
			for i := 1; i < len(data); i++ {
				check("split at "+strconv.Itoa(i), []int{i})
			}
			every := make([]int, 0, len(data))
			for i := 1; i < len(data); i++ {
				every = append(every, i)
			}
			check("byte by byte", every)
		})
	}
}

func TestSplitterIncomplete(t *testing.T) {
	for _, in := range []string{"", "+OK", "+OK\r", "$5\r\nhel", "$5\r\nhello\r", "*2\r\n:1\r\n",
		"|1\r\n+a\r\n+b\r\n", "$?\r\n;1\r\na\r\n", "*?\r\n:1\r\n", "%1\r\n+a\r\n"} {
		frames, rest, err := feed(false, []byte(in), nil)
		if err != nil || len(frames) != 0 || rest != len(in) {
			t.Errorf("%q: frames %q rest %d err %v, want an incomplete frame of %d bytes", in, frames, rest, err, len(in))
		}
	}
	// A command whose last argument is still arriving is incomplete too.
	full := multibulk("SET", "k", strings.Repeat("v", 1000))
	if frames, rest, err := feed(true, []byte(full[:len(full)-1]), nil); err != nil || len(frames) != 0 || rest != len(full)-1 {
		t.Errorf("truncated command: frames %d rest %d err %v", len(frames), rest, err)
	}
}

func TestSplitterErrors(t *testing.T) {
	deep := strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n"
	for _, c := range []struct {
		in       string
		commands bool
	}{
		{"$3\r\nabcd\r\n", false},
		{"*1\r\n$3\r\nabcd\r\n", true},
		{"*x\r\n", false},
		{"*1x\r\n", true},
		{"?\r\n", false},
		{".\r\n", false},
		{"*1\r\n.\r\n", false},
		{";3\r\nabc\r\n", false},
		{"+OK\n", false},
		{"\r\n", false},
		{"$-2\r\n", false},
		{"!-1\r\n", false},
		{"%-1\r\n", false},
		{"$\r\n", false},
		{"$-\r\n", false},
		{"*99999999999999999999\r\n", false},
		{"$?\r\n+x\r\n", false},
		{"$?\r\n;-1\r\n", false},
		{"|?\r\n", false},
		{deep, false},
	} {
		_, _, err := feed(c.commands, []byte(c.in), nil)
		var pe *protoError
		if !errors.As(err, &pe) {
			t.Errorf("%q (commands %v): err %v, want a protocol error", c.in, c.commands, err)
		}
	}
	// The frames before a bad one are returned intact.
	frames, _, err := feed(false, []byte("+OK\r\n:1\r\n?\r\n"), nil)
	if err == nil || len(frames) != 2 || frames[1].frame != ":1\r\n" {
		t.Errorf("frames %q err %v, want +OK and :1 then an error", frames, err)
	}
	// Nesting up to the limit is fine.
	ok := strings.Repeat("*1\r\n", maxDepth) + ":1\r\n"
	if frames, _, err := feed(false, []byte(ok), nil); err != nil || len(frames) != 1 {
		t.Errorf("nesting %d: frames %d err %v", maxDepth, len(frames), err)
	}
}

// FuzzSplitter checks that however a stream is cut, the splitter finds the
// same frames (or the same failure), that the frames are the stream's bytes
// in order, and that each frame split on its own is one identical frame.
// Its seed corpus (the cases above and testdata/fuzz/FuzzSplitter) runs as a
// normal test.
func FuzzSplitter(f *testing.F) {
	for _, c := range splitCases {
		var stream string
		for _, w := range c.frames {
			stream += w.frame
		}
		f.Add([]byte(stream), c.commands)
	}
	f.Fuzz(func(t *testing.T, data []byte, commands bool) {
		whole, wrest, werr := feed(commands, data, nil)
		every := make([]int, 0, len(data))
		for i := 1; i < len(data); i++ {
			every = append(every, i)
		}
		var some []int
		for i := 1; i < len(data); i += 1 + int(data[i])%7 {
			some = append(some, i)
		}
		for name, cuts := range map[string][]int{"byte by byte": every, "uneven": some} {
			frames, rest, err := feed(commands, data, cuts)
			if (err == nil) != (werr == nil) {
				t.Fatalf("%s: err %v, whole: %v", name, err, werr)
			}
			if len(frames) != len(whole) {
				t.Fatalf("%s: %d frames, whole: %d", name, len(frames), len(whole))
			}
			for i := range frames {
				if frames[i].frame != whole[i].frame || frames[i].kind != whole[i].kind || !slices.Equal(frames[i].args, whole[i].args) {
					t.Fatalf("%s: frame %d differs: %q vs %q", name, i, frames[i], whole[i])
				}
			}
			if err == nil && rest != wrest {
				t.Fatalf("%s: %d bytes left, whole: %d", name, rest, wrest)
			}
		}
		var joined strings.Builder
		for _, g := range whole {
			if g.frame == "" {
				t.Fatal("empty frame")
			}
			joined.WriteString(g.frame)
			again, rest, err := feed(commands, []byte(g.frame), nil)
			if err != nil || rest != 0 || len(again) != 1 || again[0].kind != g.kind || !slices.Equal(again[0].args, g.args) {
				t.Fatalf("frame %q alone: %q rest %d err %v", g.frame, again, rest, err)
			}
		}
		if !strings.HasPrefix(string(data), joined.String()) {
			t.Fatal("frames are not a prefix of the stream")
		}
		if werr == nil && joined.Len()+wrest != len(data) {
			t.Fatalf("frames (%d bytes) + rest (%d) != stream (%d)", joined.Len(), wrest, len(data))
		}
	})
}
