#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time ($FUZZTIME, default 3s), so that
# `make test` exercises the parsers beyond their seed corpus. A failure prints the
# failing input's path under testdata/fuzz, which go test then replays as a regression.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-3s}
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
