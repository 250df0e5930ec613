#!/usr/bin/env bash
# inca-manager on a two-level fabric (2 leaves, a spine, 4 hosts): switches
# register and take their groups from it, jobs get trees, every dtype/op
# exact through libinca in manager mode, with 1% loss, two tenants at once,
# a rank 2 s late under the other leaf taken for no failure, quotas and
# tokens enforced, QPNs and ring ports unique per host address
# across jobs, a few dozen jobs (communicators) of one tenant at once, a leaf
# killed mid-job (ranks fall back, the failure is listed), the manager
# restarted mid-job (groups survive). Prints the time from the last rank's
# registration to every switch programmed, and a rank's time in
# hl_manager_join, as medians over several 4-rank jobs, and what an idle
# ready job costs: CPU of the manager, the ranks and the switches' main
# lcores, and the ranks' requests, over 10 s.
# Usage: manager.sh BUILD_DIR
BUILD=$(cd "${1:?usage: manager.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root

FAB="$SRC/deploy/fabric"
export INCA_FABRIC=incamgr
MGR="$BUILD/control/inca-manager"
CTL="$BUILD/control/incactl"
CHECK="$BUILD/tests/tools/inca-check"
PORT=18473
WORK=$(mktemp -d /tmp/inca-mgr.XXXXXX)
MGR_PID=
cleanup() {
	[ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null && wait "$MGR_PID" 2>/dev/null
	"$FAB" down
	if [ -n "${KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$WORK/admin.token"
TOKEN_A=tenant-a-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
TOKEN_B=tenant-b-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
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
  "tenants": [
    { "name": "a", "token": "$TOKEN_A", "max_slots_per_switch": 2048, "max_jobs": 128 },
    { "name": "b", "token": "$TOKEN_B", "max_slots_per_switch": 16 }
  ]
}
JSON


check "the topology validates" "$MGR" --check --topology "$WORK/topo.json"
# a bad topology names the field
sed 's/"leaf": "leaf2" }, { "name": "h4"/"leaf": "spine" }, { "name": "h4"/' "$WORK/topo.json" > "$WORK/bad.json"
msg=$("$MGR" --check --topology "$WORK/bad.json" 2>&1)
check "a bad topology is refused with the field named ($msg)" \
	bash -c "echo '$msg' | grep -q 'hosts\[2\].leaf: expected the name of a leaf switch'"

mgr_start || { not_ok "manager start"; finish; exit 1; }
"$FAB" up --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	>/dev/null || { not_ok "fabric up"; finish; exit 1; }
sleep 0.5
up=$(ctl --json switches | /usr/bin/python3 -c 'import json,sys; print(" ".join(s["name"]+"="+s["state"] for s in json.load(sys.stdin)))')
expect_eq "the three switches registered" "$up" "spine=up leaf1=up leaf2=up"

# job JOB TOKEN RANKHOSTS ARGS...: libinca ranks in manager mode on the given
# hosts (rank order), inca-check ARGS; output in $WORK/JOB.rR
job() {
	local id=$1 token=$2 hosts=$3 n r=0 h pids=() rc=0
	shift 3
	n=$(echo "$hosts" | wc -w)
	for h in $hosts; do
		timeout 300 "$FAB" exec "$h" env INCA_MANAGER="http://192.168.77.254:$PORT" \
			INCA_MANAGER_TOKEN="$token" INCA_JOB="$id" INCA_RANK=$r INCA_SIZE="$n" \
			INCA_LOCAL_IP="10.0.0.$h" INCA_RING_IP="${RING_NET:-192.168.77}.$h" INCA_TRANSPORT=udp INCA_LOG=warn "${JOB_ENV[@]}" \
			"$CHECK" "$@" > "$WORK/$id.r$r" 2>&1 &
		pids+=($!)
		r=$((r + 1))
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	if [ $rc -ne 0 ]; then
		for f in "$WORK/$id".r*; do sed "s|^|    $(basename "$f"): |" "$f" | tail -3; done
	fi
	return $rc
}
fallbacks() {
	local n
	n=$(grep -ho "[0-9]* fallbacks" "$WORK/$1".r* | awk '{s += $1} END {print s + 0}')
	# say why when it happened
	if [ "$n" != 0 ]; then
		grep -h "warning\|error" "$WORK/$1".r* | head -4 | sed 's/^/    why: /' >&2
		fabric_diag "$FAB"
	fi
	echo "$n"
}
JOB_ENV=()

job j1 "$TOKEN_A" "1 2 3 4" -d all -o all -n 1,257,4097 -r 3 & J1=$!
# while it runs: its tree, and how long the manager took to set it up
for _ in $(seq 300); do
	[ "$(ctl --json job j1 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null)" = ready ] && break
	sleep 0.02
done
tree=$(ctl tree j1 2>&1)
ms=$(ctl --json job j1 | /usr/bin/python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin).get("setup_ms", -1))' 2>/dev/null)
check "job j1 over both leaves: every dtype and op, 1 to 4097 elements" wait $J1
expect_eq "j1: ... all through the switches (fallbacks)" "$(fallbacks j1)" 0
echo "$tree" | sed 's/^/    /'
# kept inputs (docs/hostlib.md, "Plans"): of 4 back-to-back all-reduces of
# 400,000 bytes (about 400 packets each, more than a window), every rank holds
# only the last one's: the earlier ones are complete at every rank
job jkeep "$TOKEN_A" "1 2 3 4" -d fp32 -o sum -n 100000 -r 4 ||
	not_ok "job jkeep: 4 all-reduces of 400,000 bytes"
expect_eq "jkeep: every rank keeps one input for a replay, the last one's (inputs, bytes)" \
	"$(grep -ho '[0-9]* kept inputs ([0-9]* bytes)' "$WORK"/jkeep.r* | sort | uniq -c | awk '{print $1, $2, $5}')" \
	"4 1 (400000"
check "incactl draws j1's tree: spine over leaf1 and leaf2" \
	bash -c "echo '$tree' | grep -q '^spine qpn' && echo '$tree' | grep -q '── leaf1 qpn .*fan-in 2' && echo '$tree' | grep -q '── leaf2 qpn .*fan-in 2'"
echo "    group creation (last rank registered -> all switches programmed): $ms ms"
# the switches learn of a job's end at once too (their heartbeat is held
# until their group set changes)
applied_groups() {
	ctl --json switches | /usr/bin/python3 -c 'import json,sys; print(sum(s["counters"]["groups"] for s in json.load(sys.stdin)))'
}
gone=no
for _ in $(seq 100); do
	[ "$(ctl --json groups | /usr/bin/python3 -c 'import json,sys; print(sum(len(v) for v in json.load(sys.stdin).values()))')" = 0 ] &&
		mgr_wait_applied && gone=yes && break
	sleep 0.02
done
expect_eq "j1 left: its groups are gone from the switches" "$gone" yes

# creation time, medians over 7 jobs of 4 ranks over both leaves: from the
# last rank's registration to every switch applied (the manager's log), and
# each rank's time in hl_manager_join (libinca's log)
JOB_ENV=(INCA_LOG=info)
for i in $(seq 7); do
	job "jt$i" "$TOKEN_A" "1 2 3 4" -d fp32 -o sum -n 1 || not_ok "timing job jt$i"
done
JOB_ENV=()
median() { /usr/bin/python3 -c 'import sys, statistics as s; v = [float(x) for x in sys.stdin.read().split()]; print("%.1f ms (median of %d; min %.1f, max %.1f)" % (s.median(v), len(v), min(v), max(v)) if v else "none")'; }
echo "    group creation, last rank registered -> all switches applied: $(grep -ho 'job jt[0-9]* ready: .*, [0-9.]* ms after' "$WORK/manager.log" | grep -o '[0-9.]* ms after' | grep -o '^[0-9.]*' | median)"
echo "    a rank's time in hl_manager_join (4-rank jobs): $(grep -ho 'joined job jt[0-9]* in [0-9.]* ms' "$WORK"/jt*.r* | grep -o 'in [0-9.]*' | grep -o '[0-9.]*$' | median)"
# the last rank to register waits least: per job, the shortest join
echo "    ... the last rank's (per job the shortest): $(grep -ho 'joined job jt[0-9]* in [0-9.]* ms' "$WORK"/jt*.r* |
	/usr/bin/python3 -c 'import sys, re, collections as c; d = c.defaultdict(list)
for l in sys.stdin:
    j, t = re.search(r"job (\S+) in ([0-9.]+)", l).groups(); d[j].append(float(t))
print(" ".join(str(min(v)) for v in d.values()))' | median)"
check "the timing jobs are gone from the switches" mgr_wait_applied

# QPNs and ring ports: unique per host address across jobs, chosen by the
# manager unless the rank asks; a QPN taken on that address is refused
reg() {  # reg JOB RANK SIZE IP [EXTRA]: the answer's "qpn ring_port", or the HTTP status
	curl -s -w ' %{http_code}' -X POST "http://127.0.0.1:$PORT/v1/jobs/$1/ranks" \
		-H "Authorization: Bearer $TOKEN_A" \
		-d "{\"rank\": $2, \"size\": $3, \"ip\": \"$4\"${5:+, $5}}" |
		/usr/bin/python3 -c 'import json,sys; t = sys.stdin.read(); b, c = t.rsplit(" ", 1); d = json.loads(b); print("%s %s" % (d["qpn"], d["ring_port"]) if c == "200" else c)'
}
a0=$(reg jq1 0 2 10.0.0.1); a1=$(reg jq1 1 2 10.0.0.1); b0=$(reg jq2 0 1 10.0.0.1)
expect_eq "two jobs, three ranks on 10.0.0.1: distinct QPNs and ring ports" "$a0, $a1, $b0" \
	"17 18515, 18 18516, 19 18517"
expect_eq "a QPN another job uses on that address: 409" "$(reg jq3 0 1 10.0.0.1 '"qpn": 18')" 409
desc=$(curl -s "http://127.0.0.1:$PORT/v1/jobs/jq1/ranks/1?wait_ms=3000" -H "Authorization: Bearer $TOKEN_A" |
	/usr/bin/python3 -c 'import json,sys; print(" ".join("%s:%s" % (m["qpn"], m["ring_port"]) for m in json.load(sys.stdin)["group"]["members"]))')
expect_eq "jq1's group description carries each member's QPN and ring port" "$desc" "17:18515 18:18516"
ctl delete jq1 >/dev/null; ctl delete jq2 >/dev/null
expect_eq "freed on deletion: the next rank gets 17 again" "$(reg jq4 0 1 10.0.0.1)" "17 18515"
ctl delete jq4 >/dev/null

# a few dozen communicators of one tenant at once (an MPI job's dups and
# splits): 40 jobs, every one on both leaves and the spine
all=yes
for i in $(seq 40); do
	r=$(reg "jm$i" 0 2 10.0.0.2) && r2=$(reg "jm$i" 1 2 10.0.0.3) || all=no
	case "$r $r2" in *409*|*400*|*500*) all="no ($r $r2)" ;; esac
done
expect_eq "40 jobs of tenant a at once: all accepted" "$all" yes
check "... and programmed on every switch" mgr_wait_applied
expect_eq "the switches hold the 40 jobs' groups" "$(applied_groups)" 120
for i in $(seq 40); do ctl delete "jm$i" >/dev/null; done
check "... and deleted from them" mgr_wait_applied
expect_eq "the switches hold no group" "$(applied_groups)" 0

# a single-leaf job is one group on that leaf
check "job j2 on leaf2 only (hosts 3, 4): fp32/int32 sum" job j2 "$TOKEN_A" "3 4" -d fp32,int32 -o sum -n 1000
expect_eq "j2: through the switch" "$(fallbacks j2)" 0

# two tenants at once, sharing the spine
job ja "$TOKEN_A" "1 3" -d fp32,bf16 -o sum,max -n 1,5000 -r 3 & A=$!
job jb "$TOKEN_B" "2 4" -d int32,fp64 -o sum,min -n 1,5000 -r 3 & B=$!
check "tenant a's job (hosts 1, 3) concurrently with ..." wait $A
check "... tenant b's job (hosts 2, 4), both exact" wait $B
expect_eq "ja and jb: through the switches" "$(( $(fallbacks ja) + $(fallbacks jb) ))" 0

# rails (INCA_HIER=rails), 8 ranks 2 per host: the hosts' leaders are job
# jrails's ranks, local rank 1 of every host job jrails.rail1's, each all-reduce
# split between them; both local ranks on the host's address (the udp
# transport's steering: root and a bpffs)
mkdir -p /run/inca/bpffs
if mountpoint -q /run/inca/bpffs || mount -t bpf bpf /run/inca/bpffs; then
	JOB_ENV=(INCA_HIER=rails INCA_LAYOUT=2,2,2,2 INCA_RAIL_MIN_BYTES=0)
	check "rails job jrails (8 ranks, 2 per host, two jobs at the manager): all-reduces exact" \
		job jrails "$TOKEN_A" "1 1 2 2 3 3 4 4" -c allreduce -d fp32,bf16,int64 -o sum,max \
		-n 1,257,70000 -r 2
	JOB_ENV=()
	expect_eq "jrails: through the switches" "$(fallbacks jrails)" 0
	expect_eq "jrails: ranks that sent no packet (each carries its share)" \
		"$(grep -L 'wrong; [1-9][0-9]* packets' "$WORK"/jrails.r* | wc -l)" 0
	expect_eq "jrails: the manager's log has both jobs" \
		"$(grep -ho 'job jrails\(\.rail1\)\?' "$WORK/manager.log" | sort -u | tr '\n' ' ')" \
		"job jrails job jrails.rail1 "
else
	echo "# SKIP: no bpffs at /run/inca/bpffs: the rails case is not run"
fi

# a late rank is no failure in manager mode either (docs/protocol.md 3.2,
# "Waiting"): rank 3, under leaf2, starts each of 20 all-reduces 2 s after
# the others (twice the default switch timeout); the spine's WAITs reach
# the ranks under leaf1 through it: no stall report, no plan change, no
# fallback
stall_reports() { ctl metrics | awk '$1 == "inca_manager_stall_reports_total" {print $2}'; }
s0=$(stall_reports)
check "job jlate: rank 3 starts each of 20 all-reduces 2 s late, exact" \
	job jlate "$TOKEN_A" "1 2 3 4" -d fp32 -o sum -n 1000 -r 20 -L 3:2000000
expect_eq "jlate: stall reports the manager got" "$(( $(stall_reports) - s0 ))" 0
expect_eq "jlate: plan changes at each rank" \
	"$(grep -ho '[0-9]* plan changes' "$WORK"/jlate.r* | awk '{print $1}' | tr '\n' ' ')" "0 0 0 0 "
expect_eq "jlate: fallbacks" "$(fallbacks jlate)" 0
waits=$(grep -ho '[0-9]* switch waits' "$WORK"/jlate.r0 "$WORK"/jlate.r1 | awk '{print $1}' | tr '\n' ' ')
check "jlate: ranks 0 and 1 heard WAITs through leaf1 ($waits)" \
	bash -c "set -- $waits; [ \"\${1:-0}\" -ge 20 ] && [ \"\${2:-0}\" -ge 20 ]"

# quota: tenant b may use 16 slots per switch; a 32-slot window is refused
JOB_ENV=(INCA_WINDOW=32 INCA_TIMEOUT_MS=5000)
job jq "$TOKEN_B" "2 4" -d fp32 -o sum -n 10 >/dev/null 2>&1
check "tenant b over its quota: on the host ring with a warning saying why" \
	grep -q "job jq: on the host ring: quota: tenant b would use 32 of its 16 slots" "$WORK/jq.r0"
check "... and its results exact" grep -q " 0 wrong;" "$WORK/jq.r0"
JOB_ENV=()
ctl delete jq >/dev/null 2>&1
# tokens
"$CTL" --manager "http://127.0.0.1:$PORT" switches >/dev/null 2>&1
expect_eq "incactl without a token: exit 4" $? 4
INCA_MANAGER_TOKEN=not-the-right-token-at-all "$CTL" --manager "http://127.0.0.1:$PORT" jobs >/dev/null 2>&1
expect_eq "incactl with a wrong token: exit 4" $? 4
"$CTL" --manager "http://127.0.0.1:1" --token-file "$WORK/admin.token" jobs >/dev/null 2>&1
expect_eq "incactl, manager unreachable: exit 3" $? 3
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/v1/switches/leaf1/heartbeat" \
	-H "Authorization: Bearer $TOKEN_A" -d '{"applied": 0}')
expect_eq "a tenant token cannot act as a switch" "$code" 403
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/jobs")
expect_eq "the API refuses a request without a token" "$code" 401

# 1% loss on every link of the fabric
"$FAB" up --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	--impair "loss 1%" >/dev/null || { not_ok "fabric up impaired"; finish; exit 1; }
mgr_wait_applied
JOB_ENV=(INCA_SWITCH_TIMEOUT_MS=5000)
check "job jl, 1% loss on every link: every dtype and op" \
	job jl "$TOKEN_A" "1 2 3 4" -d all -o all -n 1,4097
expect_eq "jl: through the switches (fallbacks)" "$(fallbacks jl)" 0
JOB_ENV=()

# a leaf killed mid-job: ranks fall back to the ring, results right
"$FAB" up --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	>/dev/null || { not_ok "fabric up"; finish; exit 1; }
mgr_wait_applied
JOB_ENV=(INCA_SWITCH_TIMEOUT_MS=500 INCA_TIMEOUT_MS=120000)
job jk "$TOKEN_A" "1 2 3 4" -d fp32,int64 -o sum -n 2000000 -r 10 & K=$!
for _ in $(seq 200); do
	[ "$(ctl --json jobs 2>/dev/null | grep -c '"ready"')" -ge 1 ] && break
	sleep 0.05
done
sleep 1
"$FAB" kill leaf1
check "leaf1 killed mid-job: the job completes, results right" wait $K
check "jk: the ranks fell back to the ring ($(fallbacks jk) calls)" test "$(fallbacks jk)" -ge 4
sleep 1.5
fail=$(ctl failures)
echo "$fail" | sed 's/^/    /'
check "incactl failures names leaf1 as down" bash -c "echo '$fail' | grep -q 'leaf1 .*switch down: no heartbeat'"
check "incactl failures names jk on the host ring because of leaf1" \
	bash -c "echo '$fail' | grep -q 'jk .*job on the host ring (plan 2): switch leaf1 is down'"
st=$(ctl --json switches | /usr/bin/python3 -c 'import json,sys; print([s["state"] for s in json.load(sys.stdin) if s["name"]=="leaf1"][0])')
expect_eq "incactl switches: leaf1 down" "$st" down
ctl delete jk >/dev/null 2>&1
"$FAB" start leaf1
JOB_ENV=()
check "leaf1 back: every switch up and programmed" mgr_wait_applied

# the tree dies with the ring's network: the job's ring runs over the
# switches' network (RING_NET 10.0.0), and leaf1 is killed while rank 3 is
# away with a collective in flight that the others completed in-network
# (its contributions sent, its results not taken: -E).
# The cut runs them again on the ring (replays at ranks 0-2), which cannot
# work: every rank's call fails with the reason, within the call's
# deadline, and no call returns as if it had its result. Before, ranks 0-2
# returned their next collectives with success and their buffers not
# written (an MPI job got wrong values this way), and every later call
# tried the cut again, 5 s each.
RING_NET=10.0.0
JOB_ENV=(INCA_SWITCH_TIMEOUT_MS=3000 INCA_TIMEOUT_MS=10000)
job jrn "$TOKEN_A" "1 2 3 4" -d fp32 -o sum -n 1000 -r 50 -A 3:4000000 -E \
	>/dev/null 2>&1 & R=$!
for _ in $(seq 200); do
	[ "$(ctl --json job jrn 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null)" = ready ] && break
	sleep 0.05
done
sleep 1
t0=$(date +%s)
"$FAB" kill leaf1
wait $R
took=$(( $(date +%s) - t0 ))
RING_NET=
JOB_ENV=()
expect_eq "jrn: no rank has a wrong result" \
	"$(grep -c 'elements wrong' "$WORK"/jrn.r* | awk -F: '{print $2}' | tr '\n' ' ')" "0 0 0 0 "
expect_eq "jrn: every rank's call failed, saying the collectives could not run again on the ring" \
	"$(grep -c 'inca-check: rank [0-3]: allreduce .*could not run again on the host ring' "$WORK"/jrn.r* | awk -F: '{print $2}' | tr '\n' ' ')" "1 1 1 1 "
check "jrn: the job ended within 30 s of the kill ($took s)" test "$took" -le 30
grep -h "inca-check: rank [0-3]: allreduce" "$WORK"/jrn.r* | cut -c1-200 | sed 's/^/    /'
ctl delete jrn >/dev/null 2>&1
"$FAB" start leaf1
check "leaf1 back again: every switch up and programmed" mgr_wait_applied

# a link down mid-job: leaf1's uplink cut at the spine's end. leaf1 still
# heartbeats, and reports the spine behind a port without carrier; with one
# spine there is no other tree: the job goes to the ring, and back
# in-network when the link is mended
JOB_ENV=(INCA_SWITCH_TIMEOUT_MS=3000 INCA_TIMEOUT_MS=120000)
job jd "$TOKEN_A" "1 2 3 4" -d fp32 -o sum -n 100000 -r 1000 & D=$!
jd_state() {
	ctl --json jobs 2>/dev/null | /usr/bin/python3 -c 'import json,sys
print(" ".join(j["state"] for j in json.load(sys.stdin) if j["id"] == "jd"))'
}
# until: wait up to 10 s for jd's state to be $1; the seconds it took
until_state() {
	local t0 i
	t0=$(date +%s.%N)
	for i in $(seq 200); do
		[ "$(jd_state)" = "$1" ] && { awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }'; return 0; }
		sleep 0.05
	done
	return 1
}
until_state ready >/dev/null
sleep 1
"$FAB" link leaf1 down
if t_ring=$(until_state ring); then
	ok "link leaf1-spine down: jd on the host ring ${t_ring} s later"
else
	not_ok "link leaf1-spine down: jd on the host ring (state $(jd_state))"
fi
sleep 1
"$FAB" link leaf1 up
if t_back=$(until_state ready); then
	ok "link mended: jd in-network again ${t_back} s later"
else
	not_ok "link mended: jd in-network again (state $(jd_state))"
fi
check "jd: 1000 all-reduces exact across the link's failure" wait $D
changes=$(grep -ho "[0-9]* plan changes" "$WORK"/jd.r* | awk '{print $1}' | sort -u | tr '\n' ' ')
check "jd: every rank took both plans, the ring and the tree again ($changes)" \
	test "$changes" = "2 "
fail=$(ctl failures)
check "incactl failures: leaf1 reported its port towards the spine down" \
	bash -c "echo '$fail' | grep -q 'link leaf1 - spine down: leaf1 reports its port towards spine down'"
check "incactl failures: jd on the ring because of that link" \
	bash -c "echo '$fail' | grep -q 'jd .*job on the host ring (plan 2): no spine can take the group: the link leaf1 - spine is down'"
check "incactl failures: the link back" \
	bash -c "echo '$fail' | grep -q 'link leaf1 - spine back'"
JOB_ENV=()

# idle means idle: a ready 4-rank job that runs no collective for 10 s
# (one all-reduce, then inca-check sleeps); CPU from /proc (clock ticks of
# utime + stime), the ranks' requests from the manager's counter
ticks() { awk '{s += $14 + $15} END {print s + 0}' "$@" 2>/dev/null; }
job ji "$TOKEN_A" "1 2 3 4" -d fp32 -o sum -n 1 -s 13000000 & I=$!
for _ in $(seq 200); do
	[ "$(ctl --json job ji 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null)" = ready ] && break
	sleep 0.05
done
sleep 2   # its one all-reduce done
RANKS=$(pgrep -x inca-check | tr '\n' ' ')
SWMAIN=$(for p in $(pgrep -x inca-switch); do echo "/proc/$p/task/$p/stat"; done)
hz=$(getconf CLK_TCK)
polls0=$(ctl metrics | awk '$1 == "inca_manager_rank_polls_total" {print $2}')
m0=$(ticks "/proc/$MGR_PID/stat"); r0=$(ticks $(for p in $RANKS; do echo /proc/$p/stat; done))
s0=$(ticks $SWMAIN)
sleep 10
m1=$(ticks "/proc/$MGR_PID/stat"); r1=$(ticks $(for p in $RANKS; do echo /proc/$p/stat; done))
s1=$(ticks $SWMAIN)
polls1=$(ctl metrics | awk '$1 == "inca_manager_rank_polls_total" {print $2}')
expect_eq "idle job: its 4 ranks found" "$(echo $RANKS | wc -w)" 4
pct() { awk -v t="$1" -v hz="$hz" 'BEGIN {printf "%.2f", t / hz / 10 * 100}'; }
echo "    idle 10 s: manager $(pct $((m1 - m0)))% of a core, 4 ranks $(pct $((r1 - r0)))%," \
	"the switches' main lcores $(pct $((s1 - s0)))% (3 switches), rank polls $((polls1 - polls0))"
check "idle job: manager and ranks below 2% of one core over 10 s" \
	test $(( (m1 - m0) + (r1 - r0) )) -lt $((hz * 10 * 2 / 100))
check "idle job: the ranks asked the manager at most once each in 10 s ($((polls1 - polls0)))" \
	test $((polls1 - polls0)) -le 4
check "idle job: the switches' main lcores below 2% of a core each" \
	test $((s1 - s0)) -lt $((hz * 10 * 2 * 3 / 100))
check "idle job: done, exact" wait $I

# the manager restarted mid-job: the groups survive
JOB_ENV=(INCA_SWITCH_TIMEOUT_MS=3000 INCA_TIMEOUT_MS=120000)
job jr "$TOKEN_A" "1 2 3 4" -d fp32 -o sum -n 1000000 -r 40 & R=$!
for _ in $(seq 200); do
	[ "$(ctl --json jobs 2>/dev/null | grep -c '"ready"')" -ge 1 ] && break
	sleep 0.05
done
g_before=$(ctl --json groups | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sorted((k, g["id"], g["qpn"]) for k, v in d.items() for g in v))')
kill "$MGR_PID"; wait "$MGR_PID" 2>/dev/null
sleep 0.5
mgr_start || not_ok "manager restart"
g_after=$(ctl --json groups | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sorted((k, g["id"], g["qpn"]) for k, v in d.items() for g in v))')
check "manager restarted mid-job: the job completes, results right" wait $R
expect_eq "jr: through the switches, no fallback" "$(fallbacks jr)" 0
expect_eq "the manager serves the same groups after its restart" "$g_after" "$g_before"
check "jr's groups were on all three switches" test "$(echo "$g_before" | grep -o "'leaf\|'spine" | wc -l)" -eq 3
check "Prometheus metrics are served" bash -c "ctl() { '$CTL' --manager http://127.0.0.1:$PORT --token-file '$WORK/admin.token' \"\$@\"; }; ctl metrics | grep -q '^inca_manager_switch_up{switch=\"leaf1\"} 1'"
# on any failure, what the manager saw: its failure log's end
if [ "$FAILED" != 0 ]; then
	echo "    the manager's failure log, the last 30 entries:"
	ctl failures 2>&1 | tail -30 | sed 's/^/    /'
fi
finish
