#!/usr/bin/env bash
# In-network (inca-switch via libinca, udp and xdp) vs Open MPI's ring
# all-reduce, over the same shaped testbed links, for N = 2, 4, 8 ranks and
# 8 B .. 64 MiB (doubling) of float sum. Writes CSV, Markdown and SVG plots.
# Usage: tests/bench/run-allreduce.sh [--out DIR] [--ranks "2 4 8"] [--rate 1gbit]
#                                     [--max 64M] [--iters 3]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$here/bench-results ranks="2 4 8" rate=1gbit max=64M iters=3
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=${2:?}; shift 2 ;;
	--ranks) ranks=${2:?}; shift 2 ;;
	--rate) rate=${2:?}; shift 2 ;;
	--max) max=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-allreduce.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "run-allreduce.sh: run as root" >&2; exit 1; }
B=$here/build
for f in "$B/dataplane/inca-switch" "$B/host-lib/inca-allreduce-perf" "$B/tests/bench/mpi-allreduce-perf"; do
	[ -x "$f" ] || { echo "run-allreduce.sh: $f not built" >&2; exit 1; }
done
export INCA_TESTBED=incabench
TB=$here/deploy/testbed
WORK=$(mktemp -d /tmp/inca-bench.XXXXXX)
trap '"$TB" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
mkdir -p "$out"
csv=$out/allreduce.csv
echo "tool,ranks,bytes,time_us,algbw_GBps,busbw_GBps,wrong" > "$csv"
SIZES=(-b 8 -e "$max" -f 2 -n "$iters" -w 1)

# rows TOOL N FILE: the table lines of a perf output as CSV
rows() {
	awk -v tool="$1" -v n="$2" '/^ *[0-9]/ { printf "%s,%s,%s,%s,%s,%s,%s\n", tool, n, $1, $5, $6, $7, $8 }' "$3" >> "$csv"
}

# shellcheck source=deploy/jobs.sh
source "$here/deploy/jobs.sh"
for n in $ranks; do
	group_config "$n" "$WORK/switch.json"
	for tp in udp xdp; do
		echo "== $n ranks, in-network, $tp" >&2
		"$TB" up --hosts "$n" --rate "$rate" --config "$WORK/switch.json" >/dev/null
		INCA_TRANSPORT=$tp INCA_LINE_RATE_GBPS=1 inca_job "$n" "$WORK/inca-$tp-$n.txt" "${SIZES[@]}"
		cat "$WORK/inca-$tp-$n.txt" >&2
		rows "inca-$tp" "$n" "$WORK/inca-$tp-$n.txt"
	done
	echo "== $n ranks, Open MPI ring (coll_tuned allreduce algorithm 4)" >&2
	"$TB" up --hosts "$n" --rate "$rate" --config "$WORK/switch.json" >/dev/null
	openmpi_job "$n" "$WORK/mpi-$n.txt" "${SIZES[@]}"
	cat "$WORK/mpi-$n.txt" >&2
	rows "openmpi-ring" "$n" "$WORK/mpi-$n.txt"
done
"$TB" down >/dev/null
/usr/bin/python3 "$here/tests/bench/report.py" "$csv" "$out" "$rate"
echo "results: $out (allreduce.csv, allreduce.md, allreduce-busbw.svg, allreduce-latency.svg)" >&2
