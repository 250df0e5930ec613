#!/usr/bin/env bash
# inca-switch microbenchmarks on in-memory (net_ring) ports: aggregation and
# forwarding-only per busy worker core, IB MTU 1024 and 4096, 2/8/32
# members, 1 and 2 workers (rings filled before the clock, frames out
# freed as a NIC's driver frees them: inca-bench-switch -t), and per dtype
# (fp32, fp16, bf16, int32, fp64 at IB MTU 4096), beside the
# bound of one core's memory (the same packets read, and read with a result
# written per set: stream-read, stream-rw; aggregation's payload GB/s over
# stream-rw's with one worker), the engine alone, and a perf profile of one
# case (top 10, the ICRC's share).
# Runs on a private hugetlbfs mount (N 2 MiB pages added, taken back at the
# end). Fails when any run did not do the work (inca-bench-switch exits 1).
# Writes OUT/switch.md.
# Usage: tests/bench/run-switch.sh [--out DIR] [--build DIR] [--no-perf]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=$here/bench-results
build=$here/build
perf=1
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?}; shift 2 ;;
	--build) build=${2:?}; shift 2 ;;
	--no-perf) perf=0; shift ;;
	-h|--help) sed -n 2,13p "$0"; exit 0 ;;
	*) echo "run-switch.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
B=$build/tests/bench
PAGES=600

old_pages=$(cat /proc/sys/vm/nr_hugepages)
huge=$(mktemp -d /tmp/inca-bench-huge.XXXXXX)
cleanup() {
	umount "$huge" 2>/dev/null || true
	rmdir "$huge" 2>/dev/null || true
	echo "$old_pages" > /proc/sys/vm/nr_hugepages
}
trap cleanup EXIT
echo $((old_pages + PAGES)) > /proc/sys/vm/nr_hugepages
mount -t hugetlbfs -o pagesize=2M nodev "$huge"

