#!/usr/bin/env bash
# INCA under mixed load with faults, for a bounded time: the two-level lab
# (deploy/fabric: 2 leaves, a spine, 4 hosts) with inca-manager, loss and
# duplication on every link, up to 3 jobs of 2 tenants at once started one
# after another (libinca's inca-check: all five collectives and all-reduce,
# 8 B to 16 MiB, several in flight; libinca-mpi's mpi-check under Open MPI
# when built), and at moments drawn from a printed seed: a rank stopped for
# 2 s (SIGSTOP), a switch killed and started again, a leaf's uplink cut and
# mended, the manager killed with kill -9 and started again.
#
# Every result is checked by the programs (mpi-check: world, dup and split
# communicators, every mapped type and op, up to 64 KiB). The report: jobs and calls,
# wrong results, hangs (a job past its time limit), jobs that ended with an
# error (each named with its message; a job that could not register while
# the manager was down is listed apart), fallbacks and plan changes, the
# manager's ring plans and stall reports, groups and jobs left on the
# switches and the manager after the end (leaks), and the RSS of the
# switches and the manager sampled every 10 s. Exits 1 on any wrong
# result, hang, error inside a collective or leak, and, in a run of 10
# minutes or more, on an RSS that grew more than 5% after minute 5.
#
# Usage: tests/soak/soak.sh [--minutes M] [--seed S] [--loss PCT] [--build DIR]
#                           [--no-mpi] [--no-faults] [--keep] [--log LEVEL]
# (default 3 minutes, a random seed, 0.5% loss and duplication)
# --keep: leave the work directory (every job's output, the manager's log
# and events) and say where; --log: the jobs' INCA_LOG (warn)
set -u
MINUTES=3 SEED=$(( $(date +%s) % 100000 )) LOSS=0.5 MPI=1 FAULTS=1 KEEP=${KEEP:-} JOBLOG=warn
BUILD_ARG=
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) MINUTES=${2:?}; shift 2 ;;
	--seed) SEED=${2:?}; shift 2 ;;
	--loss) LOSS=${2:?}; shift 2 ;;
	--build) BUILD_ARG=${2:?}; shift 2 ;;
	--no-mpi) MPI=0; shift ;;
	--no-faults) FAULTS=0; shift ;;
	--keep) KEEP=1; shift ;;
	--log) JOBLOG=${2:?}; shift 2 ;;
	-h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "soak.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
done
[[ "$MINUTES" =~ ^[0-9]+$ ]] && [ "$MINUTES" -ge 1 ] && [ "$MINUTES" -le 600 ] ||
	{ echo "soak.sh: --minutes M with M in 1..600" >&2; exit 2; }
[[ "$SEED" =~ ^[0-9]+$ ]] || { echo "soak.sh: --seed: a number" >&2; exit 2; }
[[ "$LOSS" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "soak.sh: --loss: a percentage" >&2; exit 2; }
case $JOBLOG in error|warn|info|debug) ;; *) echo "soak.sh: --log: error, warn, info or debug" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${BUILD_ARG:-$here/build}" && pwd) || exit 2
source "$here/tests/func/lib.sh"
need_root

