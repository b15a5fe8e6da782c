package lua

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// Every script is served assembled: no include line is left, and the text
// is the source with each include replaced by its fragment.
func TestServedScriptsAreAssembled(t *testing.T) {
	for _, n := range Names() {
		b, err := fs.ReadFile(FS(), n+".lua")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), includeMarker) {
			t.Errorf("%s: served text holds an unresolved include", n)
		}
		src, err := fs.ReadFile(sources, n+".lua")
		if err != nil {
			t.Fatal(err)
		}
		want := string(src)
		for _, f := range fragmentNames(t) {
			body, err := fs.ReadFile(sources, "fragments/"+f+".lua")
			if err != nil {
				t.Fatal(err)
			}
			want = strings.ReplaceAll(want, includeMarker+f+"\n", string(body))
			// A fragment in sections: each section is the text from its
			// marker line to the next marker (or the end).
			parts := strings.Split(string(body), "\n"+sectionMarker)
			for _, p := range parts[1:] {
				name, text, _ := strings.Cut(p, "\n")
				want = strings.ReplaceAll(want, includeMarker+f+"."+name+"\n", strings.TrimSuffix(text, "\n")+"\n")
			}
		}
		if string(b) != want {
			t.Errorf("%s: served text is not the source with its fragments in", n)
		}
	}
}

// Every fragment (and every section of one written in sections) is
// included by at least one script, is no script of its own, and includes
// nothing; each section begins with a comment naming it.
func TestEveryFragmentIsUsed(t *testing.T) {
	frags := fragmentNames(t)
	if len(frags) == 0 {
		t.Fatal("no fragments embedded")
	}
	uses := map[string]int{}
	for _, n := range Names() {
		src, err := fs.ReadFile(sources, n+".lua")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(src)) {
			if f, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), includeMarker); ok {
				uses[f]++
			}
		}
	}
	for _, f := range frags {
		body, err := fs.ReadFile(sources, "fragments/"+f+".lua")
		if err != nil {
			t.Fatal(err)
		}
		if secs := sectionsOf(body); secs != nil {
			for name, text := range secs {
				if uses[f+"."+name] == 0 {
					t.Errorf("section %s.%s is included by no script", f, name)
				}
				if !strings.HasPrefix(string(text), "-- "+f+"."+name+":") {
					t.Errorf("section %s.%s must begin with %q", f, name, "-- "+f+"."+name+":")
				}
			}
		} else if uses[f] == 0 {
			t.Errorf("fragment %s is included by no script", f)
		}
		if _, err := fs.Stat(FS(), f+".lua"); err == nil {
			t.Errorf("fragment %s is served as a script", f)
		}
		if !strings.HasPrefix(string(body), "-- fragment "+f+":") {
			t.Errorf("fragment %s must begin with %q", f, "-- fragment "+f+":")
		}
	}
	if uses["time_ms"] < 16 || uses["rwlease_prune"] != 4 || uses["rwlease_member"] != 5 || uses["released"] != 5 || uses["semaphore_expiry.next"] != 5 || uses["semaphore_expiry.extend"] != 2 || uses["semaphore_state"] != 10 || uses["semaphore_set"] != 10 || uses["latch_state"] != 4 {
		t.Errorf("includes: %v", uses)
	}
}

// An include naming no fragment, or a fragment including another, fails
// the assembly (at initialisation for the embedded scripts).
func TestAssembleRefusesBadIncludes(t *testing.T) {
	good := fstest.MapFS{
		"a.lua":           {Data: []byte("-- a\n--#include f\nreturn now\n")},
		"fragments/f.lua": {Data: []byte("local now = 1\n")},
	}
	out, err := assemble(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out["a.lua"]); got != "-- a\nlocal now = 1\nreturn now\n" {
		t.Errorf("assembled %q", got)
	}
	if _, err := assemble(fstest.MapFS{"a.lua": {Data: []byte("--#include g\n")}}); err == nil {
		t.Error("an include of a missing fragment assembled")
	}
	sectioned := fstest.MapFS{
		"a.lua":           {Data: []byte("--#include f.two\n--#include f.one\n")},
		"fragments/f.lua": {Data: []byte("-- fragment f: two parts\n--#section one\nlocal a = 1\n--#section two\nlocal b = 2\n")},
	}
	out, err = assemble(sectioned)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out["a.lua"]); got != "local b = 2\nlocal a = 1\n" {
		t.Errorf("assembled sections %q", got)
	}
	for _, bad := range []string{"--#include f\n", "--#include f.three\n"} {
		sectioned["a.lua"] = &fstest.MapFile{Data: []byte(bad)}
		if _, err := assemble(sectioned); err == nil {
			t.Errorf("%q assembled", bad)
		}
	}
	nested := fstest.MapFS{
		"a.lua":           {Data: []byte("--#include f\n")},
		"fragments/f.lua": {Data: []byte("--#include f\n")},
	}
	if _, err := assemble(nested); err == nil {
		t.Error("a fragment including another assembled")
	}
}

// The served file system behaves as io/fs asks, and holds the scripts
// only.
func TestFSIsAFileSystem(t *testing.T) {
	var files []string
	for _, n := range Names() {
		files = append(files, n+".lua")
	}
	if err := fstest.TestFS(FS(), files...); err != nil {
		t.Fatal(err)
	}
	all, err := fs.ReadDir(FS(), ".")
	if err != nil || len(all) != len(files) {
		t.Fatalf("ReadDir: %d entries, %v; want %d", len(all), err, len(files))
	}
	// A caller changing what ReadFile returned changes nothing served.
	b, _ := fs.ReadFile(FS(), files[0])
	b[0] = 'x'
	if c, _ := fs.ReadFile(FS(), files[0]); c[0] == 'x' {
		t.Error("ReadFile returned the served bytes themselves")
	}
}

func fragmentNames(t *testing.T) []string {
	t.Helper()
	es, err := fs.ReadDir(sources, "fragments")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, strings.TrimSuffix(e.Name(), ".lua"))
	}
	return out
}
