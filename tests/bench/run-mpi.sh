#!/usr/bin/env bash
# The same Open MPI binary (mpi-allreduce-perf, float sum; --coll for the
# other collectives) with and without
# libinca-mpi, on one testbed in one run: 8 ranks, 2 per host on 4 hosts,
# inca-manager in charge; Open MPI's own traffic crosses the same switch and
# links as INCA's (MPI_NET=10.0.0.0/24), so both sides run on the same path;
# Open MPI with shared memory inside a host, alone and with its hierarchical
# coll/han. Prints the OSU-style tables and, per size, the ratio against the
# faster Open MPI. libinca-mpi reduces inside the host first (docs/hostlib.md).
# Usage: tests/bench/run-mpi.sh [--rate R] [--min BYTES] [--max BYTES] [--iters N]
#          [--ranks NP] [--per-host P] [--coll allreduce|reduce_scatter|allgather|
#          bcast|reduce|barrier] [--nb W] [--mix] [--pass [--rounds R]]
#          [--mpi openmpi|mpich]
#          (default 8 ranks, 2 per host, allreduce)
# --nb W: mpi-nb-perf instead: W MPI_Iallreduce in flight, completed out of
# order, 10 rounds, 8 B to 4 KiB
# --mix: mpi-mix-perf instead: steps that mix offloaded communicators with
# passed-through ones (a user op, a short-lived dup), 8 B to 4 KiB
# --pass: what the interposer costs a call it passes through: Open MPI
# alone against every call passed through, on a communicator never
# offloaded and on an offloaded one (one call after another: MPI's
# blocking call; and with INCA_MPI_PASS_SETTLED=0: its nonblocking call,
# the form of a call right after an offloaded one), --rounds R
# interleaved rounds (default 5), --iters calls a size (default 2000); e.g.
# --ranks 2 --per-host 2 --max 4K: shared memory
# --mpi mpich: the same against Debian's MPICH (ch4:ucx on TCP only, over
# the same links between hosts) with libinca-mpi-mpich: MPICH at
# its best is the fastest at each size of its default algorithm choice, its
# hierarchical one (smp) and the ring (nb with tsp_ring; MPICH 4.0 has no
# blocking ring); allreduce only; not with --nb, --mix or --pass. MPICH's
# UCX polls without yielding: with 8 ranks on a 2-core lab it is slow
# (2 MiB in 1.35 s on TCP, 2026-11-27), a baseline for the interposer's
# MPICH build, not MPI at its best (Open MPI is, here). On TCP only, MPICH
# alone hung in MPI_Finalize in about half the runs of the func test
# (openucx/ucx#8738): a run that hangs is ended by mpich_ranks' timeout
# (900 s) and tried once more
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
rate="" min=8 max=16M iters="" np=8 per=2 coll=allreduce nb="" mix="" pass="" rounds=5 impl=openmpi
while [ $# -gt 0 ]; do
	case "$1" in
	--rate) rate=${2:?}; shift 2 ;;
	--min) min=${2:?}; shift 2 ;;
	--max) max=${2:?}; shift 2 ;;
	--coll) coll=${2:?}; shift 2 ;;
	--nb) nb=${2:?}; shift 2 ;;
	--mix) mix=1; shift ;;
	--pass) pass=1; shift ;;
	--rounds) rounds=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--ranks) np=${2:?}; shift 2 ;;
	--per-host) per=${2:?}; shift 2 ;;
	--mpi) impl=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-mpi.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "run-mpi.sh: run as root" >&2; exit 1; }
# --pass: an all-reduce, an allgather or a reduce-scatter (its figures come
# from calls that follow one another, which the rooted ones and the
# barrier, each behind a barrier of the harness's, never do)
case "$pass:$coll" in
:*|1:allreduce|1:allgather|1:reduce_scatter) ;;
*) echo "run-mpi.sh: --pass goes with --coll allreduce, allgather or reduce_scatter" >&2; exit 2 ;;
esac
# --iters: 20 by default; with --pass, 2000 (every size)
[ -n "$iters" ] || { iters=20; [ -z "$pass" ] || iters=2000; }
B=$here/build
LIB=$B/host-lib/mpi/libinca-mpi.so
PERF=$B/tests/bench/mpi-allreduce-perf
launch=mpi_ranks
case "$impl" in
openmpi) ;;
mpich)
	[ -z "$nb$mix$pass" ] || { echo "run-mpi.sh: --mpi mpich goes without --nb, --mix, --pass" >&2; exit 2; }
	[ "$coll" = allreduce ] || { echo "run-mpi.sh: --mpi mpich: allreduce only" >&2; exit 2; }
	LIB=$B/host-lib/mpi/libinca-mpi-mpich.so
	PERF=$B/tests/bench/mpi-allreduce-perf-mpich
	launch=mpich_ranks
	# MPICH's traffic on the links INCA's takes (Open MPI's: MPI_NET), and
	# only there: with UCX's shared memory on, ranks on different hosts
	# (namespaces of one machine) reached each other through it (16 MiB in
	# 0.17 s at 200 Mbit/s, 4x faster than the links allow)
	export MPICH_NET_DEVICE=eth0 MPICH_UCX_TLS=tcp,self
	;;
