#!/usr/bin/env bash
# Two ranks per host address through the real switch: a static 8-member
# group on 4 testbed hosts, the ranks of one host sharing its address (the
# udp transport steers by BTH DestQP with its reuseport program; the xdp
# transport with its XDP program, both ranks' AF_XDP sockets on one shared
# UMEM) and each with its own ring_port; every result checked exactly,
# through the switch and through the fallback ring.
# Usage: hostlib_shared.sh BUILD_DIR [TRANSPORT...]   (default: udp xdp)
BUILD=$(cd "${1:?usage: hostlib_shared.sh BUILD_DIR [TRANSPORT...]}" && pwd)
shift
TRANSPORTS=${*:-udp xdp}
source "$(dirname "$0")/lib.sh"
need_root
CHECK="$BUILD/tests/tools/inca-check"

WORK=$(mktemp -d /tmp/inca-hls.XXXXXX)
cleanup() {
	"$TB" down
	rm -rf "$WORK"
}
trap cleanup EXIT
need_run_bpffs

QKEY=0x5eed0004
# rank r on host r / 2 + 1, QPN 17 + r, ring port 18600 + r
switch_members=() members=()
for r in 0 1 2 3 4 5 6 7; do
	switch_members+=("{ \"ip\": \"10.0.0.$((r / 2 + 1))\", \"qpn\": $((17 + r)) }")
	members+=("{ \"ip\": \"10.0.0.$((r / 2 + 1))\", \"qpn\": $((17 + r)), \"ring_port\": $((18600 + r)) }")
done
join() { local IFS=,; echo "$*"; }
cat > "$WORK/switch.json" <<JSON
{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 },
  "groups": [ { "id": 4, "qpn": 260, "qkey": "$QKEY", "window": 16, "elems_per_pkt": 256,
                "members": [ $(join "${switch_members[@]}") ] } ] }
JSON
cat > "$WORK/group.json" <<JSON
{ "switch": "10.0.0.254", "group": 4, "qpn": 260, "qkey": "$QKEY", "window": 16,
  "elems_per_pkt": 256, "members": [ $(join "${members[@]}") ] }
JSON

# ranks TIMEOUT_S ENV... -- ARGS: inca-check as 8 ranks, 2 per host, on $TP
ranks() {
	local limit=$1 envs=() pids=() r rc=0
	shift
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	for r in 0 1 2 3 4 5 6 7; do
		timeout "$limit" "$TB" exec $((r / 2 + 1)) env INCA_CONFIG="$WORK/group.json" \
			INCA_RANK=$r INCA_SIZE=8 INCA_TRANSPORT=$TP INCA_LOG=info "${envs[@]}" \
			"$CHECK" "$@" > "$WORK/rank$r.out" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	FALLBACKS=$(grep -ho "[0-9]* fallbacks" "$WORK"/rank*.out | awk '{s += $1} END {print s + 0}')
	STEERED=$(grep -l "shared by QPN (eBPF\|of the shared UMEM" "$WORK"/rank*.out | wc -l)
	BUILT=$(grep -l "of the shared UMEM (built it)" "$WORK"/rank*.out | wc -l)
	if [ $rc -ne 0 ]; then
		for r in 0 1 2 3 4 5 6 7; do
			grep -v "info:" "$WORK/rank$r.out" | sed "s/^/    rank $r: /" | tail -5
		done
	fi
	return $rc
}

"$TB" up --hosts 4 --config "$WORK/switch.json" --switch "$BUILD/dataplane/inca-switch" \
	>/dev/null || { not_ok "testbed up"; finish; exit 1; }
for TP in $TRANSPORTS; do
	how="by the reuseport program"
	[ "$TP" = xdp ] && how="by the XDP program to sockets on one UMEM per host"
	check "$TP, 2 ranks per address on 4 hosts: every dtype and op, barrier, bcast" \
		ranks 300 -- -d all -o all -n 1,2,257,1000,4097 -b
	expect_eq "... every rank's QPN steered $how" "$STEERED" 8
	[ "$TP" != xdp ] || expect_eq "... one rank per host built its UMEM" "$BUILT" 4
	expect_eq "... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$TP, 2 ranks per address: fp32/int64 sum, 1000000 elements, 3 repeats" \
		ranks 300 INCA_SWITCH_TIMEOUT_MS=5000 -- -d fp32,int64 -o sum -n 1000000 -r 3
	expect_eq "... through the switch (fallbacks)" "$FALLBACKS" 0
	check "$TP, 2 ranks per address, the host ring (a ring_port each): fp32/int32 sum/max" \
		ranks 120 INCA_FALLBACK=force -- -d fp32,int32 -o sum,max -n 1,1000,50000
	check "... every call by the ring ($FALLBACKS)" test "$FALLBACKS" -ge 8
done
finish
