#!/usr/bin/env bash
# The manager's topology view in a real browser (Debian's chromium,
# headless) on the fabric lab: 2 leaves, a spine, 4 hosts, the switches
# registered with inca-manager and programmed by it. Two jobs hold groups on
# the switches (their ranks registered through the API, as libinca does);
# the page must load without a console message or a page error, draw the
# three switches up with their load, the four hosts, the links, and
# highlight the selected job's tree (the two-leaf job: spine, both leaves,
# every host; the one-leaf job: leaf1 and its hosts only). A tenant's token
# shows the fabric without the other tenant's jobs. Then leaf2 is killed:
# the page shows it down in red and the job on it on the host ring. Screenshots of
# both states are kept in BUILD/meson-logs/ (topology-view.png,
# topology-view-failure.png). The manager serves TLS with a lab CA's
# certificate (deploy/lab-ca): the switches' agents and a real libinca job
# (inca-check on the four hosts, results exact, no fallback) reach it over
# HTTPS, and chromium trusts exactly that certificate's key.
# Usage: ui.sh BUILD_DIR
BUILD=$(cd "${1:?usage: ui.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root

BROWSER=$(command -v chromium || true)
if [ -z "$BROWSER" ]; then
	echo "SKIP: no chromium (deploy/install-deps.sh installs it)"
	exit 77
fi
FAB="$SRC/deploy/fabric"
export INCA_FABRIC=incaui
MGR="$BUILD/control/inca-manager"
CHECK="$BUILD/tests/tools/inca-check"
PORT=18474
URL="https://127.0.0.1:$PORT"
WORK=$(mktemp -d /tmp/inca-ui.XXXXXX)
ART="$BUILD/meson-logs"
MGR_PID=
cleanup() {
	[ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null && wait "$MGR_PID" 2>/dev/null
	"$FAB" down
	if [ -n "${KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
mkdir -p "$ART"

quiet "$SRC/deploy/lab-ca" "$WORK/tls" || { not_ok "deploy/lab-ca"; finish; exit 1; }
export INCA_MANAGER_CACERT=$WORK/tls/ca.pem
# chromium trusts the manager's key alone (its SPKI's SHA-256)
SPKI=$(openssl x509 -in "$WORK/tls/manager.pem" -pubkey -noout | openssl pkey -pubin -outform der |
	openssl dgst -sha256 -binary | base64)
head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$WORK/admin.token"
ADMIN=$(cat "$WORK/admin.token")
TOKEN_A=tenant-a-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
TOKEN_B=tenant-b-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
cat > "$WORK/topo.json" <<JSON
{
  "switches": [
    { "name": "spine", "role": "spine", "ip": "10.0.0.250", "max_slots": 256 },
    { "name": "leaf1", "role": "leaf", "ip": "10.0.0.251", "max_slots": 256 },
    { "name": "leaf2", "role": "leaf", "ip": "10.0.0.252", "max_slots": 256 }
  ],
  "hosts": [
    { "name": "h1", "ip": "10.0.0.1", "leaf": "leaf1" }, { "name": "h2", "ip": "10.0.0.2", "leaf": "leaf1" },
    { "name": "h3", "ip": "10.0.0.3", "leaf": "leaf2" }, { "name": "h4", "ip": "10.0.0.4", "leaf": "leaf2" }
  ],
  "links": [ { "leaf": "leaf1", "spine": "spine" }, { "leaf": "leaf2", "spine": "spine" } ],
  "tenants": [
    { "name": "a", "token": "$TOKEN_A", "max_slots_per_switch": 128 },
    { "name": "b", "token": "$TOKEN_B", "max_slots_per_switch": 128 }
  ]
}
JSON

"$MGR" --topology "$WORK/topo.json" --token-file "$WORK/admin.token" --db "$WORK/state.db" \
	--listen 0.0.0.0:$PORT --tls-cert "$WORK/tls/manager.pem" --tls-key "$WORK/tls/manager.key" \
	--dead-after-ms 1000 > "$WORK/manager.log" 2>&1 &
MGR_PID=$!
for _ in $(seq 50); do curl -sf --cacert "$INCA_MANAGER_CACERT" "$URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
"$FAB" up --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "$URL" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	>/dev/null || { not_ok "fabric up"; finish; exit 1; }

api() { curl -s --cacert "$INCA_MANAGER_CACERT" -H "Authorization: Bearer $1" "${@:3}" "$URL$2"; }
get() { curl -s --cacert "$INCA_MANAGER_CACERT" "$@"; }
# jq-less: one value of a JSON answer (a python expression on d)
jval() { /usr/bin/python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
# wait_for EXPR: the /v1/topology answer makes EXPR true (10 s at most)
wait_for() {
	for _ in $(seq 100); do
		[ "$(api "$ADMIN" /v1/topology | jval "$1" 2>/dev/null)" = True ] && return 0
		sleep 0.1
	done
	return 1
}
check "the three switches registered and heartbeat" \
	wait_for 'all(s["state"] == "up" for s in d["switches"])'

# a real job first: libinca in manager mode on the four hosts, over HTTPS
pids=()
for r in 0 1 2 3; do
	h=$((r + 1))
	timeout 120 "$FAB" exec "$h" env INCA_MANAGER="https://192.168.77.254:$PORT" \
		INCA_MANAGER_TOKEN="$TOKEN_A" INCA_JOB=j0 INCA_RANK=$r INCA_SIZE=4 \
		INCA_LOCAL_IP="10.0.0.$h" INCA_RING_IP="192.168.77.$h" INCA_TRANSPORT=udp INCA_LOG=warn \
		"$CHECK" -d fp32,int32 -o sum,max -n 1,1000,100001 > "$WORK/j0.r$r" 2>&1 &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc = 0 ] || tail -n 3 "$WORK"/j0.r* | sed 's/^/    /'
check "a libinca job through the manager over HTTPS: results exact" test $rc = 0
expect_eq "... all through the switches (fallbacks)" \
	"$(grep -ho "[0-9]* fallbacks" "$WORK"/j0.r* | awk '{s += $1} END {print s + 0}')" 0
check "... and gone when its ranks left" wait_for '[j["id"] for j in d["jobs"]] == []'

# j1: four ranks over both leaves (tenant a); j2: two ranks on leaf1 (tenant b)
for r in 0 1 2 3; do
	api "$TOKEN_A" /v1/jobs/j1/ranks -d "{\"rank\": $r, \"size\": 4, \"ip\": \"10.0.0.$((r + 1))\"}" >/dev/null
done
for r in 0 1; do
	api "$TOKEN_B" /v1/jobs/j2/ranks -d "{\"rank\": $r, \"size\": 2, \"ip\": \"10.0.0.$((r + 1))\"}" >/dev/null
done
check "both jobs ready: every switch applied its groups" \
	wait_for '[j["state"] for j in d["jobs"]] == ["ready", "ready"] and all(s["applied"] == s["version"] for s in d["switches"])'

# the page and its script, as any client gets them
hdr=$(get -D - -o "$WORK/page.html" "$URL/")
check "GET / is the page, with a content security policy" \
	bash -c "grep -qi '^content-type: text/html' <<<'$hdr' && grep -qi \"^content-security-policy: default-src 'none'; script-src 'self'\" <<<\"\$0\"" "$hdr"
expect_eq "GET /ui/topology.js" "$(get -o /dev/null -w '%{http_code} %{content_type}' "$URL/ui/topology.js")" \
	"200 text/javascript; charset=utf-8"
expect_eq "GET /v1/topology without a token" "$(get -o /dev/null -w '%{http_code}' "$URL/v1/topology")" 401

# browse NAME FRAGMENT [TOKEN]: chromium loads the page (3 s of its virtual
# time, polls included); its DOM in $WORK/NAME.dom as ui_dom.py prints it,
# its log in $WORK/NAME.log, a screenshot in $WORK/NAME.png
browse() {
	local name=$1 frag=$2 flags
	flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
	       --user-data-dir="$WORK/chrome" --enable-logging=stderr --log-level=0
	       --window-size=1280,760 --virtual-time-budget=3000
	       --ignore-certificate-errors-spki-list="$SPKI")
	timeout 60 "$BROWSER" "${flags[@]}" --dump-dom "$URL/#$frag" > "$WORK/$name.html" \
		2> "$WORK/$name.log" || return 1
	/usr/bin/python3 "$SRC/tests/func/ui_dom.py" "$WORK/$name.html" > "$WORK/$name.dom" || return 1
	timeout 60 "$BROWSER" "${flags[@]}" --screenshot="$WORK/$name.png" "$URL/#$frag" \
		>/dev/null 2>> "$WORK/$name.log"
}
# cls NAME ID: the element's classes; txt NAME ID: its text
cls() { awk -F'\t' -v id="$2" '$1 == id { print $2 }' "$WORK/$1.dom"; }
txt() { awk -F'\t' -v id="$2" '$1 == id { print $3 }' "$WORK/$1.dom"; }
body() { awk -F'\t' '$1 == "body" { print $2 }' "$WORK/$1.dom"; }
# console messages and page errors: none
clean() {
	expect_eq "$1: page errors (body data-errors), page ready" "$(body "$1")" "data-errors=0 data-ready=1"
	expect_eq "$1: console messages" "$(grep -c 'CONSOLE' "$WORK/$1.log")" 0
}

check "chromium renders the view with the admin token and j1 selected" \
	browse admin "token=$ADMIN&job=j1"
clean admin
expect_eq "admin: the summary" "$(txt admin summary)" "3 switches (0 down), 4 hosts, 2 jobs"
for s in spine leaf1 leaf2; do
	expect_eq "admin: switch $s up and in j1's tree" "$(cls admin "sw-$s")" \
		"node switch $([ $s = spine ] && echo spine || echo leaf) up in-tree"
done
# the load: j1 has a group of 16 slots on all three, j2 one on leaf1
expect_eq "admin: spine's load" "$(txt admin sw-spine | grep -o '[0-9]* groups*, [0-9]* slots$')" "1 group, 16 slots"
expect_eq "admin: leaf1's load" "$(txt admin sw-leaf1 | grep -o '[0-9]* groups*, [0-9]* slots$')" "2 groups, 32 slots"
for h in 1 2 3 4; do
	expect_eq "admin: host h$h holds j1's rank $((h - 1))" \
		"$(cls admin "host-h$h")|$(txt admin "host-h$h" | grep -o 'rank [0-9,]*')" \
		"node host in-tree|rank $((h - 1))"
done
intree=$(grep -c $'^link-[^\t]*\tlink in-tree' "$WORK/admin.dom")
expect_eq "admin: links of j1's tree highlighted (4 host links, 2 leaf-spine)" "$intree" 6
expect_eq "admin: the job list" "$(cls admin job-j1)|$(txt admin job-j1)|$(txt admin job-j2)" \
	"job ready selected|j1 a 4/4 ready|j2 b 2/2 ready"
expect_eq "admin: no switch down, no job failed in the failures" \
	"$(txt admin failures | grep -c 'switch down\|job failed')" 0
cp "$WORK/admin.png" "$ART/topology-view.png"
check "admin: screenshot saved ($ART/topology-view.png)" test -s "$ART/topology-view.png"

check "chromium renders the view with j2 selected" browse j2 "token=$ADMIN&job=j2"
clean j2
expect_eq "j2: leaf1 in the tree, the spine and leaf2 not" \
	"$(cls j2 sw-leaf1)|$(cls j2 sw-spine)|$(cls j2 sw-leaf2)" \
	"node switch leaf up in-tree|node switch spine up|node switch leaf up"
expect_eq "j2: h1 and h2 hold its ranks, h3 not" \
	"$(txt j2 host-h1 | grep -o 'rank [0-9]*')|$(txt j2 host-h2 | grep -o 'rank [0-9]*')|$(cls j2 host-h3)" \
	"rank 0|rank 1|node host"

check "chromium renders the view with tenant b's token" browse tenant "token=$TOKEN_B"
clean tenant
expect_eq "tenant b: its job only, selected by default" \
	"$(txt tenant summary)|$(cls tenant job-j2)|$(cls tenant job-j1)" \
	"3 switches (0 down), 4 hosts, 1 job|job ready selected|"

check "chromium with a wrong token is asked for one" browse wrong "token=not-the-token-0123456789"
expect_eq "wrong token: the status line" "$(txt wrong status)" "the manager refused the token"

# leaf2 dies: down in red; no tree avoids it, so j1 moves to the host ring
# (its tree gone, its state in amber), the failures listed
"$FAB" kill leaf2 >/dev/null
check "the manager sees leaf2 down" \
	wait_for '[s["state"] for s in d["switches"]] == ["up", "up", "down"]'
check "chromium renders the failure" browse failure "token=$ADMIN&job=j1"
clean failure
expect_eq "failure: the summary" "$(txt failure summary)" "3 switches (1 down), 4 hosts, 2 jobs"
expect_eq "failure: leaf2 down, in no tree" "$(cls failure sw-leaf2)" "node switch leaf down"
expect_eq "failure: j1 on the host ring, j2 still ready" \
	"$(cls failure job-j1)|$(cls failure job-j2)" "job ring selected|job ready"
expect_eq "failure: leaf2's links down, j1 has no tree" \
	"$(cls failure link-h4-leaf2)|$(cls failure link-h1-leaf1)" "link down|link"
check "failure: the failures name leaf2 and j1 ($(txt failure failures | head -c 160))" \
	bash -c "grep -q 'leaf2: switch down: no heartbeat' <<<\"\$0\" && grep -q 'j1: job on the host ring (plan 2): switch leaf2 is down' <<<\"\$0\"" \
	"$(txt failure failures)"
cp "$WORK/failure.png" "$ART/topology-view-failure.png"
check "failure: screenshot saved ($ART/topology-view-failure.png)" test -s "$ART/topology-view-failure.png"

finish
