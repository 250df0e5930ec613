#!/usr/bin/env bash
# inca-manager at scale, on this machine's loopback (no testbed, no root): a
# two-tier fat-tree of --hosts-per-leaf hosts a leaf (one host per rank) and
# --spines spines, every leaf linked to every spine; one tenant; the manager
# started on it over plain HTTP with --dead-after-ms 1000, then
# inca-bench-manager plays every switch agent and every rank of --jobs: every
# job registered and ready, the manager idle while every rank holds its plan
# poll, and the root spine of the largest job killed (tests/bench/bench_manager.c
# says what it measures). The manager is stopped and the files removed
# however the run ends; its log's tail is shown when it fails.
# Usage: tests/bench/run-manager-scale.sh [--jobs SPEC] [--hosts-per-leaf H]
#          [--spines S] [--procs P] [--idle S] [--time-limit S] [--build DIR]
#   --jobs SPEC        SIZExCOUNT,... (default 4096x1,2048x2,1024x4,512x4,
#                      256x4,64x8,32x8,8x32: 16384 ranks)
#   --hosts-per-leaf H hosts under a leaf (default 32: 512 leaves at 16384)
#   --spines S         spines (default 16)
#   --procs P          inca-bench-manager's processes (default 4)
#   --idle S           seconds of idle measurement (default 5)
#   --time-limit S     the bench gives up after S seconds (default 240)
#   --build DIR        the build directory (default build/)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
jobs=4096x1,2048x2,1024x4,512x4,256x4,64x8,32x8,8x32 hpl=32 spines=16 procs=4 idle=5
limit=240 build=$here/build
while [ $# -gt 0 ]; do
	case "$1" in
	--jobs) jobs=${2:?}; shift 2 ;;
	--hosts-per-leaf) hpl=${2:?}; shift 2 ;;
	--spines) spines=${2:?}; shift 2 ;;
	--procs) procs=${2:?}; shift 2 ;;
	--idle) idle=${2:?}; shift 2 ;;
	--time-limit) limit=${2:?}; shift 2 ;;
	--build) build=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-manager-scale.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
	esac
done
[[ "$jobs" =~ ^[0-9]+x[0-9]+(,[0-9]+x[0-9]+)*$ ]] ||
	{ echo "run-manager-scale.sh: --jobs: expected SIZExCOUNT,..., got '$jobs'" >&2; exit 2; }
[[ "$hpl" =~ ^[1-9][0-9]*$ ]] ||
	{ echo "run-manager-scale.sh: --hosts-per-leaf: expected a number from 1" >&2; exit 2; }
if ! [[ "$spines" =~ ^[0-9]+$ ]] || [ "$spines" -lt 1 ] || [ "$spines" -gt 255 ]; then
	echo "run-manager-scale.sh: --spines: expected 1..255" >&2
	exit 2
fi
B=$(cd "$build" && pwd)
MGR=$B/control/inca-manager
BENCH=$B/tests/bench/inca-bench-manager
for f in "$MGR" "$BENCH"; do
	[ -x "$f" ] || { echo "run-manager-scale.sh: $f not built (ninja -C $build)" >&2; exit 1; }
