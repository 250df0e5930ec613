# Helpers for the functional tests (bash): TAP-like output, the testbed,
# telemetry queries. Source it; set BUILD first.
set -u
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TB="$SRC/deploy/testbed"
PKT="$BUILD/tests/tools/inca-pkt"
export INCA_TESTBED=${INCA_TESTBED:-incaft}
PASSED=0
FAILED=0

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "SKIP: needs root (network namespaces, DPDK)"
		exit 77
	fi
}

# need_run_bpffs: libinca's udp owners share an address through a bpffs
# that `ip netns exec` does not hide (/run/inca/bpffs); skip without one
need_run_bpffs() {
	mkdir -p /run/inca/bpffs
	if ! mountpoint -q /run/inca/bpffs && ! mount -t bpf bpf /run/inca/bpffs; then
		echo "SKIP: cannot mount a bpffs at /run/inca/bpffs"
		exit 77
	fi
}

ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
not_ok() { FAILED=$((FAILED + 1)); echo "FAIL - $*"; }

# check "description" command...: the command's exit status decides
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# quiet command...: run it without its output
quiet() { "$@" >/dev/null 2>&1; }

# expect_eq "description" actual expected
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1 ($2)"; else not_ok "$1: got '$2', want '$3'"; fi
}

finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
}

# testbed_cleanup: the EXIT trap of a suite on the testbed: its jobs
# (JOB_PID, JOB_PIDS) ended, the testbed down, its manager (MGR_PID)
# stopped; $WORK removed, or kept and named when a check failed
testbed_cleanup() {
	local p
	for p in ${JOB_PID:-} ${JOB_PIDS[@]+"${JOB_PIDS[@]}"}; do kill "$p" 2>/dev/null; done
	"$TB" down >/dev/null 2>&1
	if [ -n "${MGR_PID:-}" ]; then
		kill "$MGR_PID" 2>/dev/null
		wait "$MGR_PID" 2>/dev/null
	fi
	if [ "$FAILED" -gt 0 ]; then
		echo "# the output is kept in $WORK"
	else
		rm -rf "$WORK"
	fi
}

# json_path KEY.PATH: one value of the telemetry answer on stdin
# ({"/inca/cmd": {...}}), a dotted path into it; booleans as 0/1
json_path() {
	/usr/bin/python3 -c '
import json, sys
v = list(json.load(sys.stdin).values())[0]
for k in sys.argv[1].split("."):
    v = v[k]
print(int(v) if isinstance(v, bool) else v)' "$1"
}

# telemetry CMD KEY.PATH: one value from the testbed switch's telemetry
telemetry() {
	echo "$1" | dpdk-telemetry.py -f "$INCA_TESTBED-tb" 2>/dev/null | json_path "$2"
}

# The steering tests' owner processes (udp_steer.sh, xdp_steer.sh): each
# NAME runs in the background with its pid in PID[NAME], creates
# $WORK/NAME.ready once its communicators exist, counts until
# $WORK/NAME.done exists and writes $WORK/NAME.out.
# ready NAME...: every one created its communicators (10 s at most)
ready() {
	local n
	for n in "$@"; do
		for _ in $(seq 100); do
			[ -e "$WORK/$n.ready" ] && break
			kill -0 "${PID[$n]}" 2>/dev/null || break
			sleep 0.1
		done
		[ -e "$WORK/$n.ready" ] || { sed "s/^/    $n: /" "$WORK/$n.out"; return 1; }
	done
}
# done_with NAME: stop it; its exit status says whether its counts were exact
done_with() {
	local rc=0
	touch "$WORK/$1.done"
	wait "${PID[$1]}" || rc=$?
	unset "PID[$1]"
	sed "s/^/    $1: /" "$WORK/$1.out"
	return $rc
}