FAB="$SRC/deploy/fabric"
export INCA_FABRIC=incasoak
MGR="$BUILD/control/inca-manager"
CTL="$BUILD/control/incactl"
CHECK="$BUILD/tests/tools/inca-check"
MPICHECK="$BUILD/tests/mpi/mpi-check"
MPILIB="$BUILD/host-lib/mpi/libinca-mpi.so"
PORT=18479
JOB_LIMIT=300            # a job still running after this long hangs
WORK=$(mktemp -d /tmp/inca-soak.XXXXXX)
MGR_PID=
declare -A JOBPID JOBKIND
cleanup() {
	local p
	# a job's subshell and the timeouts under it (which pass the signal on)
	for p in ${JOBPID[@]+"${JOBPID[@]}"}; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
	[ -n "$MGR_PID" ] && kill "$MGR_PID" 2>/dev/null && wait "$MGR_PID" 2>/dev/null
	"$FAB" down >/dev/null 2>&1
	if [ -n "${KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
for f in "$MGR" "$CTL" "$CHECK" "$BUILD/dataplane/inca-switch"; do
	[ -x "$f" ] || { echo "soak.sh: $f is not built"; exit 2; }
done
if [ "$MPI" = 1 ] && { [ ! -x "$MPICHECK" ] || [ ! -e "$MPILIB" ] || ! command -v mpirun >/dev/null; }; then
	echo "soak.sh: libinca-mpi, mpi-check or mpirun missing: no MPI jobs"
	MPI=0
fi

RANDOM=$SEED
echo "# soak: $MINUTES min, seed $SEED (again: --seed $SEED), loss and duplication $LOSS%," \
	"MPI jobs $([ $MPI = 1 ] && echo on || echo off), faults $([ $FAULTS = 1 ] && echo on || echo off)"
head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$WORK/admin.token"
TOKEN_A=tenant-a-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
TOKEN_B=tenant-b-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
echo "$TOKEN_A" > "$WORK/a.token"
echo "$TOKEN_B" > "$WORK/b.token"
cat > "$WORK/topo.json" <<JSON
{ "switches": [
    { "name": "spine", "role": "spine", "ip": "10.0.0.250", "max_slots": 4096 },
    { "name": "leaf1", "role": "leaf", "ip": "10.0.0.251", "max_slots": 4096 },
    { "name": "leaf2", "role": "leaf", "ip": "10.0.0.252", "max_slots": 4096 } ],
  "hosts": [
    { "name": "h1", "ip": "10.0.0.1", "leaf": "leaf1" }, { "name": "h2", "ip": "10.0.0.2", "leaf": "leaf1" },
    { "name": "h3", "ip": "10.0.0.3", "leaf": "leaf2" }, { "name": "h4", "ip": "10.0.0.4", "leaf": "leaf2" } ],
  "links": [ { "leaf": "leaf1", "spine": "spine" }, { "leaf": "leaf2", "spine": "spine" } ],
  "tenants": [
    { "name": "a", "token": "$TOKEN_A", "max_slots_per_switch": 2048, "max_jobs": 64 },
    { "name": "b", "token": "$TOKEN_B", "max_slots_per_switch": 2048, "max_jobs": 64 } ] }
JSON
mgr_start || { echo "soak.sh: the manager did not start"; exit 1; }
"$FAB" up --hosts 4 --leaves 2 --switch "$BUILD/dataplane/inca-switch" \
	--manager "http://127.0.0.1:$PORT" --token-file "$WORK/admin.token" --heartbeat-ms 100 \
	--impair "loss $LOSS% duplicate $LOSS%" >/dev/null || { echo "soak.sh: fabric up failed"; exit 1; }
mgr_wait_applied || { echo "soak.sh: the switches did not register"; exit 1; }

pick() { local a=("$@"); echo "${a[RANDOM % ${#a[@]}]}"; }
# jobs started and not yet finished (set -u: an empty JOBPID is "unbound")
running() { local n=0 k; for k in ${JOBPID[@]+"${!JOBPID[@]}"}; do n=$((n + 1)); done; echo $n; }
now() { date +%s; }

# start_job ID: a job of a random kind, tenant and size, in the background
start_job() {
	local id=$1 tenant token kind hosts n r=0 h args=()
	tenant=$(pick a b)
	token=$WORK/$tenant.token
	kind=$(pick check check check2 big $([ $MPI = 1 ] && echo mpi))
	case $kind in
	check)   hosts="1 2 3 4"
		 args=(-c all -d "$(pick fp32 fp16 bf16 int32 int64 fp64)" -o "$(pick sum min max)"
		       -n "$(pick 1,2,257 1000,4097 2,65536)" -r "$(pick 2 5 10)" -p "$(pick 1 4 8)") ;;
	check2)  hosts=$(pick "1 3" "2 4" "1 2" "3 4")
		 args=(-c allreduce,reduce_scatter -d "$(pick fp32 int32)" -o sum -n 1,5000 -r 20 -p 4) ;;
	big)     hosts="1 2 3 4"
		 args=(-c allreduce -d fp32 -o sum -n 4194304 -r 2) ;;
	mpi)     hosts="1 2 3 4" ;;
	esac
	JOBKIND[$id]="$kind/$tenant"
	if [ "$kind" = mpi ]; then
		( INCA_TESTBED=$INCA_FABRIC INCA_MANAGER="http://192.168.77.254:$PORT" \
		  INCA_MANAGER_TOKEN_FILE=$token INCA_MPI_OFFLOAD_AFTER=1 \
		  timeout "$JOB_LIMIT" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 \
			--host 192.168.77.1:1,192.168.77.2:1,192.168.77.3:1,192.168.77.4:1 \
			--mca plm_rsh_agent "$SRC/tests/bench/ns-rsh" --mca btl tcp,self \
			--mca btl_tcp_if_include 192.168.77.0/24 --mca oob_tcp_if_include 192.168.77.0/24 \
			--mca mpi_yield_when_idle 1 -x INCA_TESTBED -x LD_PRELOAD="$MPILIB" \
			-x INCA_MANAGER -x INCA_MANAGER_TOKEN_FILE -x INCA_IFNAME=eth0 \
			-x INCA_TRANSPORT=udp -x INCA_MPI_OFFLOAD_AFTER -x INCA_LOG="$JOBLOG" \
			"$MPICHECK" -m 65536 -F > "$WORK/$id.out" 2>&1
		  echo "rc $?" >> "$WORK/$id.out" ) &
	else
		n=$(echo "$hosts" | wc -w)
		(
			pids=()
			for h in $hosts; do
				timeout "$JOB_LIMIT" "$FAB" exec "$h" env \
					INCA_MANAGER="http://192.168.77.254:$PORT" INCA_MANAGER_TOKEN_FILE="$token" \
					INCA_JOB="$id" INCA_RANK=$r INCA_SIZE="$n" INCA_LOCAL_IP="10.0.0.$h" \
					INCA_RING_IP="192.168.77.$h" INCA_TRANSPORT=udp INCA_LOG="$JOBLOG" \
					INCA_TIMEOUT_MS=60000 "$CHECK" "${args[@]}" > "$WORK/$id.r$r" 2>&1 &
				pids+=($!)
				r=$((r + 1))
			done
			rc=0
			for p in "${pids[@]}"; do wait "$p"; s=$?; [ $s -gt $rc ] && rc=$s; done
			echo "rc $rc" > "$WORK/$id.rc"
		) &
	fi
	JOBPID[$id]=$!
	echo "$(date +%T) start $id (${JOBKIND[$id]}: ${args[*]:-mpi-check})" >> "$WORK/events"
}

