#!/usr/bin/env bash
# In-network (inca-switch via libinca, udp and xdp) against Open MPI's
# all-reduce at its best here (TCP on cubic asking for ECN, the testbed's
# default, btl_tcp_links 2, recursive doubling below 4 KiB and the ring from
# 4 KiB: tests/bench/ompi-allreduce-rules.conf, the faster of the two at each
# size on this testbed), on the same links, for
# N = 2, 4, 8 ranks, 8 B .. 16 MiB of float sum, at each rate given: the
# link-bound rate(s) where both sides are limited by the links, and the
# CPU-bound 1 Gbit/s. Beside them, in the same run, the latency floor (ping
# to the switch and to another host, an 8-byte UDP echo through the switch)
# and every side's CPU-seconds per GB and retransmissions. Times are medians
# over the iterations (each iteration's slowest rank); cpus.csv has, per
# row, the period (rank 0's calls back to back: the rate they go at) and
# each CPU's shares of user, system, softirq, idle and steal time (-R of
# the perf tools); allreduce.csv's core_s_per_GB is the busy time of the
# ranks' CPUs (with --rank-cpus; '-' without). Small calls (8..256
# B) are measured again in --rounds short rounds that take turns (udp, xdp,
# the ring, udp, ...), so that the machine's slow drifts fall on every side
# alike; their latency is the median over the rounds. A failed launch is
# retried once and said; a wrong result or a call that fell back to the host
# ring fails the run. Writes CSV, Markdown, SVG and PNG plots to --out.
# The in-network side runs as users run it: in manager mode (inca-manager
# sets the group up on the switch, libinca follows its plan); --groups
# static uses a static group instead, --groups both runs the two in turn
# on the same links (the static rows as inca-udp-static, inca-xdp-static)
# and prints them side by side.
# Usage: tests/bench/run-allreduce.sh [--out DIR] [--ranks "2 4 8"]
#          [--rates "200mbit 1gbit"] [--max 16M] [--iters 20] [--rounds 20]
#          [--repeat 1] [--min 8] [--build DIR] [--mtu 1500]
#          [--groups manager|static|both] [--rank-cpus LIST]
#   --min S    the smallest size of the sweep (e.g. --min 16M --max 16M:
#              one size); with --rounds 0 no latency rounds are run
#   --build D  the build directory of the binaries (default build/)
#   --mtu M    the links' MTU for every side (default 1500; 9000: libinca's
#              IB MTU 4096 on udp, 2048 on xdp, 1024 elements per packet at
#              the switch; the ring's TCP gets the same jumbo frames)
#   --iters N  timed iterations from 128 KiB up; 10 N below (medians of
#              small, noisy calls need more)
#   --rounds R the interleaved latency rounds per rank count and rate
#   --rank-cpus L  every rank of every side (in-network and Open MPI) on
#              the CPUs L (taskset -c L, e.g. 0: off the switch worker's
#              CPU 1 on a 2-CPU machine); unset, the scheduler places them
#              and small calls take two levels (docs/performance.md). Bound
#              ranks also poll 50 us for results before they sleep
#              (libinca's default for a bound rank: INCA_SPIN_US)
#   --repeat 2 runs everything twice and compares the ratios of the two
#              runs: exit 1 when one at the first (link-bound) rate differs
#              by more than 10% (the CPU-bound rates are shown, not judged)
#   --nics K   K links per host (testbed --nics): local rank l of a host
#              sends from its link l mod K, in-network (the rails' ranks
#              each from their own) and Open MPI (btl_tcp on every link)
#   --per-host P  P ranks on each host (--ranks: the job's ranks, a
#              multiple of P): libinca reducing inside the host first
#              (inca-udp, inca-xdp), the same with rails (inca-udp-rails,
#              INCA_HIER=rails: every local rank carries its share of a
#              call from 256 KiB up; manager mode only), every rank a
#              member (inca-udp-flat, INCA_HIER=off), Open MPI's tuned ring and its
#              hierarchical coll/han (shared memory inside the host), in
#              turn on the same links; per size each one's time and algbw,
#              and in-network against the faster Open MPI (per-host.txt;
#              per-host-COLL.txt with --coll); --rounds R interleaved
#              rounds of 8..256 B calls, every side in turn, their medians
#              (per-host-latency.txt, per-host-COLL-latency.txt)
#   --coll C   with --per-host: the collective every side runs (allreduce,
#              reduce_scatter, allgather, bcast, reduce; default allreduce;
#              sizes as nccl-tests count them). Open MPI's tuned rules are
#              for all-reduce; other collectives take its own choice (and
#              han's)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$here/bench-results ranks="2 4 8" rates="200mbit 1gbit" max=16M iters=20 repeat=1 rounds=20
min=8 build=$here/build mtu=1500 groups=manager per=1 coll=allreduce
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=${2:?}; shift 2 ;;
	--ranks) ranks=${2:?}; shift 2 ;;
	--rates|--rate) rates=${2:?}; shift 2 ;;
	--max) max=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--repeat) repeat=${2:?}; shift 2 ;;
	--rounds) rounds=${2:?}; shift 2 ;;
	--min) min=${2:?}; shift 2 ;;
	--build) build=${2:?}; shift 2 ;;
	--mtu) mtu=${2:?}; shift 2 ;;
	--groups) groups=${2:?}; shift 2 ;;
	--rank-cpus) export INCA_RANK_CPUS=${2:?}; shift 2 ;;
	--per-host) per=${2:?}; shift 2 ;;
	--nics) export INCA_NICS=${2:?}; shift 2 ;;
	--coll) coll=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,64p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-allreduce.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "run-allreduce.sh: run as root" >&2; exit 1; }
