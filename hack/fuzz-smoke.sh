#!/usr/bin/env bash
# Runs every fuzz target of the module for a short budget ($FUZZTIME, default 10000x), so
# that `make test` exercises the parsers beyond their seed corpus. A failure prints the
# failing input's path under testdata/fuzz, which go test then replays as a regression.
# The budget is a count of executions, not a duration: with a duration, Go 1.26's fuzz
# coordinator can report a spurious "context deadline exceeded" when the time runs out
# while a worker is mid-execution on a loaded machine (golang/go#75804, fixed in 1.27).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10000x}
count=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		echo "fuzz-smoke: $pkg $target ($fuzztime)"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
		count=$((count + 1))
	done
done < <(git ls-files --cached --others --exclude-standard -- '*_test.go' | sort)
echo "fuzz-smoke: $count fuzz targets ran"