*) echo "run-mpi.sh: --mpi openmpi or mpich, not '$impl'" >&2; exit 2 ;;
esac
for f in "$LIB" "$PERF" "$B/control/inca-manager" "$B/dataplane/inca-switch"; do
	[ -e "$f" ] || { echo "run-mpi.sh: $f not built" >&2; exit 1; }
done
export INCA_TESTBED=incampib
WORK=$(mktemp -d /tmp/inca-mpibench.XXXXXX)
MGR_PID=
trap '"$here/deploy/testbed" down >/dev/null 2>&1 || true; [ -n "$MGR_PID" ] && { kill "$MGR_PID" 2>/dev/null; wait "$MGR_PID" 2>/dev/null; }; rm -rf "$WORK"' EXIT
# shellcheck source=deploy/jobs.sh
source "$here/deploy/jobs.sh"
[[ "$per" =~ ^[1-9][0-9]*$ ]] || { echo "run-mpi.sh: --per-host P, P >= 1" >&2; exit 2; }
manager_testbed $(( (np + per - 1) / per )) "$WORK" 18495 "$B" ${rate:+--rate "$rate"}
export MPI_NET=10.0.0.0/24
# Open MPI at its best here: the tuned component's rules that
# run-allreduce.sh uses (recursive doubling below 4 KiB, the ring from it)
export OMPI_MCA_coll_tuned_use_dynamic_rules=1
export OMPI_MCA_coll_tuned_dynamic_rules_filename=$here/tests/bench/ompi-allreduce-rules.conf
if [ -z "$pass" ]; then
	# up to 64 KiB 100 timed calls after 50 warm-up calls, as the demo: a
	# small call's mean over 20 is a few slow calls' (libinca-mpi offloads
	# a communicator at its 4th call, and the first few dozen calls after
	# are slower on both sides); larger sizes --iters after 5 (the
	# communicator's creation stays out of the timed calls)
	ARGS=(-c "$coll" -o -b "$min" -e "$max" -f 8 -n "$iters" -N 100 -w 5 -W 50)
else
	# --pass: --iters for every size, 200 warm-up calls: the first timed
	# call after the harness's barrier (offloaded, and its ranks leave it
	# tens of microseconds apart) weighs 1/iters in the mean
	ARGS=(-c "$coll" -o -b "$min" -e "$max" -f 8 -n "$iters" -w 200)
fi
if [ -n "$nb" ]; then
	PERF=$B/tests/bench/mpi-nb-perf
	[ -e "$PERF" ] || { echo "run-mpi.sh: $PERF not built" >&2; exit 1; }
	ARGS=(-w "$nb" -r 10 -s 8 -s 64 -s 512 -s 4096)
	coll="MPI_Iallreduce x $nb in flight"
elif [ -n "$mix" ]; then
	PERF=$B/tests/bench/mpi-mix-perf
	[ -e "$PERF" ] || { echo "run-mpi.sh: $PERF not built" >&2; exit 1; }
	ARGS=(-n 50 -s 8 -s 64 -s 512 -s 4096)
	coll="steps mixing offloaded and passed-through communicators"