# a finished job's line in $WORK/results: ID KIND RC CALLS WRONG FALLBACKS PLANS
finish_job() {
	local id=$1 rc calls wrong fb plans files
	if [ "${JOBKIND[$id]%%/*}" = mpi ]; then
		rc=$(awk '$1 == "rc" {print $2}' "$WORK/$id.out")
		calls=$(grep -o "mpi-check: [0-9]* passed" "$WORK/$id.out" | awk '{s += $2} END {print s + 0}')
		wrong=$(grep -o "passed, [0-9]* failed" "$WORK/$id.out" | awk '{s += $2} END {print s + 0}')
		fb=0 plans=0
	else
		rc=$(awk '{print $2}' "$WORK/$id.rc")
		files=("$WORK/$id".r*)
		calls=$(grep -ho "[0-9]* cases" "${files[@]}" | awk '{s += $1} END {print s + 0}')
		wrong=$(grep -ho "[0-9]* wrong" "${files[@]}" | awk '{s += $1} END {print s + 0}')
		fb=$(grep -ho "[0-9]* fallbacks" "${files[@]}" | awk '{s += $1} END {print s + 0}')
		plans=$(grep -ho "[0-9]* plan changes" "${files[@]}" | awk '{s += $1} END {print s + 0}')
	fi
	echo "$id ${JOBKIND[$id]} ${rc:-?} $calls $wrong $fb $plans" >> "$WORK/results"
	echo "$(date +%T) end $id rc ${rc:-?}" >> "$WORK/events"
	unset "JOBPID[$id]"
}