[[ "$repeat" =~ ^[12]$ ]] || { echo "run-allreduce.sh: --repeat 1 or 2" >&2; exit 2; }
[[ "$rounds" =~ ^[0-9][0-9]?$ ]] || { echo "run-allreduce.sh: --rounds 0..99" >&2; exit 2; }
if [ -n "${INCA_RANK_CPUS:-}" ] && ! taskset -c "$INCA_RANK_CPUS" true 2>/dev/null; then
	echo "run-allreduce.sh: --rank-cpus '$INCA_RANK_CPUS': not a CPU list of this machine (taskset -c)" >&2
	exit 2
fi
[[ "$per" =~ ^[1-9][0-9]*$ ]] || { echo "run-allreduce.sh: --per-host P, P >= 1" >&2; exit 2; }
for n in $ranks; do
	[ $((n % per)) = 0 ] && [ $((n / per)) -ge 2 ] ||
		{ echo "run-allreduce.sh: --ranks $n: need a multiple of --per-host $per on 2 hosts or more" >&2; exit 2; }
done
export INCA_PER_HOST=$per
case "$coll" in
allreduce) ;;
reduce_scatter|allgather|bcast|reduce)
	[ "$per" -gt 1 ] || { echo "run-allreduce.sh: --coll $coll needs --per-host (the one-rank-a-host sweep is all-reduce's)" >&2; exit 2; } ;;
*) echo "run-allreduce.sh: --coll: allreduce, reduce_scatter, allgather, bcast or reduce" >&2; exit 2 ;;
esac
# the per-host sweep's files: per-host.* for all-reduce, per-host-COLL.*
# for the others (two runs into one --out keep both)
PH=per-host
[ "$coll" = allreduce ] || PH=per-host-$coll
case "$groups" in
manager|static) kinds=$groups ;;
both) kinds="manager static" ;;
*) echo "run-allreduce.sh: --groups manager, static or both" >&2; exit 2 ;;
esac
B=$(cd "$build" && pwd)
export INCA_BUILD=$B INCA_TESTBED_MTU=$mtu
[ "$mtu" -le 1500 ] || export INCA_ELEMS=1024
for f in "$B/dataplane/inca-switch" "$B/host-lib/inca-allreduce-perf" \
	 "$B/tests/bench/mpi-allreduce-perf" "$B/tests/bench/udp-echo"; do
	[ -x "$f" ] || { echo "run-allreduce.sh: $f not built" >&2; exit 1; }
