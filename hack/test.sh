#!/usr/bin/env bash
# make test: every check, in the order that wastes the least time on two
# cores. The unit and harness tests and the real-node tests (make e2e) run
# side by side: each keeps a core busy only about half of the time (the
# harness tests wait on NRI's round trips, the sandboxes on their
# containers and the control plane), and neither takes the host's sandbox
# lock from the other (the real-node tests, TestRealNode*, are all e2e's).
# Beside them, at the lowest CPU priority, run the checks that time
# nothing: lint, the chart's tests and fuzz-smoke; the kernel gives a
# process at nice 19 only what the others leave. The output of the unit
# tests and of the checks follows e2e's.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
mkdir -p _out
unit_log=_out/unit.log
checks_log=_out/checks.log

# took prints how long a phase took, for the CI budget (docs/benchmarks.md).
took() { echo "make test: $1 took $(($(date +%s) - $2))s"; }

# The pinned runtime binaries first: a cold cache builds them here, and the
# seccomp effect test among the unit tests runs the cached runc.
start=$(date +%s)
$make --no-print-directory runtime-bins || exit
took runtime-bins "$start"

start=$(date +%s)
(
	$make --no-print-directory unit
	status=$?
	took unit "$start"
	exit $status
) >"$unit_log" 2>&1 &
unit=$!
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
wait "$unit"
unit_status=$?
wait "$checks"
checks_status=$?
took "make test" "$start"

echo "=== unit and harness tests (beside e2e; $unit_log):"
cat "$unit_log"
echo "=== lint, chart and fuzz-smoke (beside e2e, at nice 19; $checks_log):"
cat "$checks_log"
if ((e2e != 0 || unit_status != 0 || checks_status != 0)); then
	echo "make test: failed: e2e exit status $e2e, unit exit status $unit_status, lint/chart/fuzz-smoke exit status $checks_status" >&2
	exit 1
fi