rss_sample() {
	local t=$1 m s
	m=$(ps -o rss= -p "$MGR_PID" 2>/dev/null | awk '{print $1 + 0}')
	s=$(ps -o rss= -C inca-switch 2>/dev/null | awk '{s += $1} END {print s + 0}')
	echo "$t ${m:-0} $s" >> "$WORK/rss"
}

# a fault at a random moment, in the background where it lasts
fault() {
	local what sw j p
	what=$(pick stop switch link manager)
	case $what in
	stop)
		local ranks=($(pgrep -x inca-check))
		[ ${#ranks[@]} -gt 0 ] || return 0
		p=${ranks[RANDOM % ${#ranks[@]}]}
		echo "$(date +%T) fault: rank process $p stopped for 2 s" >> "$WORK/events"
		kill -STOP "$p" 2>/dev/null; sleep 2; kill -CONT "$p" 2>/dev/null ;;
	switch)
		sw=$(pick spine leaf1 leaf2)
		echo "$(date +%T) fault: $sw killed, started again 2 s later" >> "$WORK/events"
		"$FAB" kill "$sw" >/dev/null 2>&1; sleep 2; "$FAB" start "$sw" >/dev/null 2>&1 ;;
	link)
		j=$(pick 1 2)
		echo "$(date +%T) fault: leaf$j's uplink cut for 3 s" >> "$WORK/events"
		"$FAB" link "leaf$j" down >/dev/null 2>&1; sleep 3; "$FAB" link "leaf$j" up >/dev/null 2>&1 ;;
	manager)
		echo "$(date +%T) fault: the manager killed (kill -9), started again 1 s later" >> "$WORK/events"
		kill -9 "$MGR_PID" 2>/dev/null; wait "$MGR_PID" 2>/dev/null; sleep 1
		mgr_start > /dev/null || echo "$(date +%T) the manager did not start again" >> "$WORK/events" ;;
	esac
	FAULTS_DONE=$((FAULTS_DONE + 1))
}

t0=$(now)
end=$((t0 + MINUTES * 60))
next_fault=$((t0 + 15 + RANDOM % 15))
next_rss=$t0
seq_id=0 FAULTS_DONE=0
: > "$WORK/results"; : > "$WORK/events"; : > "$WORK/rss"
while [ "$(now)" -lt "$end" ]; do
	for id in ${JOBPID[@]+"${!JOBPID[@]}"}; do
		kill -0 "${JOBPID[$id]}" 2>/dev/null || { wait "${JOBPID[$id]}" 2>/dev/null; finish_job "$id"; }
	done
	while [ "$(running)" -lt 3 ] && [ "$(now)" -lt $((end - 20)) ]; do
		seq_id=$((seq_id + 1))
		start_job "s$seq_id"
	done
	if [ "$FAULTS" = 1 ] && [ "$(now)" -ge "$next_fault" ] && [ "$(now)" -lt $((end - 30)) ]; then
		fault    # the manager's restart must be in this shell: it sets MGR_PID
		next_fault=$(( $(now) + 15 + RANDOM % 25 ))
	fi
	if [ "$(now)" -ge "$next_rss" ]; then
		rss_sample $(( $(now) - t0 ))
		next_rss=$((next_rss + 10))
	fi
	sleep 1
done
# the jobs started end by themselves (or at their limit)
for id in ${JOBPID[@]+"${!JOBPID[@]}"}; do wait "${JOBPID[$id]}" 2>/dev/null; finish_job "$id"; done
rss_sample $(( $(now) - t0 ))

# leaks: once every job is gone, no group on any switch, no job at the manager
groups=-1 jobs=-1
for _ in $(seq 100); do
	groups=$(ctl --json switches 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(sum(s["counters"]["groups"] for s in json.load(sys.stdin)))' 2>/dev/null)
	jobs=$(ctl --json jobs 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null)
	[ "${groups:-x}" = 0 ] && [ "${jobs:-x}" = 0 ] && mgr_wait_applied && break
	sleep 0.2
done

# the report
read -r njobs calls wrong fb plans < <(awk '{n++; c += $4; w += $5; f += $6; p += $7} END {print n + 0, c + 0, w + 0, f + 0, p + 0}' "$WORK/results")
hangs=$(awk '$3 == 124 || $3 == 137' "$WORK/results" | wc -l)
errors=$(awk '$3 != 0 && $3 != 124 && $3 != 137 && $3 != 2 && $5 == 0' "$WORK/results" | wc -l)
nostart=$(awk '$3 == 2' "$WORK/results" | wc -l)
ring_plans=$(ctl metrics 2>/dev/null | awk '$1 == "inca_manager_plans_total{mode=\"ring\"}" {print $2}')
stalls=$(ctl metrics 2>/dev/null | awk '$1 == "inca_manager_stall_reports_total" {print $2}')
echo "# events"
sed 's/^/    /' "$WORK/events" | grep -v " start \| end " || true
echo "# jobs"
awk '{printf "    %-5s %-12s rc %-3s calls %-5s wrong %-3s fallbacks %-4s plan changes %s\n", $1, $2, $3, $4, $5, $6, $7}' "$WORK/results"
for id in $(awk '$3 != 0 {print $1}' "$WORK/results"); do
	# its errors first, then what else says wrong or fail (warnings)
	echo "    $id:"; cat "$WORK/$id".r* "$WORK/$id.out" 2>/dev/null |
		awk 'tolower($0) ~ /error/ { e[++ne] = $0; next }
		     tolower($0) ~ /wrong|fail/ { o[++no] = $0 }
		     END { for (i = 1; i <= ne && n < 5; i++) { print e[i]; n++ }
			   for (i = 1; i <= no && n < 5; i++) { print o[i]; n++ } }' | sed 's/^/      /'
done
echo "# RSS (seconds, manager KiB, switches KiB)"
awk '{printf "    %5d s  manager %7d  switches %8d\n", $1, $2, $3}' "$WORK/rss"
rss_grew=$(awk -v m="$MINUTES" 'm >= 10 && $1 >= 300 && !b {b = $3} END {print (b && $3 > b * 1.05) ? 1 : 0}' "$WORK/rss")
echo "# soak report (seed $SEED, $MINUTES min)"
echo "    jobs $njobs, checked calls $calls (summed over ranks; mpi-check: its checks), faults $FAULTS_DONE"
echo "    wrong results $wrong, hangs $hangs, errors inside collectives $errors, jobs that could not start $nostart"
echo "    fallbacks $fb (calls on the ring), plan changes $plans, the manager's ring plans ${ring_plans:-?} (since its last start), stall reports ${stalls:-?}"
echo "    after the end: groups on the switches ${groups:-?}, jobs at the manager ${jobs:-?}"
breach=0
[ "$wrong" = 0 ] || { echo "BREACH: wrong results"; breach=1; }
[ "$hangs" = 0 ] || { echo "BREACH: hangs"; breach=1; }
[ "$errors" = 0 ] || { echo "BREACH: jobs ended with an error inside a collective"; breach=1; }
[ "${groups:-x}" = 0 ] && [ "${jobs:-x}" = 0 ] || { echo "BREACH: leaked groups or jobs"; breach=1; }
[ "$rss_grew" = 0 ] || { echo "BREACH: the switches' RSS grew more than 5% after minute 5"; breach=1; }
[ "$njobs" -gt 0 ] || { echo "BREACH: no job ran"; breach=1; }
[ $breach = 0 ] && echo "soak: passed" || echo "soak: FAILED"
exit $breach
