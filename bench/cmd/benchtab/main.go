// Command benchtab runs the side-by-side benchmarks of package bench in
// interleaved passes and prints their medians as Markdown tables.
//
// A pass is one run of the benchmark binary over every benchmark selected
// (-test.count=1). Within a pass every row is measured between two runs of
// the no-op EVALSHA floor at the same caller count, just before and just
// after it; the row's ratio is the mean of those two floors' ns/op divided
// by the row's (its ops/s over the floor's), so that a burst of load from
// the shared machine falls on the row and its floor alike. The table gives
// the median ratio over the passes with the lowest and highest in brackets,
// and the medians of ops/s, of the server time per op (srv-us/op, from INFO
// commandstats), of allocs/op and B/op. BenchmarkPaired then measures the
// same operations paired (the rows in turns of a few hundred ops): the
// ratio and the server time to compare rows by.
//
//	cd bench && go run ./cmd/benchtab                                 # throughput, server time, allocations
//	cd bench && go run ./cmd/benchtab -passes 0 -paired 0 -handoff 3  # handoff latency, three runs
//	cd bench && go run ./cmd/benchtab -passes 0 -paired 0 -memory     # MEMORY USAGE per key
//
// Servers come from the test harness (. ~/.cache/redis-servers/env.sh);
// BENCH_BACKEND selects the flavor (default redis7).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	passes := flag.Int("passes", 7, "interleaved passes of the throughput benchmarks (0: none)")
	bench := flag.String("bench", "LockAcquireRelease|IdempotencyBegin", "throughput benchmarks (regexp)")
	benchtime := flag.String("benchtime", "1s", "-test.benchtime of each throughput row")
	paired := flag.Int("paired", 3, "runs of BenchmarkPaired (rows in turns: ratio and server time per op; each a separate process)")
	handoff := flag.Int("handoff", 0, "runs of BenchmarkHandoff (each a separate process)")
	handoffs := flag.Int("handoffs", 300, "handoffs per row and run")
	memory := flag.Bool("memory", false, "print MEMORY USAGE per key (BenchmarkMemoryUsage)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "benchtab")
	check(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	check(build.Run())

	if *passes > 0 {
		var runs [][]result
		for i := range *passes {
			fmt.Fprintf(os.Stderr, "pass %d/%d\n", i+1, *passes)
			runs = append(runs, run(bin, "-test.bench", *bench, "-test.benchmem", "-test.benchtime", *benchtime))
		}
		throughput(runs, *passes)
	}
	if *paired > 0 {
		var runs [][]result
		for i := range *paired {
			fmt.Fprintf(os.Stderr, "paired run %d/%d\n", i+1, *paired)
			runs = append(runs, run(bin, "-test.bench", "Paired", "-test.benchtime", "1x"))
		}
		pairedTable(runs)
	}
	for i := range *handoff {
		fmt.Fprintf(os.Stderr, "handoff run %d/%d\n", i+1, *handoff)
		rs := run(bin, "-test.bench", "Handoff", "-test.benchtime", fmt.Sprintf("%dx", *handoffs))
		fmt.Printf("\nHandoff run %d of %d (%d handoffs per row):\n\n", i+1, *handoff, *handoffs)
		fmt.Println("| waiter | p50 ms | p90 ms | p99 ms |")
		fmt.Println("|---|---|---|---|")
		for _, r := range rs {
			fmt.Printf("| %s | %.2f | %.2f | %.2f |\n", r.row, r.metrics["p50-ms"], r.metrics["p90-ms"], r.metrics["p99-ms"])
		}
	}
	if *memory {
		rs := run(bin, "-test.bench", "MemoryUsage", "-test.benchtime", "1x")
		fmt.Println("\n| key | MEMORY USAGE B |")
		fmt.Println("|---|---|")
		for _, r := range rs {
			fmt.Printf("| %s | %.0f |\n", r.row, r.metrics["bytes"])
		}
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtab:", err)
		os.Exit(1)
	}
}

// result is one benchmark line: BenchmarkGroup/row/callers=N-P.
type result struct {
	group, row string
	callers    int
	metrics    map[string]float64 // "ns/op", "srv-us/op", "allocs/op", "B/op", ...
}

var lineRE = regexp.MustCompile(`^Benchmark([^/\s]+)/(\S+?)(?:/callers=(\d+))?(?:#\d+)?(?:-\d+)?\s+\d+\s+(.*)$`)

func run(bin string, args ...string) []result {
	cmd := exec.Command(bin, append([]string{"-test.run", "^$"}, args...)...)
	cmd.Dir = "."
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(out.Bytes())
		check(err)
	}
	var rs []result
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r := result{group: m[1], row: m[2], metrics: map[string]float64{}}
		r.callers, _ = strconv.Atoi(m[3])
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				r.metrics[f[i+1]] = v
			}
		}
		rs = append(rs, r)
	}
	return rs
}

const floor = "floor-evalsha-noop"

