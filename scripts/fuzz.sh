#!/bin/sh
# Runs every fuzz target of the module and of the tests/ module (each
# `func FuzzX` in a _test.go file) for FUZZTIME each (a duration such as
# 10s, the default, or a count of executions such as 30000x), one after
# another, and prints the executions per target. Fails on the first
# target that finds a failing input (go test writes it to the package's testdata/fuzz/FuzzX/: commit it
# with the fix). `make fuzz-short` runs it in CI; `make fuzz FUZZTIME=10m`
# for longer campaigns. FUZZ_MATCH restricts the targets (a grep -E pattern).
set -eu
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
match=${FUZZ_MATCH:-.}
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
for file in $(git ls-files '*_test.go' | grep -v '^bench/\|^examples/'); do
	pkg=./$(dirname "$file")
	# tests/ is its own module (porcupine, goleak): go test runs there.
	mod=. rel=$pkg
	case $pkg in ./tests/*) mod=tests rel=./${pkg#./tests/} ;; esac
	for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' "$file"); do
		echo "$pkg $target" | grep -Eq -- "$match" || continue
		out=$(cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$rel" 2>&1) || {
			echo "$out"
			echo "fuzz: $pkg $target FAILED"
			exit 1
		}
		execs=$(echo "$out" | sed -n 's/.*execs: \([0-9]*\) .*/\1/p' | tail -1)
		printf '%-24s %-28s %10s execs in %s\n' "$pkg" "$target" "${execs:-?}" "$fuzztime" | tee -a "$summary"
	done
done
echo "fuzz summary:"
cat "$summary"
