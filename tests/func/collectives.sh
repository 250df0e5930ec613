#!/usr/bin/env bash
# Functional tests of libinca's collectives through the real switch on a
# 4-host testbed: reduce, reduce-scatter, allgather, bcast and all-reduce,
# every dtype and op that applies, 1 element to 16 MiB, in place, 8 in
# flight, on clean and impaired links (loss 1%, duplicate 1%); every result
# checked element by element (allgather and bcast byte for byte) and none
# may fall back. Reduce-scatter: each host receives S/N of elements plus
# headers from the switch (its port counters) and retransmissions; allgather:
# each host sends only its own shard and receives only the others'. With the
# fabric built (deploy/fabric),
# the same on two levels (2 leaves, a spine).
# Usage: collectives.sh BUILD_DIR [TRANSPORT...]   (default: udp xdp)
BUILD=$(cd "${1:?usage: collectives.sh BUILD_DIR [TRANSPORT...]}" && pwd)
shift
TRANSPORTS=${*:-udp xdp}
# INCA_ONLY_FABRIC=1 (tests/soak/stress.sh two-level): the two-level part alone
[ -z "${INCA_ONLY_FABRIC:-}" ] || TRANSPORTS=
source "$(dirname "$0")/lib.sh"
need_root
CHECK="$BUILD/tests/tools/inca-check"
export INCA_TESTBED=incacft INCA_FABRIC=incacfab

WORK=$(mktemp -d /tmp/inca-coll.XXXXXX)
cleanup() {
	"$TB" down
	"$SRC/deploy/fabric" down >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT

QKEY=0x5eed0013
MEMBERS='[ { "ip": "10.0.0.1", "qpn": 17 }, { "ip": "10.0.0.2", "qpn": 18 },
           { "ip": "10.0.0.3", "qpn": 19 }, { "ip": "10.0.0.4", "qpn": 20 } ]'
cat > "$WORK/switch.json" <<JSON
{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 },
  "groups": [ { "id": 1, "qpn": 256, "qkey": "$QKEY", "window": 16, "elems_per_pkt": 256,
                "members": $MEMBERS } ] }
JSON
cat > "$WORK/group.json" <<JSON
{ "switch": "10.0.0.254", "group": 1, "qpn": 256, "qkey": "$QKEY", "window": 16,
  "elems_per_pkt": 256, "members": $MEMBERS }
JSON

# ranks TP TIMEOUT_S ENV... -- ARGS: inca-check as ranks 0..3 on hosts 1..4
ranks() { check_ranks "$TB" "$WORK/group.json" "$@"; }
# field RANK "bytes sent": a number from rank RANK's summary line
field() { grep -o "[0-9]* $2" "$WORK/rank$1.out" | awk '{print $1}'; }
port() { telemetry /inca/ports "port$1.$2"; }

up() {
	"$TB" up --hosts 4 --config "$WORK/switch.json" --switch "$BUILD/dataplane/inca-switch" "$@" >/dev/null ||
		{ not_ok "testbed up $*"; finish; exit 1; }
}

