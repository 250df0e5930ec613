#!/usr/bin/env bash
# The udp transport's QPN steering, exactly: in a network namespace of its
# own, owners in separate processes (and two communicators in one) share
# one address; each must receive exactly the frames sent to its QPN, frames
# for an unowned QPN are dropped and counted by the reuseport program, a
# closed owner's QPN can be taken again, a live duplicate is refused.
# Usage: udp_steer.sh BUILD_DIR
BUILD=$(cd "${1:?usage: udp_steer.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
# shellcheck source=deploy/netns.sh
source "$SRC/deploy/netns.sh"
need_root
TOOL="$BUILD/tests/func/inca-udp-steer"
NS=inca-steer-$$
IP=10.99.0.1
WORK=$(mktemp -d /tmp/inca-steer.XXXXXX)
declare -A PID

cleanup() {
	local p
	for p in "${PID[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	netns_del "$NS" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

need_run_bpffs
ip netns add "$NS" || { echo "FAIL - ip netns add $NS"; exit 1; }
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$IP/32" dev lo
ns() { ip netns exec "$NS" "$@"; }
ns "$TOOL" counters "$IP" >/dev/null
if [ $? = 77 ]; then
	echo "SKIP: libinca was built without the udp transport's eBPF steering"
	exit 77
fi

# owner NAME QPNS EXPECTS DROPPED: a process owning QPNS, in the background
owner() {
	timeout 90 ip netns exec "$NS" "$TOOL" own "$IP" "$2" "$3" "$4" \
		"$WORK/$1.ready" "$WORK/$1.done" > "$WORK/$1.out" 2>&1 &
	PID[$1]=$!
}
send() { ns "$TOOL" send "$IP" "$1" "$2"; }
counters() { ns "$TOOL" counters "$IP"; }

# three processes and one with two communicators start at once (the lock)
owner a 17 10 0
owner b 18 25 0
owner c 19 30 0
owner d 20,21 40,50 0
check "5 communicators in 4 processes share $IP:4791" ready a b c d
check "frames sent to QPNs 17..21 and 7 to unowned QPN 99" \
	eval 'send 17 10 && send 18 20 && send 19 30 && send 20 40 && send 21 50 && send 99 7'
expect_eq "the program dropped the unowned QPN's frames" "$(counters)" "unowned=7 short=0"
check "a second live owner of QPN 18 is refused" ns "$TOOL" dup "$IP" 18
out=$(ns "$TOOL" dup "$IP" 21)
expect_eq "... and of QPN 21 (the second communicator of a process)" "$out" \
	"udp transport: QPN 21 on $IP is already owned by another communicator"
check "owner of QPN 17 got exactly its 10 frames" done_with a
check "QPN 17 without an owner: 3 frames" send 17 3
expect_eq "... dropped by the program" "$(counters)" "unowned=10 short=0"
owner a2 17 11 0
check "a new owner takes QPN 17" ready a2
check "11 frames to the new owner, 5 more to QPN 18" eval 'send 17 11 && send 18 5'
check "the new owner of QPN 17 got exactly its 11 frames" done_with a2
check "owner of QPN 18 got exactly its 25 frames" done_with b
check "owner of QPN 19 got exactly its 30 frames" done_with c
check "QPNs 20 and 21 in one process got exactly 40 and 50 frames" done_with d
check "the last owner removed the pinned program and maps" eval '! counters >/dev/null'

# too short for a BTH: the kernel's choice, the library drops and counts
owner e 30 0 5
check "a lone owner of QPN 30" ready e
check "5 datagrams too short for a BTH" ns "$TOOL" short "$IP" 5
expect_eq "... passed on by the program" "$(counters)" "unowned=0 short=5"
check "... and dropped by the library (5)" done_with e
finish