func throughput(runs [][]result, passes int) {
	type key struct{ group, row string }
	type series struct{ ratio, srv, allocs, bytes, ops []float64 }
	data := map[key]map[int]*series{}
	var order []key
	for _, rs := range runs {
		for i, r := range rs {
			k := key{r.group, r.row}
			if data[k] == nil {
				data[k] = map[int]*series{}
				order = append(order, k)
			}
			s := data[k][r.callers]
			if s == nil {
				s = &series{}
				data[k][r.callers] = s
			}
			ns := r.metrics["ns/op"]
			if r.row == floor {
				s.ratio = append(s.ratio, 1)
			} else if f := flanking(rs, i); f > 0 && ns > 0 {
				s.ratio = append(s.ratio, f/ns)
			}
			if ns > 0 {
				s.ops = append(s.ops, 1e9/ns)
			}
			s.srv = append(s.srv, r.metrics["srv-us/op"])
			s.allocs = append(s.allocs, r.metrics["allocs/op"])
			s.bytes = append(s.bytes, r.metrics["B/op"])
		}
	}
	fmt.Printf("\nMedians of %d passes (ratio = ops/s over the no-op EVALSHA measured just before and after the row; [lowest-highest]).\n", passes)
	group := ""
	for _, k := range order {
		if k.group != group {
			group = k.group
			fmt.Printf("\n%s:\n\n", group)
			fmt.Println("| row | ratio, 1 caller | ratio, 64 callers | ops/s 1 / 64 | server µs/op 1 / 64 | allocs/op | B/op |")
			fmt.Println("|---|---|---|---|---|---|---|")
		}
		one, many := data[k][1], data[k][64]
		fmt.Printf("| %s | %s | %s | %s / %s | %s / %s | %s | %s |\n", k.row,
			spread(one, func(s *series) []float64 { return s.ratio }),
			spread(many, func(s *series) []float64 { return s.ratio }),
			med(one, func(s *series) []float64 { return s.ops }, "%.0f"),
			med(many, func(s *series) []float64 { return s.ops }, "%.0f"),
			med(one, func(s *series) []float64 { return s.srv }, "%.1f"),
			med(many, func(s *series) []float64 { return s.srv }, "%.1f"),
			med(one, func(s *series) []float64 { return s.allocs }, "%.0f"),
			med(one, func(s *series) []float64 { return s.bytes }, "%.0f"))
	}
}

// flanking returns the mean ns/op of the floors measured just before and
// just after rs[i] (same group and caller count), or of the one there is.
func flanking(rs []result, i int) float64 {
	var sum float64
	var n int
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(rs) && rs[j].row == floor && rs[j].group == rs[i].group && rs[j].callers == rs[i].callers {
			sum += rs[j].metrics["ns/op"]
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// pairedTable prints, per row, the median over runs of its ratio (the
// floor's ns/op over the row's, same run and caller count) and of its
// server time per op.
func pairedTable(runs [][]result) {
	type key struct {
		row     string
		callers int
	}
	ratio, srv := map[key][]float64{}, map[key][]float64{}
	var order []string
	seen := map[string]bool{}
	for _, rs := range runs {
		floors := map[int]float64{}
		for _, r := range rs {
			if r.row == floor {
				floors[r.callers] = r.metrics["ns/op"]
			}
		}
		for _, r := range rs {
			if !seen[r.row] {
				seen[r.row] = true
				order = append(order, r.row)
			}
			k := key{r.row, r.callers}
			if ns := r.metrics["ns/op"]; ns > 0 && floors[r.callers] > 0 {
				ratio[k] = append(ratio[k], floors[r.callers]/ns)
			}
			srv[k] = append(srv[k], r.metrics["srv-us/op"])
		}
	}
	fmt.Printf("\nPaired (rows in turns, 25 rounds; ratio = ops/s over the no-op EVALSHA's), median of %d runs [lowest-highest]:\n\n", len(runs))
	fmt.Println("| row | ratio, 1 caller | ratio, 64 callers | server µs/op, 1 caller | server µs/op, 64 callers |")
	fmt.Println("|---|---|---|---|---|")
	cell := func(v []float64, format string) string {
		if len(v) == 0 {
			return "-"
		}
		return fmt.Sprintf(format+" ["+format+"-"+format+"]", median(v), slices.Min(v), slices.Max(v))
	}
	for _, row := range order {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", row,
			cell(ratio[key{row, 1}], "%.2f"), cell(ratio[key{row, 64}], "%.2f"),
			cell(srv[key{row, 1}], "%.2f"), cell(srv[key{row, 64}], "%.2f"))
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func med[S any](s *S, get func(*S) []float64, format string) string {
	if s == nil || len(get(s)) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(get(s)))
}

func spread[S any](s *S, get func(*S) []float64) string {
	if s == nil || len(get(s)) == 0 {
		return "-"
	}
	v := get(s)
	return fmt.Sprintf("%.2f [%.2f-%.2f]", median(v), slices.Min(v), slices.Max(v))
}
