#!/bin/sh
# The model on platforms small enough to work out by hand (suite 'sim').
# Usage: test_trivial.sh INCA_SIM BENCH_SWITCH_FILE
#
# Every case: 100 Gbit/s links (12.5e9 B/s), 1 us a cable, one worker core,
# float sum, 248 floats a packet (992 B) in a 1114-byte frame on the wire
# (98 bytes Ethernet..ICRC, 24 preamble, FCS and gap). The switch's costs
# from the committed inca-bench-switch output: aggregation 575.5 ns per
# packet of 1024 floats, forwarding 78.6 ns; a packet of 248 floats costs
# 78.6 + (575.5 - 78.6) * 248 / 1024 = 198.943 ns. A cable: 1000 ns + 1114 B
# / 12.5e9 B/s = 1000 + 89.12 = 1089.12 ns.
#
# 1. 2 hosts, one switch, one packet: both packets reach the switch at
#    1089.12; one core aggregates them one after the other (2 x 198.943);
#    the result goes back over a cable: 1089.12 + 397.886 + 1089.12
#    = 2576.126 ns.
# 2. 2 hosts, one switch, two packets, per packet: each host's second
#    packet leaves 89.12 ns after its first. The core takes the four in
#    arrival order: 1089.12 -> 1487.006 (both firsts, result 0 sent),
#    then the seconds (arrived at 1178.24, core busy) -> 1884.892; result 1
#    arrives 1884.892 + 1089.12 = 2974.012 ns.
# 3. 2 hosts on two leaves under one spine, one packet: host -> leaf
#    1089.12, the leaf aggregates its one member (198.943) -> 1288.063,
#    leaf -> spine 1089.12 -> 2377.183, the spine aggregates two (397.886)
#    -> 2775.069, spine -> leaf 1089.12 -> 3864.189, the leaf passes the
#    result on (78.6) -> 3942.789, leaf -> host 1089.12 -> 5031.909 ns.
# 4. The host ring, 2 hosts, 2896 B at 200 Mbit/s (25e6 B/s): 2 steps of
#    1448 B (one 1538-byte frame) over two cables: 2 x (2 x 1000 ns +
#    1538 / 25e6 s) = 2 x 63.52 = 127.04 us.
# 5. Chunks against packets: 4 hosts on one switch, 1 MiB at 200 Mbit/s
#    (the lab's shape), the chunked run within 3% of the per-packet run
#    (measured when written: 47885.2 and 47153.8 us, 1.6%).
# 6. As 1, rank 0's packet lost once on its way up (--drop 0:0): it gets
#    through an RTO (1 ms) later, at 1001.08912; rank 1's was aggregated
#    by 1.288063, rank 0's by 1001.288063 (the core is free again); the
#    result arrives 1001.288063 + 1.08912 = 1002.377183 us. A loss
#    probability that draws and never loses changes nothing (case 2 again).
# 7. As 1 with 4 ranks a host (--ranks-per-host 4), each local rank's core
#    moving 1e9 B/s, 1 us a call in the host: the leader reduces 4 x 992 B
#    before the network (0.5 + 3.968 us) and every rank copies 992 B out
#    after it (0.5 + 0.992): 2.576126 + 5.96 = 8.536126 us. With rails
#    from 0 B every rank copies the 3/4 of its input others own and reduces
#    its quarter of the 4 inputs (7/4 x 992 = 1736 B), then writes its
#    share twice and copies the other three (5/4 x 992 = 1240 B):
#    2.576126 + 1 + 1.736 + 1.24 = 6.552126 us. The ring of case 4 with 4 ranks a host, hierarchical
#    (no call cost): 127.04 + 2.896 + 2.172 = 132.108 us. The leader's case
#    with a cache of 4960 B at 2e9 B/s: the 4 inputs and the result
#    (5 x 992 = 4960 B) fit, so 0.5 + 1.984 and 0.5 + 0.496: 2.576126
#    + 3.48 = 6.056126 us; with 4959 B they do not (8.536126 again).
# 8. As 1 with the hosts' way up at 10 Gbit/s (--up-rate 10G: 1114 B take
#    891.2 ns): both packets reach the switch at 1891.2, aggregated by
#    2289.086, the result back at 2289.086 + 1089.12 = 3378.206 ns.
# 9. As 1 with both ranks on one shared core (--shared-cpu 1), 1000 ns of
#    CPU a packet: the core runs rank 0's packet (0..1000), then rank 1's
#    (1000..2000), not both at half speed. Rank 0's reaches the switch at
#    2089.12 and is aggregated by 2288.063; rank 1's at 3089.12, by
#    3288.063; the result arrives 3288.063 + 1089.12 = 4377.183 ns.
#    The ring of case 4 on one shared core, 10 ns a byte (14.48 us a step
#    a rank): both blocks of step 0 arrive at 63.52; the core reduces one
#    rank's (to 78.00), then the other's (to 92.48), each sending its step
#    1 block when done. The second rank takes its block while still busy
#    (TCP fills its buffers): it arrives at 78.00 + 63.52 = 141.52 and is
#    reduced by 156.00, when the first rank's arrives (92.48 + 63.52);
#    that one is reduced by 170.48 us.
# 10. The switch's shaper (--burst B: a token bucket of B bytes at the rate,
#    full at the start, the cable behind it at --up-rate). As 1 at 1 Gbit/s
#    (0.125 B/ns) with the way up and the cables at 100G: the result waits
#    for no token with B = 1500 (2.576126 us, as 1); with B = 1000 it
#    waits (1114 - 1000) / 0.125 = 912 ns: 3.488126 us. Three calls back
#    to back with B = 1500 (--calls 3: the median of each call's slowest
#    rank): call 1 leaves 386 tokens at 1487.006 ns and takes 2576.126;
#    call 2's result, 2576.126 ns later, finds 386 + 322.01575 and waits
#    405.98425 / 0.125 = 3247.874 ns: 5824.000; call 3 waits longer
#    (6335.874 ns): the median is 5.824 us. The ring of case 4 with B =
#    1000: each step's 1538 bytes wait 538 / 25e6 s = 21.52 us (the bucket
#    is full again by the next step), 2 x (21.52 + 63.52) = 170.08 us.
set -eu
sim=$1
bench=$2
fail=0