raw=$out/switch-raw.txt
: > "$raw"
run() {   # members elems workers [dtype]
	local o
	if ! o=$("$B/inca-bench-switch" -m "$1" -e "$2" -w "$3" -d "${4:-fp32}" -n 15 -H "$huge" 2>&1); then
		printf '%s\n' "$o" >&2
		echo "run-switch.sh: inca-bench-switch -m $1 -e $2 -w $3 -d ${4:-fp32} FAILED" >&2
		exit 1
	fi
	printf '%s\n' "$o" | grep -v '^EAL\|^TELEMETRY\|^inca-switch:' >> "$raw"
	printf '%s\n' "$o" | awk '/^aggregation  / { print "agg", $5, $6, $7, $8, $9 }
				  /^forward-only/ { print "fwd", $5, $6, $7, $8, $9 }
				  /^stream-read/ { print "srd", $5, $6, $7, $8, $9 }
				  /^stream-rw/ { print "srw", $5, $6, $7, $8, $9 }'
}
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
{
	echo "# inca-switch microbenchmarks"
	echo
	echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(grep -o 'avx512f\|avx2\|vpclmulqdq' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//')); net_ring ports, rings filled before the clock starts (the main lcore sleeps while the workers run; with 2 workers one shares its core with it); frames out freed on the worker as a NIC's driver with the switch's 1024 tx descriptors frees them (the default of \`inca-bench-switch -t\`); 2 MiB hugepages; fp32 sum; every slot's packets in its owner's queue (what hashing the UDP source port does); 16384 packets per run, medians of 15 runs. Per busy core: the workers' cycles in loop iterations that carried packets. Commit $commit, command \`tests/bench/run-switch.sh\`."
	echo
	echo "| IB MTU | members | workers | aggregation Mpps/core | elements/s/core | ns/packet | payload GB/s/core | Mpps all workers | forwarding Mpps/core | ns/packet | aggregation / forwarding | 2 workers / 1 | stream-read GB/s | stream-rw GB/s | aggregation / stream-rw |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for e in 256 1024; do
		for m in 2 8 32; do
			one=
			for w in 1 2; do
				r=$(run "$m" "$e" "$w")
				a=($(grep '^agg' <<< "$r")); f=($(grep '^fwd' <<< "$r"))
				sr=($(grep '^srd' <<< "$r")); sw=($(grep '^srw' <<< "$r"))
				bound=$(awk -v x="${a[4]}" -v y="${sw[4]}" 'BEGIN { printf "%.2f", x / y }')
				[ -z "$one" ] && one=${a[5]}
				speed=$(awk -v x="${a[5]}" -v y="$one" 'BEGIN { printf "%.2f", x / y }')
				ratio=$(awk -v x="${a[1]}" -v y="${f[1]}" 'BEGIN { printf "%.3f", x / y }')
				echo "| $((e * 4)) | $m | $w | ${a[1]} | ${a[2]} | ${a[3]} | ${a[4]} | ${a[5]} | ${f[1]} | ${f[3]} | $ratio | $([ "$w" = 2 ] && echo "$speed" || echo -) | ${sr[4]} | ${sw[4]} | $([ "$w" = 1 ] && echo "$bound" || echo -) |"
			done
		done
	done
	echo
	echo "Per dtype: IB MTU 4096 (4096 bytes of payload), 8 members, 1 worker, sum:"
	echo
	echo "| dtype | elements/packet | elements/s/core | ns/packet | payload GB/s/core | stream-rw GB/s | aggregation / stream-rw |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for d in fp32:1024 fp16:2048 bf16:2048 int32:1024 fp64:512; do
		r=$(run 8 "${d#*:}" 1 "${d%:*}")
		a=($(grep '^agg' <<< "$r")); sw=($(grep '^srw' <<< "$r"))
		bound=$(awk -v x="${a[4]}" -v y="${sw[4]}" 'BEGIN { printf "%.2f", x / y }')
		echo "| ${d%:*} | ${d#*:} | ${a[2]} | ${a[3]} | ${a[4]} | ${sw[4]} | $bound |"
	done
	echo
	echo "The engine alone (\`inca-bench-agg\`, one core):"
	echo
	echo '```'
	"$B/inca-bench-agg"
	echo '```'
	if [ "$perf" = 1 ] && command -v perf > /dev/null; then
		pd=$(mktemp /tmp/inca-bench-perf.XXXXXX)
		perf record -q -F 10000 -e cpu-clock -g -o "$pd" "$B/inca-bench-switch" -m 8 -e 1024 -w 1 -a \
			-H "$huge" > /dev/null 2>&1
		echo
		echo "perf (\`perf record -e cpu-clock -g\`, IB MTU 4096, 8 members, 1 worker, aggregation; the worker thread only, idle polling included):"
		echo
		# by comm and symbol, the worker's rows taken here: perf report's
		# --comm filter drops every symbol the main thread ran too (it
		# builds the frames: their CRC-32 and copies), so the ICRC and
		# memcpy went missing from the worker's profile
		prof=$(perf report -i "$pd" --no-children --sort comm,symbol --stdio -g none 2> /dev/null |
			awk '/^ +[0-9]/ && $2 == "rte-worker-1" { sub("%", "", $1); print $1, $4 }')
		if [ -z "$prof" ]; then
			echo "(perf recorded no samples of the worker thread, rte-worker-1)"
		else
			echo '```'
			awk '{ p[NR] = $1; s[NR] = $2; t += $1 }
			     END { for (i = 1; i <= NR && i <= 10; i++) printf "%7.2f%%  %s\n", 100 * p[i] / t, s[i] }' <<< "$prof"
			echo '```'
			icrc=$(awk '{ t += $1 } $2 ~ /agg_crc32|agg_icrc|crc32_|crc_multmodp/ { s += $1 }
				    END { printf "%.1f", 100 * s / t }' <<< "$prof")
			fused=$(awk '{ t += $1 } $2 ~ /^icrc_.*_(512|256|128)$/ { s += $1 }
				     END { printf "%.1f", 100 * s / t }' <<< "$prof")
			echo
			echo "The ICRC of every contribution checked in the pass that loads or sums it (icrc_*_512 / _256 / _128, both the CRC and the reduction): ${fused}% of the worker's samples. The rest of the ICRC (contributions checked alone; once per set, the result payload's CRC and the results' template; each result's balance): ${icrc}%."
		fi
		rm -f "$pd"
	fi
} > "$out/switch.md"
cat "$out/switch.md"
