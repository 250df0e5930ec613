#!/usr/bin/env bash
# Functional tests of inca-switch on a 4-host testbed: every dtype/op,
# duplicates, lost results, bad packets dropped and counted, L2 (TCP, ARP,
# ping), and result packets checked by scapy. Usage: switch.sh BUILD_DIR
BUILD=$(cd "${1:?usage: switch.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root

WORK=$(mktemp -d /tmp/inca-func.XXXXXX)
cleanup() {
	[ -n "${CAP_PID:-}" ] && kill "$CAP_PID" 2>/dev/null
	"$TB" down
	rm -rf "$WORK"
}
trap cleanup EXIT

QKEY=0x1234abcd
cat > "$WORK/switch.json" <<JSON
{
  "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 },
  "groups": [
    { "id": 1, "qpn": 256, "qkey": "$QKEY", "window": 8, "elems_per_pkt": 256,
      "members": [ { "ip": "10.0.0.1", "qpn": 17 }, { "ip": "10.0.0.2", "qpn": 18 },
                   { "ip": "10.0.0.3", "qpn": 19 }, { "ip": "10.0.0.4", "qpn": 20 } ] },
    { "id": 2, "qpn": 257, "qkey": "$QKEY", "window": 4, "elems_per_pkt": 128,
      "reproducible": true,
      "members": [ { "ip": "10.0.0.1", "qpn": 17 }, { "ip": "10.0.0.2", "qpn": 18 },
                   { "ip": "10.0.0.3", "qpn": 19 }, { "ip": "10.0.0.4", "qpn": 20 } ] },
    { "id": 3, "qpn": 259, "qkey": "$QKEY", "window": 4, "elems_per_pkt": 64,
      "members": [ { "ip": "10.0.0.1", "qpn": 30 } ] },
    { "id": 5, "qpn": 260, "qkey": "$QKEY", "window": 8, "elems_per_pkt": 2048,
      "members": [ { "ip": "10.0.0.1", "qpn": 17 }, { "ip": "10.0.0.2", "qpn": 18 },
                   { "ip": "10.0.0.3", "qpn": 19 }, { "ip": "10.0.0.4", "qpn": 20 } ] }
  ]
}
JSON
# the switch's Prometheus endpoint on the loopback (a free port)
MPORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$TB" up --hosts 4 --config "$WORK/switch.json" --switch "$BUILD/dataplane/inca-switch" \
	--metrics "127.0.0.1:$MPORT" || { not_ok "testbed up"; finish; exit 1; }

# per group: the next collective sequence number and packet counter
declare -A SEQ=([1]=1 [2]=1 [5]=1) GBASE=([1]=0 [2]=0 [5]=0)
# IB MTU 4096 (4096-byte payloads, 4202-byte frames) where the links carry
# it (INCA_TESTBED_MTU, as deploy/testbed reads it)
MTU=${INCA_TESTBED_MTU:-1500}
big_mtu() { [ "$MTU" -ge 4300 ]; }

# allreduce GROUP COUNT ELEMS "per-rank extra args" common args...
# per-rank extras: "0:--dup 2:--drop-results 3" (rank:args, comma-free)
allreduce() {
	local group=$1 count=$2 elems=$3 extras=$4
	shift 4
	local qpn=$((255 + group)) window=8 pids=() r rc=0 extra
	[ "$group" = 2 ] && window=4
	for r in 0 1 2 3; do
		extra=$(echo "$extras" | tr ' ' '\n' | sed -n "s/^$r://p" | tr '|' ' ')
		# shellcheck disable=SC2086
		"$TB" exec $((r + 1)) "$PKT" --switch 10.0.0.254 --group "$group" \
			--qpn "$qpn" --qkey $QKEY --rank $r --nranks 4 --src-qpn $((17 + r)) \
			--count "$count" --elems "$elems" --window $window \
			--seq "${SEQ[$group]}" --gbase "${GBASE[$group]}" --quiet \
			--deadline-s 20 $extra "$@" &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	SEQ[$group]=$((SEQ[$group] + 1))
	GBASE[$group]=$((GBASE[$group] + (count + elems - 1) / elems))
	return $rc
}

# 1. every dtype and op, a count that leaves a partial last packet
for dt in fp32 fp16 bf16 int32 int64 fp64; do
	case $dt in int32|int64) ops="sum min max prod band bor bxor" ;; *) ops="sum min max prod" ;; esac
	elems=256
	case $dt in int64|fp64) elems=128 ;; esac
	for op in $ops; do
		check "group 1: $dt $op, 1001 elements" allreduce 1 1001 $elems "" --dtype $dt --op $op
	done