done
export INCA_TESTBED=incabench
TB=$here/deploy/testbed
WORK=$(mktemp -d /tmp/inca-bench.XXXXXX)
ECHO_PID= MGR_PID=
PORT=18471
trap '[ -n "$ECHO_PID" ] && kill "$ECHO_PID" 2>/dev/null; [ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null; "$TB" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
mkdir -p "$out"
# sizes up to 64 KiB with ten times the iterations (-N)
SIZES=(-c "$coll" -b "$min" -e "$max" -f 2 -n "$iters" -N $((iters * 10)) -w 3 -R)
# one latency round: 8..256 B
SMALL=(-c "$coll" -b 8 -e 256 -f 2 -n "$iters" -N $((iters * 10)) -w 200)

# shellcheck source=deploy/jobs.sh
source "$here/deploy/jobs.sh"

# retry WHAT CMD...: CMD, and once more if it fails (said on stderr)
retry() {
	local what=$1
	shift
	"$@" && return 0
	echo "run-allreduce.sh: $what failed; retrying once" >&2
	"$@"
}

# ping_median HOST: the median RTT in µs of 200 pings from host 1
ping_median() {
	"$TB" exec 1 ping -n -q -c 1 "$1" >/dev/null 2>&1 || true    # ARP first
	"$TB" exec 1 ping -n -c 200 -i 0.005 "$1" |
		sed -n 's/.*time=\([0-9.]*\) ms.*/\1/p' | sort -n |
		awk '{ v[NR] = $1 } END { if (NR < 150) exit 1; printf "%.1f\n", v[int((NR + 1) / 2)] * 1000 }'
}

# testbed_up KIND N RATE: a fresh testbed of N hosts at RATE for an
# in-network job of KIND (manager: inca-manager beside it, the switch
# taking its groups from it, the libinca environment for manager mode and a
# new INCA_JOB exported; static: the static group) or for Open MPI (static)
testbed_up() {
	local kind=$1 n=$(( $2 / per )) rate=$3
	if [ -n "$MGR_PID" ]; then
		kill "$MGR_PID" 2>/dev/null; wait "$MGR_PID" 2>/dev/null || true
		MGR_PID=
	fi
	if [ "$kind" = manager ]; then
		mkdir -p "$WORK/mgr"
		rm -f "$WORK/mgr/manager.db"*
		manager_testbed "$n" "$WORK/mgr" "$PORT" "$B" --rate "$rate" --nics "${INCA_NICS:-1}" ||
			{ echo "run-allreduce.sh: the manager's testbed failed" >&2; exit 1; }
		export INCA_JOB=bench-$n-$RANDOM$RANDOM
	else
		unset INCA_MANAGER INCA_MANAGER_TOKEN_FILE INCA_JOB
		# every rank a member (INCA_HIER=off), or the hosts
		if [ "${INCA_HIER:-}" = off ] && [ "$per" -gt 1 ]; then
			group_config $((n * per)) "$WORK/switch.json" "$per"
		else
			group_config "$n" "$WORK/switch.json"
		fi
		"$TB" up --hosts "$n" --rate "$rate" --nics "${INCA_NICS:-1}" --config "$WORK/switch.json" --switch "$B/dataplane/inca-switch" >/dev/null
	fi
}
# tool names: inca-TRANSPORT in manager mode, inca-TRANSPORT-static
tool_name() { [ "$2" = manager ] && echo "inca-$1" || echo "inca-$1-static"; }

