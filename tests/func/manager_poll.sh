#!/usr/bin/env bash
# inca-manager's long-polls through real HTTP, on this machine's loopback
# (no testbed, no root): a switch (curl playing its agent; never taken for
# dead: its heartbeats here are few) and a one-rank
# job, then
#  - a rank's plan poll (?plan_ver=V&wait_ms=W) with nothing changing is
#    held for its W and answered by time-out (the manager once dropped
#    plan_ver from the query and answered every poll at once: a rank's
#    plan thread then looped on requests);
#  - a poll for an older version is answered at once, held never;
#  - 300 polls held at once by one process do not make 300 threads (each is
#    a suspended connection), and every one of them is answered when the
#    job is deleted: 404 "deleted while the request waited";
#  - a held heartbeat is answered when a job gives its switch a new version.
# Usage: manager_poll.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
# shellcheck source=tests/func/lib.sh
. "$(dirname "$0")/lib.sh"

MGR=$BUILD/control/inca-manager
PY=/usr/bin/python3
command -v curl >/dev/null || { echo "SKIP: curl missing (deploy/install-deps.sh)"; exit 77; }
WORK=$(mktemp -d /tmp/inca-poll.XXXXXX)
MGR_PID=
cleanup() {
	[ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null && wait "$MGR_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

ADMIN=admin-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
TENANT=tenant-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$ADMIN" > "$WORK/admin.token"
cat > "$WORK/topo.json" <<JSON
{ "switches": [ { "name": "tor", "role": "leaf", "ip": "10.0.0.254" } ],
  "hosts": [ { "name": "h1", "ip": "10.0.0.1", "leaf": "tor" } ],
  "tenants": [ { "name": "a", "token": "$TENANT", "max_jobs": 4 } ] }
JSON
PORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
mgr_start --dead-after-ms 600000 || { not_ok "the manager starts"; finish; exit 1; }
check "the manager serves http" grep -q "listening on 0.0.0.0:$PORT (http)" "$WORK/manager.log"

# req TOKEN ARGS...: the answer's body, then its status on a line of its own
req() { local t=$1; shift; curl -s -H "Authorization: Bearer $t" -w '\n%{http_code}' "$@"; }
field() { $PY -c 'import json,sys; v = json.load(sys.stdin)
for k in sys.argv[1].split("."): v = v[k]
print(v)' "$1"; }
metric() { curl -s -H "Authorization: Bearer $ADMIN" "$URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
heartbeat() {  # APPLIED WAIT_MS: the version it is answered with
	req "$ADMIN" -X POST -d "{\"applied\": $1, \"wait_ms\": $2}" \
		"$URL/v1/switches/tor/heartbeat" | head -n -1 | field version
}

heartbeat 0 0 > /dev/null
out=$(req "$TENANT" -X POST -d '{"rank": 0, "size": 1, "ip": "10.0.0.1"}' "$URL/v1/jobs/j/ranks")
expect_eq "a one-rank job registers" "$(echo "$out" | tail -1)" 200
expect_eq "the register answer says how long the lease is" \
	"$(echo "$out" | head -n -1 | field lease_s)" 60.0
v=$(heartbeat 0 0)
heartbeat "$v" 0 > /dev/null     # the switch applied it: the job is ready
out=$(req "$TENANT" "$URL/v1/jobs/j/ranks/0")
expect_eq "the job is ready" "$(echo "$out" | head -n -1 | field state)" ready
ver=$(echo "$out" | head -n -1 | field plan.version)

# held for its wait_ms: timed by the manager's own counter and by the clock
timeouts=$(metric 'inca_manager_long_polls_total{end="timeout"}')
t0=$(date +%s%N)
out=$(req "$TENANT" "$URL/v1/jobs/j/ranks/0?plan_ver=$ver&wait_ms=1500")
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
expect_eq "a plan poll on the current version: answered" "$(echo "$out" | tail -1)" 200
expect_eq "... by its time-out (the manager's count of timed-out polls)" \
	"$(metric 'inca_manager_long_polls_total{end="timeout"}')" $((timeouts + 1))
check "... after its 1500 ms ($ms ms)" test "$ms" -ge 1450
held=$(metric inca_manager_long_polls_total'{end="change"}')
out=$(req "$TENANT" "$URL/v1/jobs/j/ranks/0?plan_ver=$((ver - 1))&wait_ms=20000")
expect_eq "a poll on an older version: the plan at once" \
	"$(echo "$out" | head -n -1 | field plan.version)" "$ver"
expect_eq "... never held" "$(metric inca_manager_long_polls_total'{end="change"}')" "$held"

# 300 held at once from one client process; the manager's threads counted
$PY - "$PORT" "$TENANT" "$ver" 300 > "$WORK/many.out" 2>&1 <<'PY' &
import socket, sys, time
port, token, ver, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET /v1/jobs/j/ranks/0?plan_ver=%s&wait_ms=30000 HTTP/1.1\r\nHost: x\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (ver, token)).encode())
    socks.append(s)
codes = {}
for s in socks:
    s.settimeout(40)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
    while length and len(body) < length[0]:
        body += s.recv(4096)
    key = head.split(b"\r\n")[0].decode() + " " + body.decode()
    codes[key] = codes.get(key, 0) + 1
for k, v in codes.items():
    print(v, k.replace("\n", " "))
PY
CLIENT=$!
# held N: until the manager holds N requests (10 s at most)
held() {
	for _ in $(seq 100); do
		[ "$(metric inca_manager_long_polls_held)" = "$1" ] && return
		sleep 0.1
	done
}
held 300
expect_eq "300 polls held at once" "$(metric inca_manager_long_polls_held)" 300
threads=$(awk '/^Threads:/ {print $2}' "/proc/$MGR_PID/status")
check "... by a manager of $threads threads (no thread per held request)" test "$threads" -le 4
hb_before=$(metric inca_manager_long_polls_total'{end="change"}')
heartbeat "$v" 20000 > "$WORK/hb.out" &
HB=$!
held 301
expect_eq "a heartbeat with nothing new is held too" "$(metric inca_manager_long_polls_held)" 301
expect_eq "deleting the job" "$(req "$ADMIN" -X DELETE "$URL/v1/jobs/j" | tail -1)" 200
wait $CLIENT
wait $HB
expect_eq "every held poll answered when the job went: 404, deleted while it waited" \
	"$(grep -c 'job j was deleted while the request waited' "$WORK/many.out")" 1
expect_eq "... all 300 of them" "$(awk '/deleted while/ {print $1}' "$WORK/many.out")" 300
expect_eq "the held heartbeat answered with the switch's new version" \
	"$(cat "$WORK/hb.out")" $((v + 1))
expect_eq "nothing held any more" "$(metric inca_manager_long_polls_held)" 0
expect_eq "301 polls ended by a change" \
	"$(metric inca_manager_long_polls_total'{end="change"}')" $((hb_before + 301))
check "the manager still runs" kill -0 "$MGR_PID"
finish
