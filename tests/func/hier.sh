#!/usr/bin/env bash
# Functional tests of several ranks per host (libinca's host-first
# collectives, docs/hostlib.md "Several ranks per host") through the real
# switch on a 4-host testbed, static groups of hosts: every collective x
# dtype x op exact on 4 hosts x 2 ranks, 2 hosts x 4 and an uneven 3+1+2+2
# layout, in place and 8 in flight, udp with the ranks unprivileged (user
# nobody; the udp transport without its eBPF steering, which only one rank
# per host needs no more) and xdp (as root: AF_XDP needs it); the same with
# rails (INCA_HIER=rails: a group per local rank, each on a link of its own,
# testbed --nics 4); a host's link carries one copy of a 16 MiB all-reduce
# per direction whatever the ranks per host, and with rails its links share
# that copy, a share each (the switch's port counters); a local rank killed
# mid-job ends the job on every rank before its deadline; /dev/shm empty
# after every case.
# Usage: hier.sh BUILD_DIR
BUILD=$(cd "${1:?usage: hier.sh BUILD_DIR}" && pwd)
source "$(dirname "$0")/lib.sh"
need_root
CHECK="$BUILD/tests/tools/inca-check"
export INCA_TESTBED=incahier

WORK=$(mktemp -d /tmp/inca-hier.XXXXXX)
chmod 755 "$WORK"
cleanup() {
	"$TB" down
	rm -rf "$WORK"
}
trap cleanup EXIT

QKEY=0x5eed0030
HOSTS4='[ { "ip": "10.0.0.1", "qpn": 17 }, { "ip": "10.0.0.2", "qpn": 18 },
          { "ip": "10.0.0.3", "qpn": 19 }, { "ip": "10.0.0.4", "qpn": 20 } ]'
HOSTS2='[ { "ip": "10.0.0.1", "qpn": 21 }, { "ip": "10.0.0.2", "qpn": 22 } ]'
# rails: local rank k of host h at 10.0.0.(100 + 10k + h), QPN 30 + 10k + h
rail_members() {  # rail_members K NHOSTS
	local h sep=
	printf '['
	for h in $(seq "$2"); do
		printf '%s { "ip": "10.0.0.%d", "qpn": %d }' "$sep" $((100 + 10 * $1 + h)) $((30 + 10 * $1 + h))
		sep=,
	done
	printf ' ]'
}
rail() {  # rail KEY ID QPN K NHOSTS: a rail's group, as the switch (KEY id) or
	  # a host's group file (KEY group, the rest the file's) lists it
	if [ "$1" = id ]; then
		printf '{ "id": %d, "qpn": %d, "qkey": "%s", "window": 16, "elems_per_pkt": 256, "members": %s }' \
			"$2" "$3" "$QKEY" "$(rail_members "$4" "$5")"
	else
		printf '{ "group": %d, "qpn": %d, "members": %s }' "$2" "$3" "$(rail_members "$4" "$5")"
	fi
}
RAILS4="[ $(rail group 3 258 1 4) ]"
RAILS2="[ $(rail group 4 259 1 2), $(rail group 5 260 2 2), $(rail group 6 261 3 2) ]"
cat > "$WORK/switch.json" <<JSON
{ "switch": { "ip": "10.0.0.254", "idle_sleep_us": 20 },
  "groups": [ { "id": 1, "qpn": 256, "qkey": "$QKEY", "window": 16, "elems_per_pkt": 256,
                "members": $HOSTS4 },
              { "id": 2, "qpn": 257, "qkey": "$QKEY", "window": 16, "elems_per_pkt": 256,
                "members": $HOSTS2 },
              $(rail id 3 258 1 4), $(rail id 4 259 1 2), $(rail id 5 260 2 2),
              $(rail id 6 261 3 2) ] }
JSON
cat > "$WORK/hosts4.json" <<JSON
{ "switch": "10.0.0.254", "group": 1, "qpn": 256, "qkey": "$QKEY", "window": 16,
  "elems_per_pkt": 256, "members": $HOSTS4 }
JSON
cat > "$WORK/hosts2.json" <<JSON
{ "switch": "10.0.0.254", "group": 2, "qpn": 257, "qkey": "$QKEY", "window": 16,
  "elems_per_pkt": 256, "members": $HOSTS2 }
