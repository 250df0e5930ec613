#!/usr/bin/env bash
# A conformance suite nobody here wrote: mpi4py's own collective tests
# (tests/mpi/mpi4py-tests, vendored from mpi4py 3.1.4) on the lab testbed,
# 8 ranks, 2 per host, inca-manager in charge, run without and then with
# libinca-mpi preloaded. The lists of tests that pass must be the same, and
# the run with the interposer must have offloaded calls (printed).
# Usage: tests/func/mpi_suite.sh BUILD_DIR   (root)
set -u
BUILD=${1:?usage: mpi_suite.sh BUILD_DIR}
# shellcheck source=tests/func/lib.sh
source "$(dirname "$0")/lib.sh"
need_root
export INCA_TESTBED=incasuite
LIB=$BUILD/host-lib/mpi/libinca-mpi.so
SUITE=$SRC/tests/mpi/run_mpi4py_suite.py
for f in "$LIB" "$BUILD/control/inca-manager"; do
	[ -e "$f" ] || { echo "SKIP: $f is not built (libopenmpi-dev, the control plane)"; exit 77; }
done
command -v mpirun >/dev/null || { echo "SKIP: mpirun missing (openmpi-bin)"; exit 77; }
/usr/bin/python3 -c 'import mpi4py, numpy' 2>/dev/null ||
	{ echo "SKIP: python3-mpi4py or python3-numpy missing"; exit 77; }

WORK=$(mktemp -d /tmp/inca-mpisuite.XXXXXX)
PORT=18491
MGR_PID=
trap testbed_cleanup EXIT

# shellcheck source=deploy/jobs.sh
here=$SRC
source "$SRC/deploy/jobs.sh"
if ! manager_testbed 4 "$WORK" "$PORT" "$BUILD"; then
	not_ok "manager and testbed up"
	finish
	exit 1
fi
mpi8() { mpi_ranks 8 2 "$LIB" "$@"; }

for mode in without with; do
	[ "$mode" = with ] && on=1 || on=0
	start=$(date +%s)
	INCA_MPI=$on INCA_MPI_STATS=1 mpi8 /usr/bin/python3 "$SUITE" \
		> "$WORK/$mode.out" 2> "$WORK/$mode.err"
	expect_eq "mpi4py's collective tests $mode libinca-mpi: exit status" "$?" 0
	echo "# $mode libinca-mpi ($(( $(date +%s) - start )) s): $(grep '^mpi4py-suite:' "$WORK/$mode.out")"
	grep -E '^(ok|skip|fail|error) ' "$WORK/$mode.out" > "$WORK/$mode.list"
done
n=$(wc -l < "$WORK/without.list")
check "the suite ran ($n tests)" [ "$n" -gt 100 ]
expect_eq "the same tests pass, skip and fail with libinca-mpi as without it" \
	"$(diff "$WORK/without.list" "$WORK/with.list" | grep -c '^[<>]')" 0
diff "$WORK/without.list" "$WORK/with.list" | head -20
grep -A15 "calls summed" "$WORK/with.err"
offl=$(awk '$1 ~ /^MPI_/ { s += $2 } END { print s + 0 }' "$WORK/with.err")
echo "# calls offloaded by libinca-mpi during the suite: $offl"
check "libinca-mpi offloaded some of the suite's calls ($offl)" [ "$offl" -gt 0 ]
finish
