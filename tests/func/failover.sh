#!/usr/bin/env bash
# Failures and refusals on the routed lab (deploy/fabric up --routed: 4
# hosts on 2 leaf routers, 2 spine routers, aggregation nodes leaf1 leaf2
# spine1 spine2) with inca-manager's plans.
#
# Chaos: a job of 1000 allreduces (4 ranks, exact results checked) while
# the test kills the spine node of its tree, then leaf1, then the manager
# (kill -9), restarting each. No rank hangs or errors; after the spine's
# death the job goes on in-network on the other spine; with leaf1 dead it
# runs on the host ring, and back in-network once leaf1 is back; the
# manager's death changes nothing. Prints the time from each failure to
# every rank in-network again.
#
# A rank away (its collectives in flight, no call for 9 s) while its job
# goes to the ring and back to a tree: it applies both plans' cuts in
# order when it returns; results exact at every rank.
#
# Refusal: tenant b may hold 16 slots per switch. A job over that quota
# runs on the host ring with a warning and exact results, and moves
# in-network when the job holding the slots ends.
# Usage: failover.sh BUILD_DIR
BUILD=$(cd "${1:?usage: failover.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root

FAB="$SRC/deploy/fabric"
export INCA_FABRIC=incafo
MGR="$BUILD/control/inca-manager"
CTL="$BUILD/control/incactl"
CHECK="$BUILD/tests/tools/inca-check"
PORT=18476
WORK=$(mktemp -d /tmp/inca-failover.XXXXXX)
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
  "tenants": [ { "name": "a", "token": "$TOKEN_A" },
               { "name": "b", "token": "$TOKEN_B", "max_slots_per_switch": 16 } ]
}
JSON
IP=(x 10.1.1.1 10.1.1.2 10.1.2.3 10.1.2.4)

now() { date +%s.%N | cut -c1-14; }

mgr_start || { not_ok "manager start"; finish; exit 1; }
"$FAB" up --routed --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	>/dev/null || { not_ok "routed fabric up"; finish; exit 1; }
check "the four aggregation nodes registered" mgr_wait_applied

# rank JOB TOKEN HOST RANK SIZE ARGS...: one libinca rank in the background
rank() {
	local id=$1 token=$2 h=$3 r=$4 n=$5
	shift 5
	timeout 300 "$FAB" exec "$h" env INCA_MANAGER="http://192.168.77.254:$PORT" \
		INCA_MANAGER_TOKEN="$token" INCA_JOB="$id" INCA_RANK="$r" INCA_SIZE="$n" \
		INCA_LOCAL_IP="${IP[$h]}" INCA_RING_IP="192.168.77.$h" INCA_TRANSPORT=udp \
		INCA_LOG=info "${RANK_ENV[@]}" "$CHECK" "$@" > "$WORK/$id.r$r" 2>&1
}
RANK_ENV=()
# job_done LABEL JOB "N M cases, 0 wrong" PID...: every rank of JOB
# completed (its exit status) with every result exact (N ranks said M
# cases, 0 wrong); when one did not, its errors
job_done() {
	local label=$1 job=$2 want=$3 rc=0 p f
	shift 3
	for p in "$@"; do wait "$p" || rc=1; done
	expect_eq "$label: every rank completed (exit status)" "$rc" 0
	expect_eq "$label: every result exact, at every rank" \
		"$(grep -ho "[0-9]* cases, [0-9]* wrong" "$WORK/$job".r* | sort | uniq -c | sed 's/^ *//')" \
		"$want"
	[ "$rc" = 0 ] || for f in "$WORK/$job".r*; do
		grep -i "error\|fail\|disagree" "$f" | head -3 | sed "s|^|    $(basename "$f"): |"
	done
}
job_state() {
	ctl --json job "$1" 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null
}
# in_network JOB AFTER: seconds from AFTER until the last rank of JOB logged
# its move in-network after AFTER ("" while some rank has not)
in_network() {
	/usr/bin/python3 - "$WORK" "$1" "$2" <<'PY'
import glob, re, sys
work, job, after = sys.argv[1], sys.argv[2], float(sys.argv[3])
last = []
for f in sorted(glob.glob("%s/%s.r*" % (work, job))):
    t = [float(m) for m in re.findall(r"in-network on group \d+ .* at ([0-9.]+)", open(f).read())]
    t = [x for x in t if x > after]
    if not t:
        sys.exit(0)
    last.append(min(t))
print("%.2f" % (max(last) - after))
PY
}
wait_in_network() {   # wait_in_network JOB AFTER: up to 30 s
	local s
	for _ in $(seq 300); do
		s=$(in_network "$1" "$2")
		[ -n "$s" ] && { echo "$s"; return 0; }
		sleep 0.1
	done
	return 1
}
tree_root() {
	ctl --json job "$1" 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["tree"]["switch"])' 2>/dev/null
}

