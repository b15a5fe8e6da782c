package faultmatrix_test

import (
	"os"
	"strings"
	"testing"
)

// docs/faults.md's fault matrix is generated from the cells: every fault, every
// primitive, the effect each cell's test asserts.
func TestREADMEFaultMatrix(t *testing.T) {
	readme, err := os.ReadFile("../../../docs/faults.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- fault matrix: generated from internal/testkit/faultmatrix -->", "<!-- end of fault matrix -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/faults.md lacks the markers %q ... %q around the fault matrix", begin, end)
	}
	if got, want := strings.TrimSpace(s[i+len(begin):j]), matrixTable(); got != want {
		t.Errorf("docs/faults.md's fault matrix differs from the cells; it should read:\n\n%s\n", want)
	}
}

// matrixTable groups, for each fault, the primitives whose cells assert
// the same effect, in the order of subjects().
func matrixTable() string {
	var b strings.Builder
	b.WriteString("| fault | primitives | effect (asserted) | cells |\n|---|---|---|---|\n")
	for _, f := range faults {
		var order []string
		groups := map[string][]string{}
		for _, s := range subjects() {
			e := f.effect(s)
			if _, ok := groups[e]; !ok {
				order = append(order, e)
			}
			groups[e] = append(groups[e], s.name)
		}
		for _, e := range order {
			b.WriteString("| " + f.title + " | " + strings.Join(groups[e], ", ") + " | " + e + " | `" + f.id + "/*` |\n")
		}
	}
	return strings.TrimSpace(b.String())
}