JSON
# the uneven layout in the group's own members ("ranks")
sed -e 's/"qpn": 17 }/"qpn": 17, "ranks": 3 }/' -e 's/"qpn": 18 }/"qpn": 18, "ranks": 1 }/' \
    -e 's/"qpn": 19 }/"qpn": 19, "ranks": 2 }/' -e 's/"qpn": 20 }/"qpn": 20, "ranks": 2 }/' \
    "$WORK/hosts4.json" > "$WORK/uneven.json"
sed "s|\"members\": \[|\"rails\": $RAILS4, &|" "$WORK/hosts4.json" > "$WORK/rails4.json"
sed "s|\"members\": \[|\"rails\": $RAILS2, &|" "$WORK/hosts2.json" > "$WORK/rails2.json"
chmod 644 "$WORK"/*.json

"$TB" up --hosts 4 --nics 4 --mgmt --config "$WORK/switch.json" --switch "$BUILD/dataplane/inca-switch" >/dev/null ||
	{ not_ok "testbed up"; finish; exit 1; }

shm_left() { ls /dev/shm | grep -c '^inca-' ; }
port() { telemetry /inca/ports "port$1.$2"; }
# link_port H J: the switch's port of host H's link J (1-based; --nics:
# the hosts' first links, then every host's second, ...)
link_port() { [ "$2" = 1 ] && echo $(($1 - 1)) || echo $((4 * ($2 - 1) + $1 - 1)); }

EPOCH=0
PIDS=()
# start LAYOUT CONFIG TP USER ENV... -- ARGS: inca-check as every rank of
# the layout ("2,2,2,2": ranks per host, in rank order), USER root or
# nobody, in the background (PIDS; each rank's output in rank<r>.out);
# HOST2_ENV (an array): more for host 2's ranks only
HOST2_ENV=()
start() {
	local layout=$1 config=$2 tp=$3 user=$4 envs=() r=0 h=0 n size=0 as=() more
	shift 4
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	IFS=, read -ra counts <<< "$layout"
	for n in "${counts[@]}"; do size=$((size + n)); done
	[ "$user" = root ] || as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
	EPOCH=$((EPOCH + 1))
	PIDS=()
	rm -f "$WORK"/rank*.out
	for n in "${counts[@]}"; do
		h=$((h + 1))
		more=()
		[ "$h" != 2 ] || more=("${HOST2_ENV[@]}")
		for _ in $(seq "$n"); do
			timeout 120 "$TB" exec "$h" "${as[@]}" env INCA_CONFIG="$config" INCA_RANK=$r \
				INCA_SIZE=$size INCA_LAYOUT="$layout" INCA_TRANSPORT="$tp" INCA_LOG=warn \
				INCA_EPOCH=$((EPOCH * 7919)) "${envs[@]}" "${more[@]}" "$CHECK" "$@" \
				> "$WORK/rank$r.out" 2>&1 &
			PIDS+=($!)
			r=$((r + 1))
		done
	done
}
# wait_all: every rank exited 0 (else the last lines of each)
wait_all() {
	local p rc=0 r
	for p in "${PIDS[@]}"; do wait "$p" || rc=1; done
	if [ $rc -ne 0 ]; then
		for r in $(seq 0 $((${#PIDS[@]} - 1))); do
			tail -n 3 "$WORK/rank$r.out" | sed "s/^/    rank $r: /"
		done
	fi
	return $rc
}
# wait_all_fail: every rank exited non-zero (a configuration every rank refuses)
wait_all_fail() {
	local p rc=0
	for p in "${PIDS[@]}"; do wait "$p" && rc=1; done
	return $rc
}
# every_rank_says ERE...: every rank's output matches each
every_rank_says() {
	local f e
	for f in "$WORK"/rank*.out; do
		for e in "$@"; do grep -Eq "$e" "$f" || return 1; done
	done
}
# host_first: every rank's calls reduced inside the host first, none fell back
host_first() { every_rank_says " 0 fallbacks" "[1-9][0-9]* host-first"; }
# each_sent: with rails every local rank carries a share: it counted calls
# on the rails and sent packets, 100 or more (the rails' compare of their
# threshold at creation is one)
each_sent() { every_rank_says "wrong; [1-9][0-9]{2,} packets" " [1-9][0-9]* on rails"; }

# Rails: local rank k of host h on its link k + 1 (--nics 4), at
# 10.0.0.(100 + 10k + h), as on a host with a NIC per rank: no two udp
# ranks share an address, and they run unprivileged. Every call on them
# here (INCA_RAIL_MIN_BYTES=0).
ALL=(-c all -d all -o all -n 1,3,257,70000 -b)
for tp in udp xdp; do
	user=nobody
	[ "$tp" = udp ] || user=root
	for case in "2,2,2,2 hosts4" "4,4 hosts2" "3,1,2,2 uneven" "2,2,2,2 rails4 rails" \
		    "4,4 rails2 rails"; do
		read -r layout name mode <<< "$case"
		envs=()
		[ -z "$mode" ] || envs=(INCA_HIER=rails INCA_RAIL_MIN_BYTES=0)
		start "$layout" "$WORK/$name.json" "$tp" "$user" "${envs[@]}" -- "${ALL[@]}"
		check "$tp, ${mode:+rails, }layout $layout ($user): every collective, dtype and op exact" wait_all
		[ -z "$mode" ] || check "$tp, rails, layout $layout: every local rank carried its share" each_sent
		check "$tp, ${mode:+rails, }layout $layout: reduced inside the host first, no fallback" host_first
		expect_eq "$tp, ${mode:+rails, }layout $layout: nothing left in /dev/shm" "$(shm_left)" 0
	done
	# in place, 8 in flight (nonblocking, completed latest first)
	start 3,1,2,2 "$WORK/uneven.json" "$tp" "$user" -- -c all -d fp32,fp16,int64 -o sum,max \
		-n 1,1000,70000 -i -p 8
	check "$tp, uneven: in place, 8 in flight, exact" wait_all
	expect_eq "$tp, uneven, in flight: nothing left in /dev/shm" "$(shm_left)" 0
done

start 2,2,2,2 "$WORK/hosts4.json" udp nobody INCA_HIER=rails -- -c allreduce -n 100000
check "rails without the group file's rails: every rank refuses it" wait_all_fail
check "... and says what is missing" grep -q "the group lists 0 rails, it needs 1" "$WORK/rank1.out"
# in place, 8 in flight, around the default threshold (256 KiB)
start 4,4 "$WORK/rails2.json" udp nobody INCA_HIER=rails -- -c all \
	-d fp32,fp16,int64 -o sum,max -n 1,1000,70000,300000 -i -p 8
check "udp, rails, 4,4: every collective in place, 8 in flight, small and large, exact" wait_all
check "udp, rails, 4,4, in flight: every local rank carried its share" each_sent
expect_eq "udp, rails, 4,4, in flight: nothing left in /dev/shm" "$(shm_left)" 0
# which calls take the rails is each host's leader's INCA_RAIL_MIN_BYTES:
# hosts that differ are refused at once, by every rank, not left to hang
HOST2_ENV=(INCA_RAIL_MIN_BYTES=1048576)
start 2,2,2,2 "$WORK/rails4.json" udp nobody INCA_HIER=rails -- -c allreduce -n 100000
HOST2_ENV=()
check "rails, one host's INCA_RAIL_MIN_BYTES another: every rank refuses it" wait_all_fail
check "... and says so" every_rank_says \
	"INCA_RAIL_MIN_BYTES differs across the hosts \(from 262144 to 1048576 bytes"
expect_eq "rails, thresholds differ: nothing left in /dev/shm" "$(shm_left)" 0

# The bytes of one 16 MiB fp32 all-reduce on a host's links, each way:
# 16913 packets of at most 248 elements, 98 bytes of headers each, for
# one copy (the host's leader, on its first link); every rank a member
# would be P copies. With rails the host's P links share that copy: each
# carries its 1/P (within 10%), together one copy; as root (the udp
# transport's raw socket, which must send from the rank's own link) and not.
one_copy=$((16777216 + 16913 * 98))
for case in "2,2,2,2 hosts4 4 1 nobody" "4,4 hosts2 2 1 nobody" \
	    "2,2,2,2 rails4 4 2 root INCA_HIER=rails" "4,4 rails2 2 4 nobody INCA_HIER=rails"; do
	read -r layout name nh links user mode <<< "$case"
	declare -A tx0=() rx0=()
	for h in $(seq "$nh"); do
		for j in $(seq "$links"); do
			p=$(link_port "$h" "$j") tx0[$p]=$(port "$p" tx_bytes) rx0[$p]=$(port "$p" rx_bytes)
		done
	done
	start "$layout" "$WORK/$name.json" udp "$user" $mode -- -c allreduce -d fp32 -o sum -n 4194304 -r 3
	check "16 MiB all-reduce x 3, layout $layout${mode:+, $mode} ($user): exact" wait_all
	[ -z "$mode" ] || check "... every local rank carried its share" each_sent
	for h in $(seq "$nh"); do
		rx=0 tx=0 shares=yes
		for j in $(seq "$links"); do
			p=$(link_port "$h" "$j")
			lt=$(( ($(port "$p" tx_bytes) - tx0[$p]) / 3 )) lr=$(( ($(port "$p" rx_bytes) - rx0[$p]) / 3 ))
			rx=$((rx + lr)) tx=$((tx + lt))
			[ "$lr" -ge $((one_copy * 9 / 10 / links)) ] && [ "$lr" -le $((one_copy * 11 / 10 / links)) ] &&
				[ "$lt" -ge $((one_copy * 9 / 10 / links)) ] && [ "$lt" -le $((one_copy * 11 / 10 / links)) ] ||
				shares="no (link $j: $lr up, $lt down)"
		done
		check "layout $layout${mode:+ ($mode)}, host $h: $rx bytes up, $tx down a call: one copy (<= 1.1 x $one_copy)" \
			test "$rx" -le $((one_copy * 11 / 10)) -a "$tx" -le $((one_copy * 11 / 10)) \
			-a "$rx" -ge "$one_copy" -a "$tx" -ge "$one_copy"
		[ "$links" = 1 ] || expect_eq "... host $h: each of its $links links carried its share" "$shares" yes
	done
done

# The torch backend on 2 hosts x 2 ranks, unprivileged, the layout from
# torchrun's variables (LOCAL_RANK, LOCAL_WORLD_SIZE): its own checks of
# every op and dtype against Gloo
if /usr/bin/python3 -c "import torch" 2>/dev/null && ls "$BUILD"/host-lib/torch/inca_torch/_C*.so >/dev/null 2>&1; then
	PIDS=()
	for r in 0 1 2 3; do
		timeout 240 "$TB" exec $((r / 2 + 1)) setpriv --reuid=nobody --regid=nogroup --clear-groups \
			env PYTHONPATH="$BUILD/host-lib/torch" RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) \
			LOCAL_WORLD_SIZE=2 MASTER_ADDR=192.168.77.1 MASTER_PORT=29781 GLOO_SOCKET_IFNAME=mgmt0 \
			INCA_CONFIG="$WORK/hosts2.json" INCA_LOG=warn OMP_NUM_THREADS=1 \
			/usr/bin/python3 "$SRC/tests/func/pytorch_ops.py" > "$WORK/torch$r.out" 2>&1 &
		PIDS+=($!)
	done
	rc=0
	for p in "${PIDS[@]}"; do wait "$p" || rc=1; done
	check "torch, 2 hosts x 2 ranks (nobody): every op and dtype as Gloo" test "$rc" = 0
	[ "$rc" = 0 ] || tail -n 3 "$WORK"/torch*.out | sed 's/^/    /'
	hf=$(cat "$WORK"/torch*.out | grep -o " host_first=[0-9]*" | cut -d= -f2 | sort -n | head -1)
	check "torch: every rank's collectives reduced inside the host first (the fewest: ${hf:-none})" \
		test "${hf:-0}" -gt 0
	expect_eq "torch: nothing left in /dev/shm" "$(shm_left)" 0
else
	echo "# torch or inca_torch not built: the torch case is not run"
fi

# A local rank killed mid-job: its host's ranks see it gone, and no rank
# of the job runs past its deadline (INCA_TIMEOUT_MS 8 s)
start 2,2,2,2 "$WORK/hosts4.json" udp nobody INCA_TIMEOUT_MS=8000 -- \
	-c allreduce -d fp32 -o sum -n 1000 -r 2000 -s 5000
sleep 3
# rank 3 (local rank 1 on host 2): the inca-check whose environment says so
for p in $(pgrep -x inca-check); do
	tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "INCA_RANK=3" && kill -9 "$p"
done
t0=$(date +%s)
rcs=()
for p in "${PIDS[@]}"; do wait "$p"; rcs+=($?); done
t1=$(date +%s)
check "killed rank 3: every rank ended within 30 s ($((t1 - t0)) s)" test $((t1 - t0)) -le 30
check "killed rank 3: no rank hung (timeout's 124 in: ${rcs[*]})" test "${rcs[*]/124/}" = "${rcs[*]}"
check "killed rank 3: its host's leader (rank 2) saw it gone" grep -q "local rank 1 (rank 3, pid [0-9]*) is gone" "$WORK/rank2.out"
check "killed rank 3: the other hosts' ranks failed, none reported success" \
	test "${rcs[0]}" -ne 0 -a "${rcs[4]}" -ne 0 -a "${rcs[6]}" -ne 0
expect_eq "killed rank: nothing left in /dev/shm" "$(shm_left)" 0

finish