# latency_rounds DIR RATE N: $rounds rounds of 8..256 B calls, every side
# (udp and xdp in each kind of group, the ring) taking turns on a fresh
# switch each, into DIR/latency.csv
latency_rounds() {
	local dir=$1 rate=$2 n=$3 r tool
	echo "== $rate, $n ranks: $rounds latency rounds (udp, xdp, ring in turn; groups: $kinds)" >&2
	local kind tp sides=()
	for tp in udp xdp; do
		for kind in $kinds; do sides+=("$tp:$kind"); done
	done
	for r in $(seq "$rounds"); do
		for tool in "${sides[@]}" openmpi-ring; do
			if [ "$tool" = openmpi-ring ]; then
				testbed_up static "$n" "$rate"
				retry "the Open MPI latency round ($n ranks, $rate)" \
					openmpi_job "$n" "$WORK/lat.txt" "${SMALL[@]}"
			else
				tp=${tool%:*} kind=${tool#*:}
				tool=$(tool_name "$tp" "$kind")
				testbed_up "$kind" "$n" "$rate"
				INCA_TRANSPORT=$tp INCA_LINE_RATE_GBPS=1 \
					retry "the in-network $tp latency round ($n ranks, $rate)" \
					inca_job "$n" "$WORK/lat.txt" "${SMALL[@]}"
			fi
			awk -v p="$rate,$tool,$n,$r" '/^ *[0-9]/ { printf "%s,%s,%s\n", p, $1, $5 }' \
				"$WORK/lat.txt" >> "$dir/latency.csv"
		done
	done
}

# row_lines PREFIX: the "# row" lines of a perf tool's table (stdin) as
# cpus.csv's rows, one a CPU: PREFIX,bytes,period_us,spin_us,cpuN,user,...,
# ticks (spin_us empty for Open MPI's; a line without the CPUs, /proc/stat
# unread, one row with those fields empty)
row_lines() {
	awk -v p="$1" '/^# row / {
		n = split($0, part, "; ")
		split(part[1], h, " ")
		spin = h[8] == "spin" ? h[9] : ""
		if (n < 2)
			printf "%s,%s,%s,%s,,,,,,,\n", p, h[3], h[6], spin
		for (i = 2; i <= n; i++) {
			split(part[i], f, " ")
			printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", p, h[3], h[6], spin, f[1], f[3], f[5], f[7], f[9], f[11], f[13]
		}
	}'
}

# one_run RUN: every rate and rank count once, into $out/RUN/
one_run() {
	local dir=$1 rate n tp
	mkdir -p "$dir"
	echo "rate,tool,ranks,bytes,time_us,algbw_GBps,busbw_GBps,wrong,cpu_s_per_GB,core_s_per_GB" > "$dir/allreduce.csv"
	echo "rate,ranks,what,median_us" > "$dir/floor.csv"
	echo "$mtu" > "$dir/mtu.txt"
	echo "rate,tool,ranks,packets,retransmissions,probes" > "$dir/retx.csv"
	echo "rate,tool,ranks,bytes,period_us,spin_us,cpu,user,system,softirq,idle,steal,ticks" > "$dir/cpus.csv"
	echo "rate,tool,ranks,round,bytes,time_us" > "$dir/latency.csv"
	for rate in $rates; do
		for n in $ranks; do
			group_config "$n" "$WORK/switch.json"
			"$TB" up --hosts "$n" --rate "$rate" --nics "${INCA_NICS:-1}" --config "$WORK/switch.json" --switch "$B/dataplane/inca-switch" >/dev/null
			echo "== $rate, $n ranks: the latency floor" >&2
			local ps ph ue
			ps=$(ping_median 10.0.0.254) || { echo "ping to the switch lost replies" >&2; exit 1; }
			ph=$(ping_median 10.0.0.2) || { echo "ping to host 2 lost replies" >&2; exit 1; }
			"$TB" exec 2 "$B/tests/bench/udp-echo" -s > /dev/null 2>&1 &
			ECHO_PID=$!
			sleep 0.3
			ue=$("$TB" exec 1 "$B/tests/bench/udp-echo" -c 10.0.0.2 -n 1000 |
			     sed -n 's/.*median \([0-9.]*\) us.*/\1/p')
			kill "$ECHO_PID" 2>/dev/null; wait "$ECHO_PID" 2>/dev/null || true
			ECHO_PID=
			[ -n "$ue" ] || { echo "the UDP echo through the switch failed" >&2; exit 1; }
			printf '%s,%s,ping-switch,%s\n%s,%s,ping-host,%s\n%s,%s,udp-echo-host,%s\n' \
				"$rate" "$n" "$ps" "$rate" "$n" "$ph" "$rate" "$n" "$ue" >> "$dir/floor.csv"
			echo "   ping switch $ps us, ping host $ph us, 8 B UDP echo $ue us" >&2
			[ "$rounds" = 0 ] || latency_rounds "$dir" "$rate" "$n"
			local kind t
			for kind in $kinds; do
			for tp in udp xdp; do
				t=$(tool_name "$tp" "$kind")
				echo "== $rate, $n ranks, in-network, $tp, $kind group" >&2
				testbed_up "$kind" "$n" "$rate"
				export INCA_TRANSPORT=$tp INCA_LINE_RATE_GBPS=1
				retry "the in-network $tp job ($n ranks, $rate, $kind group)" \
					inca_job "$n" "$WORK/inca.txt" "${SIZES[@]}"
				cat "$WORK/inca.txt" >&2
				awk -v r="$rate" -v t="$t" -v n="$n" '/^ *[0-9]/ {
					printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", r, t, n, $1, $5, $6, $7, $8, $10, $11 }' \
					"$WORK/inca.txt" >> "$dir/allreduce.csv"
				row_lines "$rate,$t,$n" < "$WORK/inca.txt" >> "$dir/cpus.csv"
				sed -n 's/^# packets sent \([0-9]*\), retransmissions \([0-9]*\) .*; \([0-9]*\) of them probes.*/\1 \2 \3/p' \
					"$WORK/inca.txt" | awk -v p="$rate,$t,$n" \
					'{ s += $1; r += $2; q += $3 } END { printf "%s,%d,%d,%d\n", p, s, r, q }' \
					>> "$dir/retx.csv"
			done
			done
			unset INCA_JOB
			echo "== $rate, $n ranks, Open MPI (ring from 4 KiB, recursive doubling below)" >&2
			testbed_up static "$n" "$rate"
			retry "the Open MPI job ($n ranks, $rate)" openmpi_job "$n" "$WORK/mpi.txt" "${SIZES[@]}"
			cat "$WORK/mpi.txt" >&2
			awk -v r="$rate" -v n="$n" '/^ *[0-9]/ {
				printf "%s,openmpi-ring,%s,%s,%s,%s,%s,%s,%s,%s\n", r, n, $1, $5, $6, $7, $8, $9, $10 }' \
				"$WORK/mpi.txt" >> "$dir/allreduce.csv"
			row_lines "$rate,openmpi-ring,$n" < "$WORK/mpi.txt" >> "$dir/cpus.csv"
		done
	done
	"$TB" down >/dev/null
	[ -z "$MGR_PID" ] || { kill "$MGR_PID" 2>/dev/null; wait "$MGR_PID" 2>/dev/null || true; MGR_PID=; }
	/usr/bin/python3 "$here/tests/bench/report.py" "$dir"
	if [ "$groups" = both ]; then
		/usr/bin/python3 "$here/tests/bench/report.py" --versus "$dir" |
			tee "$dir/manager-vs-static.txt"
	fi
}