# ---- chaos: 1000 allreduces through three failures ----
pids=()
for h in 1 2 3 4; do
	rank chaos "$TOKEN_A" "$h" $((h - 1)) 4 -d int32 -o sum -n 4096 -r 1000 -s 30000 &
	pids+=($!)
done
root=
for _ in $(seq 100); do root=$(tree_root chaos); [ -n "$root" ] && [ "$(ctl --json job chaos | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = ready ] && break; sleep 0.1; done
check "chaos: in-network on a spine's tree (${root:-none})" bash -c "[[ '$root' == spine[12] ]]"
sleep 4
other=spine1; [ "$root" = spine1 ] && other=spine2
t=$(now)
"$FAB" kill "$root"
if s=$(wait_in_network chaos "$t"); then
	ok "chaos: $root killed: every rank in-network again ($s s after the kill)"
	echo "    failure of $root -> in-network again: $s s"
else
	not_ok "chaos: $root killed: every rank in-network again within 30 s"
fi
expect_eq "chaos: ... on $other" "$(tree_root chaos)" "$other"
"$FAB" start "$root" >/dev/null
sleep 3

t=$(now)
"$FAB" kill leaf1
ring=no
for _ in $(seq 60); do
	[ "$(ctl --json job chaos | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = ring ] && ring=yes && break
	sleep 0.1
done
expect_eq "chaos: leaf1 killed: the job on the host ring (no tree reaches h1, h2)" "$ring" yes
sleep 3
t2=$(now)
"$FAB" start leaf1 >/dev/null
if s=$(wait_in_network chaos "$t2"); then
	s1=$(/usr/bin/python3 -c "print('%.2f' % ($t2 - $t + $s))")
	ok "chaos: leaf1 back: every rank in-network again ($s s after its restart)"
	echo "    failure of leaf1 -> in-network again: $s1 s (leaf1 down for $(/usr/bin/python3 -c "print('%.1f' % ($t2 - $t))") s; $s s from its restart)"
else
	not_ok "chaos: leaf1 back: every rank in-network again within 30 s"
fi
sleep 3

before=$(grep -h "in-network on group" "$WORK"/chaos.r* | wc -l)
kill -9 "$MGR_PID"
wait "$MGR_PID" 2>/dev/null
sleep 2
mgr_start || not_ok "chaos: the manager restarted"
sleep 3
after=$(grep -h "in-network on group" "$WORK"/chaos.r* | wc -l)
expect_eq "chaos: the manager killed and restarted: the job stayed on its tree (moves)" \
	"$((after - before))" 0
job_done "chaos: 1000 collectives" chaos "4 1000 cases, 0 wrong" "${pids[@]}"
grep -ho "[0-9]* fallbacks.*" "$WORK"/chaos.r0 | sed 's/^/    rank 0: /'
check "chaos: the ranks ended in-network (the last plan a tree)" \
	bash -c "grep -h 'plan [0-9]*:' '$WORK'/chaos.r0 | tail -1 | grep -q 'in-network'"

# ---- a rank away while its job goes to the ring and back: rank 3 starts
# its first 4 collectives and makes no call for 9 s; meanwhile leaf1 dies
# (plan 2: the ring, the others run again there from rank 3's first
# collective not completed) and comes back (plan 3: a tree). When rank 3
# returns it must take plan 2's cut before plan 3's: one that skipped it
# kept its 4 collectives in-network (their results came in while it was
# away) and ran its next ones on the ring against the others' replays
# ("the ranks disagree on which collective fell back", a soak's error) ----
mgr_wait_applied
pids=()
for h in 1 2 3 4; do
	rank away "$TOKEN_A" "$h" $((h - 1)) 4 -d int32 -o sum -n 4096 -r 4 -p 4 -A 3:9000000 &
	pids+=($!)
done
for _ in $(seq 100); do grep -q "away for" "$WORK/away.r3" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
"$FAB" kill leaf1
for _ in $(seq 60); do
	[ "$(ctl --json job away | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = ring ] && break
	sleep 0.1
done
"$FAB" start leaf1 >/dev/null
job_done "rank away across ring and back" away "4 16 cases, 0 wrong" "${pids[@]}"
# the case is only a case if plan 3 was cut while rank 3 was away: the
# others took it before rank 3 came back ("away" is rank 3's first line,
# its return the plans it then took)
expect_eq "rank away across ring and back: every rank took plans 2 and 3, in order" \
	"$(for r in 0 1 2 3; do grep -o "rank $r: plan [0-9]*:" "$WORK/away.r$r" | awk '{print $4}' | tr -d ':' | tr '\n' ' '; echo; done | sort | uniq -c | sed 's/^ *//')" \
	"4 2 3 "
grep -h "plan [0-9]*:\|away for" "$WORK"/away.r* | sed 's/^/    /'

# ---- rails: 8 ranks, 2 a host (INCA_HIER=rails: all-reduces of 256 KiB
# and more split between the rails, the rest through the hosts' leaders)
# are two jobs at the manager, jrail (the hosts' leaders) and jrail.rail1
# (local rank 1 of every host), each on a tree of its own, planned as one.
# leaf1 dies: no tree reaches h1 and h2, both rails go to the host ring;
# leaf1 back: both in-network again. Each time every rank of both rails
# moves at the same collective (the manager's one cut, which every rank
# logs), and their acknowledgements are within a few collectives of each
# other: every rail numbers every collective, also those only the leaders
# carry (bcasts, small all-reduces); results exact. ----
mkdir -p /run/inca/bpffs
if mountpoint -q /run/inca/bpffs || mount -t bpf bpf /run/inca/bpffs; then
	mgr_wait_applied
	pids=()
	RANK_ENV=(INCA_HIER=rails INCA_LAYOUT=2,2,2,2)
	r=0
	for h in 1 1 2 2 3 3 4 4; do
		rank jrail "$TOKEN_A" "$h" $r 8 -c allreduce,bcast -d int32,fp32 -o sum -n 70000,1 \
			-r 90 -s 20000 &
		pids+=($!)
		r=$((r + 1))
	done
	RANK_ENV=()
	# both_rails STATE TENTHS: wait up to TENTHS x 0.1 s for both rails
	# in STATE; print their states
	both_rails() {
		for _ in $(seq "$2"); do
			[ "$(job_state jrail)" = "$1" ] && [ "$(job_state jrail.rail1)" = "$1" ] && break
			sleep 0.1
		done
		echo "$(job_state jrail) $(job_state jrail.rail1)"
	}
	expect_eq "rails: both rails in-network, each on a tree of its own" \
		"$(both_rails ready 150)" "ready ready"
	sleep 2
	"$FAB" kill leaf1
	expect_eq "rails: leaf1 killed: both rails on the host ring" "$(both_rails ring 60)" \
		"ring ring"
	sleep 3
	t=$(now)
	"$FAB" start leaf1 >/dev/null
	if s=$(wait_in_network jrail "$t"); then
		ok "rails: leaf1 back: every rank of both rails in-network again ($s s after its restart)"
	else
		not_ok "rails: leaf1 back: every rank of both rails in-network again within 30 s"
	fi
	job_done rails jrail "8 720 cases, 0 wrong" "${pids[@]}"
	# each move: the collective every rank logged, one line per rank; and
	# where each rank acknowledged it (the ranks of a job are within a
	# few collectives of each other when every rail numbers alike; a rail
	# that numbered only what it carries would be far behind)
	for what in "the host ring:host ring" "in-network:tree"; do
		expect_eq "rails: to ${what%%:*}: the 8 ranks of both rails at one collective" \
			"$(grep -ho "plan [0-9]*: ${what%%:*} from collective [0-9]*" "$WORK"/jrail.r* | \
			   awk '{print $NF}' | sort | uniq -c | awk '{print $1}')" 8
		acks=$(grep -ho "plan [0-9]* (${what#*:}[^)]*) acknowledged at collective [0-9]*" \
			"$WORK"/jrail.r* | awk '{print $NF}' | sort -n)
		# a rank whose acknowledgement's answer was cut off retries and
		# may find the cut already made: it logs no acknowledgement, only
		# the retry (seen in CI, 2026-11-29: "acknowledging plan 2: ...
		# interrupted (retrying)", then on the ring at the others' cut)
		plan=$(grep -ho "plan [0-9]* (${what#*:}[^)]*) acknowledged" "$WORK"/jrail.r* |
		       awk '{print $2}' | sort -u | head -n 1)
		retried=0
		for f in "$WORK"/jrail.r*; do
			grep -q "plan [0-9]* (${what#*:}[^)]*) acknowledged at collective" "$f" && continue
			[ -n "$plan" ] && grep -q "acknowledging plan $plan: .*(retrying)" "$f" &&
				retried=$((retried + 1))
		done
		expect_eq "rails: to ${what%%:*}: 8 acknowledgements, at most 4 collectives apart" \
			"$(echo "$acks" | awk -v r="$retried" 'NR == 1 { lo = $1 } { n++; hi = $1 }
				END { print n + r, (hi - lo <= 4) }')" "8 1"
		echo "    acknowledged at: $(echo $acks)"
		[ "$retried" = 0 ] || echo "    and $retried retried, the cut made meanwhile"
	done
	grep -h "plan [0-9]*:" "$WORK"/jrail.r0 "$WORK"/jrail.r1 | sed 's/^/    /'
	grep -E "job jrail" "$WORK/manager.log" | grep "plan" | sed 's/^/    /'
else
	echo "# SKIP: no bpffs at /run/inca/bpffs: the rails case is not run"
fi

# ---- refusal: over the quota, the ring; in-network once the slots free ----
mgr_wait_applied
pids=()
for h in 1 3; do
	rank hold "$TOKEN_B" "$h" $(( (h - 1) / 2 )) 2 -d fp32 -o sum -n 1024 -r 150 -s 30000 &
	pids+=($!)
done
for _ in $(seq 100); do [ "$(ctl --json job hold 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null)" = ready ] && break; sleep 0.1; done
opids=()
t0=$(now)
for h in 2 4; do
	rank over "$TOKEN_B" "$h" $(( (h - 2) / 2 )) 2 -d fp32,int32 -o sum,max -n 1,1024 -r 100 -s 30000 &
	opids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
t=$(now)
expect_eq "refusal: the job holding the slots completed" "$rc" 0
for p in "${opids[@]}"; do wait "$p" || rc=1; done
expect_eq "refusal: the job over the quota completed" "$rc" 0
check "refusal: ... on the host ring first, with a warning saying why" \
	grep -q "job over: on the host ring: quota: tenant b would use 32 of its 16 slots" "$WORK/over.r0"
expect_eq "refusal: ... its results exact" \
	"$(grep -ho "[0-9]* cases, [0-9]* wrong" "$WORK"/over.r* | sort | uniq -c | sed 's/^ *//')" \
	"2 800 cases, 0 wrong"
# from the over job's start: its ranks may log the move before the other
# job's processes have exited and $t was read (the leave frees the slots)
if s=$(in_network over "$t0"); [ -n "$s" ]; then
	ok "refusal: ... in-network once the slots were free ($s s after it started; the" \
		"other job's ranks had exited $(awk -v a="$t" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') s after it started)"
else
	not_ok "refusal: ... in-network once the slots were free"
	grep -E "job (hold|over)|over:|hold:" "$WORK/manager.log" | sed 's/^/    /'
	grep -h "plan [0-9]*:\|in-network on" "$WORK"/over.r* | sed 's/^/    /'
fi
n=$(grep -ho "[0-9]* fallbacks" "$WORK/over.r0" | grep -o "^[0-9]*")
check "refusal: ... some collectives on the ring before ($n)" test "${n:-0}" -gt 0
finish
