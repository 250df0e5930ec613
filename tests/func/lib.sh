# Helpers for the functional tests (bash): TAP-like output, the testbed,
# telemetry queries. Source it; set BUILD first.
set -u
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TB="$SRC/deploy/testbed"
PKT="$BUILD/tests/tools/inca-pkt"
export INCA_TESTBED=${INCA_TESTBED:-incaft}
PASSED=0
FAILED=0

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "SKIP: needs root (network namespaces, DPDK)"
		exit 77
	fi
}

# need_run_bpffs: libinca's udp owners share an address through a bpffs
# that `ip netns exec` does not hide (/run/inca/bpffs); skip without one
need_run_bpffs() {
	mkdir -p /run/inca/bpffs
	if ! mountpoint -q /run/inca/bpffs && ! mount -t bpf bpf /run/inca/bpffs; then
		echo "SKIP: cannot mount a bpffs at /run/inca/bpffs"
		exit 77
	fi
}

ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
not_ok() { FAILED=$((FAILED + 1)); echo "FAIL - $*"; }

# check "description" command...: the command's exit status decides
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# quiet command...: run it without its output
quiet() { "$@" >/dev/null 2>&1; }

# expect_eq "description" actual expected
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1 ($2)"; else not_ok "$1: got '$2', want '$3'"; fi
}

finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
}

# telemetry CMD KEY.PATH: one value from the switch's telemetry
telemetry() {
	echo "$1" | dpdk-telemetry.py -f "$INCA_TESTBED-tb" 2>/dev/null |
		/usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
v = list(d.values())[0]
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$2"
}

# The steering tests' owner processes (udp_steer.sh, xdp_steer.sh): each
# NAME runs in the background with its pid in PID[NAME], creates
# $WORK/NAME.ready once its communicators exist, counts until
# $WORK/NAME.done exists and writes $WORK/NAME.out.
# ready NAME...: every one created its communicators (10 s at most)
ready() {
	local n
	for n in "$@"; do
		for _ in $(seq 100); do
			[ -e "$WORK/$n.ready" ] && break
			kill -0 "${PID[$n]}" 2>/dev/null || break
			sleep 0.1
		done
		[ -e "$WORK/$n.ready" ] || { sed "s/^/    $n: /" "$WORK/$n.out"; return 1; }
	done
}
# done_with NAME: stop it; its exit status says whether its counts were exact
done_with() {
	local rc=0
	touch "$WORK/$1.done"
	wait "${PID[$1]}" || rc=$?
	unset "PID[$1]"
	sed "s/^/    $1: /" "$WORK/$1.out"
	return $rc
}
