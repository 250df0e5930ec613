#!/usr/bin/env bash
# Every collective libinca offloads, in-network (inca-switch via libinca,
# udp) against Open MPI's counterpart (MPI_Allreduce with the ring rules of
# run-allreduce.sh, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast,
# MPI_Reduce, MPI_Barrier with Open MPI's own choice of algorithm), on the
# same links, in one run: N ranks, 8 B .. --max of floats (sum where the
# collective reduces; bcast and reduce timed call by call after an untimed
# barrier on both sides). Prints, per collective, the time at the smallest
# size and 4 KiB
# and the algbw at the largest size for both sides, and writes the full
# tables (nccl-tests' columns and busbw factors) to --out.
# Every result is checked element by element on every rank: a wrong
# element or a call that fell back to the host ring fails the run; a failed
# launch is retried once and said. The in-network side runs as users run
# it, in manager mode (inca-manager sets each job's group up on the
# switch; one testbed for the whole run); --groups static uses a static
# group on a fresh testbed per collective instead.
# Usage: tests/bench/run-collectives.sh [--out DIR] [--ranks 8] [--rate 200mbit]
#          [--max 16M] [--iters 10] [--colls "allreduce reduce_scatter ..."]
#          [--transport udp] [--groups manager|static]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$here/bench-results/collectives n=8 rate=200mbit max=16M iters=10 tp=udp
colls="allreduce reduce_scatter allgather bcast reduce barrier" groups=manager
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=${2:?}; shift 2 ;;
	--ranks) n=${2:?}; shift 2 ;;
	--rate) rate=${2:?}; shift 2 ;;
	--max) max=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--colls) colls=${2:?}; shift 2 ;;
	--transport) tp=${2:?}; shift 2 ;;
	--groups) groups=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-collectives.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "run-collectives.sh: run as root" >&2; exit 1; }
[[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] || { echo "run-collectives.sh: --ranks 2 or more" >&2; exit 2; }
[[ "$groups" =~ ^(manager|static)$ ]] || { echo "run-collectives.sh: --groups manager or static" >&2; exit 2; }
B=$here/build
for f in "$B/dataplane/inca-switch" "$B/host-lib/inca-allreduce-perf" \
	 "$B/tests/bench/mpi-allreduce-perf"; do
	[ -x "$f" ] || { echo "run-collectives.sh: $f not built" >&2; exit 1; }
done
export INCA_TESTBED=incacoll
TB=$here/deploy/testbed
WORK=$(mktemp -d /tmp/inca-coll.XXXXXX)
MGR_PID=
trap '"$TB" down >/dev/null 2>&1 || true; [ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
mkdir -p "$out"
SIZES=(-b 8 -e "$max" -f 2 -n "$iters" -N $((iters * 10)) -w 3)
# shellcheck source=deploy/jobs.sh
source "$here/deploy/jobs.sh"

retry() {
	local what=$1
	shift
	"$@" && return 0
	echo "run-collectives.sh: $what failed; retrying once" >&2
	"$@"
}

# fresh: a new testbed for a static group's job or Open MPI's; with the
# manager one testbed serves the whole run, each job its own INCA_JOB
fresh() {
	[ "$groups" = static ] || return 0
	"$TB" up --hosts "$n" --rate "$rate" --config "$WORK/switch.json" >/dev/null
}
if [ "$groups" = manager ]; then
	manager_testbed "$n" "$WORK" 18472 "$B" --rate "$rate" ||
		{ echo "run-collectives.sh: the manager's testbed failed" >&2; exit 1; }
else
	group_config "$n" "$WORK/switch.json"
fi
echo "coll,tool,ranks,bytes,time_us,algbw_GBps,busbw_GBps,wrong" > "$out/collectives.csv"
for coll in $colls; do
	echo "== $coll, $n ranks, in-network ($tp, $groups group)" >&2
	fresh
	INCA_JOB=coll-$coll-$RANDOM INCA_TRANSPORT=$tp INCA_LINE_RATE_GBPS=1 retry "the in-network $coll job" \
		inca_job "$n" "$WORK/inca.txt" -c "$coll" "${SIZES[@]}"
	cat "$WORK/inca.txt" >&2
	awk -v c="$coll" -v t="inca-$tp" -v n="$n" '/^ *[0-9]/ {
		printf "%s,%s,%s,%s,%s,%s,%s,%s\n", c, t, n, $1, $5, $6, $7, $8 }' \
		"$WORK/inca.txt" >> "$out/collectives.csv"
	echo "== $coll, $n ranks, Open MPI" >&2
	fresh
	retry "the Open MPI $coll job" openmpi_job "$n" "$WORK/mpi.txt" -c "$coll" "${SIZES[@]}"
	cat "$WORK/mpi.txt" >&2
	awk -v c="$coll" -v n="$n" '/^ *[0-9]/ {
		printf "%s,openmpi,%s,%s,%s,%s,%s,%s\n", c, n, $1, $5, $6, $7, $8 }' \
		"$WORK/mpi.txt" >> "$out/collectives.csv"
done
"$TB" down >/dev/null
[ -z "$MGR_PID" ] || { kill "$MGR_PID" 2>/dev/null; wait "$MGR_PID" 2>/dev/null || true; MGR_PID=; }
/usr/bin/python3 - "$out" "$rate" "$n" "$groups" <<'PY'
import csv, sys
out, rate, n, groups = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = {}
for r in csv.DictReader(open(out + "/collectives.csv")):
    rows.setdefault((r["coll"], r["tool"]), {})[int(r["bytes"])] = r
colls = list(dict.fromkeys(c for c, _ in rows))
md = ["# Collectives: in-network (inca-switch, %s group) vs Open MPI, %d ranks, links of %s" % (groups, n, rate), "",
      "Median time of the slowest rank (µs) at the smallest size (8 B; whole shards for "
      "reduce_scatter and allgather: one element per rank) and at 4 KiB, algbw (size ÷ "
      "time, GB/s) at the largest size; size as nccl-tests counts it. bcast and reduce: "
      "each timed call after an untimed barrier, on both sides.", "",
      "| collective | smallest (B) | INCA µs | Open MPI µs | 4 KiB INCA µs | Open MPI µs | size (B) | algbw INCA | algbw Open MPI | INCA ÷ Open MPI |",
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for c in colls:
    inca = next((v for (cc, t), v in rows.items() if cc == c and t.startswith("inca")), {})
    mpi = rows.get((c, "openmpi"), {})
    t = lambda s, b: s[b]["time_us"] if b in s else "–"
    big = max(set(inca) & set(mpi), default=None)
    if c == "barrier" or big is None:
        md.append("| %s | – | %s | %s | | | | | | |" % (c, t(inca, min(inca, default=0)), t(mpi, min(mpi, default=0))))
        continue
    small = min(set(inca) & set(mpi))
    k4 = max((b for b in set(inca) & set(mpi) if b <= 4096), default=small)
    # from the time: the tools print algbw with 3 decimals
    a, m = big / float(inca[big]["time_us"]) / 1e3, big / float(mpi[big]["time_us"]) / 1e3
    md.append("| %s | %d | %s | %s | %s | %s | %d | %.4f | %.4f | %.2f |" % (
        c, small, t(inca, small), t(mpi, small), t(inca, k4), t(mpi, k4), big, a, m,
        a / m if m else 0))
open(out + "/collectives.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
