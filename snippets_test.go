package coordination_test

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Users paste the Go snippets of README.md, of the pages of docs/ and of
// the package docs, so each one must compile and check its errors: each
// must appear, line for line, in the body of an Example function, or of a
// function named snippet... that an Example calls, which the compiler
// checks and go test runs (on an embedded server). A whole program (a
// block that starts with "package main") is README's Quick start alone:
// each of its functions but main must appear so in an Example, and
// TestQuickStartInAFreshModule builds and runs the whole of it.
func TestSnippetsAreExamples(t *testing.T) {
	bodies := exampleBodies(t)
	check := func(where, snippet string) {
		t.Helper()
		s := normalize(snippet)
		if s == "" {
			return
		}
		for _, b := range bodies {
			if strings.Contains(b, s) {
				return
			}
		}
		t.Errorf("%s: this snippet is in no Example function (make it one, verbatim):\n%s", where, snippet)
	}
	// README's snippets are function bodies, as it says ("Function bodies
	// given ctx and coord that return an error"): each must be the whole
	// body of a snippet function, so that pasted as one it compiles.
	whole := func(where, snippet string) {
		t.Helper()
		s := normalize(snippet)
		for _, b := range bodies {
			if b == s {
				return
			}
		}
		t.Errorf("%s: this README snippet is not the whole body of a snippet function (it must compile pasted as one):\n%s", where, snippet)
	}
	programs := 0
	for _, file := range markdownFiles(t) {
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range fencedGo(string(md)) {
			where := file + " Go block " + itoa(i+1)
			if !strings.HasPrefix(strings.TrimSpace(s), "package main") {
				check(where, s)
				if file == "README.md" {
					whole(where, s)
				}
				continue
			}
			programs++
			if file != "README.md" || s != quickStart(t) {
				t.Errorf("%s: a whole program, and not README's Quick start: make it a function body that an Example holds", where)
				continue
			}
			for name, body := range funcBodies(t, where, s) {
				if name != "main" {
					check(where+" func "+name, body)
				}
			}
		}
	}
	if programs != 1 {
		t.Errorf("%d whole programs in the Markdown files, want 1 (README's Quick start)", programs)
	}
	for file, blocks := range docCodeBlocks(t) {
		for i, s := range blocks {
			check(file+" code block "+itoa(i+1), s)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// markdownFiles returns README.md and every page of docs/, the Markdown
// users read and paste from.
func markdownFiles(t *testing.T) []string {
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	sort.Strings(pages)
	return append([]string{"README.md"}, pages...)
}

// funcBodies parses a whole program and returns the text of each
// function's body, by name.
func funcBodies(t *testing.T, where, src string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", src, 0)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
			out[fn.Name.Name] = src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
		}
	}
	return out
}

// quickStart returns README.md's Quick start: the first Go block after
// the "## Quick start" heading, a whole program.
func quickStart(t testing.TB) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "\n## Quick start\n")
	if !ok {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	blocks := fencedGo(after)
	if len(blocks) == 0 || !strings.HasPrefix(blocks[0], "package main\n") {
		t.Fatal("README.md's Quick start does not start with a whole program (package main)")
	}
	return blocks[0]
}

// normalize removes the common indentation and blank edges of a block and
// turns runs of whitespace inside lines into one space.
func normalize(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
	var out []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(out, "\n")
}

// fencedGo returns the bodies of the ```go blocks of a Markdown text.
func fencedGo(md string) []string {
	var out []string
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		var b []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b = append(b, lines[i])
		}
		out = append(out, strings.Join(b, "\n"))
	}
	return out
}

// docCodeBlocks returns the code blocks of every package doc comment
// (doc.go files) of the module, by file.
func docCodeBlocks(t *testing.T) map[string][]string {
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "bench" || path == "internal" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir // internal packages are not documentation users read
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if f.Doc == nil {
			return nil
		}
		var p comment.Parser
		for _, b := range p.Parse(f.Doc.Text()).Content {
			if c, ok := b.(*comment.Code); ok && looksLikeGo(c.Text) {
				out[path] = append(out[path], c.Text)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// looksLikeGo tells Go code from other preformatted text in doc comments
// (tables, SQL, shell lines, key layouts): it holds an assignment or a
// call of a package function and no table rule.
func looksLikeGo(s string) bool {
	return (strings.Contains(s, ":=") || strings.Contains(s, "err != nil")) && !strings.Contains(s, "UPDATE ") && !strings.Contains(s, "|---")
}

// exampleBodies returns the normalized bodies of every Example function in
// the module's test files.
func exampleBodies(t *testing.T) []string {
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "bench" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !(strings.HasPrefix(fn.Name.Name, "Example") || strings.HasPrefix(fn.Name.Name, "snippet")) {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			out = append(out, normalize(body))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
