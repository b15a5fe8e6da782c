package coordination_test

import (
	"os"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/engine"

	// The packages that declare instruments of their own (engine.NewMetric,
	// engine.NewLeaseMetrics), so that engine.Table holds every one.
	_ "github.com/coordkit/coordination/fencing"
	_ "github.com/coordkit/coordination/lock"
	_ "github.com/coordkit/coordination/rwlease"
)

// The README's metrics table lists exactly the instruments of the engine's
// table (engine.Table: the engine's own, in internal/engine/metrics.go, and
// every primitive's), sorted by name, with their types, units and
// attributes: one table of names, in the code and in the docs.
func TestREADMEMetricsTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- metrics table: generated from engine.Table -->", "<!-- end of metrics table -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q ... %q around the metrics table", begin, end)
	}
	got := strings.TrimSpace(s[i+len(begin) : j])
	if want := metricsTable(); got != want {
		t.Errorf("README.md's metrics table differs from the engine's table; it should read:\n\n%s\n", want)
	}
}

func metricsTable() string {
	var b strings.Builder
	b.WriteString("| instrument | type | unit | attributes | what it counts |\n|---|---|---|---|---|\n")
	for _, m := range engine.Table {
		kind := map[engine.MetricKind]string{engine.Counter: "counter", engine.Histogram: "histogram", engine.UpDownCounter: "up-down counter"}[m.Kind]
		attrs := m.Attributes
		if attrs == "" {
			attrs = "none"
		}
		b.WriteString("| `" + m.Name + "` | " + kind + " | " + m.Unit + " | " + attrs + " | " + m.Description + " |\n")
	}
	return strings.TrimSpace(b.String())
}
