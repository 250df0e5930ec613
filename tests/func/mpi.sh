#!/usr/bin/env bash
# Functional test of libinca-mpi: unmodified Open MPI programs (C, and
# Python through Debian's mpi4py) on a 4-host testbed with 2 ranks per host
# (8 ranks), inca-manager in charge, MPI's own traffic on the management
# network. Every all-reduce is checked element by element; the switch's
# counters must show the offloaded bytes; MINLOC, derived types and user ops
# pass through; a rank that cannot offload makes every rank pass through;
# communicators used fewer times than INCA_MPI_OFFLOAD_AFTER are never
# offloaded; and with the switch killed mid-job the program still finishes
# right.
# Usage: tests/func/mpi.sh BUILD_DIR   (root)
set -u
BUILD=${1:?usage: mpi.sh BUILD_DIR}
# shellcheck source=tests/func/lib.sh
source "$(dirname "$0")/lib.sh"
need_root
export INCA_TESTBED=incampi
LIB=$BUILD/host-lib/mpi/libinca-mpi.so
CHECK=$BUILD/tests/mpi/mpi-check
for f in "$LIB" "$CHECK" "$BUILD/control/inca-manager"; do
	[ -e "$f" ] || { echo "SKIP: $f is not built (libopenmpi-dev, the control plane)"; exit 77; }
done
command -v mpirun >/dev/null || { echo "SKIP: mpirun missing (openmpi-bin)"; exit 77; }

WORK=$(mktemp -d /tmp/inca-mpi.XXXXXX)
PORT=18490
MGR_PID=
JOB_PID=
trap testbed_cleanup EXIT

# shellcheck source=deploy/jobs.sh
here=$SRC
source "$SRC/deploy/jobs.sh"
# a second tenant that may hold 2 jobs (the pool's retry below)
head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$WORK/small.token"
export MANAGER_TENANTS_EXTRA=", { \"name\": \"small\", \"token\": \"$(cat "$WORK/small.token")\",
                 \"max_slots_per_switch\": 16384, \"max_jobs\": 2 }"
if ! manager_testbed 4 "$WORK" "$PORT" "$BUILD"; then
	not_ok "manager and testbed up"
	finish
	exit 1
fi
mpi8() { mpi_ranks 8 2 "$LIB" "$@"; }
# the contributions the switch counted so far
contributions() { telemetry /inca/info contributions; }

echo "# C program: world, dup, split; every mapped type x op; 1 element .. 16 MiB"
before=$(contributions)
# every communicator decided at its first offloadable call (the refused one
# makes one call)
INCA_MPI_OFFLOAD_AFTER=1 mpi8 "$CHECK" -m 16777216 -r 3 > "$WORK/c.out" 2> "$WORK/c.err"
rc=$?
after=$(contributions)
expect_eq "mpi-check exit status" "$rc" 0
check "mpi-check: every result exact" grep -q "mpi-check: [1-9][0-9]* passed, 0 failed" "$WORK/c.out"
grep "mpi-check:" "$WORK/c.out"
grep -A15 "calls summed" "$WORK/c.err"
mpi_all_offloaded "$WORK/c.err" ""
# the table's columns: 8 p_comm, 9 p_type, 10 p_op, 11 p_size, 12 p_shape, 13 p_failed
check "MINLOC and a derived type passed through, counted by type ($(mpi_stat "$WORK/c.err" MPI_Allreduce 9))" \
	[ "$(mpi_stat "$WORK/c.err" MPI_Allreduce 9)" -gt 0 ]
check "a user op passed through, counted by op ($(mpi_stat "$WORK/c.err" MPI_Allreduce 10))" \
	[ "$(mpi_stat "$WORK/c.err" MPI_Allreduce 10)" -gt 0 ]
check "the refused communicator passed through, counted by communicator" \
	[ "$(mpi_stat "$WORK/c.err" MPI_Allreduce 8)" -gt 0 ]
expect_eq "MPI_Reduce_scatter with unequal counts passed through (by shape: 4 types x 3 sizes x 2 communicators x 8 ranks)" \
	"$(mpi_stat "$WORK/c.err" MPI_Reduce_scatter 12)" 192
expect_eq "no call finished through MPI with the switch alive (p_failed)" \
	"$(awk '$1 ~ /^MPI_/ { s += $13 } END { print s + 0 }' "$WORK/c.err")" 0