# wait_for_line FILE REGEX PID: up to 60 s until a line of FILE matches
# REGEX, or sooner when PID has ended
wait_for_line() {
	local file=$1 regex=$2 pid=$3
	for _ in $(seq 600); do
		grep -q "$regex" "$file" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# mpi_stat ERR CALL COLUMN: one number of libinca-mpi's INCA_MPI_STATS
# table in ERR (columns: 2 offloaded, 3 passed, 4 bytes offloaded, ...
# 8 p_comm, 9 p_type, 10 p_op, 11 p_size, 12 p_shape, 13 p_failed)
mpi_stat() {
	awk -v c="$2" -v k="$3" '$1 == c { print $k }' "$1"
}

# mpi_all_offloaded ERR LABEL: each of the 13 calls libinca-mpi offloads
# (docs/mpi.md) was, some times, in ERR's INCA_MPI_STATS table
mpi_all_offloaded() {
	local c n
	for c in MPI_Allreduce MPI_Iallreduce MPI_Reduce MPI_Ireduce MPI_Reduce_scatter_block \
		MPI_Ireduce_scatter_block MPI_Reduce_scatter MPI_Allgather MPI_Iallgather MPI_Bcast \
		MPI_Ibcast MPI_Barrier MPI_Ibarrier; do
		n=$(mpi_stat "$1" "$c" 2)
		check "$2$c offloaded ($n calls)" [ "${n:-0}" -gt 0 ]
	done
}

# wait_job PID LIMIT_S NAME OUT: wait for job PID (a launcher, mpirun or
# mpiexec) at most LIMIT_S seconds; if it is still running then, every
# process whose command line holds NAME is listed in OUT, with its
# threads' stacks when it runs NAME's program (gdb, when installed), and
# is killed, then the job; returns the
# job's exit status, 124 when it had to be ended
wait_job() {
	local pid=$1 limit=$2 name=$3 out=$4 t0 p procs exe
	t0=$(date +%s)
	while kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
		sleep 1
	done
	if kill -0 "$pid" 2>/dev/null; then
		procs=$(pgrep -f -- "$name" | grep -vx -e "$$" -e "$BASHPID")
		for p in $procs; do
			echo "== pid $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-150)"
			# the stacks of the program itself (NAME's first word), not
			# of its launchers'
			exe=$(readlink "/proc/$p/exe")
			[ "${exe##*/}" = "$(basename "${name%% *}")" ] && command -v gdb >/dev/null &&
				timeout 20 gdb -p "$p" -batch -ex "thread apply all bt" 2>/dev/null | grep -E "^(#|Thread)"
		done > "$out" 2>&1
		# shellcheck disable=SC2086
		[ -z "$procs" ] || kill $procs 2>/dev/null
		sleep 2
		kill "$pid" 2>/dev/null
		wait "$pid"
		return 124
	fi
	wait "$pid"
}

# mpi_switch_kill_case LAUNCHER CHECK: the MPI suites' case "the switch
# killed mid-job": LAUNCHER (the suite's function that runs a program as 8
# ranks) runs CHECK -l 300 with INCA_MPI_VERBOSE=2; the switch is SIGKILLed
# at its 60th loop. The program must finish with every result exact, the
# ranks having said the switch path failed. Recovery takes 10-80 s here: a
# job still running 300 s after the kill is stuck, its ranks' stacks are
# shown and it is ended. On failure: the program's FAIL lines, every
# recovery per rank, its last lines. Output in $WORK/kill.*
mpi_switch_kill_case() {
	local launcher=$1 prog=$2 rc t0
	echo "# the switch killed mid-job"
	INCA_MPI_VERBOSE=2 "$launcher" "$prog" -l 300 > "$WORK/kill.out" 2> "$WORK/kill.err" &
	JOB_PID=$!
	wait_for_line "$WORK/kill.out" "loop 60 " "$JOB_PID"
	check "the job was running when the switch was killed" kill -0 "$JOB_PID"
	t0=$(date +%s.%N)
	kill_switch
	wait_job "$JOB_PID" 300 "$prog -l 300" "$WORK/kill.stacks"
	rc=$?
	JOB_PID=
	echo "# the program ended $(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s after the kill"
	if [ "$rc" = 124 ]; then
		not_ok "the program finished within 300 s of the switch's death (its ranks' stacks follow)"
		grep -E "^== |^#[0-9]+ +(0x[0-9a-f]+ in )?(im_|hl_|inca_|MPI_|PMPI_|mpi_|main|batch|loop|poll|epoll|futex|nanosleep)" \
			"$WORK/kill.stacks" | head -60 | sed "s/^/# /"
	fi
	expect_eq "the program finished after the switch died (exit status)" "$rc" 0
	check "every result exact after the switch died" \
		grep -q "mpi-check: [1-9][0-9]* passed, 0 failed" "$WORK/kill.out"
	check "the ranks said the switch path failed" grep -q "switch path failed" "$WORK/kill.err"
	grep -E "switch path failed|plan [0-9]+:|libinca: (warning|error)" "$WORK/kill.err" |
		sort | uniq -c | sort -rn | head -8 | sed "s/^/# /"
	if [ "$rc" != 0 ]; then
		grep -m 20 -E "FAIL|mpi-check: [0-9]+ passed" "$WORK/kill.out" "$WORK/kill.err" | sed "s/^/# /"
		grep -E "libinca-mpi\[[0-9]+\]" "$WORK/kill.err" | cut -c1-220 | sort | uniq -c | head -30 | sed "s/^/# /"
		tail -n 5 "$WORK/kill.out" | sed "s/^/# /"
	fi
	grep -A15 "calls summed" "$WORK/kill.err"
}

# kill_switch: SIGKILL the testbed's inca-switch (its recorded PID, and only
# if that process is still an inca-switch)
kill_switch() {
	local spid
	spid=$(cat "/run/inca-testbed/$INCA_TESTBED/switch.pid" 2>/dev/null)
	[ -n "$spid" ] && grep -q inca-switch "/proc/$spid/cmdline" 2>/dev/null && kill -9 "$spid"
}

# check_ranks LAB CONFIG TRANSPORT TIMEOUT_S ENV... -- ARGS: $CHECK ARGS as
# ranks 0..3 on hosts 1..4 of LAB (deploy/testbed or deploy/fabric), rank r
# with INCA_CONFIG=CONFIG where "%r" is replaced by r; rank r's output in
# $WORK/rank<r>.out, the ranks' fallbacks summed in FALLBACKS. Fails when a
# rank does, showing each rank's last lines.
# Each job has its own epoch (INCA_EPOCH), 1, 2, 3... in the order of the
# test: a job's keys are then older than the previous job's on every set
# (epoch x 0x9e3779b1: docs/protocol.md 3.2), so the switch frees the sets
# for it (restarts), and never equal.
CHECK_EPOCH=0
check_ranks() {
	local lab=$1 config=$2 tp=$3 limit=$4 envs=() pids=() r rc=0
	shift 4
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	CHECK_EPOCH=$((CHECK_EPOCH + 1))
	for r in 0 1 2 3; do
		timeout "$limit" "$lab" exec $((r + 1)) env INCA_CONFIG="${config//%r/$r}" \
			INCA_RANK=$r INCA_SIZE=4 INCA_TRANSPORT="$tp" INCA_LOG=warn \
			INCA_EPOCH=$CHECK_EPOCH "${envs[@]}" \
			"$CHECK" "$@" > "$WORK/rank$r.out" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	FALLBACKS=$(grep -ho "[0-9]* fallbacks" "$WORK"/rank*.out | awk '{s += $1} END {print s + 0}')
	grep -h "falling back" "$WORK"/rank*.out | sed 's/^/    /' | head -2
	if [ $rc -ne 0 ]; then
		for r in 0 1 2 3; do sed "s/^/    rank $r: /" "$WORK/rank$r.out" | tail -5; done
	fi
	return $rc
}

# fabric_diag FAB: each switch's ports (packets in and out, egress drops and
# bytes queued, NIC drops) and its non-zero drop counters, one line each: what a job that
# fell back when it should not have leaves behind to read
fabric_diag() {
	local sw
	for sw in $("$1" status 2>/dev/null | awk '$2 ~ /^[0-9]+\./ {print $1}'); do
		{ "$1" telemetry "$sw" /inca/ports; "$1" telemetry "$sw" /inca/drops; } 2>/dev/null |
			/usr/bin/python3 -c 'import json, sys
sw = sys.argv[1]; out = []
for line in sys.stdin:
    try: d = json.loads(line)
    except ValueError: continue
    for k, v in d.items():
        if k == "/inca/ports" and isinstance(v, dict):
            out += ["%s rx %s tx %s egress_drops %s queued %s rx_missed %s tx_errors %s" % (p,
                    c.get("rx_packets"), c.get("tx_packets"), c.get("egress_drops"),
                    c.get("egress_queued_bytes"), c.get("nic_rx_missed", "-"),
                    c.get("nic_tx_errors", "-")) for p, c in sorted(v.items())]
        elif k == "/inca/drops" and isinstance(v, dict):
            out += ["drops: " + (" ".join("%s=%s" % (n, x) for n, x in sorted(v.items()) if x) or "none")]
print("    %s: %s" % (sw, "; ".join(out) or "no telemetry"))' "$sw" >&2
	done
}

# fabric_groups DIR QKEY_SPINE QKEY_LEAF WINDOW IDLE_US: the static configs
# of a two-level lab (deploy/fabric, 4 hosts, 2 leaves) with group 1: the
# spine (10.0.0.250, QPN 256) over the leaves 10.0.0.251 and .252 (QPN 300,
# fan-in 2 each), leaf j over hosts 2j-1 and 2j (ranks 2j-2 and 2j-1, QPNs
# 16 + host), in DIR/spine.json and DIR/leaf<j>.json
fabric_groups() {
	local dir=$1 qs=$2 ql=$3 window=$4 idle=$5 j a b
	cat > "$dir/spine.json" <<JSON
{ "switch": { "ip": "10.0.0.250", "idle_sleep_us": $idle },
  "groups": [ { "id": 1, "qpn": 256, "qkey": "$qs", "window": $window, "elems_per_pkt": 256,
    "members": [ { "ip": "10.0.0.251", "qpn": 300, "fanin": 2 },
                 { "ip": "10.0.0.252", "qpn": 300, "fanin": 2 } ] } ] }
JSON
	for j in 1 2; do
		a=$((2 * j - 1)) b=$((2 * j))
		cat > "$dir/leaf$j.json" <<JSON
{ "switch": { "ip": "10.0.0.25$j", "idle_sleep_us": $idle },
  "groups": [ { "id": 1, "qpn": 300, "qkey": "$ql", "window": $window, "elems_per_pkt": 256,
    "first_rank": $((a - 1)),
    "members": [ { "ip": "10.0.0.$a", "qpn": $((16 + a)) }, { "ip": "10.0.0.$b", "qpn": $((16 + b)) } ],
    "parent": { "ip": "10.0.0.250", "qpn": 256, "qkey": "$qs", "rank": $((j - 1)) } } ] }
JSON
	done
}

# fabric_rank_configs DIR QKEY_LEAF WINDOW MEMBERS: libinca's static
# configs for ranks 0..3 on that lab, DIR/tree<r>.json: each rank's switch
# is its leaf, its member_index its place there; MEMBERS the JSON list of
# all four (rank order)
fabric_rank_configs() {
	local dir=$1 ql=$2 window=$3 members=$4 r
	for r in 0 1 2 3; do
		cat > "$dir/tree$r.json" <<JSON
{ "switch": "10.0.0.25$((r / 2 + 1))", "group": 1, "qpn": 300, "qkey": "$ql", "window": $window,
  "elems_per_pkt": 256, "member_index": $((r % 2)), "members": $members }
JSON
	done
}

# A func test's manager: inca-manager on $WORK/topo.json with
# $WORK/admin.token, its state in $WORK/state.db, on port $PORT (MGR, CTL,
# WORK and PORT set by the script). mgr_start [ARG...]: start it (MGR_PID)
# and wait up to 5 s for /healthz; when it does not answer, its log.
mgr_start() {
	"$MGR" --topology "$WORK/topo.json" --token-file "$WORK/admin.token" --db "$WORK/state.db" \
		--listen 0.0.0.0:$PORT --dead-after-ms 1000 "$@" >> "$WORK/manager.log" 2>&1 &
	MGR_PID=$!
	for _ in $(seq 50); do
		curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	cat "$WORK/manager.log"
	return 1
}
# ctl ARG...: incactl with the admin token
ctl() { "$CTL" --manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" "$@"; }
# mgr_wait_applied [SWITCH...]: every switch (or those named) heartbeats and
# has applied the manager's version, within 10 s
mgr_wait_applied() {
	for _ in $(seq 100); do
		ctl --json switches 2>/dev/null | /usr/bin/python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin) if len(sys.argv) == 1 or x["name"] in sys.argv[1:]]
sys.exit(0 if all(x["state"] == "up" and x["applied"] == x["version"] for x in s) else 1)' "$@" &&
			return 0
		sleep 0.1
	done
	return 1
}
