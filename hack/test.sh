#!/usr/bin/env bash
# make test: every check, in the order that wastes the least time on two
# cores. The unit and harness tests run first and alone: they drive real
# plugins through NRI, whose requests time out after 2 s, and must have the
# CPU. Then the real-node tests (make e2e) run, and beside them, at the
# lowest CPU priority, the checks that time nothing: lint, the chart's
# tests and fuzz-smoke. The sandboxes wait on containers much of the time,
# and the kernel gives a process at nice 19 only what the others leave, so
# those checks take nothing from a sandbox that needs the CPU and the whole
# run is minutes shorter. Their output follows e2e's.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
mkdir -p _out
checks_log=_out/checks.log

# took prints how long a phase took, for the CI budget (docs/benchmarks.md).
took() { echo "make test: $1 took $(($(date +%s) - $2))s"; }

# The pinned runtime binaries first: a cold cache builds them here, and the
# seccomp effect test among the unit tests runs the cached runc.
start=$(date +%s)
$make --no-print-directory runtime-bins || exit
took runtime-bins "$start"

start=$(date +%s)
$make --no-print-directory unit || exit
took unit "$start"

start=$(date +%s)
(
	nice -n 19 $make --no-print-directory lint chart fuzz-smoke
	status=$?
	took "lint, chart and fuzz-smoke" "$start"
	exit $status
) >"$checks_log" 2>&1 &
checks=$!
$make --no-print-directory e2e
e2e=$?
took e2e "$start"
wait "$checks"
checks_status=$?

echo "=== lint, chart and fuzz-smoke (beside e2e, at nice 19; $checks_log):"
cat "$checks_log"
if ((e2e != 0 || checks_status != 0)); then
	echo "make test: failed: e2e exit status $e2e, lint/chart/fuzz-smoke exit status $checks_status" >&2
	exit 1
fi