# The byte accounting of one reduce-scatter and one allgather of S = 4 MiB
# of fp32 (shards of 262144 elements: 1058 packets of at most 248 per
# shard, 4232 in all; 98 bytes of headers a packet on the wire).
bytes_check() {
	local tp=$1 what=$2 r
	local npkts=4232 shard_bytes=1048576 hdr=98 full=$((98 + 248 * 4)) slack=2000
	local base=$((npkts * hdr + shard_bytes))
	declare -a tx0 rx0
	for r in 0 1 2 3; do tx0[$r]=$(port $r tx_bytes); rx0[$r]=$(port $r rx_bytes); done
	local retx0 dup0 waits0
	retx0=$(telemetry /inca/group,1 retransmits)
	waits0=$(telemetry /inca/group,1 waits)
	dup0=$(telemetry /inca/info impair_duplicated)
	check "$tp$what: reduce-scatter, 4 MiB of fp32 (for the byte count)" \
		ranks "$tp" 120 INCA_SWITCH_TIMEOUT_MS=5000 -- -c reduce_scatter -d fp32 -o sum -n 262144
	local extra=$(( $(telemetry /inca/group,1 retransmits) - retx0 +
			$(telemetry /inca/info impair_duplicated) - dup0 ))
	# and the switch's WAITs (headers alone) to ranks that resent early
	local waits=$(( $(telemetry /inca/group,1 waits) - waits0 ))
	for r in 0 1 2 3; do
		local got=$(( $(port $r tx_bytes) - tx0[r] ))
		check "$tp$what: host $((r + 1)) received $got bytes: S/N + headers = $base, + at most $extra resent frames and $waits WAITs" \
			test "$got" -ge "$base" -a "$got" -le $((base + extra * full + waits * hdr + slack))
		local sent=$(( $(port $r rx_bytes) - rx0[r] )) own
		own=$(field $r "bytes sent")
		check "$tp$what: the switch received what host $((r + 1)) sent ($sent of $own bytes)" \
			test "$sent" -ge "$own" -a "$sent" -le $((own + slack))
	done
	for r in 0 1 2 3; do tx0[$r]=$(port $r tx_bytes); done
	retx0=$(telemetry /inca/group,1 retransmits)
	waits0=$(telemetry /inca/group,1 waits)
	dup0=$(telemetry /inca/info impair_duplicated)
	check "$tp$what: allgather, 4 MiB of fp32 (for the byte count)" \
		ranks "$tp" 120 INCA_SWITCH_TIMEOUT_MS=5000 -- -c allgather -d fp32 -n 262144
	extra=$(( $(telemetry /inca/group,1 retransmits) - retx0 +
		  $(telemetry /inca/info impair_duplicated) - dup0 ))
	waits=$(( $(telemetry /inca/group,1 waits) - waits0 ))
	# the other three shards; its own shard's results are acknowledgements
	# without data (docs/protocol.md 2.1)
	local others=$((npkts * hdr + 3 * shard_bytes))
	for r in 0 1 2 3; do
		local own retx got
		own=$(field $r "bytes sent")
		retx=$(field $r retransmitted)
		check "$tp$what: allgather: host $((r + 1)) sent its shard + headers ($own bytes: $base + $retx resent frames)" \
			test "$own" -ge "$base" -a "$own" -le $((base + retx * full))
		got=$(( $(port $r tx_bytes) - tx0[r] ))
		check "$tp$what: allgather: host $((r + 1)) received the others' shards + headers ($got bytes: $others, + at most $extra resent frames and $waits WAITs)" \
			test "$got" -ge "$others" -a "$got" -le $((others + extra * full + waits * hdr + slack))
	done
}

for tp in $TRANSPORTS; do
	up
	check "$tp: every collective, dtype and op, 1 to 4097 elements (per shard)" \
		ranks "$tp" 600 -- -c all -d all -o all -n 1,3,257,4097
	expect_eq "$tp: ... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$tp: in place, 1 to 100001 elements" \
		ranks "$tp" 300 -- -i -c all -d fp32,bf16,int64 -o sum,min,bxor -n 1,777,100001
	expect_eq "$tp: ... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$tp: 8 in flight, completed latest first" \
		ranks "$tp" 300 -- -p 8 -c all -d fp32,int32,fp16 -o sum,max,bor -n 1,1000,20000
	expect_eq "$tp: ... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$tp: 8 all-reduces and 8 reduce-scatters in flight over 20 ms of computation" \
		ranks "$tp" 300 -- -p 8 -W 20000 -c allreduce,reduce_scatter -d fp32,bf16 -o sum -n 1,1000,20000
	expect_eq "$tp: ... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$tp: 16 MiB: all-reduce, reduce and bcast of 4194304 fp32" \
		ranks "$tp" 600 INCA_TIMEOUT_MS=240000 INCA_SWITCH_TIMEOUT_MS=5000 -- \
		-c allreduce,reduce,bcast -d fp32 -o sum -n 4194304 -R 2
	expect_eq "$tp: ... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$tp: 16 MiB: reduce-scatter's send buffer, allgather's receive buffer" \
		ranks "$tp" 600 INCA_TIMEOUT_MS=240000 INCA_SWITCH_TIMEOUT_MS=5000 -- \
		-c reduce_scatter,allgather -d fp32 -o sum -n 1048576
	expect_eq "$tp: ... through the switch (fallbacks)" "$FALLBACKS" 0
	bytes_check "$tp" ""

	up --impair "loss 1% duplicate 1%"
	check "$tp, impaired links (loss 1%, duplicate 1%): every collective, dtype and op" \
		ranks "$tp" 900 INCA_SWITCH_TIMEOUT_MS=5000 -- -c all -d all -o all -n 1,257,4097
	expect_eq "$tp, impaired links: ... through the switch (fallbacks)" "$FALLBACKS" 0
	retx=$(grep -ho "[0-9]* retransmitted" "$WORK"/rank*.out | awk '{s += $1} END {print s + 0}')
	check "$tp, impaired links: ranks retransmitted ($retx)" test "$retx" -gt 0
	check "$tp, impaired links: 8 in flight" \
		ranks "$tp" 600 INCA_SWITCH_TIMEOUT_MS=5000 -- -p 8 -c all -d fp32,int64 -o sum -n 1,5000
	expect_eq "$tp, impaired links: ... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$tp, impaired links: 16 MiB of every collective" \
		ranks "$tp" 900 INCA_TIMEOUT_MS=240000 INCA_SWITCH_TIMEOUT_MS=5000 -- \
		-c allreduce,reduce,bcast -d fp32 -o sum -n 4194304
	expect_eq "$tp, impaired links: ... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$tp, impaired links: 16 MiB of reduce-scatter and allgather" \
		ranks "$tp" 900 INCA_TIMEOUT_MS=240000 INCA_SWITCH_TIMEOUT_MS=5000 -- \
		-c reduce_scatter,allgather -d fp32 -o sum -n 1048576
	expect_eq "$tp, impaired links: ... through the switch (fallbacks)" "$FALLBACKS" 0
	bytes_check "$tp" ", impaired links"