done
check "group 1: fp32 sum, 300007 elements (1172 packets)" allreduce 1 300007 256 "" --dtype fp32 --op sum
check "group 1: fp16 sum, 3 elements (one packet with PadCnt 2)" allreduce 1 3 256 "" --dtype fp16 --op sum
check "group 2 (reproducible): fp32 sum, 5000 elements" allreduce 2 5000 128 "" --dtype fp32 --op sum
check "group 2 (reproducible): bf16 prod, 777 elements" allreduce 2 777 128 "" --dtype bf16 --op prod

if big_mtu; then
	check "IB MTU 4096 (links MTU $MTU): group 5, fp32 sum, 100000 elements" allreduce 5 100000 1024 "" --dtype fp32 --op sum
	check "IB MTU 4096: group 5, fp16 max, 50000 elements (2048 per packet)" allreduce 5 50000 2048 "" --dtype fp16 --op max
	check "IB MTU 4096: lost results answered" allreduce 5 30000 1024 "1:--drop-results|3|--timeout-ms|30" --dtype int32 --op sum
	expect_eq "IB MTU 4096: no frame was truncated (ip_len drops)" "$(telemetry /inca/drops ip_len)" 0
else
	echo "# IB MTU 4096 with one worker skipped: links MTU $MTU (section 6 runs them on MTU 9000 with two workers; INCA_TESTBED_MTU=9000 runs them here too)"
fi

# The one pass: an fp32 sum's contributions have their ICRC checked in the
# pass that reduces them (docs/switch.md), on CPUs with PCLMULQDQ and AVX2
# or VPCLMULQDQ; a wrong ICRC there is dropped as one
before_c=$(telemetry /inca/group,1 contributions)
before_o=$(telemetry /inca/group,1 icrc_one_pass)
check "group 1: fp32 sum, 4000 elements" allreduce 1 4000 256 "" --dtype fp32 --op sum
after_c=$(telemetry /inca/group,1 contributions)
after_o=$(telemetry /inca/group,1 icrc_one_pass)
if grep -qw pclmulqdq /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo; then
	expect_eq "every contribution of the fp32 sum checked in the pass that reduced it (icrc_one_pass)" \
		$((after_o - before_o)) $((after_c - before_c))
else
	expect_eq "no one-pass kernel on this CPU (icrc_one_pass)" $((after_o - before_o)) 0
fi
before=$(telemetry /inca/drops icrc)
check "bad packet (icrc) in an fp32 sum from rank 2, group completes" allreduce 1 600 256 "2:--bad|icrc" --dtype fp32 --op sum
after=$(telemetry /inca/drops icrc)
expect_eq "switch counted one 'icrc' drop (fp32 sum)" $((after - before)) 1

# 2. duplicates and lost results
before_dup=$(telemetry /inca/group,1 duplicates)
check "duplicated contributions from every rank" allreduce 1 4000 256 "0:--dup 1:--dup 2:--dup 3:--dup" --dtype int32 --op sum
after_dup=$(telemetry /inca/group,1 duplicates)
check "the switch counted duplicates ($before_dup -> $after_dup)" test "$after_dup" -gt "$before_dup"
before_rt=$(telemetry /inca/group,1 retransmits)
check "rank 2 loses its first 5 results and retransmits" allreduce 1 4000 256 "2:--drop-results|5|--timeout-ms|30" --dtype fp32 --op max
after_rt=$(telemetry /inca/group,1 retransmits)
check "retained results answered retransmissions ($before_rt -> $after_rt)" test "$after_rt" -ge $((before_rt + 5))