# per_host_rounds RATE N: $rounds rounds of 8..256 B calls, every side of
# per_host_run taking turns on a fresh testbed each, into
# $out/$PH-latency.csv (a sweep's first rows are slow on every side:
# these are the small calls' figures)
per_host_rounds() {
	local rate=$1 n=$2 r side kind tool
	echo "== $rate, $n ranks ($per per host): $rounds latency rounds (every side in turn)" >&2
	for r in $(seq "$rounds"); do
		for kind in $kinds; do
			for side in udp xdp udp-flat; do
				tool=$(tool_name "$side" "$kind")
				export INCA_TRANSPORT=${side%-flat} INCA_LINE_RATE_GBPS=1
				if [ "$side" = udp-flat ]; then export INCA_HIER=off; else unset INCA_HIER; fi
				testbed_up "$kind" "$n" "$rate"
				retry "the in-network $side latency round ($n ranks, $rate)" \
					inca_job "$n" "$WORK/lat.txt" "${SMALL[@]}"
				awk -v p="$rate,$tool,$n,$r" '/^ *[0-9]/ { printf "%s,%s,%s\n", p, $1, $5 }' \
					"$WORK/lat.txt" >> "$out/$PH-latency.csv"
			done
		done
		unset INCA_HIER INCA_JOB
		for tool in openmpi-ring openmpi-han; do
			testbed_up static "$n" "$rate"
			[ "$tool" = openmpi-han ] && export OMPI_HAN=1 || unset OMPI_HAN
			retry "the $tool latency round ($n ranks, $rate)" \
				openmpi_job "$n" "$WORK/lat.txt" "${SMALL[@]}"
			awk -v p="$rate,$tool,$n,$r" '/^ *[0-9]/ { printf "%s,%s,%s\n", p, $1, $5 }' \
				"$WORK/lat.txt" >> "$out/$PH-latency.csv"
		done
		unset OMPI_HAN
	done
}

