#!/usr/bin/env bash
# In-network all-reduce under packet loss: the lab's side of the scale
# model's loss calibration (tests/sim/calibrate_loss.py). N ranks, one a
# host, in manager mode (inca-manager sets the group up, libinca over udp:
# inca-udp of run-allreduce.sh), 200 Mbit/s links, the switch losing each
# frame on each link with probability P (inca-switch --impair "loss P%":
# both directions of every port, so a contribution and its result each
# cross one lossy link), for every P given; float sum, every element of
# every result checked. A fresh testbed for each P. Times are medians over
# the iterations of the slowest rank; retransmissions are rank 0's.
# Fails when a call is wrong or falls back to the host ring. Writes
# OUT/loss.csv (rate,loss_pct,ranks,bytes,time_us,packets,retransmissions,probes,
# rto_us: rank 0's packets, retransmissions and probes over the job, its
# retransmission timeout at the end) and prints it.
# Usage: tests/bench/run-loss.sh [--out DIR] [--build DIR] [--ranks N]
#          [--losses "0 0.1 1 5"] [--min 64K] [--max 4M] [--iters 10]
#          [--rate 200mbit]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$here/bench-results build=$here/build n=4 losses="0 0.1 1 5" min=64K max=4M iters=10
rate=200mbit
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=${2:?}; shift 2 ;;
	--build) build=${2:?}; shift 2 ;;
	--ranks) n=${2:?}; shift 2 ;;
	--losses) losses=${2:?}; shift 2 ;;
	--min) min=${2:?}; shift 2 ;;
	--max) max=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--rate) rate=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-loss.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "run-loss.sh: run as root" >&2; exit 1; }
[[ "$n" =~ ^[2-8]$ ]] || { echo "run-loss.sh: --ranks 2..8" >&2; exit 2; }
[[ "$iters" =~ ^[1-9][0-9]*$ ]] || { echo "run-loss.sh: --iters N, N >= 1" >&2; exit 2; }
for p in $losses; do
	awk -v p="$p" 'BEGIN { exit !(p ~ /^[0-9]+(\.[0-9]+)?$/ && p < 100) }' ||
		{ echo "run-loss.sh: --losses: percentages below 100, not '$p'" >&2; exit 2; }
done
B=$(cd "$build" && pwd)
for f in "$B/dataplane/inca-switch" "$B/host-lib/inca-allreduce-perf" "$B/control/inca-manager"; do
	[ -x "$f" ] || { echo "run-loss.sh: $f not built" >&2; exit 1; }
done
export INCA_BUILD=$B INCA_TESTBED=incaloss INCA_TRANSPORT=udp
WORK=$(mktemp -d /tmp/inca-loss.XXXXXX)
PORT=18473
MGR_PID=
# shellcheck source=../../deploy/jobs.sh
source "$here/deploy/jobs.sh"
stop_manager() {
	if [ -n "$MGR_PID" ]; then
		kill "$MGR_PID" 2>/dev/null || true
		wait "$MGR_PID" 2>/dev/null || true
		MGR_PID=
	fi
}
trap 'stop_manager; "$here/deploy/testbed" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
mkdir -p "$out"
csv=$out/loss.csv
echo "rate,loss_pct,ranks,bytes,time_us,packets,retransmissions,probes,rto_us" > "$csv"
for p in $losses; do
	stop_manager
	mkdir -p "$WORK/mgr"
	rm -f "$WORK/mgr/manager.db"*
	impair=()
	awk -v p="$p" 'BEGIN { exit !(p > 0) }' && impair=(--impair "loss $p%")
	manager_testbed "$n" "$WORK/mgr" "$PORT" "$B" --rate "$rate" "${impair[@]}" ||
		{ echo "run-loss.sh: the manager's testbed failed" >&2; exit 1; }
	echo "== loss $p%, $n ranks, $rate" >&2
	for b in $(awk -v lo="$min" -v hi="$max" 'function v(s) { m = 1
			if (s ~ /[kK]$/) m = 1024; if (s ~ /M$/) m = 1048576; return (s + 0) * m }
		BEGIN { for (x = v(lo); x <= v(hi); x *= 4) print x }'); do
		# one size a job: its packets and retransmissions are that size's
		export INCA_JOB=loss-$p-$b-$RANDOM$RANDOM
		if ! inca_job "$n" "$WORK/o.txt" -b "$b" -e "$b" -n "$iters" -w 2; then
			echo "run-loss.sh: the job at loss $p%, $b bytes failed" >&2
			exit 1
		fi
		t=$(awk '/^ *[0-9]/ { print $5 }' "$WORK/o.txt")
		pr=$(sed -n 's/^# packets sent \([0-9]*\), retransmissions \([0-9]*\) .*; \([0-9]*\) of them probes.*/\1,\2,\3/p' "$WORK/o.txt")
		rto=$(sed -n 's/^# retransmission timeout at the end \([0-9]*\) us/\1/p' "$WORK/o.txt")
		[ -n "$t" ] && [ -n "$pr" ] && [ -n "$rto" ] ||
			{ echo "run-loss.sh: no figures from the job:" >&2; cat "$WORK/o.txt" >&2; exit 1; }
		echo "$rate,$p,$n,$b,$t,$pr,$rto" | tee -a "$csv" >&2
	done
done
cat "$csv"