# run NAME EXPECTED_US TOLERANCE ARGS...: inca-sim's time_us within
# TOLERANCE (relative) of EXPECTED_US
run() {
	name=$1 want=$2 tol=$3
	shift 3
	got=$("$sim" --bench "$bench" --log=root.thres:warning --rate 100G --latency 1e-6 "$@" |
		sed -n 's/.* time_us=\([0-9.]*\) .*/\1/p')
	if [ -z "$got" ]; then
		echo "FAIL $name: no time from inca-sim $*"
		fail=1
	elif awk -v g="$got" -v w="$want" -v t="$tol" \
		'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= t * w) }'; then
		echo "ok   $name: $got us (expected $want)"
	else
		echo "FAIL $name: $got us, expected $want (tolerance $tol)"
		fail=1
	fi
}

run "one switch, one packet" 2.576126 1e-6 --hosts 2 --bytes 992
run "one switch, two packets" 2.974012 1e-6 --hosts 2 --bytes 1984 --per-packet
run "leaf/spine, one packet" 5.031909 1e-6 --tiers 2 --hosts 2 --hosts-per-leaf 1 \
	--spines 1 --bytes 992
run "ring, two hosts" 127.04 1e-6 --hosts 2 --bytes 2896 --rate 200M --ring
run "one switch, one packet lost once" 1002.377183 1e-6 --hosts 2 --bytes 992 --per-packet \
	--drop 0:0
run "one switch, two packets, --loss 1e-12 (draws, no loss)" 2.974012 1e-6 --hosts 2 --bytes 1984 \
	--per-packet --loss 1e-12
run "4 ranks a host, leader" 8.536126 1e-6 --hosts 2 --bytes 992 --ranks-per-host 4 \
	--host-rate 1e9 --host-call 1e-6
run "4 ranks a host, rails" 6.552126 1e-6 --hosts 2 --bytes 992 --ranks-per-host 4 \
	--host-rate 1e9 --host-call 1e-6 --hier rails --rail-min 0
run "4 ranks a host, rails below --rail-min: the leader" 8.536126 1e-6 --hosts 2 --bytes 992 \
	--ranks-per-host 4 --host-rate 1e9 --host-call 1e-6 --hier rails
