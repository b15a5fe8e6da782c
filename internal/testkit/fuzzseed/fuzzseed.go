// Package fuzzseed writes the seed corpus of fuzz targets and builds the
// fuzzed script replies of the decoder targets (FuzzDecoders). It imports
// nothing of the module, so that any package's internal tests can use it.
package fuzzseed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Seeds adds each seed (one value per argument of the fuzz function, in
// order) to f's corpus with f.Add. With COORD_WRITE_CORPUS=1 it also writes
// each seed as a file of the committed corpus,
// testdata/fuzz/<target>/seed-<n> (the format of `go test -fuzz`), so that
// `COORD_WRITE_CORPUS=1 go test -run '^FuzzX$' ./pkg/` refreshes the
// corpus after the seeds change. Go runs the committed corpus, with the
// f.Add seeds, as a normal test of the target.
func Seeds(f *testing.F, seeds ...[]any) {
	f.Helper()
	write := os.Getenv("COORD_WRITE_CORPUS") == "1"
	dir := filepath.Join("testdata", "fuzz", f.Name())
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for i, s := range seeds {
		f.Add(s...)
		if !write {
			continue
		}
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, v := range s {
			switch x := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", x)
			case string:
				fmt.Fprintf(&b, "string(%q)\n", x)
			case bool:
				fmt.Fprintf(&b, "bool(%v)\n", x)
			case int:
				fmt.Fprintf(&b, "int(%d)\n", x)
			case int64:
				fmt.Fprintf(&b, "int64(%d)\n", x)
			case uint8:
				fmt.Fprintf(&b, "byte(%q)\n", x)
			case uint16:
				fmt.Fprintf(&b, "uint16(%d)\n", x)
			case uint64:
				fmt.Fprintf(&b, "uint64(%d)\n", x)
			default:
				f.Fatalf("Seeds: unsupported seed type %T", v)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(b.String()), 0o644); err != nil {
			f.Fatal(err)
		}
	}
}
