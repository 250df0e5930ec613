#!/usr/bin/env bash
# One func case again and again, for the failures that come only under some
# timings (issue 32): each run is the func script's own case, in a fresh
# lab, its checks exact as in CI. Bounded by a count and a time, it stops
# by itself; the runs that failed keep their TAP output.
#
# Cases:
#   tree-loss   func tree's two-level all-reduces with 1% loss, 1%
#               duplication and 5% reordering on every link (static groups;
#               inca-pkt, fp32/bf16/int64, 20000 elements, 50 ms timeout)
#   two-level   func collectives' two-level part: every collective, dtype
#               and op, 8 in flight, 16 MiB, on clean and impaired links
#
# Usage: tests/soak/stress.sh CASE [--runs N (50)] [--minutes M (60)]
#                             [--load K (0)] [--build DIR] [--keep]
# --load K: K busy loops at normal priority beside every run (the load a
# CI machine adds); --keep: keep every run's output, not only the failed
# ones'. Exits 1 if any run failed, 2 on bad arguments.
set -u
CASE= RUNS=50 MINUTES=60 LOAD=0 BUILD_ARG= KEEP=
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=${2:?}; shift 2 ;;
	--minutes) MINUTES=${2:?}; shift 2 ;;
	--load) LOAD=${2:?}; shift 2 ;;
	--build) BUILD_ARG=${2:?}; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "stress.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	*) [ -z "$CASE" ] || { echo "stress.sh: one case (try --help)" >&2; exit 2; }
	   CASE=$1; shift ;;
	esac
done
case $CASE in
tree-loss) SCRIPT=tree.sh; ENVS=(INCA_TREE_ONLY_LOSS=1) ;;
two-level) SCRIPT=collectives.sh; ENVS=(INCA_ONLY_FABRIC=1) ;;
'') echo "stress.sh: which case: tree-loss or two-level (try --help)" >&2; exit 2 ;;
*) echo "stress.sh: unknown case '$CASE': tree-loss or two-level" >&2; exit 2 ;;
esac
for v in RUNS MINUTES LOAD; do
	[[ "${!v}" =~ ^[0-9]+$ ]] || { echo "stress.sh: --${v,,}: a number" >&2; exit 2; }
done
[ "$RUNS" -ge 1 ] && [ "$RUNS" -le 10000 ] || { echo "stress.sh: --runs N with N in 1..10000" >&2; exit 2; }
[ "$MINUTES" -ge 1 ] && [ "$MINUTES" -le 1440 ] || { echo "stress.sh: --minutes M with M in 1..1440" >&2; exit 2; }
[ "$LOAD" -le 16 ] || { echo "stress.sh: --load K with K in 0..16" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${BUILD_ARG:-$here/build}" && pwd) || exit 2
[ "$(id -u)" = 0 ] || { echo "stress.sh: needs root (the func cases build namespaces)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/inca-stress.XXXXXX)
LOADERS=()
cleanup() {
	for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$KEEP" ] || [ -n "$(ls "$WORK")" ] || rmdir "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

end=$(( $(date +%s) + MINUTES * 60 ))
for _ in $(seq "$LOAD"); do
	# each loop ends by itself at the time bound, whatever happens here
	timeout $((MINUTES * 60 + 60)) bash -c 'while :; do :; done' & LOADERS+=($!)
done
echo "# stress: $CASE, up to $RUNS runs or $MINUTES min, $LOAD busy loops beside (build $BUILD)"
ran=0 failed=0 secs=()
while [ "$ran" -lt "$RUNS" ] && [ "$(date +%s)" -lt "$end" ]; do
	ran=$((ran + 1))
	out="$WORK/run$ran.tap"
	t0=$(date +%s)
	# a run that outlives the whole bound is a hang: ended, and failed
	env "${ENVS[@]}" timeout --kill-after=30 $((end - t0 + 600)) \
		bash "$here/tests/func/$SCRIPT" "$BUILD" > "$out" 2>&1
	rc=$?
	t1=$(date +%s)
	secs+=($((t1 - t0)))
	nok=$(grep -c '^not ok' "$out")
	if [ "$rc" -ne 0 ] || [ "$nok" -ne 0 ]; then
		failed=$((failed + 1))
		echo "run $ran: FAILED (exit $rc, $nok checks failed, $((t1 - t0)) s): $out"
		grep '^not ok' "$out" | head -5 | sed 's/^/    /'
	else
		echo "run $ran: ok ($(grep -c '^ok' "$out") checks, $((t1 - t0)) s)"
		[ -n "$KEEP" ] || rm -f "$out"
	fi
done
med=$(printf '%s\n' "${secs[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
echo "# stress: $CASE: $ran runs, $failed failed (median $med s a run)$([ "$ran" -lt "$RUNS" ] && echo ", stopped at the $MINUTES-minute bound")"
[ -n "$KEEP" ] || [ "$failed" -gt 0 ] || echo "# no output kept"
[ "$failed" -eq 0 ]
