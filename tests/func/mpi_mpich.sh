#!/usr/bin/env bash
# Functional test of libinca-mpi-mpich: the interposer built for MPICH's ABI
# (Debian's mpich 4.0, ch4:ucx), preloaded into unmodified MPICH programs
# (C, and Fortran 90 with `use mpi`, whose bindings call the C functions)
# launched by hydra on a 4-host testbed with 2 ranks per host (8 ranks),
# inca-manager in charge, MPI's own traffic on the management network over
# UCX's TCP (shared memory inside a host). Every call libinca serves
# offloaded and every result exact, C and Fortran; then the switch killed
# mid-job, the program finishing right. (MPICH alone is not run: in this
# lab it crashed in MPI_Reduce with UCX's shared memory, and hung in
# MPI_Finalize without it: docs/mpi.md.)
# Usage: tests/func/mpi_mpich.sh BUILD_DIR   (root)
set -u
BUILD=${1:?usage: mpi_mpich.sh BUILD_DIR}
# shellcheck source=tests/func/lib.sh
source "$(dirname "$0")/lib.sh"
need_root
export INCA_TESTBED=incampich
LIB=$BUILD/host-lib/mpi/libinca-mpi-mpich.so
CHECK=$BUILD/tests/mpi/mpi-check-mpich
CHECK_F=$BUILD/tests/mpi/mpi-check-f-mpich
for f in "$LIB" "$CHECK" "$CHECK_F" "$BUILD/control/inca-manager"; do
	[ -e "$f" ] || { echo "SKIP: $f is not built (mpich, libmpich-dev and gfortran: deploy/install-deps.sh)"; exit 77; }
done
command -v mpiexec.hydra >/dev/null || { echo "SKIP: mpiexec.hydra missing (mpich)"; exit 77; }

WORK=$(mktemp -d /tmp/inca-mpich.XXXXXX)
PORT=18494
MGR_PID=
JOB_PID=
trap testbed_cleanup EXIT

echo "# the library of the other ABI, preloaded by mistake, says so (before MPI starts)"
# (both libraries built: Open MPI and MPICH installed, as install-deps does)
if [ -e "$BUILD/host-lib/mpi/libinca-mpi.so" ]; then
	out=$(LD_PRELOAD="$BUILD/host-lib/mpi/libinca-mpi.so" timeout 60 "$CHECK" -s 1 2>&1)
	expect_eq "libinca-mpi.so (Open MPI's) in an MPICH program: exit status" "$?" 1
	check "... saying which to preload ($(head -c 150 <<< "$out"))" grep -q "preload libinca-mpi-mpich.so" <<< "$out"
fi
if [ -x "$BUILD/tests/mpi/mpi-check" ]; then
	out=$(LD_PRELOAD="$LIB" timeout 60 "$BUILD/tests/mpi/mpi-check" -s 1 2>&1)
	expect_eq "libinca-mpi-mpich.so in an Open MPI program: exit status" "$?" 1
	check "... saying which to preload ($(head -c 150 <<< "$out"))" grep -q "preload libinca-mpi.so instead" <<< "$out"
fi

# shellcheck source=deploy/jobs.sh
here=$SRC
source "$SRC/deploy/jobs.sh"
if ! manager_testbed 4 "$WORK" "$PORT" "$BUILD"; then
	not_ok "manager and testbed up"
	finish
	exit 1
fi
mpi8() { mpich_ranks 8 2 "$LIB" "$@"; }

echo "# C program through libinca-mpi-mpich: world, dup, split; every mapped type x op"
INCA_MPI_OFFLOAD_AFTER=1 mpi8 "$CHECK" -m 1048576 > "$WORK/c.out" 2> "$WORK/c.err"
expect_eq "mpi-check exit status" "$?" 0
check "mpi-check: every result exact" grep -q "mpi-check: [1-9][0-9]* passed, 0 failed" "$WORK/c.out"
grep "mpi-check:" "$WORK/c.out"
grep -A15 "calls summed" "$WORK/c.err"
mpi_all_offloaded "$WORK/c.err" ""
check "MINLOC and a derived type passed through, counted by type ($(mpi_stat "$WORK/c.err" MPI_Allreduce 9))" \
	[ "$(mpi_stat "$WORK/c.err" MPI_Allreduce 9)" -gt 0 ]
check "a user op passed through, counted by op ($(mpi_stat "$WORK/c.err" MPI_Allreduce 10))" \
	[ "$(mpi_stat "$WORK/c.err" MPI_Allreduce 10)" -gt 0 ]
expect_eq "no call finished through MPI with the switch alive (p_failed)" \
	"$(awk '$1 ~ /^MPI_/ { s += $13 } END { print s + 0 }' "$WORK/c.err")" 0
[ "$FAILED" -gt 0 ] && grep -E "FAIL|rror" "$WORK/c.err" | head -20

echo "# Fortran 90 program (use mpi, built with mpif90.mpich)"
INCA_MPI_OFFLOAD_AFTER=1 mpi8 "$CHECK_F" > "$WORK/f.out" 2> "$WORK/f.err"
expect_eq "mpi-check-f exit status" "$?" 0
check "mpi-check-f: every result exact" grep -q "mpi-check-f: [1-9][0-9]* passed, 0 failed" "$WORK/f.out"
grep "mpi-check-f:" "$WORK/f.out"
mpi_all_offloaded "$WORK/f.err" "Fortran: "
expect_eq "Fortran: nothing passed through (the world and a split, all mapped)" \
	"$(awk '$1 ~ /^MPI_/ { s += $3 } END { print s + 0 }' "$WORK/f.err")" 0

mpi_switch_kill_case mpi8 "$CHECK"
finish
