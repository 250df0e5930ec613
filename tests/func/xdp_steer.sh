#!/usr/bin/env bash
# The xdp transport's shared interface, exactly: in two network namespaces
# joined by a veth pair, owners in separate processes (and two
# communicators in one) share queue 0 of one interface through one UMEM;
# each must receive exactly the frames sent to its QPN, none dropped. The
# owner that built the UMEM leaves while others go on, a killed owner's QPN
# is taken again, a group whose owners all died is rebuilt, a live
# duplicate QPN and a foreign XDP program are refused, and the last owner
# detaches the program and removes the shared file. Also: an idle owner
# does not starve the others of RX frames, a sender's queued frames all
# leave (also once it only receives), an oversized frame is refused, an
# IB MTU whose frames do not fit is refused at open, a group can be built
# again right after it closed, and a forked child's destroy leaves the
# parent's communicator alone.
# Usage: xdp_steer.sh BUILD_DIR
BUILD=$(cd "${1:?usage: xdp_steer.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
# shellcheck source=deploy/netns.sh
source "$SRC/deploy/netns.sh"
need_root
TOOL="$BUILD/tests/func/inca-xdp-steer"
NSO=inca-xso-$$ NSP=inca-xsp-$$
IP=10.99.1.1 PEER=10.99.1.2
MAC=02:00:00:00:99:01 PEER_MAC=02:00:00:00:99:02
WORK=$(mktemp -d /tmp/inca-xsteer.XXXXXX)
declare -A PID

cleanup() {
	local p
	for p in "${PID[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	netns_del "$NSO" 2>/dev/null
	netns_del "$NSP" 2>/dev/null
	rm -f "${SHM:-/nonexistent}"
	rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NSO" && ip netns add "$NSP" || { echo "FAIL - ip netns add"; exit 1; }
ip -n "$NSO" link add x0 type veth peer name x1 netns "$NSP"
ip -n "$NSO" link set x0 address $MAC
ip -n "$NSP" link set x1 address $PEER_MAC
ip -n "$NSO" addr add $IP/24 dev x0
ip -n "$NSP" addr add $PEER/24 dev x1
for n in "$NSO" "$NSP"; do ip -n "$n" link set lo up; done
ip -n "$NSO" link set x0 up
ip -n "$NSP" link set x1 up
NET=$(ip netns exec "$NSO" stat -L -c %i /proc/self/ns/net)
IFX=$(ip netns exec "$NSO" cat /sys/class/net/x0/ifindex)
SHM=/dev/shm/inca-xdp-if$IFX-net$NET.umem
out=$(ip netns exec "$NSO" "$TOOL" open $IP $PEER 5 2>&1)
if [[ "$out" == *"built without the xdp transport"* ]]; then
	echo "SKIP: libinca was built without the xdp transport"
	exit 77
fi

# owner NAME QPNS EXPECTS [CMD]: a process owning QPNS, in the background
# (CMD: own, ownfork)
owner() {
	timeout 90 ip netns exec "$NSO" env INCA_LOG=info "$TOOL" "${4:-own}" $IP $PEER "$2" \
		"$3" "$WORK/$1.ready" "$WORK/$1.done" > "$WORK/$1.out" 2>&1 &
	PID[$1]=$!
}
# idle NAME QPN: a process owning QPN that never receives
idle() {
	timeout 90 ip netns exec "$NSO" env INCA_LOG=info "$TOOL" idle $IP $PEER "$2" \
		"$WORK/$1.ready" "$WORK/$1.done" > "$WORK/$1.out" 2>&1 &
	PID[$1]=$!
}
# killed NAME: kill -9, as a crash
killed() {
	local child
	# timeout's child is the owner itself; timeout reaps it and exits
	child=$(pgrep -P "${PID[$1]}")
	[ -n "$child" ] && kill -KILL $child 2>/dev/null
	wait "${PID[$1]}" 2>/dev/null
	unset "PID[$1]"
}
send() { ip netns exec "$NSP" "$TOOL" send x1 $PEER_MAC $PEER $MAC $IP "$1" "$2"; }
prog_attached() { ip -n "$NSO" -d link show x0 | grep -q "prog/xdp"; }

# the first owner builds the group; then three processes, one with two
# communicators, join at once (the lock)
owner a 17 10
check "the first owner of x0" ready a
check "... built the shared UMEM" grep -q "socket 0 of the shared UMEM (built it)" "$WORK/a.out"
owner b 18 25
owner c 19 30
owner d 20,21 40,50
check "5 communicators in 4 processes share x0 queue 0" ready b c d
check "... one UMEM in $SHM" test -s "$SHM"
check "frames sent to QPNs 17..21 and 7 to unowned QPN 99" \
	eval 'send 17 10 && send 18 20 && send 19 30 && send 20 40 && send 21 50 && send 99 7'
check "a second live owner of QPN 18 is refused" ip netns exec "$NSO" "$TOOL" dup $IP $PEER 18
out=$(ip netns exec "$NSO" "$TOOL" dup $IP $PEER 21)
check "... and of QPN 21 (the second communicator of a process): '$out'" \
	eval '[[ "$out" == *"QPN 21 on x0 is already owned by another communicator"* ]]'
check "the others joined it" eval 'grep -q "(joined)" "$WORK/b.out" && grep -c "(joined)" "$WORK/d.out" | grep -qx 2'
check "the builder, owner of QPN 17, got exactly its 10 frames and leaves" done_with a
owner a2 17 11
check "a new owner takes QPN 17" ready a2
check "11 frames to the new owner, 5 more to QPN 18" eval 'send 17 11 && send 18 5'
check "the new owner of QPN 17 got exactly its 11 frames" done_with a2
killed c
owner c2 19 12
check "QPN 19 of a killed owner is taken again" ready c2
check "12 frames to it" send 19 12
check "the new owner of QPN 19 got exactly its 12 frames" done_with c2
check "owner of QPN 18 got exactly its 25 frames" done_with b
check "QPNs 20 and 21 in one process got exactly 40 and 50 frames" done_with d
check "the last owner detached the program" eval '! prog_attached'
check "... and removed the shared file" test ! -e "$SHM"

# every owner dies: the next one rebuilds the group
owner e 30 0
owner f 31 0
check "two owners again" ready e f
killed e
killed f
check "both killed: the program stays, the file too" eval 'prog_attached && test -e "$SHM"'
owner g 32 9
check "a new owner rebuilds the group" ready g
check "... saying so" grep -q "had no live owner: rebuilding it" "$WORK/g.out"
check "9 frames to it" send 32 9
check "the owner of the rebuilt group got exactly its 9 frames" done_with g
check "... and left nothing behind" eval '! prog_attached && test ! -e "$SHM"'

# an owner that never receives holds at most its RX ring (256 frames), not
# the group's 1024: the others still receive
idle i 40
owner h 41 200
check "an idle owner and a receiving one" ready i h
check "1100 frames to the idle one's QPN, then 200 to the other's" \
	eval 'send 40 1100 && send 41 200'
check "the receiving owner got exactly its 200 frames" done_with h
check "the idle owner leaves" done_with i

# one sender, 4000 frames (the group has 1024 TX frames): all accepted and
# all on the wire, the last ones sent while it only receives
rx_peer() { ip netns exec "$NSP" cat /sys/class/net/x1/statistics/rx_packets; }
before=$(rx_peer)
out=$(ip netns exec "$NSO" env INCA_LOG=warn "$TOOL" tx $IP $PEER 77 4000 2>&1)
rc=$?
echo "$out" | sed 's/^/    tx: /'
check "4000 frames sent through one communicator, an oversized one refused" test $rc -eq 0
check "... and said so" eval '[[ "$out" == *"frame of 8144 bytes is not sent"* ]]'
after=$(rx_peer)
check "... all 4000 reached the peer ($((after - before)) packets)" test $((after - before)) -ge 4000

out=$(ip netns exec "$NSO" "$TOOL" mtu $IP $PEER 4096)
check "IB MTU 4096 is refused at open: '$out'" \
	eval '[[ "$out" == *"mtu 4096: frames of up to 4170 bytes, an AF_XDP frame holds 3840; mtu 2048 at most"* ]]'
check "... leaving nothing behind" eval '! prog_attached && test ! -e "$SHM"'

out=$(ip netns exec "$NSO" "$TOOL" reopen $IP $PEER 50 20)
check "the group built and closed 20 times in a row $out" test -z "$out"

# a forked child destroys its copy of the communicator: the parent's stays
owner k 42 30 ownfork
check "an owner whose forked child destroyed its copy" ready k
check "... said so" grep -q "a forked child destroyed its copies" "$WORK/k.out"
check "30 frames to it" send 42 30
check "the parent still got exactly its 30 frames" done_with k
check "... and left nothing behind" eval '! prog_attached && test ! -e "$SHM"'

# a program that is not INCA's: refused, and left alone
cat > "$WORK/other.bpf.c" <<'C'
#include <linux/bpf.h>
__attribute__((section("xdp"), used)) int other_pass(struct xdp_md *ctx) { return XDP_PASS; }
char _license[] __attribute__((section("license"), used)) = "GPL";
C
if clang -O2 -target bpf -I/usr/include/"$(uname -m)"-linux-gnu -c "$WORK/other.bpf.c" \
	-o "$WORK/other.bpf.o" 2>/dev/null &&
   ip -n "$NSO" link set x0 xdpgeneric obj "$WORK/other.bpf.o" sec xdp; then
	out=$(ip netns exec "$NSO" "$TOOL" open $IP $PEER 40)
	check "a foreign XDP program is refused: '$out'" \
		eval '[[ "$out" == *"x0 already runs an XDP program"*"that is not INCA"* ]]'
	check "... and left attached, no file left behind" eval 'prog_attached && test ! -e "$SHM"'
	ip -n "$NSO" link set x0 xdpgeneric off
else
	echo "# no clang or ip link xdp: the foreign-program case is not run"
fi
finish