bytes=$(mpi_stat "$WORK/c.err" MPI_Allreduce 4)
# the ranks of a host reduce inside it first, and their leader sends at
# least one contribution per 992 bytes (IB MTU 1024): half the ranks' bytes
need=$(( ${bytes:-0} / 2 / 992 ))
got=$(( after - before ))
check "the switch counted the contributions ($got >= $need)" test "$got" -ge "$need" -a "$need" -gt 0
hf=$(sed -n 's/^libinca-mpi: \([0-9]*\) of libinca.s \([0-9]*\) collectives reduced inside the host first.*/\1 \2/p' "$WORK/c.err")
check "collectives reduced inside the host first ($hf of them)" test "${hf%% *}" -gt 0 2>/dev/null
check "8 ranks, 2 per host, on the switch's groups (4 communicators offloaded)" \
	[ "$(grep -c 'offloaded to INCA' "$WORK/c.err")" -ge 4 ]
check "a rank that cannot offload makes every rank pass through (said once)" \
	grep -q "not offloaded: rank 3: INCA_IFNAME names no interface" "$WORK/c.err"
if [ "$FAILED" -gt 0 ]; then
	grep -E "FAIL|rror" "$WORK/c.err" | head -20
fi

echo "# short-lived communicators: a split, a broadcast, an all-reduce, freed, 10 times"
mpi8 "$CHECK" -s 10 > "$WORK/s.out" 2> "$WORK/s.err"
expect_eq "short-lived: mpi-check exit status" "$?" 0
check "short-lived: every result exact" grep -q "mpi-check: 160 passed, 0 failed" "$WORK/s.out"
expect_eq "short-lived: no communicator offloaded before its 4th call (INCA_MPI_OFFLOAD_AFTER)" \
	"$(grep -c 'offloaded to INCA' "$WORK/s.err")" 0
expect_eq "short-lived: every all-reduce and broadcast passed through (offloaded, passed)" \
	"$(mpi_stat "$WORK/s.err" MPI_Allreduce 2) $(mpi_stat "$WORK/s.err" MPI_Allreduce 3) $(mpi_stat "$WORK/s.err" MPI_Bcast 2) $(mpi_stat "$WORK/s.err" MPI_Bcast 3)" "0 80 0 88"
INCA_MPI_OFFLOAD_AFTER=2 mpi8 "$CHECK" -s 10 > "$WORK/s2.out" 2> "$WORK/s2.err"
expect_eq "short-lived, INCA_MPI_OFFLOAD_AFTER=2: mpi-check exit status" "$?" 0
check "short-lived, INCA_MPI_OFFLOAD_AFTER=2: every result exact" \
	grep -q "mpi-check: 160 passed, 0 failed" "$WORK/s2.out"
# MPI_COMM_WORLD's second offloadable call is the program's last
# MPI_Bcast (after its MPI_Reduce of the counts)
expect_eq "short-lived, INCA_MPI_OFFLOAD_AFTER=2: each half of each split offloaded at its all-reduce, the world at its bcast" \
	"$(grep -c 'offloaded to INCA' "$WORK/s2.err") $(mpi_stat "$WORK/s2.err" MPI_Allreduce 2) $(mpi_stat "$WORK/s2.err" MPI_Bcast 2)" "21 80 8"
# each split after the first has the ranks of the one freed before it: its
# halves take the freed halves' groups (INCA_MPI_POOL), no new job
expect_eq "short-lived, INCA_MPI_OFFLOAD_AFTER=2: the halves of splits 2..10 take the freed halves' groups" \
	"$(grep -c "a freed communicator's group" "$WORK/s2.err")" 18
check "short-lived, INCA_MPI_OFFLOAD_AFTER=2: the stats line counts them" \
	grep -q "communicators offloaded: 3 with a new group, 18 with a freed communicator's" "$WORK/s2.err"
INCA_MPI_POOL=0 INCA_MPI_OFFLOAD_AFTER=2 mpi8 "$CHECK" -s 3 > "$WORK/s3.out" 2> "$WORK/s3.err"
expect_eq "short-lived, INCA_MPI_POOL=0: mpi-check exit status" "$?" 0
expect_eq "short-lived, INCA_MPI_POOL=0: every split's halves create their own groups" \
	"$(grep -c "a freed communicator's group" "$WORK/s3.err") $(grep -c 'ms to create' "$WORK/s3.err")" "0 7"
# a tenant at its quota (2 jobs) while the halves' groups are kept (jobs on
# the manager): the world's group, made at its second call after the
# splits, is refused; every rank lets its kept groups go and it is made
# once more, as a new job
INCA_MANAGER_TOKEN_FILE=$WORK/small.token INCA_MPI_OFFLOAD_AFTER=2 mpi8 "$CHECK" -s 3 \
	> "$WORK/s4.out" 2> "$WORK/s4.err"
