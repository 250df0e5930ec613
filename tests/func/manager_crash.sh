#!/usr/bin/env bash
# inca-manager killed (kill -9) at random points while jobs are created and
# deleted, on the lab fabric (2 leaves, a spine, 4 hosts; the switches'
# agents heartbeat every 100 ms). At least 200 creations and deletions over
# at least 10 kills; after every restart (crash_client.py check): the
# allocations are the sum over the live jobs and what the database's rows
# hold, every switch holds exactly the manager's groups, every job whose
# creation was acknowledged and not deleted since is live, none whose
# deletion was acknowledged is. Prints how long a restart takes until every
# switch has applied the manager's group set again.
# Usage: manager_crash.sh BUILD_DIR
BUILD=$(cd "${1:?usage: manager_crash.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root

FAB="$SRC/deploy/fabric"
export INCA_FABRIC=incacrash
MGR="$BUILD/control/inca-manager"
CTL="$BUILD/control/incactl"
CLIENT="$SRC/tests/func/crash_client.py"
PORT=18474
URL="http://127.0.0.1:$PORT"
WORK=$(mktemp -d /tmp/inca-crash.XXXXXX)
MGR_PID=
CLIENT_PID=
cleanup() {
	[ -n "$CLIENT_PID" ] && kill "$CLIENT_PID" 2>/dev/null && wait "$CLIENT_PID" 2>/dev/null
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
    { "name": "spine", "role": "spine", "ip": "10.0.0.250", "max_slots": 4096 },
    { "name": "leaf1", "role": "leaf", "ip": "10.0.0.251", "max_slots": 4096 },
    { "name": "leaf2", "role": "leaf", "ip": "10.0.0.252", "max_slots": 4096 }
  ],
  "hosts": [
    { "name": "h1", "ip": "10.0.0.1", "leaf": "leaf1" }, { "name": "h2", "ip": "10.0.0.2", "leaf": "leaf1" },
    { "name": "h3", "ip": "10.0.0.3", "leaf": "leaf2" }, { "name": "h4", "ip": "10.0.0.4", "leaf": "leaf2" }
  ],
  "links": [ { "leaf": "leaf1", "spine": "spine" }, { "leaf": "leaf2", "spine": "spine" } ],
  "tenants": [ { "name": "a", "token": "$TOKEN", "max_slots_per_switch": 4096, "max_jobs": 64 } ]
}
JSON

now_ms() { date +%s%3N; }

mgr_start --lease-s 3600 || { not_ok "manager start"; finish; exit 1; }
"$FAB" up --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "$URL" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	>/dev/null || { not_ok "fabric up"; finish; exit 1; }
check "the switches registered" mgr_wait_applied

LOG="$WORK/ops.log"
: > "$LOG"
RANDOM=${SEED:-$$}
echo "    seed $RANDOM"
round=0 kills=0 failed_rounds=0
restarts=()
while [ "$round" -lt 60 ]; do
	ops=$(grep -c '^created \|^deleting ' "$LOG")
	[ "$ops" -ge 200 ] && [ "$kills" -ge 10 ] && break
	round=$((round + 1))
	/usr/bin/python3 "$CLIENT" ops "$URL" "$TOKEN" "10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4" \
		"$round" 40 "$LOG" 2>> "$WORK/client.err" &
	CLIENT_PID=$!
	# the kill at a random point of the client's work, not of its
	# interpreter's start (which took most of a round on a loaded machine)
	lines=$(wc -l < "$LOG")
	for _ in $(seq 300); do
		[ "$(wc -l < "$LOG")" -gt "$lines" ] && break
		kill -0 "$CLIENT_PID" 2>/dev/null || break
		sleep 0.01
	done
	sleep "0.$(printf %03d $((RANDOM % 300 + 10)))"
	kill -9 "$MGR_PID" 2>/dev/null
	wait "$MGR_PID" 2>/dev/null
	kills=$((kills + 1))
	wait "$CLIENT_PID"
	CLIENT_PID=
	t0=$(now_ms)
	if ! mgr_start --lease-s 3600 || ! mgr_wait_applied; then
		not_ok "round $round: the manager restarted and every switch applied its groups"
		failed_rounds=$((failed_rounds + 1))
		break
	fi
	restarts+=($(($(now_ms) - t0)))
	if ! out=$(/usr/bin/python3 "$CLIENT" check "$URL" "$(cat "$WORK/admin.token")" \
		"$WORK/state.db" "$LOG" 2>&1); then
		echo "$out" | sed 's/^/    /'
		failed_rounds=$((failed_rounds + 1))
	fi
done
ops=$(grep -c '^created \|^deleting ' "$LOG")
echo "    $round rounds, $kills kills, $(grep -c '^created ' "$LOG") creations, $(grep -c '^deleting ' "$LOG") deletions"
check "at least 200 creations and deletions ($ops) over at least 10 kills ($kills)" \
	test "$ops" -ge 200 -a "$kills" -ge 10
expect_eq "after every restart the state was consistent (rounds that were not)" "$failed_rounds" 0
# the manager said why when a creation was refused: none should be
check "no creation was refused (client.err)" test ! -s "$WORK/client.err"
[ -s "$WORK/client.err" ] && head -3 "$WORK/client.err" | sed 's/^/    /'
med=$(printf '%s\n' "${restarts[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
echo "    restart -> every switch applied the manager's groups: median $med ms over ${#restarts[@]} restarts"
finish
