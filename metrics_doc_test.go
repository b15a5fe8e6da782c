package coordination_test

import (
	"os"
	"strings"
	"testing"

	// Every primitive's package, for its instruments.
	_ "github.com/coordkit/coordination/fencing"
	_ "github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/instrument"
	_ "github.com/coordkit/coordination/latch"
	_ "github.com/coordkit/coordination/leader"
	_ "github.com/coordkit/coordination/lock"
	_ "github.com/coordkit/coordination/ratelimit"
	_ "github.com/coordkit/coordination/redlock"
	_ "github.com/coordkit/coordination/rwlease"
	_ "github.com/coordkit/coordination/semaphore"
)

// docs/metrics.md's table lists exactly the instruments of the engine's
// table, in its order (by name), with their types, units and attributes:
// one table of names, in the code and in the docs. The table holds the
// instruments of the packages linked into the program, each declared by
// the package that records it: the imports below link every primitive.
func TestREADMEMetricsTable(t *testing.T) {
	readme, err := os.ReadFile("docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- metrics table: generated from instrument.Table -->", "<!-- end of metrics table -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/metrics.md lacks the markers %q ... %q around the metrics table", begin, end)
	}
	got := strings.TrimSpace(s[i+len(begin) : j])
	if want := metricsTable(); got != want {
		t.Errorf("docs/metrics.md's metrics table differs from the engine's table; it should read:\n\n%s\n", want)
	}
}

// The instrument table, with every primitive linked, has unique names in
// the coordination.<primitive>. namespace, each with a description and a
// unit.
func TestMetricTable(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range instrument.Table {
		if seen[m.Name] {
			t.Errorf("%s declared twice", m.Name)
		}
		seen[m.Name] = true
		if !strings.HasPrefix(m.Name, "coordination.") || strings.Count(m.Name, ".") < 2 {
			t.Errorf("%s: want coordination.<primitive>.<what>", m.Name)
		}
		if m.Description == "" || m.Unit == "" {
			t.Errorf("%s: description or unit missing", m.Name)
		}
	}
}

func metricsTable() string {
	var b strings.Builder
	b.WriteString("| instrument | type | unit | attributes | what it counts |\n|---|---|---|---|---|\n")
	for _, m := range instrument.Table {
		kind := map[instrument.Kind]string{instrument.Counter: "counter", instrument.Histogram: "histogram", instrument.UpDownCounter: "up-down counter"}[m.Kind]
		attrs := m.Attributes
		if attrs == "" {
			attrs = "none"
		}
		b.WriteString("| `" + m.Name + "` | " + kind + " | " + m.Unit + " | " + attrs + " | " + m.Description + " |\n")
	}
	return strings.TrimSpace(b.String())
}
