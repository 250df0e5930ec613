#!/usr/bin/env bash
# The README's main command: installs what INCA needs, builds it, brings up a
# lab testbed (inca-manager, inca-switch and 4 hosts on 200 Mbit/s links, a
# rate this 2-core lab can fill from both sides), runs
# an all-reduce job whose group the manager sets up on the switch, the same
# job as Open MPI's ring all-reduce (or libinca's TCP ring without Open MPI),
# prints them side by side, and tears everything down (also on Ctrl-C).
# Then the same Open MPI binary with and without libinca-mpi, one rank per
# host and then two (what jobs meet: the ranks of a host reduce inside it
# first), against Open MPI at its best for each layout.
# It checks its own result: in-network slower than the ring at the largest
# size (on these links, which bind) or at the smallest (8 B, one round
# trip), or libinca-mpi slower than Open MPI at the largest size (either
# layout), makes it exit 1 saying so.
#
# Usage: deploy/demo.sh [--hosts N] [--rate R] [--max-size BYTES] [--no-install]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
hosts=4 rate=200mbit maxsize=16M install=1
while [ $# -gt 0 ]; do
	case "$1" in
	--hosts) hosts=${2:?}; shift 2 ;;
	--rate) rate=${2:?}; shift 2 ;;
	--max-size) maxsize=${2:?}; shift 2 ;;
	--no-install) install=0; shift ;;
	-h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "demo.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