# per_host_latency_table: the rounds' medians per side and size, and each
# in-network side's time over the faster Open MPI's (< 1: in-network faster)
per_host_latency_table() {
	awk -F, 'NR > 1 { k = $1 "," $3; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
		if (!((k, $5) in sz)) { sz[k, $5] = 1; sizes[k, ++ns[k]] = $5 }
		if (!((k, $2) in tl)) { tl[k, $2] = 1; tools[k, ++nt[k]] = $2 }
		v[k, $2, $5] = v[k, $2, $5] " " $6 }
	     function med(s,   x, m, i, j, t) { m = split(s, x, " ")
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
		return x[int((m + 1) / 2)] }
	     END { for (i = 1; i <= nk; i++) { k = keys[i]; split(k, a, ",")
		printf "\n%s, %d ranks, %d per host, small calls: median time (us) of '"$rounds"' interleaved rounds; ratios: time over the faster Open MPI (<1: in-network faster)\n", a[1], a[2], '"$per"'
		printf "%10s", "bytes"
		for (j = 1; j <= nt[k]; j++) printf " %20s", tools[k, j]
		for (j = 1; j <= nt[k]; j++) if (tools[k, j] ~ /^inca/) printf " %16s", tools[k, j] "/MPI"
		printf "\n"
		for (s = 1; s <= ns[k]; s++) { b = sizes[k, s]; printf "%10s", b; best = 0
			for (j = 1; j <= nt[k]; j++) { m[j] = med(v[k, tools[k, j], b]); printf " %20.1f", m[j]
				if (tools[k, j] ~ /^openmpi/ && (best == 0 || m[j] < best)) best = m[j] }
			for (j = 1; j <= nt[k]; j++) if (tools[k, j] ~ /^inca/) printf " %15.2fx", m[j] / best
			printf "\n" } } }' "$out/$PH-latency.csv" | tee "$out/$PH-latency.txt"
}

# rails_bpffs: the rails' ranks share their host's address, so the udp
# transport steers by QPN with its eBPF program, whose pins are in a bpffs
# at /run/inca/bpffs (mounted here if it is not; unmounted at the end)
RAILS_BPFFS=
rails_bpffs() {
	mountpoint -q /run/inca/bpffs && return 0
	mkdir -p /run/inca/bpffs && mount -t bpf bpf /run/inca/bpffs ||
		{ echo "run-allreduce.sh: cannot mount a bpffs at /run/inca/bpffs (rails)" >&2; exit 1; }
	RAILS_BPFFS=1
}

