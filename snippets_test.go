package coordination_test

import (
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Users paste the Go snippets of README.md and of the package docs, so each
// one must compile and check its errors: each must appear, line for line,
// in the body of an Example function, or of a function named snippet...
// that an Example calls, which the compiler checks and go test runs (on an
// embedded server).
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
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range fencedGo(string(readme)) {
		check("README.md Go block "+itoa(i+1), s)
	}
	for file, blocks := range docCodeBlocks(t) {
		for i, s := range blocks {
			check(file+" code block "+itoa(i+1), s)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

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