done
[[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 2 ] && [ "$hosts" -le 16 ] ||
	{ echo "demo.sh: --hosts wants 2..16" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "demo.sh: run as root (namespaces, DPDK)" >&2; exit 1; }

export INCA_TESTBED=incademo
WORK=$(mktemp -d /tmp/inca-demo.XXXXXX)
PORT=18470
MGR_PID=
# shellcheck source=deploy/jobs.sh
source "$here/deploy/jobs.sh"
trap demo_cleanup EXIT
trap 'echo; echo "demo.sh: interrupted"; exit 130' INT TERM

demo_build "$install" build

step "starting inca-manager (topology: 1 switch, $hosts hosts, tenant demo)"
manager_setup "$hosts" "$WORK" "$PORT"
build/control/inca-manager --topology "$WORK/topology.json" --token-file "$WORK/admin.token" \
	--db "$WORK/manager.db" --listen "0.0.0.0:$PORT" > "$WORK/manager.log" 2>&1 &
MGR_PID=$!
for _ in $(seq 50); do
	grep -q "inca-manager: ready" "$WORK/manager.log" && break
	sleep 0.1
done
grep "inca-manager: ready" "$WORK/manager.log" || { cat "$WORK/manager.log"; exit 1; }
incactl() { build/control/incactl --manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" "$@"; }

step "bringing up the testbed: inca-switch + $hosts hosts, links shaped to $rate"
printf '{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 } }\n' > "$WORK/switch.json"
"$here/deploy/testbed" up --hosts "$hosts" --rate "$rate" --config "$WORK/switch.json" --mgmt \
	--manager "http://127.0.0.1:$PORT" --name switch1 --token-file "$WORK/admin.token"
sleep 0.5
incactl switches
export INCA_TRANSPORT=udp INCA_JOB=demo-$$
# both sides' ranks off the switch worker's CPU, as a switch has its own
# (INCA_RANK_CPUS set by hand wins; empty: no pinning). Sharing it, the
# in-network 4 KiB call took 184 or 377 µs from one job to the next, off it
# 223-225 (docs/performance.md, third session). Open MPI's ranks are kept
# there with --bind-to none (deploy/jobs.sh; before 2026-11-27 Open MPI
# rebound them to both CPUs: its small calls took 400-450 µs instead of
# 100-180). Bound ranks poll for their results before they sleep
# (libinca's default for them, docs/hostlib.md INCA_SPIN_US)
export INCA_RANK_CPUS=${INCA_RANK_CPUS-$(cpus_off_switch)}
[ -z "$INCA_RANK_CPUS" ] || echo "every rank of both sides on CPUs $INCA_RANK_CPUS, off the switch worker's CPU 1"
# medians of 10 calls, of 100 up to 64 KiB (a small call's time on a shared
# 2-core machine varies more from call to call)
SIZES=(-b 8 -e "$maxsize" -f 8 -n 10 -N 100 -w 2)
# the link's rate in GB/s, for the fractions below
link=$(echo "$rate" | awk '/gbit$/ { print $1 / 8 } /mbit$/ { print $1 / 8000 } /kbit$/ { print $1 / 8e6 }')

step "all-reduce through the switch (in-network), 8 B .. $maxsize, float sum; the manager sets up the group"
inca_job "$hosts" "$WORK/switch.txt" "${SIZES[@]}" &
job=$!
for _ in $(seq 300); do
	incactl --json job "$INCA_JOB" 2>/dev/null | grep -q '"state": "ready"' && break
	sleep 0.1
done
incactl tree "$INCA_JOB" || true
wait $job
cat "$WORK/switch.txt"
if command -v mpirun >/dev/null && [ -x build/tests/bench/mpi-allreduce-perf ]; then
	step "the same job as Open MPI's ring all-reduce (MPI_Allreduce over TCP, ring algorithm)"
	openmpi_job "$hosts" "$WORK/ring.txt" "${SIZES[@]}"
	ring_name="Open MPI ring"
else
	step "the same job as a host ring all-reduce over TCP (libinca's fallback path)"
	INCA_JOB=demo-ring-$$ inca_job "$hosts" "$WORK/ring.txt" "${SIZES[@]}" -F
	ring_name="TCP ring"
fi
cat "$WORK/ring.txt"

step "side by side: switch vs $ring_name (median time in µs, algbw in GB/s, link: each side's payload rate per direction / the $rate link)"
echo "A ring moves 2(N-1)/N of the buffer in and out of every host, in-network aggregation once:"
echo "with both at the link, the speed-up is at most $(awk -v n="$hosts" 'BEGIN { printf "%.2f", 2 * (n - 1) / n }')x ($hosts ranks)."
awk -v link="$link" -v n="$hosts" 'FNR == 1 { f++ }
     /^ *[0-9]/ { t[f, $1] = $5; a[f, $1] = $6; if (f == 1) order[++m] = $1 }
     END {
	printf "%12s %12s %12s %12s %12s %7s %7s %9s\n", "size (B)", "switch (us)", "ring (us)",
	       "switch GB/s", "ring GB/s", "link", "link", "speed-up"
	for (i = 1; i <= m; i++) {
		s = order[i]
		if (!((2, s) in t)) continue
		printf "%12s %12s %12s %12s %12s %6.0f%% %6.0f%% %8.2fx\n", s, t[1, s], t[2, s], a[1, s],
		       a[2, s], 100 * a[1, s] / link, 100 * a[2, s] * 2 * (n - 1) / n / link, t[2, s] / t[1, s]
	}
     }' "$WORK/switch.txt" "$WORK/ring.txt"
# the verdicts at the largest size both sides ran (the links bind) and at
# the smallest (one round trip): time ring / time switch
verdicts=()
# one line each: "SIZE RATIO", nothing where a side lacks the size
verdict_sizes=$(awk 'FNR == 1 { f++ } /^ *[0-9]/ { t[f, $1] = $5; if (f == 1) { last = $1; if (first == "") first = $1 } }
	function ratio(s) { if ((2, s) in t && t[1, s] > 0) printf "%s %.2f", s, t[2, s] / t[1, s]; print "" }
	END { ratio(last); ratio(first) }' "$WORK/switch.txt" "$WORK/ring.txt")
speedup=$(sed -n 1p <<< "$verdict_sizes")
small=$(sed -n 2p <<< "$verdict_sizes")
if [ -z "$speedup" ] || [ -z "$small" ]; then
	verdicts+=("no in-network or ring figure at the largest or smallest size: see the tables above")
else
	if awk -v s="${speedup#* }" 'BEGIN { exit !(s < 1.0) }'; then
		verdicts+=("in-network is slower than the $ring_name at ${speedup% *} B (${speedup#* }x) on links that bind")
	fi
	if awk -v s="${small#* }" 'BEGIN { exit !(s < 1.0) }'; then
		verdicts+=("in-network is slower than the $ring_name at ${small% *} B (${small#* }x)")
	fi
fi

if command -v mpirun >/dev/null && [ -e build/host-lib/mpi/libinca-mpi.so ]; then
	step "the same Open MPI binary, unchanged, without and with libinca-mpi preloaded (docs/mpi.md)"
	export MPI_NET=10.0.0.0/24      # MPI's own traffic on the same links
	# 5 warm-up calls a size, 50 up to 64 KiB (OSU's benchmarks use 200
	# there): libinca-mpi offloads a communicator at its 4th call
	# (INCA_MPI_OFFLOAD_AFTER), and its creation (10-30 ms) belongs in the
	# warm-up, not in the first size's mean; so do the slower first few
	# dozen calls after it (with 2 ranks per host and 5 warm-up calls the
	# 8 B mean was 405-459 us, with 40: 230-233; libinca alone shows them too)
	OSU=(build/tests/bench/mpi-allreduce-perf -o -b 8 -e "$maxsize" -f 8 -n 10 -N 100 -w 5 -W 50)
	if INCA_MPI=0 mpi_ranks "$hosts" 1 "$here/build/host-lib/mpi/libinca-mpi.so" "${OSU[@]}" \
		> "$WORK/osu-mpi.txt" 2> "$WORK/osu-mpi.err" &&
	   INCA_MPI=1 mpi_ranks "$hosts" 1 "$here/build/host-lib/mpi/libinca-mpi.so" "${OSU[@]}" \
		> "$WORK/osu-inca.txt" 2> "$WORK/osu-inca.err"; then
		grep "offloaded to INCA" "$WORK/osu-inca.err" || true
		osu_side_by_side "$WORK/osu-mpi.txt" "$WORK/osu-inca.txt" | tee "$WORK/osu.txt"
		mpi=$(awk '/^[0-9]/ { last = $1; s = $4 } END { sub("x", "", s); print last, s }' \
			"$WORK/osu.txt")
		if [ -z "${mpi#* }" ]; then
			verdicts+=("the MPI comparison printed no figure")
		elif awk -v s="${mpi#* }" 'BEGIN { exit !(s < 1.0) }'; then
			verdicts+=("libinca-mpi is slower than Open MPI at ${mpi% *} B (${mpi#* }x)")
		fi
	else
		echo "the MPI run failed:"; tail -n 5 "$WORK"/osu-*.err
		verdicts+=("the MPI run failed")
	fi

	# what jobs meet: several ranks per host (one per GPU or socket)
	np=$((hosts * 2))
	step "several ranks per host: $np ranks, 2 on each host; the same binary through libinca-mpi (reduced inside each host first, docs/hostlib.md) against Open MPI at its best for that layout (shared memory inside a host; the faster of its tuned rules and coll/han at each size)"
	# 100 calls a size up to 64 KiB, as above: with 50, a disturbed stretch
	# of the shared machine took libinca-mpi's 32 KiB mean from its usual
	# 1.5-1.9 ms to 2.6 ms in one run (2026-11-28; that run's in-network
	# 32 KiB median, one rank a host, was 30% slower than usual as well)
	OSU2=(build/tests/bench/mpi-allreduce-perf -o -b 8 -e "$maxsize" -f 8 -n 5 -N 100 -w 5 -W 50)
	if OMPI_MCA_coll_tuned_use_dynamic_rules=1 \
	   OMPI_MCA_coll_tuned_dynamic_rules_filename="$here/tests/bench/ompi-allreduce-rules.conf" \
	   INCA_MPI=0 mpi_ranks "$np" 2 "$here/build/host-lib/mpi/libinca-mpi.so" "${OSU2[@]}" \
		> "$WORK/osu2-tuned.txt" 2> "$WORK/osu2-tuned.err" &&
	   INCA_MPI=0 MPI_HAN=1 mpi_ranks "$np" 2 "$here/build/host-lib/mpi/libinca-mpi.so" \
		"${OSU2[@]}" > "$WORK/osu2-han.txt" 2> "$WORK/osu2-han.err" &&
	   INCA_MPI=1 mpi_ranks "$np" 2 "$here/build/host-lib/mpi/libinca-mpi.so" "${OSU2[@]}" \
		> "$WORK/osu2-inca.txt" 2> "$WORK/osu2-inca.err"; then
		grep "collectives reduced inside the host first" "$WORK/osu2-inca.err" || true
		osu_best "$WORK/osu2-tuned.txt" "$WORK/osu2-han.txt" > "$WORK/osu2-best.txt"
		osu_side_by_side "$WORK/osu2-best.txt" "$WORK/osu2-inca.txt" | tee "$WORK/osu2.txt"
		mpi2=$(awk '/^[0-9]/ { last = $1; s = $4 } END { sub("x", "", s); print last, s }' \
			"$WORK/osu2.txt")
		if [ -z "${mpi2#* }" ]; then
			verdicts+=("the several-ranks-per-host comparison printed no figure")
		elif ! grep -q "collectives reduced inside the host first" "$WORK/osu2-inca.err"; then
			verdicts+=("libinca-mpi did not reduce inside the hosts first")
		elif awk -v s="${mpi2#* }" 'BEGIN { exit !(s < 1.0) }'; then
			verdicts+=("libinca-mpi with 2 ranks per host is slower than Open MPI at its best at ${mpi2% *} B (${mpi2#* }x)")
		fi
	else
		echo "the several-ranks-per-host MPI run failed:"; tail -n 5 "$WORK"/osu2-*.err
		verdicts+=("the several-ranks-per-host MPI run failed")
	fi
fi

cat <<EOF

Where to look next:
  the manager       build/control/incactl switches | jobs | tree JOB | failures
                    (inca-manager --help; docs/manager.md)
  switch counters   echo /inca/info | dpdk-telemetry.py -f $INCA_TESTBED-tb   (while it runs)
  lossless fabric   echo /inca/qos,0 | dpdk-telemetry.py -f $INCA_TESTBED-tb
  the testbed       deploy/testbed up --hosts 4; deploy/testbed exec 1 ping 10.0.0.254
  the figures       build/tests/bench/inca-bench-agg, build/tests/bench/inca-bench-switch
  a two-level lab   deploy/fabric up --hosts 4 --leaves 2 ...; tests/func/manager.sh
  MPI programs      LD_PRELOAD=libinca-mpi.so (docs/mpi.md); tests/bench/run-mpi.sh
  the docs          docs/protocol.md, docs/switch.md, docs/hostlib.md, docs/manager.md
EOF
if [ "${#verdicts[@]}" -gt 0 ]; then
	printf 'demo.sh: FAILED: %s\n' "${verdicts[@]}" >&2
	exit 1
fi
echo "demo.sh: in-network ${speedup#* }x the $ring_name at ${speedup% *} B and ${small#* }x at ${small% *} B${mpi:+, libinca-mpi ${mpi#* }x Open MPI at ${mpi% *} B}${mpi2:+, with 2 ranks per host ${mpi2#* }x Open MPI at its best}"