done
# the ranks of every job, one host each
ranks=0
for spec in ${jobs//,/ }; do
	ranks=$((ranks + ${spec%x*} * ${spec#*x}))
done
leaves=$(((ranks + hpl - 1) / hpl))
if [ "$ranks" -lt 1 ] || [ "$ranks" -gt 65536 ]; then
	echo "run-manager-scale.sh: --jobs: 1..65536 ranks in all, got $ranks" >&2
	exit 2
fi
[ "$leaves" -le 1024 ] ||
	{ echo "run-manager-scale.sh: $leaves leaves: at most 1024 (give more --hosts-per-leaf)" >&2
	  exit 2; }

WORK=$(mktemp -d /tmp/inca-mgr-scale.XXXXXX)
MGR_PID=
rc=1
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	if [ -n "$MGR_PID" ]; then
		kill "$MGR_PID" 2>/dev/null || true
		wait "$MGR_PID" 2>/dev/null || true
	fi
	if [ "$rc" != 0 ] && [ -s "$WORK/manager.log" ]; then
		echo "--- the manager's log, its last 30 lines:" >&2
		tail -n 30 "$WORK/manager.log" >&2
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

secret() { printf '%s-%s' "$1" "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"; }
secret admin > "$WORK/admin.token"
secret tenant > "$WORK/tenant.token"
# leafN 10.255.(N/256).(N%256), spineN 10.254.0.N; host h (rank order across
# the jobs, as inca-bench-manager numbers them) 10.(1+h/65536).(h/256%256).(h%256)
# under leaf h/H; every leaf linked to every spine
awk -v leaves="$leaves" -v spines="$spines" -v hosts="$ranks" -v hpl="$hpl" \
	-v token="$(cat "$WORK/tenant.token")" 'BEGIN {
	cap = "\"max_groups\": 1024, \"max_slots\": 65536"
	printf "{ \"switches\": [\n"
	for (n = 0; n < leaves; n++)
		printf "  { \"name\": \"leaf%d\", \"role\": \"leaf\", \"ip\": \"10.255.%d.%d\", %s },\n",
			n, int(n / 256), n % 256, cap
	for (n = 0; n < spines; n++)
		printf "  { \"name\": \"spine%d\", \"role\": \"spine\", \"ip\": \"10.254.0.%d\", %s }%s\n",
			n, n, cap, n < spines - 1 ? "," : ""
	printf "], \"hosts\": [\n"
	for (h = 0; h < hosts; h++)
		printf "  { \"name\": \"h%d\", \"ip\": \"10.%d.%d.%d\", \"leaf\": \"leaf%d\" }%s\n",
			h, 1 + int(h / 65536), int(h / 256) % 256, h % 256, int(h / hpl),
			h < hosts - 1 ? "," : ""
	printf "], \"links\": [\n"
	for (n = 0; n < leaves; n++)
		for (s = 0; s < spines; s++)
			printf "  { \"leaf\": \"leaf%d\", \"spine\": \"spine%d\" }%s\n", n, s,
				n < leaves - 1 || s < spines - 1 ? "," : ""
	printf "], \"tenants\": [ { \"name\": \"t\", \"token\": \"%s\", \"max_jobs\": 1024 } ] }\n",
		token
}' > "$WORK/topology.json"
"$MGR" --check --topology "$WORK/topology.json" ||
	{ echo "run-manager-scale.sh: the generated topology is refused" >&2; exit 1; }

# a free port: the kernel's pick for a socket we close at once
PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$MGR" --topology "$WORK/topology.json" --token-file "$WORK/admin.token" --db "$WORK/state.db" \
	--listen "127.0.0.1:$PORT" --dead-after-ms 1000 > "$WORK/manager.log" 2>&1 &
MGR_PID=$!
for _ in $(seq 300); do
	grep -q "inca-manager: ready" "$WORK/manager.log" && break
	kill -0 "$MGR_PID" 2>/dev/null || break
	sleep 0.1
done
grep -q "inca-manager: ready" "$WORK/manager.log" ||
	{ echo "run-manager-scale.sh: the manager did not start within 30 s" >&2; exit 1; }

set +e
"$BENCH" --url "http://127.0.0.1:$PORT" --admin-token-file "$WORK/admin.token" \
	--tenant-token-file "$WORK/tenant.token" --jobs "$jobs" --hosts-per-leaf "$hpl" \
	--leaves "$leaves" --spines "$spines" --procs "$procs" --idle "$idle" \
	--time-limit "$limit" --manager-pid "$MGR_PID"
rc=$?
set -e
kill -0 "$MGR_PID" 2>/dev/null ||
	{ echo "run-manager-scale.sh: the manager is gone (it ended during the run)" >&2; rc=1; }
exit "$rc"