# 3. bad packets are dropped and counted, and the group still completes
for kind in qkey:qkey nonmember:not_member slot:slot fanin:fanin; do
	name=${kind%%:*} counter=${kind#*:}
	before=$(telemetry /inca/group,1 "drops.$counter")
	check "bad packet ($name) from rank 1, group completes" allreduce 1 600 256 "1:--bad|$name" --dtype fp32 --op sum
	after=$(telemetry /inca/group,1 "drops.$counter")
	expect_eq "group 1 counted one '$counter' drop" $((after - before)) 1
done
for kind in icrc:icrc trunc:trunc_inca group:group; do
	name=${kind%%:*} counter=${kind#*:}
	before=$(telemetry /inca/drops "$counter")
	check "bad packet ($name) from rank 3, group completes" allreduce 1 600 128 "3:--bad|$name" --dtype int64 --op bxor
	after=$(telemetry /inca/drops "$counter")
	expect_eq "switch counted one '$counter' drop" $((after - before)) 1
done

# 4. result packets as an independent checker sees them
"$TB" exec 1 dumpcap -q -i eth0 -f "udp port 4791" -w "$WORK/h1.pcapng" >/dev/null 2>&1 &
CAP_PID=$!
sleep 1.5
check "all-reduce while capturing on host 1" allreduce 1 1500 256 "" --dtype bf16 --op sum
sleep 0.5
kill "$CAP_PID" 2>/dev/null
wait "$CAP_PID" 2>/dev/null
CAP_PID=
check "scapy: result packets have valid ICRC and headers" \
	/usr/bin/python3 "$SRC/tests/func/check_results.py" "$WORK/h1.pcapng" 10.0.0.254 17 $QKEY 1
malformed=$(tshark -r "$WORK/h1.pcapng" -Y "_ws.malformed || _ws.expert.severity >= error" 2>/dev/null | wc -l)
expect_eq "tshark: malformed packets in the capture" "$malformed" 0
ud=$(tshark -r "$WORK/h1.pcapng" -Y "ip.src == 10.0.0.254 && infiniband.bth.opcode == 100" 2>/dev/null | wc -l)
check "tshark dissects results as UD SEND only ($ud)" test "$ud" -ge 6

# a member on a tagged link gets its results tagged the same way
check "VLAN 100 / priority 3 contribution: the result comes back tagged alike" \
	"$TB" exec 1 /usr/bin/python3 "$SRC/tests/func/vlan_result.py" eth0 10.0.0.1 10.0.0.254 \
	259 $QKEY 30 3

# 5. ordinary traffic crosses the switch
check "ping the switch" quiet "$TB" exec 1 ping -c 2 -W 2 10.0.0.254
check "ping host to host" quiet "$TB" exec 2 ping -c 2 -W 2 10.0.0.3
"$TB" exec 4 /usr/bin/python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.0.0.4", 5001)); s.listen(1); s.settimeout(20)
c, _ = s.accept(); c.settimeout(20)
n = 0
while True:
    b = c.recv(65536)
    if not b: break
    c.sendall(b); n += len(b)
' &
SRV=$!
sleep 0.5
check "TCP: 4 MiB echoed host 1 <-> host 4 through the switch" "$TB" exec 1 /usr/bin/python3 -c '
import os, socket, sys, threading
data = os.urandom(4 << 20)
s = socket.create_connection(("10.0.0.4", 5001), timeout=20)
got = bytearray()
def reader():
    while True:
        b = s.recv(65536)
        if not b: break
        got.extend(b)
t = threading.Thread(target=reader); t.start()
s.sendall(data); s.shutdown(socket.SHUT_WR)
t.join(30)
sys.exit(0 if got == data else 1)'
wait "$SRV" 2>/dev/null
arp=$(telemetry /inca/info arp_replies)
check "the switch answered ARP for its address ($arp)" test "$arp" -ge 4

# the same counters for Prometheus: GET /metrics on the management address
curl -s "http://127.0.0.1:$MPORT/metrics" > "$WORK/metrics.txt"
metric() { awk -v k="$1" '$1 == k { print $2 }' "$WORK/metrics.txt"; }
check "/metrics: every family has HELP and TYPE" /usr/bin/python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
fams = {l.split()[2] for l in lines if l.startswith("# TYPE ")}
helps = {l.split()[2] for l in lines if l.startswith("# HELP ")}
names = {l.split("{")[0].split()[0] for l in lines if l and not l.startswith("#")}
sys.exit(0 if fams and fams == helps and names <= fams else 1)' "$WORK/metrics.txt"
for c in contributions completions duplicates retransmits restarts; do
	expect_eq "/metrics: group 1 $c as the telemetry's" \
		"$(metric "inca_group_${c}_total{group=\"1\"}")" "$(telemetry /inca/group,1 $c)"
done
expect_eq "/metrics: group 1 results sent as the telemetry's" \
	"$(metric 'inca_group_results_sent_total{group="1"}')" "$(telemetry /inca/group,1 results_sent)"
expect_eq "/metrics: group 1's slots" "$(metric 'inca_group_slots{group="1"}')" 8
expect_eq "/metrics: groups installed" "$(metric inca_switch_groups)" 4
for reason in icrc trunc_inca group; do
	expect_eq "/metrics: drops of $reason as the telemetry's" \
		"$(metric "inca_drops_total{reason=\"$reason\"}")" "$(telemetry /inca/drops $reason)"
done
check "/metrics: group 1 contributions and icrc drops non-zero" test "$(metric 'inca_group_contributions_total{group="1"}')" -gt 0 -a "$(metric 'inca_drops_total{reason="icrc"}')" -gt 0
# port counters move with background traffic: between two telemetry reads
before=$(telemetry /inca/ports port0.rx_packets)
curl -s "http://127.0.0.1:$MPORT/metrics" > "$WORK/metrics.txt"
after=$(telemetry /inca/ports port0.rx_packets)
prom=$(metric 'inca_port_rx_packets_total{port="0"}')
check "/metrics: port 0 rx packets ($prom) between two telemetry reads ($before, $after)" \
	test "$before" -gt 0 -a "$before" -le "$prom" -a "$prom" -le "$after"
expect_eq "/metrics: other paths are 404" \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/")" 404
expect_eq "/metrics: POST is 405" \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$MPORT/metrics")" 405

# 6. two workers on jumbo links (MTU 9000, whatever INCA_TESTBED_MTU says, so
# that every run checks IB MTU 4096): every group's slots are spread over
# both ((group + slot) % 2); a contribution the ports' hash gives the other
# worker is handed over
"$TB" up --hosts 4 --workers 2 --mtu 9000 --config "$WORK/switch.json" --switch "$BUILD/dataplane/inca-switch" ||
	{ not_ok "testbed up with 2 workers, MTU 9000"; finish; exit 1; }
SEQ=([1]=1 [2]=1 [5]=1)
GBASE=([1]=0 [2]=0 [5]=0)
check "2 workers: group 1, int32 sum, 20000 elements" allreduce 1 20000 256 "" --dtype int32 --op sum
check "2 workers: group 2, fp32 sum, 20000 elements" allreduce 2 20000 128 "" --dtype fp32 --op sum
expect_eq "2 workers: group 1's slots are spread over workers" "$(telemetry /inca/group,1 workers)" 2
expect_eq "2 workers: group 2's slots are spread over workers" "$(telemetry /inca/group,2 workers)" 2
check "2 workers, IB MTU 4096: group 5, fp32 sum, 100000 elements" allreduce 5 100000 1024 "" --dtype fp32 --op sum
check "2 workers, IB MTU 4096: group 5, fp16 max, 50000 elements (2048 per packet)" allreduce 5 50000 2048 "" --dtype fp16 --op max
check "2 workers, IB MTU 4096: lost results answered" allreduce 5 30000 1024 "1:--drop-results|3|--timeout-ms|30" --dtype int32 --op sum
expect_eq "2 workers, IB MTU 4096: group 5's slots are spread over workers" "$(telemetry /inca/group,5 workers)" 2
expect_eq "2 workers, IB MTU 4096: no frame was truncated (ip_len drops)" "$(telemetry /inca/drops ip_len)" 0
handoffs=$(telemetry /inca/info handoffs)
# af_packet's fanout hashes the whole 4-tuple, not the source port alone:
# some contributions reach the other worker and are handed over
check "2 workers: contributions were handed to the owning worker ($handoffs)" test "$handoffs" -gt 0

# 7. a lossy, duplicating, reordering network on every host link (emulated
# by the switch: these kernels have no sch_netem); the --stats line; a clean
# stop on SIGTERM
"$TB" up --hosts 4 --impair "loss 3% duplicate 3% reorder 10%" --stats 0.5 \
	--config "$WORK/switch.json" --switch "$BUILD/dataplane/inca-switch" ||
	{ not_ok "testbed up with impaired links"; finish; exit 1; }
SEQ=([1]=1 [2]=1)
GBASE=([1]=0 [2]=0)
check "impaired links: fp32 sum, 60000 elements" allreduce 1 60000 256 "" --dtype fp32 --op sum --timeout-ms 20
check "impaired links: reproducible bf16 sum, 20000 elements" allreduce 2 20000 128 "" --dtype bf16 --op sum --timeout-ms 20
rt=$(telemetry /inca/info retransmits)
check "impaired links: the switch answered retransmissions ($rt)" test "$rt" -gt 0
for k in impair_lost impair_duplicated impair_reordered; do
	n=$(telemetry /inca/info $k)
	check "impaired links: $k > 0 ($n)" test "$n" -gt 0
done
log=/run/inca-testbed/$INCA_TESTBED/switch.log
sleep 0.6
check "--stats prints a summary line" grep -q "^inca-switch: rx .* pps, tx .* pps, contributions" "$log"
pid=$(cat "/run/inca-testbed/$INCA_TESTBED/switch.pid")
kill -TERM "$pid"
for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
check "SIGTERM stops the switch" test ! -d "/proc/$pid"
check "the switch said it was stopping" grep -q "^inca-switch: stopping" "$log"

# 8. a --vdev that does not come up (here: no such interface) does not
# start a switch with its other ports renumbered: the EAL alone carries on
vd=inca-vd$$
ip link add "$vd-a" type veth peer name "$vd-b"
ip link set "$vd-a" up
ip link set "$vd-b" up
out=$(timeout 30 "$BUILD/dataplane/inca-switch" --lcores 0@0,1@$(( $(nproc) > 1 ? 1 : 0 )) \
	--no-huge -m 256 --no-pci --file-prefix "$vd" --vdev "net_af_packet_vd0,iface=$vd-a" \
	--vdev "net_af_packet_vd1,iface=$vd-nosuch" --vdev "net_af_packet_vd2,iface=$vd-b" \
	-- -c "$WORK/switch.json" 2>&1)
rc=$?
ip link del "$vd-a" 2>/dev/null
rm -rf "/var/run/dpdk/$vd"
expect_eq "a --vdev that did not come up: the switch exits 1" "$rc" 1
check "... and names it" grep -q "^inca-switch: --vdev net_af_packet_vd1 did not come up as a port" <<< "$out"
check "... and says 1 of 3" grep -q "^inca-switch: 1 of the 3 --vdev devices did not come up" <<< "$out"
finish
