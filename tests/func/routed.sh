#!/usr/bin/env bash
# Routed placement: the lab fabric in routed mode (deploy/fabric up
# --routed: 2 leaf routers with their hosts' subnets, 2 spine routers, ECMP
# between the leaves over both spines; INCA aggregation nodes on each leaf
# subnet and behind each spine router, each with its router as gateway) and
# inca-manager placing jobs on them. Checks: the routers route (a host pings
# a host of the other subnet and both spines' aggregation nodes; the leaf
# routers hold two equal-cost next hops); a job over both subnets is exact
# for every dtype and op on a leaf-spine tree whose partials crossed the
# routers (the spine node's contributions, the routers' forwarded packets),
# on both transports; with spine1's node killed, a new job goes through
# spine2.
# Usage: routed.sh BUILD_DIR
BUILD=$(cd "${1:?usage: routed.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root

FAB="$SRC/deploy/fabric"
export INCA_FABRIC=incarte
MGR="$BUILD/control/inca-manager"
CTL="$BUILD/control/incactl"
CHECK="$BUILD/tests/tools/inca-check"
PORT=18475
WORK=$(mktemp -d /tmp/inca-routed.XXXXXX)
MGR_PID=
cleanup() {
	[ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null && wait "$MGR_PID" 2>/dev/null
	"$FAB" down
	if [ -n "${KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$WORK/admin.token"
TOKEN=tenant-a-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
cat > "$WORK/topo.json" <<JSON
{
  "switches": [
    { "name": "spine1", "role": "spine", "ip": "10.31.0.250" },
    { "name": "spine2", "role": "spine", "ip": "10.32.0.250" },
    { "name": "leaf1", "role": "leaf", "ip": "10.1.1.250" },
    { "name": "leaf2", "role": "leaf", "ip": "10.1.2.250" }
  ],
  "hosts": [
    { "name": "h1", "ip": "10.1.1.1", "leaf": "leaf1" }, { "name": "h2", "ip": "10.1.1.2", "leaf": "leaf1" },
    { "name": "h3", "ip": "10.1.2.3", "leaf": "leaf2" }, { "name": "h4", "ip": "10.1.2.4", "leaf": "leaf2" }
  ],
  "links": [ { "leaf": "leaf1", "spine": "spine1" }, { "leaf": "leaf2", "spine": "spine1" },
             { "leaf": "leaf1", "spine": "spine2" }, { "leaf": "leaf2", "spine": "spine2" } ],
  "tenants": [ { "name": "a", "token": "$TOKEN" } ]
}
JSON
IP=(x 10.1.1.1 10.1.1.2 10.1.2.3 10.1.2.4)

mgr_start || { not_ok "manager start"; finish; exit 1; }
"$FAB" up --routed --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	>/dev/null || { not_ok "routed fabric up"; finish; exit 1; }
check "the four aggregation nodes registered" mgr_wait_applied spine1 spine2 leaf1 leaf2

# the routers route
check "h1 reaches h4 (other subnet, through the spines)" "$FAB" exec 1 ping -c 1 -W 2 10.1.2.4
check "h1 reaches spine1's node (10.31.0.250)" "$FAB" exec 1 ping -c 1 -W 2 10.31.0.250
check "h3 reaches spine2's node (10.32.0.250)" "$FAB" exec 3 ping -c 1 -W 2 10.32.0.250
nh=$("$FAB" router leaf1 ip route show 10.1.2.0/24 | grep -c 'nexthop via')
expect_eq "leaf1's router: two equal-cost next hops to 10.1.2.0/24" "$nh" 2

# job JOB TRANSPORT ARGS...: libinca ranks on h1..h4 in manager mode
job() {
	local id=$1 tp=$2 h pids=() rc=0
	shift 2
	for h in 1 2 3 4; do
		timeout 300 "$FAB" exec "$h" env INCA_MANAGER="http://192.168.77.254:$PORT" \
			INCA_MANAGER_TOKEN="$TOKEN" INCA_JOB="$id" INCA_RANK=$((h - 1)) INCA_SIZE=4 \
			INCA_LOCAL_IP="${IP[$h]}" INCA_RING_IP="192.168.77.$h" INCA_TRANSPORT="$tp" \
			INCA_LOG=warn "$CHECK" "$@" > "$WORK/$id.r$h" 2>&1 &
		pids+=($!)
	done
	for h in "${pids[@]}"; do wait "$h" || rc=1; done
	[ $rc -eq 0 ] || for f in "$WORK/$id".r*; do sed "s|^|    $(basename "$f"): |" "$f" | tail -3; done
	return $rc
}
fallbacks() {
	grep -ho "[0-9]* fallbacks" "$WORK/$1".r* | awk '{s += $1} END {print s + 0}'
}
fwd() {   # packets the spine routers forwarded (their leaf-facing links' rx)
	local k j n=0
	for k in 1 2; do for j in 1 2; do
		n=$((n + $("$FAB" router "spine$k" cat "/sys/class/net/dn$j/statistics/rx_packets")))
	done; done
	echo "$n"
}

f0=$(fwd)
c0=$(ctl --json switches | /usr/bin/python3 -c 'import json,sys; print(sum(s["counters"].get("contributions", 0) for s in json.load(sys.stdin) if s["name"].startswith("spine")))')
check "a job over both subnets: every dtype and op, 1 to 4097 elements (udp)" \
	job r1 udp -d all -o all -n 1,257,4097
expect_eq "r1: all through the aggregation nodes (fallbacks)" "$(fallbacks r1)" 0
c1=$(ctl --json switches | /usr/bin/python3 -c 'import json,sys; print(sum(s["counters"].get("contributions", 0) for s in json.load(sys.stdin) if s["name"].startswith("spine")))')
f1=$(fwd)
echo "    spine nodes' contributions +$((c1 - c0)), spine routers forwarded +$((f1 - f0)) packets"
check "the leaves' partials reached a spine node across the routers" test $((c1 - c0)) -gt 0
check "... through the spine routers" test $((f1 - f0)) -ge $((c1 - c0))
check "an xdp job over both subnets is exact too" job r2 xdp -d fp32,int32 -o sum,max -n 1,4097
expect_eq "r2: all through the aggregation nodes (fallbacks)" "$(fallbacks r2)" 0

# spine1 down: a new job's tree takes spine2
"$FAB" kill spine1
down=no
for _ in $(seq 50); do
	[ "$(ctl --json switches | /usr/bin/python3 -c 'import json,sys; print([s["state"] for s in json.load(sys.stdin) if s["name"] == "spine1"][0])')" = down ] && down=yes && break
	sleep 0.1
done
expect_eq "spine1 killed: the manager sees it down" "$down" yes
spine2() {
	ctl --json switches | /usr/bin/python3 -c 'import json,sys; print([s["counters"].get("contributions", 0) for s in json.load(sys.stdin) if s["name"] == "spine2"][0])'
}
c0=$(spine2)
check "a new job while spine1 is down: exact" job r3 udp -d fp32,bf16 -o sum -n 1,4097
expect_eq "r3: in-network (fallbacks)" "$(fallbacks r3)" 0
sleep 0.3     # a heartbeat with the counters
c1=$(spine2)
check "r3 went through spine2 (its contributions +$((c1 - c0)))" test $((c1 - c0)) -gt 0
finish