fi
# link_bound NAME: with --rate, the run's largest size cannot be faster
# than its bytes through one host's link allow ((H-1)/H of them, whatever
# the algorithm); a run that was took another path and is no comparison
link_bound() {
	[ -n "$rate" ] || return 0
	local hosts=$(( (np + per - 1) / per ))
	awk -v rate="$rate" -v h="$hosts" -v name="$1" '
		/^[0-9]/ { s = $1; t = $2 }
		END {
			r = rate; u = tolower(r); m = 1
			if (u ~ /tbit$/) m = 1e12; else if (u ~ /gbit$/) m = 1e9; else if (u ~ /mbit$/) m = 1e6; else if (u ~ /kbit$/) m = 1e3
			r = u; sub(/[a-z]+$/, "", r); bps = r * m
			if (h < 2 || s == "") exit 0
			bound = s * 8 / bps * (h - 1) / h * 1e6
			if (t < 0.9 * bound) {
				printf "run-mpi.sh: %s: %d bytes in %.0f us, below the %.0f us its links allow: its traffic did not cross them\n", name, s, t, bound > "/dev/stderr"
				exit 1
			}
		}' "$WORK/$1.txt"
}
# run NAME: the perf tool once; a failed launch is retried once, and said
run() {
	local name=$1 try
	for try in 1 2; do
		if "$launch" "$np" "$per" "$LIB" "$PERF" "${ARGS[@]}" > "$WORK/$name.txt" 2> "$WORK/$name.err"; then
			[ -n "$nb$mix$pass" ] || link_bound "$name" || exit 1
			return 0
		fi
		echo "run-mpi.sh: the $name run failed (try $try):" >&2
		tail -n 5 "$WORK/$name.err" >&2
	done
	return 1
}
# no_offload NAME: its stats table shows calls passed through and none
# offloaded (the tool's barriers, which have no size, may be)
no_offload() {
	if ! awk '/^MPI_/ && $1 != "MPI_Barrier" { if ($2 > 0) bad = 1; if ($3 > 0) passed = 1 }
		  END { exit bad || !passed }' "$WORK/$1.err"; then
		echo "run-mpi.sh: --pass: the interposer offloaded, or did not run ($1):" >&2
		cat "$WORK/$1.err" >&2
		exit 1
	fi
}
if [ -n "$pass" ]; then
	# What the interposer costs a call it passes through, at the speed of
	# the layout given (one host: shared memory, the worst case for it):
	# Open MPI alone, then the same binary with every call passed through
	# on a communicator never offloaded (MPI's blocking call) and on one
	# offloaded at its first barrier (the calls below INCA_MPI_MIN_BYTES,
	# one after another: after the first, MPI's blocking call), and again
	# with INCA_MPI_PASS_SETTLED=0 (every one MPI's nonblocking call,
	# serving recoveries while it waits: the form a call right after an
	# offloaded one takes). In turn for $rounds rounds (the machine's
	# drifts fall on every side alike); medians over the rounds.
	# INCA_MPI_STATS=0, the default: its clock reads are not counted.
	for r in $(seq "$rounds"); do
		INCA_MPI=0 run "o$r"
		INCA_MPI=1 INCA_MPI_STATS=0 INCA_MPI_OFFLOAD_AFTER=2147483647 run "b$r"
		INCA_MPI=1 INCA_MPI_STATS=0 INCA_MPI_OFFLOAD_AFTER=1 INCA_MPI_MIN_BYTES=64G run "n$r"
		INCA_MPI=1 INCA_MPI_STATS=0 INCA_MPI_OFFLOAD_AFTER=1 INCA_MPI_MIN_BYTES=64G \
			INCA_MPI_PASS_SETTLED=0 run "s$r"
	done
	INCA_MPI=1 INCA_MPI_OFFLOAD_AFTER=2147483647 run bstats
	INCA_MPI=1 INCA_MPI_OFFLOAD_AFTER=1 INCA_MPI_MIN_BYTES=64G run nstats
	INCA_MPI=1 INCA_MPI_OFFLOAD_AFTER=1 INCA_MPI_MIN_BYTES=64G INCA_MPI_PASS_SETTLED=0 run sstats
	no_offload bstats
	no_offload nstats
	no_offload sstats
	# the offloaded runs: offloaded at the first barrier, before any timed
	# call; the forms the calls took (docs/mpi.md, "What a call passed
	# through costs")
	forms() { sed -n 's/.*offloaded communicators: \([0-9]*\) waited.* \([0-9]*\) with MPI.s blocking call/\1 \2/p' "$WORK/$1.err"; }
	read -r n_serve n_block < <(forms nstats) || true
	read -r s_serve s_block < <(forms sstats) || true
	if [ "$(awk '$1 == "MPI_Barrier" { print $2 }' "$WORK/nstats.err")" != "$((np * $(grep -c '^[0-9]' "$WORK/nstats.txt")))" ] ||
	   [ -z "${n_block:-}" ] || [ -z "${s_serve:-}" ] || [ "$n_block" -le "$n_serve" ] || [ "$s_block" != 0 ]; then
		echo "run-mpi.sh: --pass: the offloaded runs did not offload every barrier, or their calls did not take the forms measured (one after another: ${n_serve:-?} nonblocking, ${n_block:-?} blocking; INCA_MPI_PASS_SETTLED=0: ${s_serve:-?} nonblocking, ${s_block:-?} blocking)" >&2
		exit 1
	fi
	echo "== $coll passed through libinca-mpi ($np ranks, $per per host${rate:+, links $rate}," \
	     "medians of $rounds interleaved rounds, us)"
	awk 'FNR == 1 { m = split(FILENAME, path, "/"); k = substr(path[m], 1, 1) }
	     /^[0-9]/ { v[k, $1] = v[k, $1] " " $2; if (k == "o" && !seen[$1]++) o[++n] = $1 }
	     function med(s,   x, m, i, j, t) { m = split(s, x, " ")
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
		return x[int((m + 1) / 2)] }
	     END { printf "%-8s %9s %9s %9s %9s %8s %8s %8s\n", "# Size", "Open MPI", "never", "settled", "serving", "ratio", "ratio", "ratio"
		for (i = 1; i <= n; i++) { s = o[i]; a = med(v["o", s]); b = med(v["b", s]); c = med(v["n", s]); d = med(v["s", s])
			printf "%-8s %9.2f %9.2f %9.2f %9.2f %7.3fx %7.3fx %7.3fx\n", s, a, b, c, d, b / a, c / a, d / a } }' \
		"$WORK"/o[0-9]*.txt "$WORK"/b[0-9]*.txt "$WORK"/n[0-9]*.txt "$WORK"/s[0-9]*.txt
	echo "# ratio: time passed through / Open MPI alone (1.000: no cost). never: a communicator"
	echo "# never offloaded (MPI's blocking call); settled: an offloaded one, calls one after"
	echo "# another (MPI's blocking call: $n_block of the stats run's $((n_serve + n_block)) calls passed"
	echo "# through, the others right after an offloaded barrier); serving: the same with"
	echo "# INCA_MPI_PASS_SETTLED=0 (MPI's nonblocking call, serving recoveries: the form of"
	echo "# a call right after an offloaded one)"
	exit 0