expect_eq "quota of 2 jobs, groups kept: mpi-check exit status" "$?" 0
check "quota of 2 jobs, groups kept: every result exact" \
	grep -q "mpi-check: [1-9][0-9]* passed, 0 failed" "$WORK/s4.out"
check "quota of 2 jobs, groups kept: the world's group refused, the kept ones let go, tried once more" \
	grep -q "groups were kept: they are let go, and it is tried once more" "$WORK/s4.err"
check "quota of 2 jobs, groups kept: 3 new groups (the halves', the world's after the retry), 4 kept ones" \
	grep -q "communicators offloaded: 3 with a new group, 4 with a freed communicator's" "$WORK/s4.err"

echo "# calls passed through on an offloaded communicator: 20 rounds of an offloaded all-reduce, then a reduce-scatter with an empty block, a user-op all-reduce, reduce, all-reduce"
mpi8 "$CHECK" -p 20 > "$WORK/p.out" 2> "$WORK/p.err"
expect_eq "passed through: mpi-check exit status" "$?" 0
check "passed through: every result exact (24 all-reduces, 20 rounds of a reduce-scatter and three, 8 ranks)" \
	grep -q "mpi-check: 512 passed, 0 failed" "$WORK/p.out"
expect_eq "passed through: all-reduces offloaded from the 4th (21 x 8), passed through before it (3 x 8) and with the user op (40 x 8)" \
	"$(mpi_stat "$WORK/p.err" MPI_Allreduce 2) $(mpi_stat "$WORK/p.err" MPI_Allreduce 3)" "168 344"
# the reduce-scatter follows an offloaded call (a rank may still miss its
# result), and so does the first all-reduce (rank 0, whose block was empty,
# may have left the reduce-scatter before the others entered it); the
# reduce and the second all-reduce follow an all-reduce every rank had to
# enter
check "passed through: 2 of each round's 4 calls waited nonblocking, 2 took MPI's blocking call (x 8 ranks)" \
	grep -q "passed through on offloaded communicators: 320 waited for nonblocking, serving recoveries .* 320 with MPI's blocking call" "$WORK/p.err"

for f in f f08; do
	mod="use mpi"; [ "$f" = f08 ] && mod="use mpi_f08"
	echo "# Fortran program ($mod, built with mpif90)"
	CHECK_F=$BUILD/tests/mpi/mpi-check-$f
	if [ -x "$CHECK_F" ]; then
		INCA_MPI_OFFLOAD_AFTER=1 mpi8 "$CHECK_F" > "$WORK/$f.out" 2> "$WORK/$f.err"
		expect_eq "mpi-check-$f exit status" "$?" 0
		check "mpi-check-$f: every result exact" \
			grep -q "mpi-check-$f: [1-9][0-9]* passed, 0 failed" "$WORK/$f.out"
		grep "mpi-check-$f:" "$WORK/$f.out"
		grep -A15 "calls summed" "$WORK/$f.err"
		mpi_all_offloaded "$WORK/$f.err" "Fortran ($mod): "
		expect_eq "Fortran ($mod): nothing passed through (the world and a split, all mapped)" \
			"$(awk '$1 ~ /^MPI_/ { s += $3 } END { print s + 0 }' "$WORK/$f.err")" 0
	else
		not_ok "the Fortran program mpi-check-$f is built (mpif90: gfortran, libopenmpi-dev)"
	fi
done

echo "# Python (mpi4py) program"
mpi8 /usr/bin/python3 -X faulthandler "$SRC/tests/mpi/mpi_check.py" --max 16777216 > "$WORK/py.out" 2> "$WORK/py.err"
expect_eq "mpi_check.py exit status" "$?" 0
check "mpi_check.py: every result exact" grep -q "mpi-check.py: [1-9][0-9]* passed, 0 failed" "$WORK/py.out"
grep "mpi-check.py:" "$WORK/py.out"
n=$(mpi_stat "$WORK/py.err" MPI_Allreduce 2)
check "mpi4py's Allreduce offloaded ($n calls)" [ "${n:-0}" -gt 0 ]

# no switch was killed so far: a recovery here means a rank gave up on a
# live switch (INCA_SWITCH_TIMEOUT_MS without a result)
echo "# recoveries with the switch alive: $(cat "$WORK/c.err" "$WORK/py.err" | grep -c "switch path failed")"
mpi_switch_kill_case mpi8 "$CHECK"
finish