# per_host_run: --per-host P; every side in turn, rate by rate, into
# $out/$PH.csv and a table per rate and rank count ($PH.txt)
per_host_run() {
	local rate n kind side tool t
	mkdir -p "$out"
	echo "rate,tool,ranks,per_host,bytes,time_us,algbw_GBps" > "$out/$PH.csv"
	echo "rate,tool,ranks,round,bytes,time_us" > "$out/$PH-latency.csv"
	for rate in $rates; do
		for n in $ranks; do
			for kind in $kinds; do
				for side in udp xdp udp-flat udp-rails; do
					# a static group file has no rails here
					[ "$side-$kind" != udp-rails-static ] || continue
					t=$(tool_name "$side" "$kind")
					echo "== $rate, $n ranks ($per per host), in-network $side, $kind group" >&2
					export INCA_TRANSPORT=${side%-*} INCA_LINE_RATE_GBPS=1
					case $side in
					udp-flat) export INCA_HIER=off ;;
					udp-rails) export INCA_HIER=rails; rails_bpffs ;;
					*) unset INCA_HIER ;;
					esac
					testbed_up "$kind" "$n" "$rate"
					retry "the in-network $side job ($n ranks, $rate, $kind group)" \
						inca_job "$n" "$WORK/inca.txt" "${SIZES[@]}"
					cat "$WORK/inca.txt" >&2
					awk -v p="$rate,$t,$n,$per" '/^ *[0-9]/ { printf "%s,%s,%s,%s\n", p, $1, $5, $6 }' \
						"$WORK/inca.txt" >> "$out/$PH.csv"
				done
			done
			unset INCA_HIER INCA_JOB
			for tool in openmpi-ring openmpi-han; do
				echo "== $rate, $n ranks ($per per host), $tool" >&2
				testbed_up static "$n" "$rate"
				[ "$tool" = openmpi-han ] && export OMPI_HAN=1 || unset OMPI_HAN
				retry "the $tool job ($n ranks, $rate)" openmpi_job "$n" "$WORK/mpi.txt" "${SIZES[@]}"
				cat "$WORK/mpi.txt" >&2
				awk -v p="$rate,$tool,$n,$per" '/^ *[0-9]/ { printf "%s,%s,%s,%s\n", p, $1, $5, $6 }' \
					"$WORK/mpi.txt" >> "$out/$PH.csv"
			done
			unset OMPI_HAN
			[ "$rounds" = 0 ] || per_host_rounds "$rate" "$n"
		done
	done
	"$TB" down >/dev/null
	[ -z "$MGR_PID" ] || { kill "$MGR_PID" 2>/dev/null; wait "$MGR_PID" 2>/dev/null || true; MGR_PID=; }
	[ -z "$RAILS_BPFFS" ] || umount /run/inca/bpffs
	[ "$rounds" = 0 ] || per_host_latency_table
	# per rate and rank count: time (µs) of every side; in-network (udp, then
	# xdp) over the faster Open MPI, and over today's path
	awk -F, 'NR > 1 { k = $1 "," $3; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
		if (!(($1, $3, $5) in sz)) { sz[$1, $3, $5] = 1; sizes[k, ++ns[k]] = $5 }
		t[k, $2, $5] = $6; tools[$2] = 1 }
	     END { for (i = 1; i <= nk; i++) { k = keys[i]; split(k, a, ",")
		printf "\n%s, %s, %d ranks, %d per host: time (us); ratios are speed-ups (>1: in-network faster)\n", "'"$coll"'", a[1], a[2], '"$per"'
		printf "%10s", "bytes"; n = 0
		split("inca-udp inca-xdp inca-udp-flat inca-udp-rails inca-udp-static inca-xdp-static inca-udp-flat-static openmpi-ring openmpi-han", cand, " ")
		for (j = 1; j <= 9; j++) if ((k, cand[j], sizes[k, 1]) in t) names[++n] = cand[j]
		for (j = 1; j <= n; j++) printf " %20s", names[j]
		printf " %12s %12s %12s %13s\n", "udp/bestMPI", "xdp/bestMPI", "udp/flat", "rails/bestMPI"
		for (s = 1; s <= ns[k]; s++) { b = sizes[k, s]; printf "%10s", b
			for (j = 1; j <= n; j++) printf " %20.1f", t[k, names[j], b]
			best = 0
			for (tl in tools) if (tl ~ /^openmpi/ && (k, tl, b) in t && (best == 0 || t[k, tl, b] < best)) best = t[k, tl, b]
			u = ""; x = ""; f = ""; l = ""
			for (tl in tools) { if (tl ~ /^inca-udp(-static)?$/) u = t[k, tl, b]; if (tl ~ /^inca-xdp(-static)?$/) x = t[k, tl, b]
				if (tl ~ /^inca-udp-flat/) f = t[k, tl, b]; if (tl == "inca-udp-rails") l = t[k, tl, b] }
			ru = (u > 0) ? sprintf("%.2fx", best / u) : "-"; rx = (x > 0) ? sprintf("%.2fx", best / x) : "-"
			rf = (u > 0 && f > 0) ? sprintf("%.2fx", f / u) : "-"; rl = (l > 0) ? sprintf("%.2fx", best / l) : "-"
			printf " %12s %12s %12s %13s\n", ru, rx, rf, rl } } }' \
		"$out/$PH.csv" | tee "$out/$PH.txt"
	echo "results: $out ($PH.txt, $PH.csv)" >&2
}

if [ "$per" -gt 1 ]; then
	per_host_run
	exit 0
fi

if [ "$repeat" = 1 ]; then
	one_run "$out"
	echo "results: $out (allreduce.md, allreduce.csv, latency.csv, floor.csv, retx.csv, cpus.csv, plots)" >&2
else
	one_run "$out/run1"
	one_run "$out/run2"
	/usr/bin/python3 "$here/tests/bench/report.py" --compare "$out/run1" "$out/run2" \
		"${rates%% *}" > "$out/repeat.md" || status=$?
	cat "$out/repeat.md"
	exit "${status:-0}"
fi