fi
if [ "$impl" = mpich ]; then
	INCA_MPI=0 run mpich
	INCA_MPI=0 MPICH_ALLREDUCE=smp run mpich-smp
	INCA_MPI=0 MPICH_ALLREDUCE=nb MPICH_IALLREDUCE=tsp_ring run mpich-ring
	INCA_MPI=1 run inca
	grep -q "offloaded to INCA" "$WORK/inca.err" ||
		{ echo "run-mpi.sh: the interposer did not offload:" >&2; cat "$WORK/inca.err" >&2; exit 1; }
	echo "== $coll: MPICH alone, its default algorithms ($np ranks, $per per host${rate:+, links $rate})"
	cat "$WORK/mpich.txt"
	echo "== MPICH, hierarchical (MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=smp)"
	cat "$WORK/mpich-smp.txt"
	echo "== MPICH, the ring (MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=nb, MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM=tsp_ring)"
	cat "$WORK/mpich-ring.txt"
	echo "== the same binary with LD_PRELOAD=libinca-mpi-mpich.so"
	cat "$WORK/inca.txt"
	grep -A15 "calls summed" "$WORK/inca.err"
	osu_best "$WORK/mpich.txt" "$WORK/mpich-smp.txt" > "$WORK/mpich-best2.txt"
	osu_best "$WORK/mpich-best2.txt" "$WORK/mpich-ring.txt" > "$WORK/mpich-best.txt"
	echo "== side by side: MPICH at its best (the fastest of the three at each size) against libinca-mpi-mpich"
	osu_side_by_side "$WORK/mpich-best.txt" "$WORK/inca.txt" | sed '1s/Open MPI (us)/   MPICH (us)/'
	exit 0
fi
INCA_MPI=0 run openmpi
INCA_MPI=0 MPI_HAN=1 run openmpi-han
INCA_MPI=1 run inca
grep -q "offloaded to INCA" "$WORK/inca.err" ||
	{ echo "run-mpi.sh: the interposer did not offload:" >&2; cat "$WORK/inca.err" >&2; exit 1; }
echo "== $coll: Open MPI alone ($np ranks, $per per host${rate:+, links $rate})"
cat "$WORK/openmpi.txt"
echo "== the same binary with LD_PRELOAD=libinca-mpi.so"
cat "$WORK/inca.txt"
grep -A15 "calls summed" "$WORK/inca.err"
echo "== Open MPI with coll/han (hierarchical: shared memory inside the host)"
cat "$WORK/openmpi-han.txt"
# Open MPI at its best: the faster of the two at each size
osu_best "$WORK/openmpi.txt" "$WORK/openmpi-han.txt" > "$WORK/openmpi-best.txt"
echo "== side by side: Open MPI at its best (the faster of tuned and han at each size) against libinca-mpi"
osu_side_by_side "$WORK/openmpi-best.txt" "$WORK/inca.txt"