run "4 ranks a host, leader, in cache" 6.056126 1e-6 --hosts 2 --bytes 992 --ranks-per-host 4 \
	--host-rate 1e9 --host-call 1e-6 --host-cache 4960 --host-rate-cached 2e9
run "4 ranks a host, leader, a byte past the cache" 8.536126 1e-6 --hosts 2 --bytes 992 \
	--ranks-per-host 4 --host-rate 1e9 --host-call 1e-6 --host-cache 4959 --host-rate-cached 2e9
run "one switch, one packet, the way up at 10G" 3.378206 1e-6 --hosts 2 --bytes 992 --up-rate 10G
run "one switch, one packet, the ranks on one core" 4.377183 1e-6 --hosts 2 --bytes 992 \
	--shared-cpu 1 --host-ns 1000
run "ring, two hosts on one core" 170.48 1e-6 --hosts 2 --bytes 2896 --rate 200M --ring \
	--shared-cpu 1 --ring-ns-per-byte 10
run "the shaper, tokens enough" 2.576126 1e-6 --hosts 2 --bytes 992 --rate 1G --up-rate 100G \
	--burst 1500
run "the shaper, tokens short" 3.488126 1e-6 --hosts 2 --bytes 992 --rate 1G --up-rate 100G \
	--burst 1000
run "the shaper, three calls back to back" 5.824 1e-6 --hosts 2 --bytes 992 --rate 1G \
	--up-rate 100G --burst 1500 --calls 3
run "ring, two hosts, the shaper" 170.08 1e-6 --hosts 2 --bytes 2896 --rate 200M --ring \
	--burst 1000
run "ring, two hosts of 4 ranks" 132.108 1e-6 --hosts 2 --bytes 2896 --rate 200M --ring \
	--ranks-per-host 4 --host-rate 1e9
per_packet=$("$sim" --bench "$bench" --log=root.thres:warning --rate 200M --hosts 4 \
	--bytes 1048576 --per-packet | sed -n 's/.* time_us=\([0-9.]*\) .*/\1/p')
run "chunks against packets" "${per_packet:-0}" 0.03 --rate 200M --hosts 4 --bytes 1048576
# --help is ours (SimGrid's engine would answer it with its configuration);
# a bad option is refused with the usage, exit 2
if "$sim" --help | grep -q "^  --sizing " &&
	! "$sim" --help 2>&1 | grep -q "configuration accepted by this simulator"; then
	echo "ok --help"
else
	echo "FAIL --help: not inca-sim's own"
	fail=1
fi
rc=0
"$sim" --bench "$bench" --no-such-option > /dev/null 2>&1 || rc=$?
if [ "$rc" = 2 ]; then echo "ok bad option: exit 2"; else echo "FAIL bad option: exit $rc, want 2"; fail=1; fi
# loss is simulated packet by packet only; a drop names a packet there is;
# a number is a number, all of it, in range (atoi took "4x" for 4 and "x" for 0)
for bad in "--loss 0.01" "--per-packet --loss 1" "--per-packet --drop 2:0" "--per-packet --drop 0:1" \
	"--per-packet --ring --drop 0:0" "--per-packet --drop 0:0x" "--hosts 4x" "--tiers 4" \
	"--rate 200mbits" "--rate -1G" "--up-rate 0" "--calls 0" "--burst 0" "--cores 0" "--window 5000" "--latency x" "--seed -1" \
	"--bytes 1T" "--loss nan" "--ranks-per-host 4" "--ranks-per-host 0 --host-rate 1e9" \
	"--ranks-per-host 2 --host-rate 0" "--hier ring" "--host-rate 1e9" "--hier rails" \
	"--rail-min 1M" \
	"--ranks-per-host 2 --host-rate 1e9 --host-cache 32M" "stray"; do
	rc=0
	# shellcheck disable=SC2086
	err=$("$sim" --bench "$bench" --log=root.thres:warning --hosts 2 --bytes 992 $bad 2>&1 \
		> /dev/null) || rc=$?
	msg=$(printf '%s\n' "$err" | grep '^inca-sim: ' || true)
	if [ "$rc" = 2 ] && [ -n "$msg" ]; then
		echo "ok $bad: exit 2 ($msg)"
	else
		echo "FAIL $bad: exit $rc, want 2 with a message"
		fail=1
	fi
done
exit $fail