done
"$TB" down

# Two levels: 2 leaves (hosts 1-2 and 3-4) under a spine. The spine's
# members are the leaves, each covering 2 ranks (by default in a row); leaf
# 2's hosts are ranks 2 and 3 (first_rank). Each rank's switch is its leaf,
# its member_index its place there.
FAB="$SRC/deploy/fabric"
QS=0x5151aab0
QL=0x1e1f0013
fabric_groups "$WORK" "$QS" "$QL" 16 20
fabric_rank_configs "$WORK" "$QL" 16 "$MEMBERS"
# tranks TIMEOUT_S ENV... -- ARGS: inca-check as ranks 0..3 on the fabric's hosts
tranks() { check_ranks "$FAB" "$WORK/tree%r.json" udp "$@"; }
if [ -z "${INCA_SKIP_FABRIC:-}" ]; then
	for impair in "" "loss 1% duplicate 1%"; do
		what="two levels${impair:+, impaired links ($impair)}"
		"$FAB" up --hosts 4 --leaves 2 --configs "$WORK" --switch "$BUILD/dataplane/inca-switch" \
			${impair:+--impair "$impair"} >/dev/null || { not_ok "fabric up $impair"; break; }
		check "$what: every collective, dtype and op, 1 to 4097 elements" \
			tranks 900 INCA_SWITCH_TIMEOUT_MS=5000 -- -c all -d all -o all -n 1,257,4097
		expect_eq "$what: ... through the switches (fallbacks)" "$FALLBACKS" 0
		check "$what: 8 in flight" \
			tranks 600 INCA_SWITCH_TIMEOUT_MS=5000 -- -p 8 -c all -d fp32,int64 -o sum -n 1,5000
		expect_eq "$what: ... through the switches (fallbacks)" "$FALLBACKS" 0
		check "$what: 16 MiB of each collective" \
			tranks 900 INCA_TIMEOUT_MS=240000 INCA_SWITCH_TIMEOUT_MS=5000 -- \
			-c allreduce,reduce,bcast -d fp32 -o sum -n 4194304 -R 3
		expect_eq "$what: ... through the switches (fallbacks)" "$FALLBACKS" 0
		check "$what: 16 MiB of reduce-scatter and allgather" \
			tranks 900 INCA_TIMEOUT_MS=240000 INCA_SWITCH_TIMEOUT_MS=5000 -- \
			-c reduce_scatter,allgather -d fp32 -o sum -n 1048576
		expect_eq "$what: ... through the switches (fallbacks)" "$FALLBACKS" 0
	done
	"$FAB" down
fi
finish
